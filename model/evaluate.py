"""Command-line scorer for readtwice predictions.

Usage:
  python -m model.evaluate --task hotpotqa|triviaqa|narrativeqa|extractive_qa \
      --predictions P --gold G [--output out.json]
  task options:
    triviaqa:    --per_document  (Wikipedia: score per (question, document) pair)
    narrativeqa: --protocol paper|raw  --nometeor  --split train|valid|test

Gold files: HotpotQA official JSON list; TriviaQA official rc question file
(domain and VerifiedEval read from it); NarrativeQA `qaps.csv`; extractive_qa:
the dataset's JSON-lines file (`schemas/jsonl_qa.py`).

Prints the metrics as one JSON object (sorted keys) on the last line of
stdout and, when `--output` is given, also writes it to that file.

Paths may be local or `tf.io.gfile` URLs (`gs://...`); TensorFlow is only
imported for the latter. The scoring itself (its Python API: `run`, `score`,
`records_options`, `check_gold`) is `model.evaluation.evaluate_lib`'s.

The tasks, their gold files, metrics, flags and warnings come from the
registry of `model.tasks` (one module per task).
"""

import argparse
import sys
from typing import Any, Dict, List, Optional

from model.evaluation import evaluate_lib
from model import tasks
from schemas import cli


EXAMPLE = ('python -m model.evaluate --task hotpotqa --predictions /tmp/predictions.json '
           '--gold hotpot_dev_distractor_v1.json')


def build_parser() -> cli.Parser:
  """The command line (the shared contract of `schemas.cli`); each task adds its flags."""
  parser = cli.Parser('model.evaluate',
                      'Score predictions with the official metrics of a task.', EXAMPLE)
  parser.add_argument('--task', required=True, choices=sorted(tasks.names()),
                      help='the official metrics to use')
  parser.add_argument('--predictions', required=True, io=cli.READS,
                      help='predictions JSON file (as model.predict writes it)')
  parser.add_argument('--gold', required=True, io=cli.READS,
                      help='official gold file: ' + ', '.join(
                          tasks.get(name).gold_help for name in tasks.names()))
  parser.add_argument('--output', default=None, io=cli.WRITES,
                      help='optional path to also write the metrics JSON')
  for name in tasks.names():
    for flag in tasks.get(name).flags:
      flag.add_to(parser)
  return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
  """Parses command-line flags; a task's flag given with another task is an error."""
  parser = build_parser()
  args = parser.parse_args(argv)
  for name in tasks.names():
    if name == args.task:
      continue
    for flag in tasks.get(name).flags:
      if getattr(args, flag.dest) is not None and flag.dest not in _flag_dests(args.task):
        parser.error(f'{flag.display} only applies to --task {name}')
  return args


def _flag_dests(task: str) -> List[str]:
  return [flag.dest for flag in tasks.get(task).flags]


def task_options(args: argparse.Namespace) -> Dict[str, Any]:
  """The `evaluate` keyword options that were given for this task."""
  return {dest: getattr(args, dest) for dest in _flag_dests(args.task)
          if getattr(args, dest) is not None}


def main(argv: Optional[List[str]] = None) -> int:
  """CLI entry point; returns the process exit code."""
  args = parse_args(argv)

  def body():
    metrics = evaluate_lib.run(args.task, args.predictions, args.gold, args.output, **task_options(args))
    evaluate_lib.print_warnings(args.task, metrics)
    return metrics

  return cli.run_command(cli.prog_of('model.evaluate'), body, (evaluate_lib.EvaluationError,))


if __name__ == '__main__':
  sys.exit(main())
