"""The library under ``python -m model.finetune`` (:mod:`model.finetune`): the dev evaluation
(:func:`dev_evaluation`, scored exactly as ``model.evaluate``) and :func:`run`, the command's
work once its flags are checked.
"""

from __future__ import annotations

import argparse
import sys

import tensorflow as tf

from model.training import driver
from model.evaluation import evaluate_lib
from model import flags
from model.inference import predict_lib
from model.training import objectives
from model.training import strategies
from model import tasks
from model.training import trainer as trainer_lib
from model.data import training_data


def dev_options(task: str, dev_dir: str) -> dict:
  """The ``model.evaluate`` options of the dev evaluation: those the dev records imply
  (:func:`model.evaluation.evaluate_lib.records_options`: NarrativeQA's split, read from their
  manifest) and the task's ``dev_options`` (NarrativeQA leaves out METEOR, which needs Java) -- for
  NarrativeQA dev records of ``--split valid``, ``{"split": "valid", "meteor": False}``, what
  ``model.evaluate --split valid --nometeor`` scores with."""
  from model.data import pack_reader as input_lib  # pylint: disable=g-import-not-at-top

  manifest = input_lib.read_manifest(dev_dir)
  return {**evaluate_lib.records_options(task, manifest, dev_dir), **tasks.get(task).dev_options}


def dev_evaluation(task: str, dev_dir: str, dev_gold: str, reduction: str = "max",
                   max_packs=None, memory_scope: str = "sub_document"):
  """``fn(model) -> metrics``: predicts ``dev_dir`` (as ``model.predict``) and scores the
  predictions against ``dev_gold`` exactly as ``python -m model.evaluate`` scores them: the same
  function (:func:`model.evaluation.evaluate_lib.score`) with the options its flags would give
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


def run(prog: str, args: argparse.Namespace) -> int:
  """``model.finetune``'s work (flags checked by :func:`model.finetune.main`): trains, evaluates
  on dev, prints the summary line; exit status."""
  try:
    manifests = training_data.read_manifests([args.records_dir])
    epoch = training_data.packs_per_epoch(manifests)
    if args.dev_records_dir:
      training_data.read_manifests([args.records_dir, args.dev_records_dir])
      if not tf.io.gfile.exists(args.gold):
        raise training_data.TrainingError(f"--gold {args.gold} does not exist")
    steps = args.steps or max(1, int(round(args.epochs * epoch)))
    tc = flags.train_config(args, steps)
    mc = driver.model_config(args, manifests[0])
  except (training_data.TrainingError, ValueError, OSError) as e:
    return flags.fail(prog, str(e))
  try:
    evaluation = None
    if args.dev_records_dir:
      evaluation = trainer_lib.EvalSpec(
          dev_evaluation(args.task, args.dev_records_dir, args.gold, args.reduction,
                         args.eval_packs, args.memory_scope),
          every=args.eval_every or max(1, epoch), best_metric=args.best_metric or
          tasks.get(args.task).best_metric, patience=args.patience or None)
    strategy = strategies.make_strategy(args.strategy, args.tpu)
    summary = trainer_lib.Trainer(objectives.FinetuneObjective(mc, args.coref_weight),
                                  [args.records_dir],
                                  args.model_dir, mc, tc, strategy=strategy,
                                  init_fn=driver.init_fn(args), evaluation=evaluation,
                                  log_batches=args.log_batches,
                                  allow_schedule_change=args.allow_schedule_change,
                                  memory_scope=args.memory_scope,
                                  book_memory_refresh=args.book_memory_refresh).run()
  except (training_data.TrainingError, evaluate_lib.EvaluationError, predict_lib.PredictError,
          tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
    return flags.fail(prog, driver.error_message(e, [args.records_dir] + (
        [args.dev_records_dir] if args.dev_records_dir else [])))
  except (tf.errors.OpError, UnicodeDecodeError) as e:  # garbage records, a shard gone
    return driver.records_failure(prog, e, [args.records_dir] + (
        [args.dev_records_dir] if args.dev_records_dir else []))
  summary["packs_per_epoch"] = epoch
  return flags.finish(summary)


