"""Pretraining: masked LM with dynamic entity / whole-word-span masking + coreference loss.

CLI::

  python -m model.pretrain --records_dir D [--records_dir D2 ...] --model_dir M \
      [--preset readtwice_e|readtwice_cls|tiny_e|...] [--steps 10000] [--optimizer lamb] \
      [--learning_rate 5e-4] [--warmup_fraction 0.1] [--strategy cpu|mirrored|tpu --tpu NAME] \
      [--mention_mask_rate 0.25] [--token_mask_rate 0.15] [--max_span_words 3] \
      [--whole_entity] [--dev_records_dir H --eval_every N --eval_packs K] ...

Records are the output dirs of the Wikipedia and books pipelines (local or ``gs://``; their
manifests must agree on segment geometry and tokenizer).  Masks are drawn in the ``tf.data``
pipeline for every pack anew (:mod:`model.data.masking`): 25% of entity mentions masked whole, 15%
of the other context tokens in whole-word spans, 80/10/10 replacement, seeded, and resumed
exactly.  LAMB, 10% linear warm-up then linear decay, no weight decay on LayerNorm parameters
or biases.  With ``--dev_records_dir`` (held-out documents) the masked-LM loss and accuracy on
all masked tokens and on masked entity tokens are measured every ``--eval_every`` steps and at
the end, with fixed masks, and written to ``metrics.json`` (``final_eval``) and to
TensorBoard's ``eval`` run (``<model_dir>/tb/eval``; training scalars are in ``tb/train``).  A
run that finds its own checkpoint in ``--model_dir`` resumes; a changed schedule (``--steps``,
``--learning_rate``, ...) is an error unless ``--allow_schedule_change``.

This module is the command (its flags, :mod:`model.flags`, then :mod:`model.training.pretrain_lib`):
its ``--help`` and usage errors answer before TensorFlow loads.
"""

from __future__ import annotations

import sys

from model import configs as configs_lib
from model import faults
from model import flags
from schemas import cli

EXAMPLE = r"""python -m model.pretrain --records_dir /tmp/wiki_records \
    --records_dir /tmp/books_records --model_dir /tmp/pretrained --preset readtwice_e \
    --steps 10000 --dev_records_dir /tmp/wiki_heldout --eval_every 1000"""


def build_parser() -> cli.Parser:
  p = cli.Parser("model.pretrain", __doc__.split("\n\n")[0], EXAMPLE)
  p.add_argument("--records_dir", action="append", required=True, io=cli.READS,
                 help="pipeline output dir; repeat the flag to train on several")
  p.add_argument("--steps", type=int, default=10000, help="training steps (packs)")
  flags.add_common_flags(p, preset="readtwice_e", optimizer="lamb", learning_rate=5e-4)
  flags.add_coref_flag(p, configs_lib.PRETRAIN_COREF_WEIGHT,
                       "the paper's auxiliary pre-training task")
  m = configs_lib.MaskingConfig(mask_token_id=0, vocab_size=1)
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
  flags.check_flags(p, args)
  if args.eval_every is not None and not args.dev_records_dir:
    p.error("--eval_every needs --dev_records_dir")
  problem = flags.unusable_records(args.records_dir, args.dev_records_dir)
  if problem:
    return flags.fail(p.prog, problem)
  with faults.starting():
    from model.training import pretrain_lib  # pylint: disable=g-import-not-at-top  (TensorFlow)
  return pretrain_lib.run(p.prog, args)


if __name__ == "__main__":
  sys.exit(main())
