"""Fine-tuning on a QA task with dev evaluation by the official metrics and early stopping.

CLI::

  python -m model.finetune --task hotpotqa|triviaqa|narrativeqa|extractive_qa --records_dir D \
      --model_dir M \
      [--dev_records_dir DD --gold GOLD] [--init_checkpoint PRETRAINED | --init_roberta HF_DIR] \
      [--preset ...] [--epochs 6] [--learning_rate 3e-5] [--warmup_fraction 0.1] \
      [--optimizer adamw] [--eval_every N] [--patience 2] [--strategy cpu|mirrored|tpu] ...

The paper's fine-tuning settings are the defaults: AdamW, 6 epochs, 10% linear warm-up then
linear decay, learning rate chosen from {5e-6, 1e-5, 3e-5} on the dev set (``--learning_rate``;
3e-5 by default), early stopping on the dev metric.  With ``--dev_records_dir`` (the dev
split's pipeline output) and ``--gold`` (the official dev file) the model is evaluated once per
epoch (``--eval_every`` steps), with the same decoding as ``model.predict`` and the official
metrics of ``model.evaluate``; every evaluation's metrics go to TensorBoard's ``eval`` run
(``<model_dir>/tb/eval``, beside the training run ``tb/train``); the best model is kept in
``<model_dir>/best`` (predict with ``--model_dir <model_dir>/best``), and training stops after
``--patience`` evaluations without improvement.  ``--init_checkpoint`` takes a pretraining model
dir (its config.json gives the architecture) or checkpoint; a run that finds its own checkpoint
in ``--model_dir`` resumes (with the schedule it started with: a changed ``--steps`` /
``--epochs`` / ``--learning_rate`` / ... is an error unless ``--allow_schedule_change``).
"""

from __future__ import annotations

import sys

import tensorflow as tf

from model import faults
from model import book_memory
from model import driver
from model import evaluate as evaluate_lib
from model import predict as predict_lib
from model import objectives
from model import strategies
from model import tasks
from model import trainer as trainer_lib
from model import training_data
from schemas import cli

PAPER_LEARNING_RATES = (5e-6, 1e-5, 3e-5)


def dev_evaluation(task: str, dev_dir: str, dev_gold: str, reduction: str = "max",
                   max_packs=None, memory_scope: str = "sub_document"):
  """``fn(model) -> metrics``: predicts ``dev_dir`` and scores it against ``dev_gold`` (with the
  task's ``dev_options``: NarrativeQA leaves out METEOR, which needs Java)."""
  options = dict(tasks.get(task).dev_options)

  def evaluate(model):
    predictions = predict_lib.predict_with_model(model, dev_dir, task=task, reduction=reduction,
                                                 max_packs=max_packs, memory_scope=memory_scope)
    metrics = evaluate_lib.score(task, predictions, dev_gold, **options,
                                 **predict_lib.score_options(task, predictions))
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
  return evaluate


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
  driver.add_common_flags(p, preset="readtwice_e", optimizer="adamw",
                         learning_rate=PAPER_LEARNING_RATES[-1])
  driver.add_coref_flag(p, objectives.FINETUNE_COREF_WEIGHT,
                        "the paper uses it in pre-training only")
  p.add_argument("--memory_scope", choices=book_memory.MEMORY_SCOPES, default="sub_document",
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
  g.add_argument("--patience", type=int, default=2,
                 help="stop after this many evaluations without improvement (0: never stop)")
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
  driver.check_flags(p, args)
  if bool(args.dev_records_dir) != bool(args.gold):
    p.error("--dev_records_dir and --gold go together")
  if args.eval_every is not None and not args.dev_records_dir:
    p.error("--eval_every needs --dev_records_dir and --gold")
  if args.steps is None and not args.epochs > 0:
    p.error(f"--epochs must be > 0, got {args.epochs}")
  if args.patience < 0:
    p.error(f"--patience must be >= 0, got {args.patience}")
  if args.book_memory_refresh < 1:
    p.error(f"--book_memory_refresh must be >= 1, got {args.book_memory_refresh}")
  try:
    manifests = training_data.read_manifests([args.records_dir])
    epoch = training_data.packs_per_epoch(manifests)
    if args.dev_records_dir:
      training_data.read_manifests([args.records_dir, args.dev_records_dir])
      if not tf.io.gfile.exists(args.gold):
        raise training_data.TrainingError(f"--gold {args.gold} does not exist")
    steps = args.steps or max(1, int(round(args.epochs * epoch)))
    tc = driver.train_config(args, steps)
    mc = driver.model_config(args, manifests[0])
  except (training_data.TrainingError, ValueError, OSError) as e:
    return driver.fail(p.prog, str(e))
  try:
    evaluation = None
    if args.dev_records_dir:
      evaluation = trainer_lib.EvalSpec(
          dev_evaluation(args.task, args.dev_records_dir, args.gold, args.reduction,
                         args.eval_packs, args.memory_scope),
          every=args.eval_every or max(1, epoch), best_metric=args.best_metric or
          tasks.get(args.task).best_metric, patience=args.patience or None)
    strategy = strategies.make_strategy(args.strategy, args.tpu)
    summary = trainer_lib.Trainer(objectives.FinetuneTask(mc, args.coref_weight),
                                  [args.records_dir],
                                  args.model_dir, mc, tc, strategy=strategy,
                                  init_fn=driver.init_fn(args), evaluation=evaluation,
                                  log_batches=args.log_batches,
                                  allow_schedule_change=args.allow_schedule_change,
                                  memory_scope=args.memory_scope,
                                  book_memory_refresh=args.book_memory_refresh).run()
  except (training_data.TrainingError, evaluate_lib.EvaluationError, predict_lib.PredictError,
          tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
    return driver.fail(p.prog, driver.error_message(e, [args.records_dir] + (
        [args.dev_records_dir] if args.dev_records_dir else [])))
  except (tf.errors.OpError, UnicodeDecodeError) as e:  # garbage records, a shard gone
    return driver.records_failure(p.prog, e, [args.records_dir] + (
        [args.dev_records_dir] if args.dev_records_dir else []))
  summary["packs_per_epoch"] = epoch
  return driver.finish(summary)


if __name__ == "__main__":
  sys.exit(main())
