"""Scoring readtwice predictions with the official metrics of a task: the library behind
``python -m model.evaluate`` (:mod:`model.evaluate`), which ``model.finetune``'s dev evaluation
and ``model.predict --gold`` use too.

``run`` scores a predictions file, ``score`` an in-memory predictions object (e.g. for periodic
dev evaluation during training), ``records_options`` gives the options a records dir implies
(NarrativeQA's split), ``check_gold`` reads and checks a gold file up front, and the warnings
name gold entries without a prediction and predictions of unknown ids.

Paths may be local or `tf.io.gfile` URLs (`gs://...`); TensorFlow is only imported for the
latter.  The tasks, their gold files, metrics, flags and warnings come from the registry of
`model.tasks` (one module per task).
"""

import json
import sys
from typing import Any, Dict, Mapping, Optional

from model import tasks
from model.evaluation import common


class EvaluationError(Exception):
  """A user-facing error (bad file, bad format)."""


def load_json(path: str, role: str) -> Any:
  """Reads a JSON file, turning I/O and parse failures into EvaluationError.

  Args:
    path: File to read: a local path, or a `tf.io.gfile` URL (`gs://...`, `ram://...`).
    role: What the file is ('predictions' or 'gold'), for messages.

  Returns:
    The parsed JSON value.
  """
  try:
    return common.load_json(path, role)
  except common.InputError as e:
    raise EvaluationError(str(e)) from e


def _check_task(task: str) -> tasks.Task:
  try:
    return tasks.get(task)
  except tasks.UnknownTaskError as e:
    raise EvaluationError(str(e)) from e


def _score(task: str, predictions: Any, predictions_source: str, gold_path: str,
           options: Mapping[str, Any]) -> Dict[str, Any]:
  """Loads the gold file, validates both sides and scores (`score` and `run`)."""
  spec = _check_task(task)
  try:
    gold = spec.load_gold(gold_path)
  except common.InputError as e:
    raise EvaluationError(str(e)) from e
  except OSError as e:
    raise EvaluationError(f'cannot read gold file {gold_path}: {e}') from e
  except ValueError as e:
    raise EvaluationError(f'gold file {gold_path}: {e}') from e
  try:
    spec.check_predictions(predictions, predictions_source)
    spec.check_gold(gold, gold_path)
  except ValueError as e:
    raise EvaluationError(str(e)) from e
  try:
    return spec.evaluate(predictions, gold, **options)
  except spec.unavailable_errors as e:
    raise EvaluationError(str(e)) from e
  except ValueError as e:  # e.g. NarrativeQA: no row of the --split in the gold file
    raise EvaluationError(f'gold file {gold_path}: {e}') from e


def score(task: str, predictions: Any, gold_path: str,
          **task_options: Any) -> Dict[str, Any]:
  """Scores an in-memory predictions object (e.g.
  `model.inference.predict_lib.predict_with_model`'s).

  The same validation and metrics as `run` on a file holding `predictions`
  as JSON (`predictions` is not modified).

  Args:
    task: A registered task name (`model.tasks.names()`).
    predictions: The task's predictions object (as the predictions JSON file would hold it).
    gold_path: Gold file: a local path or a `tf.io.gfile` URL.
    **task_options: Keyword options of the task's `evaluate` (its flags).

  Returns:
    The metrics dict.

  Raises:
    EvaluationError: On unknown task, unreadable or malformed input.
  """
  return _score(task, predictions, 'predictions', gold_path, task_options)


def records_options(task: str, manifest: Mapping[str, Any],
                    records_dir: str) -> Dict[str, Any]:
  """The options this command's flags must give to score the predictions of a records dir.

  What the records imply (`model.tasks.Task.records_options`): NarrativeQA's `split` (the
  pipeline's `--split`, read from the manifest), so that `model.finetune`'s dev metrics and
  `model.predict --gold` score exactly the rows `model.evaluate --split` scores.

  Args:
    task: A registered task name.
    manifest: The records dir's parsed `manifest.json`.
    records_dir: The records dir, for messages.

  Returns:
    Keyword options of the task's `evaluate`.

  Raises:
    EvaluationError: On unknown task, or a manifest that lacks what is needed (one line).
  """
  spec = _check_task(task)
  try:
    return spec.records_options(manifest, records_dir)
  except ValueError as e:
    raise EvaluationError(str(e)) from e


def check_gold(task: str, gold_path: str, **task_options: Any) -> None:
  """Reads, validates and scores an empty prediction object against `gold_path` (with the
  options scoring will use), so that a wrong gold file or split fails before any prediction,
  e.g. at the start of fine-tuning instead of at its first dev evaluation.

  Raises:
    EvaluationError: On unknown task, unreadable or malformed gold file, or options that
      select nothing in it (e.g. a NarrativeQA split without rows).
  """
  spec = _check_task(task)
  _score(task, spec.empty_predictions(), 'predictions', gold_path, task_options)


def run(task: str, predictions_path: str, gold_path: str,
        output_path: Optional[str] = None, **options: Any) -> Dict[str, Any]:
  """Loads, validates and scores one prediction file.

  Args:
    task: A registered task name (`model.tasks.names()`).
    predictions_path: Predictions JSON file.
    gold_path: Gold file (JSON, CSV or JSON lines, as the task reads it).
    output_path: Optional file to write the metrics JSON to.
    **options: Keyword options of the task's `evaluate` (its flags).

  Every path may be local or a `tf.io.gfile` URL (`gs://...`, `ram://...`).

  Returns:
    The metrics dict.

  Raises:
    EvaluationError: On unknown task, unreadable or malformed input.
  """
  _check_task(task)
  predictions = load_json(predictions_path, 'predictions')
  metrics = _score(task, predictions, predictions_path, gold_path, options)
  if output_path:
    try:
      common.write_text(output_path, json.dumps(metrics, sort_keys=True) + '\n')
    except OSError as e:
      raise EvaluationError(f'cannot write output file {output_path}: '
                            f'{e}') from e
  return metrics


def missing_warning(task: str, metrics: Dict[str, Any]) -> Optional[str]:
  """The stderr warning about gold entries without a prediction, or None if there are none.

  Says what the task's metrics do with them (`model.tasks.Task.missing_warning`): e.g.
  HotpotQA scores a missing answer 0 on the answer metrics and a missing supporting-fact list
  0 on the sp metrics, NarrativeQA scores a missing question as an EMPTY answer.

  Args:
    task: A registered task name.
    metrics: What the task's `evaluate` returned (its `n_*` counts are read).

  Returns:
    One line starting with 'warning: ', or None.
  """
  return tasks.get(task).missing_warning(metrics)


def unknown_warning(task: str, metrics: Dict[str, Any]) -> Optional[str]:
  """The stderr warning about predictions whose id is not in the gold file, or None."""
  unknown = metrics.get('n_ignored', 0)
  if not unknown:
    return None
  return (f'warning: {unknown} predictions have ids that are not in the gold file and were '
          f'not scored (wrong gold file or split for --task {task}?)')


def print_warnings(task: str, metrics: Dict[str, Any]) -> None:
  """Prints the missing- and unknown-id warnings (if any) on stderr."""
  for warning in (missing_warning(task, metrics), unknown_warning(task, metrics)):
    if warning:
      print(warning, file=sys.stderr, flush=True)
