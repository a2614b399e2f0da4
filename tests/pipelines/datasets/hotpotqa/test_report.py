"""The HotpotQA job's stats report: answer coverage (spans, yes/no, an unlabelled test file),
answers per question, packs; reconciled with the manifest."""

from __future__ import annotations

import pytest

from pipelines import runner
from tests.golden import inputs
from tests.pipelines import report_checks


@pytest.mark.slow
def test_stats_report(tmp_path, restore_logging):
  out = str(tmp_path / "out")
  assert runner.dataset_main("hotpotqa", inputs.hotpotqa(str(tmp_path / "in"))
                             + ["--output_dir", out] + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  stats = files["stats"]
  assert stats["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                             "coverage", "answers_per_question", "packs"]
  # 24 generated questions and the fixtures' good records (one a duplicate id, skipped after
  # segmentation), one unlabelled test question; 5 of the answers are yes/no.
  assert stats["coverage"] == {"questions": 28, "answerable": 27, "in_segment": 22,
                               "lost_in_segmentation": 0, "not_in_text": 0, "yes_no": 5,
                               "no_answer": 1}
  m = files["manifest"]
  # Span questions: the labeller's count (its answers_per_question distribution).
  assert stats["histograms"]["answers_per_question"]["count"] == m["stages"]["answers"]["exact"]
  # 63 full packs and 3 others: the pack panel's counts span decades.
  assert "packs" in files["logged"]
