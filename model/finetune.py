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


def dev_options(task: str, dev_dir: str) -> dict:
  """The ``model.evaluate`` options of the dev evaluation: those the dev records imply
  (:func:`model.evaluate.records_options`: NarrativeQA's split, read from their manifest) and
  the task's ``dev_options`` (NarrativeQA leaves out METEOR, which needs Java) -- for
  NarrativeQA dev records of ``--split valid``, ``{"split": "valid", "meteor": False}``, what
  ``model.evaluate --split valid --nometeor`` scores with."""
  from model import input as input_lib  # pylint: disable=g-import-not-at-top

  manifest = input_lib.read_manifest(dev_dir)
  return {**evaluate_lib.records_options(task, manifest, dev_dir), **tasks.get(task).dev_options}


def dev_evaluation(task: str, dev_dir: str, dev_gold: str, reduction: str = "max",
                   max_packs=None, memory_scope: str = "sub_document"):
  """``fn(model) -> metrics``: predicts ``dev_dir`` (as ``model.predict``) and scores the
  predictions against ``dev_gold`` exactly as ``python -m model.evaluate`` scores them: the same
  function (:func:`model.evaluate.score`) with the options its flags would give
  (:func:`dev_options`, and the predictions' own, e.g. TriviaQA keys per page).  The gold file
  is read and checked with those options at once (EvaluationError), before any training; the
  evaluate warnings (gold entries without a prediction, unknown ids) go to stderr, each kind
  the first time it appears.  The metrics are the numeric entries of ``model.evaluate``'s."""
  options = dev_options(task, dev_dir)
  evaluate_lib.check_gold(task, dev_gold, **options)
  warned = set()

  def evaluate(model):
    predictions = predict_lib.predict_with_model(model, dev_dir, task=task, reduction=reduction,
                                                 max_packs=max_packs, memory_scope=memory_scope)
    metrics = evaluate_lib.score(task, predictions, dev_gold, **options,
                                 **predict_lib.score_options(task, predictions))
    for kind, warning in (("missing", evaluate_lib.missing_warning(task, metrics)),
                          ("unknown", evaluate_lib.unknown_warning(task, metrics))):
      if warning and kind not in warned:
        warned.add(kind)
        print(f"{warning} (dev evaluation of {dev_dir})", file=sys.stderr, flush=True)
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
  driver.check_flags(p, args)
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
