"""The TriviaQA job's stats report: answer coverage (aliases found or not in the evidence, a
test file without answers), reconciled with the manifest."""

from __future__ import annotations

import pytest

from pipelines import runner
from tests.golden import inputs
from tests.pipelines import report_checks


@pytest.mark.slow
def test_stats_report(tmp_path, restore_logging):
  out = str(tmp_path / "out")
  assert runner.dataset_main("triviaqa", inputs.triviaqa(str(tmp_path / "in"))
                             + ["--output_dir", out] + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  stats, m = files["stats"], files["manifest"]
  assert stats["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                             "coverage", "answers_per_question", "packs"]
  cov = stats["coverage"]
  # Answers whose aliases occur nowhere in the evidence: the labeller's not_found (it skips
  # questions without answers).
  assert cov["not_in_text"] == m["stages"]["answers"]["not_found"] > 0
  assert cov["in_segment"] > 0 and cov["no_answer"] > 0 and cov["yes_no"] == 0
