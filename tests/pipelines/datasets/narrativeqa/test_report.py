"""The NarrativeQA job's stats report: answer coverage by the ROUGE-L oracle and the scores of
the chosen spans (quantiles, histogram), reconciled with the oracle's counters; on generated
stories and on the real-format samples' full story."""

from __future__ import annotations

import csv
import os

import pytest

from pipelines import runner
from tests.golden import inputs
from tests.pipelines import report_checks

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "shared", "samples",
                       "narrativeqa")
TIME_MACHINE = "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58"
QUESTIONS = [("What did the Time Traveller build?", "A time machine", "a machine"),
             ("Who are the Eloi?", "People of the future", "the Eloi"),
             ("Who are the Morlocks?", "Creatures living underground", "subterranean beings"),
             ("What is the fourth dimension?", "Time", "duration"),
             ("What happened to Weena?", "She was lost in the forest fire", "she died in a fire"),
             ("Who knits the purple scarves?", "Nobody in this story", "zebra unicorn")]


def _check_oracle(files):
  stats, m = files["stats"], files["manifest"]
  answers = m["stages"]["answers"]
  o = stats["oracle"]
  spans, best = o["span_rouge_l"], o["best_rouge_l"]
  assert o["min_score"] == m["config"]["oracle"]["min_score"]
  assert spans["count"] == sum(spans["counts"]) == answers["oracle_spans"]
  assert best["count"] == sum(best["counts"]) == answers["oracle_found"] + answers.get(
      "not_found", 0)
  assert spans["bin_edges"][0] == 0 and spans["bin_edges"][-1] == 1
  assert len(spans["bin_edges"]) == len(spans["counts"]) + 1 == 21
  assert o["min_score"] <= spans["min"] <= spans["p25"] <= spans["median"] <= spans["p75"] \
      <= spans["max"] <= 1
  # Coverage: a question without an oracle span is "not in the text".
  assert stats["coverage"]["not_in_text"] == answers.get("not_found", 0)
  assert stats["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                             "coverage", "answers_per_question", "oracle", "packs"]


@pytest.mark.slow
def test_stats_report(tmp_path, restore_logging):
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", inputs.narrativeqa(str(tmp_path / "in"))
                             + ["--output_dir", out] + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  _check_oracle(files)
  cov = files["stats"]["coverage"]
  assert cov["in_segment"] > 0 and cov["not_in_text"] > 0


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="no ../shared/samples")
def test_stats_report_on_the_full_sample_story(tmp_path, restore_logging):
  with open(os.path.join(SAMPLES, "qaps.csv"), encoding="utf-8", newline="") as f:
    header = next(csv.reader(f))
  qaps = str(tmp_path / "qaps.csv")
  with open(qaps, "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    for q, a1, a2 in QUESTIONS:
      w.writerow([TIME_MACHINE, "test", q, a1, a2, "", "", ""] + [""] * (len(header) - 8))
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", [
      "--input", qaps, "--split", "test", "--output_dir", out,
      "--documents", os.path.join(SAMPLES, "documents_full.csv"),
      "--stories_dir", os.path.join(SAMPLES, "stories")] + report_checks.FLAGS) == 0
  files = report_checks.check_report(out)
  _check_oracle(files)
  stats = files["stats"]
  assert stats["coverage"]["questions"] == len(QUESTIONS)
  # Hundreds of spans, most of them exact (1.0), a few near the threshold: a log axis.
  assert "oracle" in files["logged"]
  assert stats["oracle"]["span_rouge_l"]["max"] == 1.0
