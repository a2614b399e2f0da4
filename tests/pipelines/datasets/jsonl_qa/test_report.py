"""The jsonl_qa job's stats report: every coverage case (an answer in a segment, an answer
longer than a segment, an answer not in the text, no answer: in a test file, and in a labelled
file where it is a dead letter), reconciled with the manifest."""

from __future__ import annotations

import json
import os

import pytest

from pipelines import __main__ as generic
from tests.pipelines import report_checks

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                      "pipelines", "datasets", "jsonl_qa", "sample", "examples.jsonl")
WORDS = " ".join(f"word{i}" for i in range(200))
LONG = " ".join(f"long{i}" for i in range(80))  # longer than a 64-token segment


def _write(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(line) + "\n" for line in lines)
  return path


@pytest.mark.slow
def test_stats_report(tmp_path, restore_logging):
  context = f"{WORDS} {LONG} {WORDS}"
  labelled = _write(str(tmp_path / "mine.jsonl"), [
      {"id": "long", "question": "What is long?", "context": context,
       "answers": [{"text": LONG, "start": context.index(LONG)}]},
      {"id": "absent", "question": "Where is the zebra?", "context": WORDS,
       "answers": ["zebra unicorn"]},
      {"id": "found", "question": "Which word?", "context": WORDS, "answers": ["word150"]},
      {"id": "unanswered", "question": "Why?", "context": WORDS}])  # labels/missing_answer
  test_file = _write(str(tmp_path / "test.jsonl"), [
      {"id": "test1", "question": "Who?", "context": WORDS}])
  out = str(tmp_path / "out")
  assert generic.main(["jsonl_qa", "--input", ",".join([SAMPLE, labelled, test_file]),
                       "--output_dir", out] + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  stats, m = files["stats"], files["manifest"]
  assert stats["coverage"] == {"questions": 10, "answerable": 8, "in_segment": 6,
                               "lost_in_segmentation": 1, "not_in_text": 1, "yes_no": 0,
                               "no_answer": 2}
  assert m["rejected_by_reason"] == {"labels/missing_answer": 1}
  assert m["counts"]["written"] == stats["coverage"]["questions"] - 1
  assert stats["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                             "coverage", "answers_per_question", "packs"]
