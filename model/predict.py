"""Runs a trained ReadTwice model over packs and writes predictions in a task's official format.

CLI::

  python -m model.predict --records_dir D --model_dir M --output predictions.json \
      [--gold GOLD] [--reduction max|sum] [--memory_scope sub_document|book]

The task (and, for TriviaQA, whether the official keys are per (question, page):
``--per_document``) is the records' own, read from their manifest (its ``task``, else the
``job`` that wrote them; :func:`model.tasks.task_name`); ``--task`` / ``--per_document`` are
only checks.

Output (the task's :meth:`model.tasks.Task.predictions` of the :mod:`model.inference.decoding`
answers):

* ``hotpotqa``: ``{"answer": {qid: str}, "sp": {qid: [[title, sent_id], ...]}}``.
* ``triviaqa``: ``{QuestionId: answer}`` (Wikipedia), or for records of one document per
  (question, page) -- web, or Wikipedia with the pipeline's ``--per_document`` --
  ``{"<QuestionId>--<Filename>": answer}``.
* ``narrativeqa``: ``{"<document_id>: <question>": answer}``.
* ``extractive_qa``: ``{"<document id>": answer}`` (e.g. the ``jsonl_qa`` dataset's ids).

``--reduction`` aggregates a question's span candidates across its segments, sub-documents and
packs: ``max`` (best single span) or ``sum`` (logsumexp per normalised answer text).
Python API: :func:`model.inference.predict_lib.predict` (loads the model from ``model_dir``) and
:func:`model.inference.predict_lib.predict_with_model` (an already built model, e.g. for periodic
dev evaluation during training; score its result with :func:`model.evaluation.evaluate_lib.score`). 
Paths may be any ``tf.io.gfile`` path (local, ``gs://``).

This module is the command (its flags, then :mod:`model.inference.predict_lib`): its ``--help`` and
usage errors answer before TensorFlow loads.
"""

from __future__ import annotations

import sys

from model import configs as configs_lib
from model import faults
from model import flags
from model import tasks
from schemas import cli

EXAMPLE = ("python -m model.predict --records_dir /tmp/hotpot_dev_records "
           "--model_dir /tmp/model/best --output /tmp/predictions.json "
           "--gold hotpot_dev_distractor_v1.json")


def build_parser() -> cli.Parser:
  p = cli.Parser("model.predict", __doc__.split("\n\n")[0], EXAMPLE)
  p.add_argument("--records_dir", required=True, io=cli.READS,
                 help="a QA pipeline's output dir (hotpotqa, triviaqa, narrativeqa, or "
                      "extractive QA data such as jsonl_qa); the task and TriviaQA's "
                      "per-document keys follow its manifest")
  p.add_argument("--model_dir", required=True, io=cli.READS,
                 help="a model.finetune / model.train model dir (config.json + checkpoints), "
                      "e.g. <model_dir>/best")
  p.add_argument("--output", required=True, io=cli.WRITES, help="predictions JSON file to write")
  p.add_argument("--checkpoint", default=None, io=cli.READS,
                 help="checkpoint prefix to restore (default: the latest in --model_dir)")
  p.add_argument("--task", choices=tasks.names(), default=None,
                 help="optional check: the task the records must be of (default: theirs)")
  cli.bool_flag(p, "per_document", None,
                "TriviaQA: one answer per '<QuestionId>--<Filename>' document (default: as "
                "the records are, per page for web)")
  p.add_argument("--reduction", choices=configs_lib.REDUCTIONS, default="max",
                 help="aggregation of a question's span candidates across its segments: max "
                      "(best span) or sum (logsumexp per answer text)")
  p.add_argument("--memory_scope", choices=configs_lib.MEMORY_SCOPES, default="sub_document",
                 help="which memories a segment reads: its sub-document's (the paper) or its "
                      "whole book's, across sub-documents and packs (two passes)")
  p.add_argument("--top_k", type=int, default=20,
                 help="span candidates kept per segment before aggregation")
  p.add_argument("--max_answer_tokens", type=int, default=configs_lib.DEFAULT_MAX_ANSWER_TOKENS,
                 help="longest answer span, in tokens")
  p.add_argument("--sp_threshold", type=float, default=0.5,
                 help="HotpotQA: supporting-fact probability above which a sentence is "
                      "predicted")
  p.add_argument("--gold", default=None, io=cli.READS,
                 help="official gold file: also score the predictions with the same code as "
                 "`python -m model.evaluate` and print the metrics as the last line "
                 "(NarrativeQA: the rows of the records' split, as its --split)")
  return p


@faults.command("model.predict")
def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  for name in ("top_k", "max_answer_tokens"):
    if getattr(args, name) < 1:
      p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
  if not 0.0 <= args.sp_threshold <= 1.0:
    p.error(f"--sp_threshold must be in [0, 1], got {args.sp_threshold}")
  problem = flags.unusable_records(args.records_dir)
  if problem:
    return flags.fail(p.prog, problem)
  with faults.starting():
    from model.inference import predict_lib  # pylint: disable=g-import-not-at-top  (TensorFlow)
  return predict_lib.run(p.prog, args)


if __name__ == "__main__":
  sys.exit(main())
