"""The library under ``python -m model.pretrain`` (:mod:`model.pretrain`): the held-out masked-LM
evaluation (:func:`mlm_evaluation`) and :func:`run`, the command's work once its flags are
checked.
"""

from __future__ import annotations

import argparse
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from model.training import driver
from model import flags
from model.training import losses as losses_lib
from model.training import objectives
from model.training import strategies
from model.training import trainer as trainer_lib
from model.data import training_data


EVAL_SEED = 12345  # the held-out masks: one fixed draw, the same for every model compared


def mlm_evaluation(model, records_dirs: Sequence[str], task: objectives.PretrainObjective,
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

  @tf.function(reduce_retracing=True, autograph=False)  # no control flow on tensors
  def step(features):
    outputs = model(features, training=False)
    sums = losses_lib.mlm_token_sums(outputs["mlm_logits"], features["masked_ids"],
                                     features["masked_weights"], features["masked_is_entity"],
                                     outputs.get("mlm_index"))
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


def run(prog: str, args: argparse.Namespace) -> int:
  """``model.pretrain``'s work (flags checked by :func:`model.pretrain.main`): trains, evaluates
  on the held-out records, prints the summary line; exit status."""
  tc = flags.train_config(args, args.steps)
  try:
    manifests = training_data.read_manifests(args.records_dir)
    if args.dev_records_dir:
      training_data.read_manifests(args.records_dir + args.dev_records_dir)
    mc = driver.model_config(args, manifests[0])
    masking = objectives.masking_config(
        manifests[0], mention_rate=args.mention_mask_rate, token_rate=args.token_mask_rate,
        max_span_words=args.max_span_words, whole_entity=args.whole_entity)
  except (training_data.TrainingError, ValueError, OSError) as e:  # records, configs, masking
    return flags.fail(prog, str(e))
  try:
    task = objectives.PretrainObjective(mc, masking, coref_weight=args.coref_weight)
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
    return flags.fail(prog, driver.error_message(
        e, list(args.records_dir) + list(args.dev_records_dir or [])))
  except (tf.errors.OpError, UnicodeDecodeError) as e:  # garbage records, a shard gone
    return driver.records_failure(prog, e,
                                  list(args.records_dir) + list(args.dev_records_dir or []))
  return flags.finish(summary)


