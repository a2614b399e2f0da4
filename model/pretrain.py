"""Pretraining: masked LM with dynamic entity / whole-word-span masking + coreference loss.

CLI::

  python -m model.pretrain --records_dir D [--records_dir D2 ...] --model_dir M \
      [--preset readtwice_e|readtwice_cls|tiny_e|...] [--steps 10000] [--optimizer lamb] \
      [--learning_rate 5e-4] [--warmup_fraction 0.1] [--strategy cpu|mirrored|tpu --tpu NAME] \
      [--mention_mask_rate 0.25] [--token_mask_rate 0.15] [--max_span_words 3] \
      [--whole_entity] [--dev_records_dir H --eval_every N --eval_packs K] ...

Records are the output dirs of the Wikipedia and books pipelines (local or ``gs://``; their
manifests must agree on segment geometry and tokenizer).  Masks are drawn in the ``tf.data``
pipeline for every pack anew (:mod:`model.masking`): 25% of entity mentions masked whole, 15%
of the other context tokens in whole-word spans, 80/10/10 replacement, seeded, and resumed
exactly.  LAMB, 10% linear warm-up then linear decay, no weight decay on LayerNorm parameters
or biases.  With ``--dev_records_dir`` (held-out documents) the masked-LM loss and accuracy on
all masked tokens and on masked entity tokens are measured every ``--eval_every`` steps and at
the end, with fixed masks, and written to ``metrics.json`` (``final_eval``) and to
TensorBoard's ``eval`` run (``<model_dir>/tb/eval``; training scalars are in ``tb/train``).  A
run that finds its own checkpoint in ``--model_dir`` resumes; a changed schedule (``--steps``,
``--learning_rate``, ...) is an error unless ``--allow_schedule_change``.
"""

from __future__ import annotations

import sys
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from model import faults
from model import driver
from model import losses as losses_lib
from model import masking as masking_lib
from model import objectives
from model import strategies
from model import trainer as trainer_lib
from model import training_data
from schemas import cli

EVAL_SEED = 12345  # the held-out masks: one fixed draw, the same for every model compared


def mlm_evaluation(model, records_dirs: Sequence[str], task: objectives.PretrainTask,
                   max_packs: Optional[int] = None, seed: int = EVAL_SEED) -> Dict[str, float]:
  """Masked-LM metrics of ``model`` on ``records_dirs`` with fixed masks (one pass).

  Returns ``mlm_loss``, ``mlm_accuracy`` (all masked tokens), ``mlm_entity_accuracy`` /
  ``mlm_entity_loss`` (tokens of masked entity mentions), ``mlm_other_accuracy`` (the rest),
  the token counts, ``memory_noop_rate`` and ``packs``.
  """
  manifests = training_data.read_manifests(records_dirs)
  ds = training_data.records_dataset(records_dirs, manifests, shuffle=False, repeat=False,
                                   seed=0, max_mentions=task.max_mentions)
  if max_packs:
    ds = ds.take(max_packs)
  ds = task.prepare(ds, seed)

  keys = ("weight", "correct", "entity_weight", "entity_correct", "ce", "entity_ce")

  @tf.function(reduce_retracing=True)
  def step(features):
    outputs = model(features, training=False)
    sums = losses_lib.mlm_token_sums(outputs["mlm_logits"], features["masked_ids"],
                                     features["masked_weights"], features["masked_is_entity"])
    return tf.concat([tf.stack([sums[k] for k in keys]), objectives.noop_sums(outputs)], 0)

  totals = np.zeros(8)
  packs = 0
  for features in ds:
    totals += step(features).numpy()
    packs += 1
  tokens, correct, ent, ent_correct, ce, ent_ce, noop, readers = totals
  other = tokens - ent
  return {"mlm_loss": ce / max(tokens, 1), "mlm_accuracy": correct / max(tokens, 1),
          "mlm_entity_loss": ent_ce / max(ent, 1), "mlm_entity_accuracy": ent_correct / max(ent, 1),
          "mlm_other_accuracy": (correct - ent_correct) / max(other, 1),
          "masked_tokens": float(tokens), "masked_entity_tokens": float(ent),
          "memory_noop_rate": noop / readers if readers else 0.0, "packs": float(packs)}


EXAMPLE = r"""python -m model.pretrain --records_dir /tmp/wiki_records \
    --records_dir /tmp/books_records --model_dir /tmp/pretrained --preset readtwice_e \
    --steps 10000 --dev_records_dir /tmp/wiki_heldout --eval_every 1000"""


def build_parser() -> cli.Parser:
  p = cli.Parser("model.pretrain", __doc__.split("\n\n")[0], EXAMPLE)
  p.add_argument("--records_dir", action="append", required=True, io=cli.READS,
                 help="pipeline output dir; repeat the flag to train on several")
  p.add_argument("--steps", type=int, default=10000, help="training steps (packs)")
  driver.add_common_flags(p, preset="readtwice_e", optimizer="lamb", learning_rate=5e-4)
  driver.add_coref_flag(p, objectives.PRETRAIN_COREF_WEIGHT,
                        "the paper's auxiliary pre-training task")
  m = masking_lib.MaskingConfig(mask_token_id=0, vocab_size=1)
  g = p.add_argument_group("masking")
  g.add_argument("--mention_mask_rate", type=float, default=m.mention_rate,
                 help="share of entity mentions masked whole")
  g.add_argument("--token_mask_rate", type=float, default=m.token_rate,
                 help="share of the other context tokens masked, in whole-word spans")
  g.add_argument("--max_span_words", type=int, default=m.max_span_words,
                 help="span lengths are uniform in [1, this] words")
  cli.bool_flag(g, "whole_entity", False,
                "mask every mention of the same entity in a segment together")
  g = p.add_argument_group("held-out evaluation")
  g.add_argument("--dev_records_dir", action="append", default=None, io=cli.READS,
                 help="held-out pipeline output dir (repeatable)")
  g.add_argument("--eval_every", type=int, default=None,
                 help="evaluate every this many steps (default: only at the end)")
  g.add_argument("--eval_packs", type=int, default=None,
                 help="evaluate on the first this many packs (default: all)")
  return p


@faults.command("model.pretrain", trains=True)
def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  driver.check_flags(p, args)
  if args.eval_every is not None and not args.dev_records_dir:
    p.error("--eval_every needs --dev_records_dir")
  tc = driver.train_config(args, args.steps)
  try:
    manifests = training_data.read_manifests(args.records_dir)
    if args.dev_records_dir:
      training_data.read_manifests(args.records_dir + args.dev_records_dir)
    mc = driver.model_config(args, manifests[0])
    masking = objectives.masking_config(
        manifests[0], mention_rate=args.mention_mask_rate, token_rate=args.token_mask_rate,
        max_span_words=args.max_span_words, whole_entity=args.whole_entity)
  except (training_data.TrainingError, ValueError, OSError) as e:  # records, configs, masking
    return driver.fail(p.prog, str(e))
  try:
    task = objectives.PretrainTask(mc, masking, coref_weight=args.coref_weight)
    evaluation = None
    if args.dev_records_dir:
      def evaluate(model):
        return mlm_evaluation(model, args.dev_records_dir, task, args.eval_packs)
      evaluation = trainer_lib.EvalSpec(evaluate, every=args.eval_every or tc.steps)
    strategy = strategies.make_strategy(args.strategy, args.tpu)
    summary = trainer_lib.Trainer(task, args.records_dir, args.model_dir, mc, tc,
                                  strategy=strategy, init_fn=driver.init_fn(args),
                                  evaluation=evaluation, log_batches=args.log_batches,
                                  allow_schedule_change=args.allow_schedule_change).run()
  except (training_data.TrainingError, tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
    return driver.fail(p.prog, driver.error_message(
        e, list(args.records_dir) + list(args.dev_records_dir or [])))
  except (tf.errors.OpError, UnicodeDecodeError) as e:  # garbage records, a shard gone
    return driver.records_failure(p.prog, e,
                                  list(args.records_dir) + list(args.dev_records_dir or []))
  return driver.finish(summary)


if __name__ == "__main__":
  sys.exit(main())
