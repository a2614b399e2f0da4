"""Fine-tuning on a QA task with dev evaluation by the official metrics (early stopping on
request).

CLI::

  python -m model.finetune --task hotpotqa|triviaqa|narrativeqa|extractive_qa --records_dir D \
      --model_dir M \
      [--dev_records_dir DD --gold GOLD] [--init_checkpoint PRETRAINED | --init_roberta HF_DIR] \
      [--preset ...] [--epochs 6] [--learning_rate 3e-5] [--warmup_fraction 0.1] \
      [--optimizer adamw] [--eval_every N] [--patience N] [--strategy cpu|mirrored|tpu] ...

The paper's fine-tuning settings are the defaults: AdamW, 6 epochs, 10% linear warm-up then
linear decay, learning rate chosen from {5e-6, 1e-5, 3e-5} on the dev set (``--learning_rate``;
3e-5 by default); its early stopping on the dev metric is ``--patience N`` (without it a run
trains exactly its ``--steps`` / ``--epochs``).  With ``--dev_records_dir`` (the dev
split's pipeline output) and ``--gold`` (the official dev file) the model is evaluated once per
epoch (``--eval_every`` steps), with the same decoding as ``model.predict`` and the official
metrics of ``model.evaluate``; every evaluation's metrics go to TensorBoard's ``eval`` run
(``<model_dir>/tb/eval``, beside the training run ``tb/train``); the best model is kept in
``<model_dir>/best`` (predict with ``--model_dir <model_dir>/best``), and with ``--patience N``
training stops after N evaluations without improvement (one ``stopped early at step S of T:
...`` line on stderr; ``stopped_early``, ``stop_reason`` and ``best_step`` in the summary).  A
rerun of a finished run (all its steps, or stopped early) trains nothing: one ``<model_dir>
already finished at step N (...)`` line, exit 0.  ``--init_checkpoint`` takes a pretraining model
dir (its config.json gives the architecture) or checkpoint; a run that finds its own checkpoint
in ``--model_dir`` resumes (with the schedule it started with: a changed ``--steps`` /
``--epochs`` / ``--learning_rate`` / ... is an error unless ``--allow_schedule_change``).

This module is the command (its flags, :mod:`model.flags`, then :mod:`model.training.finetune_lib`):
its ``--help`` and usage errors answer before TensorFlow loads.
"""

from __future__ import annotations

import sys

from model import configs as configs_lib
from model import faults
from model import flags
from model import tasks
from schemas import cli

PAPER_LEARNING_RATES = (5e-6, 1e-5, 3e-5)

EXAMPLE = r"""python -m model.finetune --task hotpotqa \
    --records_dir /tmp/hotpot_train_records --model_dir /tmp/model \
    --dev_records_dir /tmp/hotpot_dev_records --gold hotpot_dev_distractor_v1.json \
    --preset readtwice_e --init_checkpoint /tmp/pretrained --learning_rate 1e-5"""


def build_parser() -> cli.Parser:
  p = cli.Parser("model.finetune", __doc__.split("\n\n")[0], EXAMPLE)
  p.add_argument("--task", required=True, choices=tasks.names(),
                 help="the QA task: its loss heads, decoding and official dev metric")
  p.add_argument("--records_dir", required=True, io=cli.READS, help="the train split's pipeline output dir")
  p.add_argument("--epochs", type=float, default=6.0, help="passes over the train packs")
  p.add_argument("--steps", type=int, default=None, help="training steps (overrides --epochs)")
  flags.add_common_flags(p, preset="readtwice_e", optimizer="adamw",
                        learning_rate=PAPER_LEARNING_RATES[-1])
  flags.add_coref_flag(p, configs_lib.FINETUNE_COREF_WEIGHT,
                       "the paper uses it in pre-training only")
  p.add_argument("--memory_scope", choices=configs_lib.MEMORY_SCOPES, default="sub_document",
                 help="which memories a segment reads, in training and dev evaluation: its "
                      "sub-document's (the paper) or its whole book's across sub-documents and "
                      "packs (other packs' memories from a store refilled from the current "
                      "weights every --book_memory_refresh steps, without gradient; CPU/GPU)")
  p.add_argument("--book_memory_refresh", type=int, default=100,
                 help="--memory_scope book: steps between refills of the book memory store "
                      "(each refill reads BERT_1 over the packs of the books that span several "
                      "packs)")
  g = p.add_argument_group("dev evaluation and early stopping")
  g.add_argument("--dev_records_dir", default=None, io=cli.READS,
                 help="the dev split's pipeline output dir")
  g.add_argument("--gold", default=None, io=cli.READS,
                 help="the official gold file of the dev split (as model.evaluate)")
  g.add_argument("--eval_every", type=int, default=None,
                 help="evaluate every this many steps (default: once per epoch)")
  g.add_argument("--patience", type=int, default=None,
                 help="early stopping: stop after this many dev evaluations without improvement "
                      "of --best_metric (default, or 0: no early stopping; the run trains all "
                      "its --steps / --epochs)")
  g.add_argument("--best_metric", default=None,
                 help="dev metric that selects the best model (default: f1, NarrativeQA "
                      "rouge_l)")
  g.add_argument("--eval_packs", type=int, default=None,
                 help="evaluate on the first this many dev packs (default: all)")
  g.add_argument("--reduction", default="max", choices=["max", "sum"],
                 help="span aggregation across segments (as model.predict)")
  return p


@faults.command("model.finetune", trains=True)
def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  flags.check_flags(p, args)
  if bool(args.dev_records_dir) != bool(args.gold):
    p.error("--dev_records_dir and --gold go together")
  if args.eval_every is not None and not args.dev_records_dir:
    p.error("--eval_every needs --dev_records_dir and --gold")
  if args.steps is None and not args.epochs > 0:
    p.error(f"--epochs must be > 0, got {args.epochs}")
  if args.patience is not None and args.patience < 0:
    p.error(f"--patience must be >= 0, got {args.patience}")
  if args.patience and not args.dev_records_dir:
    p.error("--patience needs --dev_records_dir and --gold (it stops on the dev metric)")
  if args.book_memory_refresh < 1:
    p.error(f"--book_memory_refresh must be >= 1, got {args.book_memory_refresh}")
  problem = flags.unusable_records(args.records_dir, args.dev_records_dir)
  if problem:
    return flags.fail(p.prog, problem)
  with faults.starting():
    from model.training import finetune_lib  # pylint: disable=g-import-not-at-top  (TensorFlow)
  return finetune_lib.run(p.prog, args)


if __name__ == "__main__":
  sys.exit(main())
