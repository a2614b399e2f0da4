"""Every job's stats report: ``stats.json`` and ``stats.png`` beside its manifest.

Written by the manifest step (:func:`pipelines.beam.manifest.write_manifest`) after
``manifest.json`` and before ``COMPLETED`` (so a completed output always has its report), each
file atomically (a temporary file renamed into place; local or ``gs://``).  Built from the
finished manifest, the report-only stats of the stages (``report/`` keys of
:mod:`pipelines.beam.stats`: answer coverage, oracle scores, segments per pack) and, for the
Wikipedia job, the entity vocabulary.  No pass over the documents: the stages count as they go.
The figure is drawn by :mod:`pipelines.beam.report_figure` from ``stats.json`` alone.

``stats.json`` (keys; every panel of ``stats.png`` is drawn from one of them):

* ``job``, ``title`` (the figure's title), ``counts``, ``stage_counts``, ``skipped_by_reason``,
  ``rejected_by_reason``, ``examples``: as in the manifest; ``distributions``: the manifest's
  ``tokens_per_document``, ``segments_per_document`` and ``mentions_per_segment``.
* ``panels``: the names of the figure's panels, in order (the keys below, ``outcome`` for the
  input records by outcome: ``counts`` and the ``*_by_reason`` maps).
* ``histograms``: per drawn histogram (``tokens_per_document``, ``segments_per_document``,
  ``answers_per_question``, ``mentions_per_segment``): ``unit``, ``count``, ``min``, ``max``,
  ``mean``, ``bin_edges`` (power-of-two bins ``[edge[i], edge[i + 1])``, contiguous from the
  smallest to the largest value's bin) and ``counts`` (one per bin).  These distributions count
  the documents the segmenter processed (``stages.segment.documents``): the written documents
  plus those a later stage dropped (skipped duplicates, ``labels/missing_answer``).
* ``packs``: ``packs``, ``segments_per_pack`` (capacity), ``segment_slots``, ``segments``,
  ``padding_segments``, ``fill`` (segments / slots), ``sub_documents``,
  ``sub_documents_per_pack`` (mean), and ``segments_in_pack`` / ``sub_documents_in_pack``:
  ``{"count": packs, "values": {"<n>": packs holding n}}``.
* ``coverage`` (question-answering jobs): per segmented document with a question, what became
  of its answer: ``in_segment`` (an answer span lies wholly inside at least one segment),
  ``lost_in_segmentation`` (spans in the text, none inside a segment: cut by window edges or
  covered by no token), ``not_in_text`` (no span found; NarrativeQA: no span reached the oracle's
  ROUGE-L threshold), ``yes_no`` (HotpotQA yes/no answers), ``no_answer`` (no reference answer:
  test files, unanswerable examples); ``questions`` (their sum) and ``answerable``
  (``questions - no_answer``).  ``questions`` equals the manifest's ``labels`` (labelled plus
  unlabelled); a question read as several documents (TriviaQA web pages, ``--per_document``)
  counts once per document.
* ``oracle`` (NarrativeQA): ``min_score`` (``--oracle_min_score``), ``span_rouge_l`` (every
  chosen answer span's ROUGE-L F1) and ``best_rouge_l`` (every labelled question's best score,
  also when no span was chosen): ``count``, ``min``, ``p25``, ``median``, ``p75``, ``max``
  (nearest-rank quantiles of the scores rounded to 0.01), ``bin_edges`` (0, 0.05, ..., 1; the
  last bin closed) and ``counts``.
* ``mentions`` (always; drawn when a mention was found): mentions placed in a segment
  (``labels``, once per segment holding them) and not (``unmappable``: no token covers them;
  ``cut``: per window cutting them; ``lost``: in no window).
* ``entities`` (Wikipedia): ``vocabulary``, ``mentions``, ``top`` (20 most mentioned),
  ``count_at_rank`` (decades) and ``rank_curve`` (``ranks``, ``counts``: log-spaced points of
  the entity frequency by rank).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from apache_beam.io.filesystems import FileSystems

from pipelines.beam import segment, writer
from pipelines.beam.stats import ValueCounts

LOGGER = logging.getLogger("pipelines")
STATS_JSON = "stats.json"
STATS_PNG = "stats.png"
OUTPUTS = (STATS_JSON, STATS_PNG)  # a DatasetSpec's ``outputs`` (what --overwrite replaces)
_DISTRIBUTIONS = ("tokens_per_document", "segments_per_document", "mentions_per_segment")
COVERAGE = segment.COVERAGE  # what became of a question's answer
HISTOGRAM_UNITS = {"tokens_per_document": "tokens", "segments_per_document": "segments",
                   "answers_per_question": "answer spans",
                   "mentions_per_segment": "mentions"}
SCORE_EDGES = tuple(range(0, 101, 5))  # ROUGE-L x 100


def power_of_two_histogram(distribution: Mapping[str, Any]) -> Dict[str, Any]:
  """A manifest distribution (``histogram``: ``{"<lo>-<hi>": n}``) as contiguous bins."""
  hist = {tuple(int(x) for x in k.split("-")): n
          for k, n in distribution.get("histogram", {}).items()}
  edges: List[int] = []
  counts: List[int] = []
  if hist:
    lo, top = min(b for b, _ in hist), max(e for _, e in hist)
    edges.append(lo)
    while edges[-1] < top:
      b = edges[-1]
      e = 1 if b == 0 else 2 * b
      counts.append(hist.get((b, e), 0))
      edges.append(e)
  return {"count": distribution.get("count", 0), "min": distribution.get("min", 0),
          "max": distribution.get("max", 0), "mean": distribution.get("mean", 0.0),
          "bin_edges": edges, "counts": counts}


def score_summary(values: Optional[ValueCounts]) -> Dict[str, Any]:
  """Quantiles and a 0.05-bin histogram of scores counted x 100 (:class:`ValueCounts`)."""
  values = values or ValueCounts()
  out: Dict[str, Any] = {"count": values.count}
  for name, q in (("min", 0.0), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("max", 1.0)):
    out[name] = values.quantile(q) / 100 if values.count else None
  out["bin_edges"] = [e / 100 for e in SCORE_EDGES]
  out["counts"] = values.histogram(SCORE_EDGES)
  return out


def _in_pack(values: Optional[ValueCounts]) -> Dict[str, Any]:
  return (values or ValueCounts()).describe()


def _packs(m: Mapping[str, Any], stats: Mapping[str, Any]) -> Dict[str, Any]:
  ex = m.get("examples", {})
  capacity = int(m.get("config", {}).get("segments_per_pack") or 0)
  packs = int(ex.get("packs", 0))
  slots = packs * capacity if capacity else ex.get("segments", 0) + ex.get("padding_segments", 0)
  return {"packs": packs, "segments_per_pack": capacity, "segment_slots": slots,
          "segments": ex.get("segments", 0), "padding_segments": ex.get("padding_segments", 0),
          "fill": round(ex.get("segments", 0) / slots, 4) if slots else 0.0,
          "sub_documents": ex.get("sub_documents", 0),
          "sub_documents_per_pack": round(ex.get("sub_documents", 0) / packs, 3) if packs
                                    else 0.0,
          "segments_in_pack": _in_pack(stats.get("segments_per_pack")),
          "sub_documents_in_pack": _in_pack(stats.get("sub_documents_per_pack"))}


def _coverage(stats: Mapping[str, Any]) -> Optional[Dict[str, int]]:
  found = {k: int(stats.get(f"questions/{k}", 0)) for k in COVERAGE}
  if not any(found.values()):
    return None
  total = sum(found.values())
  return dict(found, questions=total, answerable=total - found["no_answer"])


def _rank_curve(counts: Sequence[int]) -> Dict[str, List[int]]:
  """Log-spaced points (12 per decade, and the last rank) of a count-by-rank curve."""
  ranks, k = [], 0
  while counts:
    r = int(round(10 ** (k / 12)))
    k += 1
    if r > len(counts):
      break
    if not ranks or r != ranks[-1]:
      ranks.append(r)
  if counts and ranks[-1] != len(counts):
    ranks.append(len(counts))
  return {"ranks": ranks, "counts": [counts[r - 1] for r in ranks]}


def title_of(m: Mapping[str, Any]) -> str:
  """The figure's title: the job (with its split and context, where it has them) and what it
  wrote.  Not the output path: the same input gives the same report wherever it is written."""
  c = m["counts"]
  config = m.get("config", {})
  extra = ", ".join(f"{k} {config[k]}" for k in ("split", "context") if config.get(k))
  return (f"{m.get('job') or 'job'}{f' ({extra})' if extra else ''}: "
          f"{plural(c['written'], 'document')} written from "
          f"{plural(c['input'], 'input record')} ({c['skipped']:,} skipped, "
          f"{c['rejected']:,} rejected)")


def plural(n: int, noun: str) -> str:
  """``1 document``, ``2 documents``, ``1,000 documents``."""
  return f"{n:,} {noun}{'' if n == 1 else 's'}"


def build_report(manifest: Dict[str, Any],
                 vocabulary: Optional[Sequence[Tuple[int, str, int]]] = None,
                 stats: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
  """The ``stats.json`` content (see the module docstring).  ``stats``: the report-only stats
  (:func:`pipelines.beam.manifest.report_inputs`)."""
  m, stats = manifest, dict(stats or {})
  segment = m.get("stages", {}).get("segment", {})
  mentions = {k: segment.get(f"mentions_{k}", 0) for k in ("labels", "unmappable", "cut", "lost")}
  dists = m.get("distributions", {})
  report: Dict[str, Any] = {
      "job": m.get("job"), "title": title_of(m), "counts": m["counts"],
      "stage_counts": m.get("stage_counts", []),
      "skipped_by_reason": m.get("skipped_by_reason", {}),
      "rejected_by_reason": m.get("rejected_by_reason", {}),
      "examples": m.get("examples", {}),
      "distributions": {k: dists.get(k) for k in _DISTRIBUTIONS if k in dists},
      "mentions": mentions,
      "packs": _packs(m, stats),
  }
  coverage = _coverage(stats)
  if coverage is not None:
    report["coverage"] = coverage
  has_mentions = (sum(mentions.values()) > 0 or bool(vocabulary)
                  or dists.get("mentions_per_segment", {}).get("sum", 0) > 0)
  shown = ["tokens_per_document", "segments_per_document"]
  shown += ["answers_per_question"] if coverage is not None else []
  shown += ["mentions_per_segment"] if has_mentions else []
  report["histograms"] = {k: dict(power_of_two_histogram(dists[k]), unit=HISTOGRAM_UNITS[k])
                          for k in shown if k in dists}
  if "oracle/span_rouge_l_pct" in stats or "oracle/best_rouge_l_pct" in stats:
    report["oracle"] = {
        "min_score": m.get("config", {}).get("oracle", {}).get("min_score"),
        "span_rouge_l": score_summary(stats.get("oracle/span_rouge_l_pct")),
        "best_rouge_l": score_summary(stats.get("oracle/best_rouge_l_pct"))}
  if vocabulary is not None:
    counts = [c for _, _, c in vocabulary]
    report["entities"] = {
        "vocabulary": len(vocabulary), "mentions": sum(counts),
        "top": [{"entity_id": i, "title": t, "count": c} for i, t, c in vocabulary[:20]],
        "count_at_rank": {str(r): counts[r - 1] for r in (1, 10, 100, 1000, 10000, 100000,
                                                          1000000) if r <= len(counts)},
        "rank_curve": _rank_curve(counts),
    }
  panels = ["outcome"] + [k for k in ("tokens_per_document", "segments_per_document")
                          if k in report["histograms"]]
  if coverage is not None:
    panels += ["coverage"] + (["answers_per_question"]
                              if "answers_per_question" in report["histograms"] else [])
  panels += ["oracle"] if "oracle" in report else []
  if has_mentions:  # (an empty run has no mentions-per-segment distribution to draw)
    panels += [k for k in ("mentions_per_segment",) if k in report["histograms"]]
    panels += ["mentions"]
  panels += ["entities"] if vocabulary else []
  panels += ["packs"] if report["packs"]["packs"] else []
  report["panels"] = panels
  return report


def summary_lines(report: Dict[str, Any]) -> List[str]:
  """A few lines for the job's log."""
  c = report["counts"]
  lines = [f"input: {c['input']:,}, {c['written']:,} written, {c['skipped']:,} skipped "
           f"({', '.join(f'{k} {v:,}' for k, v in report['skipped_by_reason'].items()) or '-'}),"
           f" {c['rejected']:,} rejected"]
  d = report["distributions"]
  if "tokens_per_document" in d:
    lines.append(f"tokens/document mean {d['tokens_per_document']['mean']:,.0f} (max "
                 f"{d['tokens_per_document']['max']:,}); segments/document mean "
                 f"{d.get('segments_per_document', {}).get('mean', 0):.2f}")
  if "coverage" in report:
    cov = report["coverage"]
    lines.append(f"answers: {cov['in_segment']:,} of {cov['answerable']:,} answerable questions "
                 f"have one in a segment; lost at segment edges {cov['lost_in_segmentation']:,},"
                 f" not in the text {cov['not_in_text']:,}, yes/no {cov['yes_no']:,}; no answer "
                 f"{cov['no_answer']:,}")
  if "oracle" in report and report["oracle"]["span_rouge_l"]["count"]:
    s = report["oracle"]["span_rouge_l"]
    lines.append(f"oracle spans {s['count']:,}: ROUGE-L min {s['min']:.2f}, median "
                 f"{s['median']:.2f}, max {s['max']:.2f}")
  m = report["mentions"]
  if "mentions" in report["panels"]:
    lines.append(f"mentions placed in segments {m['labels']:,}; not placed: unmappable "
                 f"{m['unmappable']:,}, lost {m['lost']:,} (cut by a window edge {m['cut']:,})")
  if "entities" in report:
    e = report["entities"]
    top = ", ".join(f"{t['title']} ({t['count']:,})" for t in e["top"][:5])
    lines.append(f"entity vocabulary {e['vocabulary']:,} entities; most frequent: {top}")
  p = report["packs"]
  if p["packs"]:
    lines.append(f"packs {p['packs']:,}: fill {p['fill']:.1%}, {p['sub_documents_per_pack']:.2f}"
                 f" sub-documents per pack")
  return lines


def plot_report(report: Dict[str, Any]) -> bytes:
  """``stats.png``'s bytes (see :mod:`pipelines.beam.report_figure`)."""
  from pipelines.beam import report_figure  # pylint: disable=g-import-not-at-top
  return report_figure.render_png(report_figure.build_figure(report))


def write_report(manifest: Dict[str, Any], output_dir: str,
                 vocabulary: Optional[Sequence[Tuple[int, str, int]]] = None,
                 stats: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
  """Writes ``stats.json`` and ``stats.png``; logs the summary; returns the report.  The
  signature of ``DocumentsToRecords``' ``report``: ``vocabulary`` is the job's
  ``report_input`` (the Wikipedia job's entity vocabulary), ``stats`` the report-only stats."""
  report = build_report(manifest, vocabulary, stats)
  writer.write_atomically(FileSystems.join(output_dir, STATS_JSON),
                          [json.dumps(report, indent=1, sort_keys=True).encode("utf-8")])
  writer.write_atomically(FileSystems.join(output_dir, STATS_PNG), [plot_report(report)])
  for line in summary_lines(report):
    LOGGER.info("%s", line)
  return report
