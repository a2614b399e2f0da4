"""Command-line scorer for readtwice predictions.

Usage:
  python -m model.evaluate --task hotpotqa --predictions P --gold G \
      [--output out.json]

Prints the metrics as one JSON object (sorted keys) on the last line of
stdout and, when `--output` is given, also writes it to that file.

Each task is a module registered in `TASKS` that provides
`check_predictions(obj, source)`, `check_gold(obj, source)` (both raising
`ValueError` with a readable message) and `evaluate(predictions, gold)`
returning a flat dict of JSON-serialisable metrics.
"""

import argparse
import json
import sys
from types import ModuleType
from typing import Any, Dict, List, Optional

from model.evaluation import hotpotqa

# Task name -> metrics module. TriviaQA / NarrativeQA modules plug in here.
TASKS: Dict[str, ModuleType] = {
    'hotpotqa': hotpotqa,
}


class EvaluationError(Exception):
  """A user-facing error (bad file, bad format)."""


def load_json(path: str, role: str) -> Any:
  """Reads a JSON file, turning I/O and parse failures into EvaluationError.

  Args:
    path: File to read.
    role: What the file is ('predictions' or 'gold'), for messages.

  Returns:
    The parsed JSON value.
  """
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except OSError as e:
    raise EvaluationError(f'cannot read {role} file {path}: {e}') from e
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise EvaluationError(f'{role} file {path} is not valid JSON: {e}') from e


def run(task: str, predictions_path: str, gold_path: str,
        output_path: Optional[str] = None) -> Dict[str, Any]:
  """Loads, validates and scores one prediction file.

  Args:
    task: Key of `TASKS`.
    predictions_path: Predictions JSON file.
    gold_path: Gold JSON file.
    output_path: Optional file to write the metrics JSON to.

  Returns:
    The metrics dict.

  Raises:
    EvaluationError: On unknown task, unreadable or malformed input.
  """
  if task not in TASKS:
    raise EvaluationError(f'unknown task {task!r}; choose from '
                          f'{sorted(TASKS)}')
  module = TASKS[task]
  predictions = load_json(predictions_path, 'predictions')
  gold = load_json(gold_path, 'gold')
  try:
    module.check_predictions(predictions, predictions_path)
    module.check_gold(gold, gold_path)
  except ValueError as e:
    raise EvaluationError(str(e)) from e
  metrics = module.evaluate(predictions, gold)
  if output_path:
    try:
      with open(output_path, 'w', encoding='utf-8') as f:
        json.dump(metrics, f, sort_keys=True)
        f.write('\n')
    except OSError as e:
      raise EvaluationError(f'cannot write output file {output_path}: '
                            f'{e}') from e
  return metrics


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
  """Parses command-line flags."""
  parser = argparse.ArgumentParser(
      prog='python -m model.evaluate',
      description='Score predictions with the official metrics of a task.')
  parser.add_argument('--task', required=True, choices=sorted(TASKS))
  parser.add_argument('--predictions', required=True,
                      help='predictions JSON file')
  parser.add_argument('--gold', required=True, help='gold JSON file')
  parser.add_argument('--output', default=None,
                      help='optional path to also write the metrics JSON')
  return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
  """CLI entry point; returns the process exit code."""
  args = parse_args(argv)
  try:
    metrics = run(args.task, args.predictions, args.gold, args.output)
  except EvaluationError as e:
    print(f'error: {e}', file=sys.stderr)
    return 1
  missing_answer = metrics.get('n_missing_answer', 0)
  missing_sp = metrics.get('n_missing_sp', 0)
  if missing_answer or missing_sp:
    print(f'warning: {missing_answer} gold questions have no answer and '
          f'{missing_sp} no sp prediction; they score 0',
          file=sys.stderr)
  print(json.dumps(metrics, sort_keys=True))
  return 0


if __name__ == '__main__':
  sys.exit(main())
