"""Command-line scorer for readtwice predictions.

Usage:
  python -m model.evaluate --task hotpotqa|triviaqa|narrativeqa \
      --predictions P --gold G [--output out.json]
  task options:
    triviaqa:    --per_document  (Wikipedia: score per (question, document) pair)
    narrativeqa: --protocol paper|raw  --nometeor  --split train|valid|test

Gold files: HotpotQA official JSON list; TriviaQA official rc question file
(domain and VerifiedEval read from it); NarrativeQA `qaps.csv`.

Prints the metrics as one JSON object (sorted keys) on the last line of
stdout and, when `--output` is given, also writes it to that file.

Paths may be local or `tf.io.gfile` URLs (`gs://...`); TensorFlow is only
imported for the latter. Python API: `run` (files), `score` (an in-memory
predictions object, e.g. for periodic dev evaluation during training).

Each task is a module registered in `TASKS` that provides
`check_predictions(obj, source)`, `check_gold(obj, source)` (both raising
`ValueError` with a readable message) and `evaluate(predictions, gold)`
returning a flat dict of JSON-serialisable metrics.
"""

import argparse
import json
import sys
from types import ModuleType
from typing import Any, Dict, List, Mapping, Optional

from model.evaluation import common, hotpotqa, narrativeqa, triviaqa
from schemas import cli

# Task name -> metrics module.
TASKS: Dict[str, ModuleType] = {
    'hotpotqa': hotpotqa,
    'triviaqa': triviaqa,
    'narrativeqa': narrativeqa,
}

# Task-specific options: flag attribute -> (task, evaluate() keyword).
TASK_OPTIONS = {
    'per_document': ('triviaqa', 'per_document'),
    'protocol': ('narrativeqa', 'protocol'),
    'meteor': ('narrativeqa', 'meteor'),
    'split': ('narrativeqa', 'split'),
}


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
    with common.open_text(path) as f:
      return json.load(f)
  except OSError as e:
    raise EvaluationError(f'cannot read {role} file {path}: {e}') from e
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise EvaluationError(f'{role} file {path} is not valid JSON: {e}') from e


def _check_task(task: str) -> ModuleType:
  if task not in TASKS:
    raise EvaluationError(f'unknown task {task!r}; choose from '
                          f'{sorted(TASKS)}')
  return TASKS[task]


def _score(task: str, predictions: Any, predictions_source: str, gold_path: str,
           options: Mapping[str, Any]) -> Dict[str, Any]:
  """Loads the gold file, validates both sides and scores (`score` and `run`)."""
  module = _check_task(task)
  if hasattr(module, 'load_gold'):
    try:
      gold = module.load_gold(gold_path)
    except OSError as e:
      raise EvaluationError(f'cannot read gold file {gold_path}: {e}') from e
    except ValueError as e:
      raise EvaluationError(f'gold file {gold_path}: {e}') from e
  else:
    gold = load_json(gold_path, 'gold')
  try:
    module.check_predictions(predictions, predictions_source)
    module.check_gold(gold, gold_path)
  except ValueError as e:
    raise EvaluationError(str(e)) from e
  try:
    return module.evaluate(predictions, gold, **options)
  except narrativeqa.MeteorUnavailableError as e:
    raise EvaluationError(str(e)) from e


def score(task: str, predictions: Any, gold_path: str,
          **task_options: Any) -> Dict[str, Any]:
  """Scores an in-memory predictions object (e.g. `model.predict.predict_with_model`'s).

  The same validation and metrics as `run` on a file holding `predictions`
  as JSON (`predictions` is not modified).

  Args:
    task: Key of `TASKS`.
    predictions: The task's predictions object (as the predictions JSON file would hold it).
    gold_path: Gold file: a local path or a `tf.io.gfile` URL.
    **task_options: Keyword options of the task's `evaluate` (see TASK_OPTIONS).

  Returns:
    The metrics dict.

  Raises:
    EvaluationError: On unknown task, unreadable or malformed input.
  """
  return _score(task, predictions, 'predictions', gold_path, task_options)


def run(task: str, predictions_path: str, gold_path: str,
        output_path: Optional[str] = None, **options: Any) -> Dict[str, Any]:
  """Loads, validates and scores one prediction file.

  Args:
    task: Key of `TASKS`.
    predictions_path: Predictions JSON file.
    gold_path: Gold JSON file.
    output_path: Optional file to write the metrics JSON to.
    **options: Keyword options of the task's `evaluate` (see TASK_OPTIONS).

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


EXAMPLE = ('python -m model.evaluate --task hotpotqa --predictions /tmp/predictions.json '
           '--gold hotpot_dev_distractor_v1.json')


def build_parser() -> cli.Parser:
  """The command line (the shared contract of `schemas.cli`)."""
  parser = cli.Parser('model.evaluate',
                      'Score predictions with the official metrics of a task.', EXAMPLE)
  parser.add_argument('--task', required=True, choices=sorted(TASKS),
                      help='the official metrics to use')
  parser.add_argument('--predictions', required=True,
                      help='predictions JSON file (as model.predict writes it)')
  parser.add_argument('--gold', required=True,
                      help='official gold file: HotpotQA JSON, TriviaQA rc question file, '
                      'NarrativeQA qaps.csv')
  parser.add_argument('--output', default=None,
                      help='optional path to also write the metrics JSON')
  parser.add_argument('--per_document', action='store_true', default=None,
                      help='triviaqa: score Wikipedia per (question, document)')
  parser.add_argument('--protocol', choices=['paper', 'raw'], default=None,
                      help='narrativeqa: "paper" lowercases and strips a trailing '
                      'run of spaces/periods (default); "raw" scores as is')
  cli.bool_flag(parser, 'meteor', None,
                'narrativeqa: also METEOR (needs Java + pycocoevalcap; on by default)')
  parser.add_argument('--split', default=None,
                      help='narrativeqa: only score rows of this set '
                      '(train/valid/test)')
  return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
  """Parses command-line flags."""
  parser = build_parser()
  args = parser.parse_args(argv)
  for flag, (task, _) in TASK_OPTIONS.items():
    if getattr(args, flag) is not None and args.task != task:
      parser.error(f'--{"(no)meteor" if flag == "meteor" else flag} only applies '
                   f'to --task {task}')
  return args


def task_options(args: argparse.Namespace) -> Dict[str, Any]:
  """The `evaluate` keyword options that were given for this task."""
  return {kw: getattr(args, flag) for flag, (task, kw) in TASK_OPTIONS.items()
          if task == args.task and getattr(args, flag) is not None}


def missing_warning(task: str, metrics: Dict[str, Any]) -> Optional[str]:
  """The stderr warning about gold entries without a prediction, or None if there are none.

  Says what the task's metrics module does with them: HotpotQA scores a missing answer 0 on
  the answer metrics and a missing supporting-fact list 0 on the sp metrics (either one 0 on
  the joint metrics); TriviaQA scores a missing key 0; NarrativeQA scores a missing question
  as an EMPTY answer (0 ROUGE-L and METEOR; it adds reference length but no n-grams to BLEU).

  Args:
    task: Key of `TASKS`.
    metrics: What the task's `evaluate` returned (its `n_*` counts are read).

  Returns:
    One line starting with 'warning: ', or None.
  """
  n_gold = metrics.get('n_gold')
  if task == 'hotpotqa':
    answer, sp = metrics.get('n_missing_answer', 0), metrics.get('n_missing_sp', 0)
    if not (answer or sp):
      return None
    return (f'warning: of {n_gold} gold questions, {answer} have no answer prediction and '
            f'{sp} no supporting-fact (sp) prediction; a missing answer scores 0 on the '
            'answer and joint metrics, a missing sp 0 on the sp and joint metrics')
  missing = metrics.get('n_missing', 0)
  if not missing:
    return None
  if task == 'narrativeqa':
    return (f'warning: {missing} of {n_gold} gold questions have no prediction; they are '
            'scored as an empty answer (0 ROUGE-L and METEOR; reference length but no '
            'n-grams for BLEU)')
  if task == 'triviaqa':
    return (f'warning: {missing} of {n_gold} gold keys have no prediction; they score 0 on '
            'exact_match and f1')
  return f'warning: {missing} of {n_gold} gold entries have no prediction'


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


def main(argv: Optional[List[str]] = None) -> int:
  """CLI entry point; returns the process exit code."""
  args = parse_args(argv)

  def body():
    metrics = run(args.task, args.predictions, args.gold, args.output, **task_options(args))
    print_warnings(args.task, metrics)
    return metrics

  return cli.run_command('python -m model.evaluate', body, (EvaluationError,))


if __name__ == '__main__':
  sys.exit(main())
