"""The stats report (``stats.json``, ``stats.png``) on hand-made manifests and stats whose
numbers are known: the report-only stats (value counts, answer coverage, packs) and their
absence from the manifest, stats.json's figures, and the figure (titles, labels, log scales,
annotated bars, reproducible PNG bytes)."""

from __future__ import annotations

import json
import os

import pytest

from pipelines import datasets
from pipelines.beam import manifest as manifest_lib
from pipelines.beam import report, report_figure
from pipelines.beam.packing import PackEncoder
from pipelines.beam.segment import answer_coverage
from pipelines.beam.stats import (BundleStats, Distribution, SumStats, ValueCounts,
                                  report_stats, split_stats)
from pipelines.document import Question
from schemas import records
from tests.pipelines import report_checks


# ------------------------------------------------------------------------------ stats

def test_value_counts_quantiles_histogram_and_merge():
  v = ValueCounts.of([40, 50, 50, 60, 70, 80, 90, 100])
  assert v.count == 8
  # Nearest rank: the smallest value with at least ceil(q * n) values at or below it.
  assert [v.quantile(q) for q in (0, 0.25, 0.5, 0.75, 1)] == [40, 50, 60, 80, 100]
  assert v.histogram([0, 50, 100]) == [1, 7]  # the last bin is closed
  assert v.histogram([60, 80]) == [3]  # values outside the edges are not counted
  merged = v.merge(ValueCounts.of([0, 100]))
  assert merged.counts[100] == 2 and merged.quantile(0) == 0 and v.counts[100] == 1
  assert merged.describe() == {"count": 10, "values": {
      "0": 1, "40": 1, "50": 2, "60": 1, "70": 1, "80": 1, "90": 1, "100": 2}}
  with pytest.raises(ValueError):
    ValueCounts().quantile(0.5)
  with pytest.raises(ValueError):
    ValueCounts().add(-1)


def test_report_stats_are_summed_but_stay_out_of_the_manifest():
  s = BundleStats()
  s.count("segment/input")
  s.count("report/questions/in_segment")
  s.tally("report/oracle/span_rouge_l_pct", 50)
  (first,) = [o.value.value for o in s.emit()]
  s.tally("report/oracle/span_rouge_l_pct", 70)
  s.observe("segment/tokens_per_document", 5)
  (second,) = [o.value.value for o in s.emit()]
  combine = SumStats()
  total = combine.extract_output(combine.add_input(combine.add_input(
      combine.create_accumulator(), first), second))
  assert total["report/oracle/span_rouge_l_pct"] == ValueCounts.of([50, 70])
  counters, dists = split_stats(total)
  assert counters == {"segment/input": 1} and list(dists) == ["segment/tokens_per_document"]
  assert report_stats(total) == {"oracle/span_rouge_l_pct": ValueCounts.of([50, 70]),
                                 "questions/in_segment": 1}
  # The manifest of such stats holds none of them, and the report gets them with the shards'.
  shards = [{"kind": "records", "path": "r0", "records": 2, "bytes": 9, "packs": 2,
             "segments": 9, "sub_documents": 3, "padding_segments": 7,
             "report/segments_per_pack": ValueCounts.of([8, 1])}]
  header = {"job": "t", "git_revision": "r", "tokenizer": {"name": "n"}, "config": {},
            "inputs": []}
  stats = dict(total, **{"read/records": 1, "parse/input": 1, "parse/output": 1})
  m = manifest_lib.build_manifest(header, 1, stats, [], shards, {}, created_at="T")
  assert "report" not in json.dumps(m)
  got = manifest_lib.report_inputs(stats, shards)
  assert got["segments_per_pack"] == ValueCounts.of([1, 8])
  assert got["oracle/span_rouge_l_pct"] == ValueCounts.of([50, 70])


def test_pack_encoder_counts_segments_and_sub_documents_per_pack():
  stats = PackEncoder(8, 16, 1).stats([[0, 1], [2], [3, 4, 5]], [3, 5, 8, 1, 1, 2])
  assert stats["packs"] == 3 and stats["padding_segments"] == 4
  assert stats["report/segments_per_pack"] == ValueCounts.of([8, 8, 4])
  assert stats["report/sub_documents_per_pack"] == ValueCounts.of([2, 1, 3])


def test_answer_coverage_of_a_question():
  span, yes = records.ANSWER_TYPE_SPAN, records.ANSWER_TYPE_YES
  assert answer_coverage(Question("q", "Q?"), [], 0) == "no_answer"
  assert answer_coverage(Question("q", "Q?", ("yes",), yes), [], 0) == "yes_no"
  assert answer_coverage(Question("q", "Q?", ("a",), span), [], 0) == "not_in_text"
  assert answer_coverage(Question("q", "Q?", ("a",), span), [(0, 1)], 0) == (
      "lost_in_segmentation")
  assert answer_coverage(Question("q", "Q?", ("a",), span), [(0, 1)], 2) == "in_segment"


def test_every_job_replaces_its_report_on_overwrite():
  for name, spec in datasets.specs().items():
    assert set(report.OUTPUTS) <= set(spec.outputs), name


# ------------------------------------------------------------------------------ stats.json

def _manifest(job="wikipedia", **extra):
  m = {"job": job,
       "counts": {"input": 120000, "written": 100000, "skipped": 19000, "rejected": 1000},
       "stage_counts": [],
       "skipped_by_reason": {"parse/redirect": 18000, "parse/disambiguation": 1000},
       "rejected_by_reason": {"parse/bad_page": 1000},
       "examples": {"documents": 100000, "packs": 1000, "segments": 7915,
                    "padding_segments": 85, "sub_documents": 2500},
       "config": {"segments_per_pack": 8},
       "stages": {"segment": {"mentions_labels": 100000, "mentions_unmappable": 3,
                              "mentions_cut": 157, "mentions_lost": 0}},
       "distributions": {
           "tokens_per_document": Distribution.of([1] * 5 + [600] * 90000
                                                  + [5000] * 9995).describe(),
           "segments_per_document": Distribution.of([1] * 60000 + [3] * 40000).describe(),
           "mentions_per_segment": Distribution.of([0] * 7000 + [1] * 900
                                                   + [30] * 15).describe()}}
  m.update(extra)
  return m


PACKS = ValueCounts.of([8] * 980 + [4] * 15 + [3] * 5)
VOCABULARY = [(i + 1, f"Entity {i + 1}", max(1, 5000 // (i + 1))) for i in range(2000)]


def test_stats_json_of_a_pretraining_job():
  r = report.build_report(_manifest(), VOCABULARY,
                          {"segments_per_pack": PACKS,
                           "sub_documents_per_pack": ValueCounts.of([2] * 500 + [3] * 500)})
  assert r["title"] == ("wikipedia: 100,000 documents written from 120,000 input records "
                        "(19,000 skipped, 1,000 rejected)")
  assert r["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                         "mentions_per_segment", "mentions", "entities", "packs"]
  tokens = r["histograms"]["tokens_per_document"]
  assert tokens["bin_edges"] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
  assert tokens["counts"] == [5] + [0] * 8 + [90000, 0, 0, 9995]
  assert tokens["unit"] == "tokens" and tokens["count"] == 100000
  assert r["histograms"]["mentions_per_segment"]["bin_edges"][:2] == [0, 1]
  assert r["mentions"] == {"labels": 100000, "unmappable": 3, "cut": 157, "lost": 0}
  p = r["packs"]
  assert (p["packs"], p["segment_slots"], p["fill"]) == (1000, 8000, round(7915 / 8000, 4))
  assert p["sub_documents_per_pack"] == 2.5
  assert p["segments_in_pack"] == {"count": 1000, "values": {"3": 5, "4": 15, "8": 980}}
  e = r["entities"]
  assert e["vocabulary"] == 2000 and e["count_at_rank"] == {"1": 5000, "10": 500,
                                                             "100": 50, "1000": 5}
  assert e["rank_curve"]["ranks"][:5] == [1, 2, 3, 4, 5] and e["rank_curve"]["ranks"][-1] == 2000
  assert e["rank_curve"]["counts"][-1] == 2
  assert "coverage" not in r and "oracle" not in r
  json.dumps(r)  # JSON as it is
  one = dict(_manifest(), counts={"input": 1, "written": 1, "skipped": 0, "rejected": 0})
  assert report.title_of(one) == ("wikipedia: 1 document written from 1 input record "
                                  "(0 skipped, 0 rejected)")


def _qa_stats():
  return {"questions/in_segment": 70, "questions/lost_in_segmentation": 5,
          "questions/not_in_text": 20, "questions/no_answer": 5,
          "oracle/span_rouge_l_pct": ValueCounts.of([40, 50, 50, 60, 70, 80, 90, 100]),
          "oracle/best_rouge_l_pct": ValueCounts.of([10] * 20 + [100] * 80),
          "segments_per_pack": PACKS}


def test_stats_json_of_a_question_answering_job():
  m = _manifest("narrativeqa", stages={"segment": {}},
                config={"segments_per_pack": 8, "split": "test", "context": "story",
                        "oracle": {"min_score": 0.35}})
  del m["distributions"]["mentions_per_segment"]
  m["distributions"]["answers_per_question"] = Distribution.of([0] * 20 + [1] * 75).describe()
  r = report.build_report(m, None, _qa_stats())
  assert r["title"].startswith("narrativeqa (split test, context story): 100,000 documents")
  assert r["coverage"] == {"in_segment": 70, "lost_in_segmentation": 5, "not_in_text": 20,
                           "yes_no": 0, "no_answer": 5, "questions": 100, "answerable": 95}
  spans = r["oracle"]["span_rouge_l"]
  assert {k: spans[k] for k in ("count", "min", "p25", "median", "p75", "max")} == {
      "count": 8, "min": 0.4, "p25": 0.5, "median": 0.6, "p75": 0.8, "max": 1.0}
  assert spans["bin_edges"] == [i / 20 for i in range(21)]
  assert spans["counts"][8] == 1 and spans["counts"][10] == 2 and spans["counts"][19] == 1
  assert sum(spans["counts"]) == 8
  assert r["oracle"]["best_rouge_l"]["median"] == 1.0 and r["oracle"]["min_score"] == 0.35
  assert r["panels"] == ["outcome", "tokens_per_document", "segments_per_document",
                         "coverage", "answers_per_question", "oracle", "packs"]
  assert r["histograms"]["answers_per_question"]["counts"] == [20, 75]
  lines = report.summary_lines(r)
  assert any("70 of 95 answerable" in line for line in lines)
  assert any("median 0.60" in line for line in lines)


# ------------------------------------------------------------------------------ the figure

def _texts(ax):
  return [t.get_text() for t in ax.texts]


def test_figure_of_a_pretraining_job():
  r = report.build_report(_manifest(), VOCABULARY, {"segments_per_pack": PACKS})
  fig = report_figure.build_figure(r)
  logged = report_checks.check_figure(r, fig)  # titles, labels, log where counts span decades
  # The outcome (100,000 written, 1,000 rejected), token, mention and pack counts span decades;
  # the segments per document (60,000 and 40,000) do not.
  assert logged == ["outcome", "tokens_per_document", "mentions_per_segment", "mentions",
                    "packs"]
  axes = dict(zip(r["panels"], fig.get_axes()))
  assert fig._suptitle.get_text().startswith("wikipedia: 100,000 documents written")  # pylint: disable=protected-access
  mentions = axes["mentions"]
  assert mentions.get_yscale() == "log" and mentions.get_xscale() == "linear"
  # 157 cut mentions beside 100,000 placed: the small bar carries its number.
  assert _texts(mentions) == ["100k", "3", "157", "0"]
  assert [t.get_text() for t in mentions.get_xticklabels()] == [
      "placed", "unmappable", "cut at an edge", "lost"]
  assert axes["segments_per_document"].get_yscale() == "linear"
  assert _texts(axes["outcome"])[0] == "100k (83%)"
  assert axes["outcome"].get_xscale() == "log"
  assert axes["entities"].get_xscale() == axes["entities"].get_yscale() == "log"
  assert [t.get_text() for t in axes["tokens_per_document"].get_xticklabels()][-4:] == [
      "512–1023", "1024–2047", "2048–4095", "4096–8191"]
  assert "n 100k, mean" in axes["tokens_per_document"].get_title()


def test_figure_of_a_question_answering_job():
  m = _manifest("narrativeqa", stages={"segment": {}},
                config={"segments_per_pack": 8, "oracle": {"min_score": 0.35}})
  del m["distributions"]["mentions_per_segment"]
  m["distributions"]["answers_per_question"] = Distribution.of([0] * 20 + [1] * 75).describe()
  r = report.build_report(m, None, _qa_stats())
  fig = report_figure.build_figure(r)
  report_checks.check_figure(r, fig)
  axes = dict(zip(r["panels"], fig.get_axes()))
  coverage = axes["coverage"]
  assert coverage.get_xscale() == "linear"  # 70 / 5 < 30
  assert [t.get_text() for t in coverage.get_yticklabels()] == [
      "answer in a segment", "lost at segment edges", "no span ≥ min ROUGE-L",
      "no reference answer"]
  assert _texts(coverage) == ["70 (70%)", "5 (5%)", "20 (20%)", "5 (5%)"]
  assert "70 of 95 answerable (74%)" in coverage.get_title()
  oracle = axes["oracle"]
  # The chosen spans (1 or 2 per bin) and the best scores (20 and 80 questions) span 80x.
  assert oracle.get_xlim() == (0, 1) and oracle.get_yscale() == "log"
  assert "median 0.60" in oracle.get_title() and "p25 0.50" in oracle.get_title()
  assert oracle.get_legend() is not None


@pytest.mark.slow
def test_png_is_valid_and_reproducible():
  r = report.build_report(_manifest(), VOCABULARY, {"segments_per_pack": PACKS})
  one = report.plot_report(r)
  assert one == report.plot_report(json.loads(json.dumps(r)))  # from stats.json alone
  width, height = report_checks.png_size(one)
  assert (width, height) == (int(4 * report_figure.PANEL_SIZE[0] * report_figure.DPI),
                             int((2 * report_figure.PANEL_SIZE[1] + 0.5) * report_figure.DPI))


def test_write_report_writes_both_files_atomically_through_the_file_systems(tmp_path,
                                                                           monkeypatch):
  out = str(tmp_path / "out")
  os.makedirs(out)
  r = report.write_report(_manifest(), out, VOCABULARY, {"segments_per_pack": PACKS})
  assert sorted(os.listdir(out)) == ["stats.json", "stats.png"]  # no temporary file left
  with open(os.path.join(out, "stats.json"), encoding="utf-8") as f:
    assert json.load(f) == json.loads(json.dumps(r))
  written = []
  monkeypatch.setattr(report.writer, "write_atomically",
                      lambda path, chunks: written.append((path, b"".join(chunks))))
  monkeypatch.setattr(report, "plot_report", lambda r: b"PNG of " + r["title"].encode())
  report.write_report(_manifest(), "gs://bucket/run", None, {})
  assert written == [("gs://bucket/run/stats.json", written[0][1]),
                     ("gs://bucket/run/stats.png", "PNG of wikipedia: 100,000 documents "
                      "written from 120,000 input records (19,000 skipped, 1,000 "
                      "rejected)".encode())]
  assert json.loads(written[0][1])["title"].startswith("wikipedia: ")


def test_report_of_an_empty_output():  # --allow_empty: nothing written, a report all the same
  m = {"job": "hotpotqa", "counts": {"input": 2, "written": 0, "skipped": 0, "rejected": 2},
       "rejected_by_reason": {"parse/bad_context": 2}, "skipped_by_reason": {},
       "examples": {"documents": 0, "packs": 0, "segments": 0, "padding_segments": 0,
                    "sub_documents": 0}, "config": {"segments_per_pack": 8},
       "stages": {}, "distributions": {}}
  r = report.build_report(m, None, {})
  assert r["panels"] == ["outcome"] and r["histograms"] == {}
  assert r["packs"]["fill"] == 0.0 and "coverage" not in r
  fig = report_figure.build_figure(r)
  report_checks.check_figure(r, fig)
  assert report.summary_lines(r)[0].startswith("input: 2, 0 written")


def test_report_of_an_empty_wikipedia_output_with_its_entity_vocabulary():
  # A Wikipedia run whose only page was rejected: an (empty) vocabulary, no distributions.
  m = {"job": "wikipedia", "counts": {"input": 1, "written": 0, "skipped": 0, "rejected": 1},
       "rejected_by_reason": {"read/truncated": 1}, "skipped_by_reason": {},
       "examples": {"documents": 0, "packs": 0, "segments": 0, "padding_segments": 0,
                    "sub_documents": 0}, "config": {"segments_per_pack": 8},
       "stages": {}, "distributions": {}}
  r = report.build_report(m, [], {})
  assert r["panels"] == ["outcome"] and r["entities"]["vocabulary"] == 0
  report_checks.check_figure(r, report_figure.build_figure(r))
