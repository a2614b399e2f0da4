"""The books job's stats report: without entity annotation, no mention panels; reconciled with
the manifest."""

from __future__ import annotations

import pytest

from pipelines import runner
from tests.golden import inputs
from tests.pipelines import report_checks


@pytest.mark.slow
def test_stats_report(tmp_path, restore_logging):
  out = str(tmp_path / "out")
  assert runner.dataset_main("books", inputs.books(str(tmp_path / "in")) + ["--output_dir", out]
                             + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  stats = files["stats"]
  assert stats["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                             "packs"]
  assert "coverage" not in stats and "oracle" not in stats and "entities" not in stats
  assert stats["mentions"] == {"labels": 0, "unmappable": 0, "cut": 0, "lost": 0}
  assert stats["rejected_by_reason"] == {"parse/empty_book": 1}
