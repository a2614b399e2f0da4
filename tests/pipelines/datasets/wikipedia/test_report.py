"""The Wikipedia job's stats report: mentions placed / not placed and the entity frequency by
rank beside the common panels; reconciled with the manifest and the entity vocabulary."""

from __future__ import annotations

import os

import pytest

from schemas import entities as entities_schema
from pipelines import runner
from tests.golden import inputs
from tests.pipelines import report_checks


@pytest.mark.slow
def test_stats_report(tmp_path, restore_logging):
  out = str(tmp_path / "out")
  assert runner.dataset_main("wikipedia", inputs.wikipedia(str(tmp_path / "in"))
                             + ["--output_dir", out] + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  stats = files["stats"]
  assert stats["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                             "mentions_per_segment", "mentions", "entities", "packs"]
  m = files["manifest"]
  assert stats["histograms"]["mentions_per_segment"]["count"] == m["examples"]["segments"]
  assert stats["mentions"]["labels"] == m["distributions"]["mentions_per_segment"]["sum"] > 0
  vocab = entities_schema.read_vocabulary(os.path.join(out, "entities", "vocabulary.parquet"))
  counts = sorted(vocab.column("count").to_pylist(), reverse=True)
  e = stats["entities"]
  assert e["vocabulary"] == len(counts) and e["mentions"] == sum(counts)
  curve = e["rank_curve"]
  assert curve["ranks"][0] == 1 and curve["ranks"][-1] == len(counts)
  assert curve["counts"] == [counts[r - 1] for r in curve["ranks"]]
