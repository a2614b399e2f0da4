"""A pretraining corpus' stats report: ``stats.json`` and ``stats.png`` beside its manifest.

Built from the finished manifest (pages in, written, skipped and rejected by reason; the
per-document and per-segment distributions; where mentions could not be placed) and, when the
job built one, the entity vocabulary (entity frequency by rank, log-log).  Written before
``COMPLETED``, so a completed output always has its report.
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

from apache_beam.io.filesystems import FileSystems

from pipelines.beam import writer

LOGGER = logging.getLogger("pipelines")
STATS_JSON = "stats.json"
STATS_PNG = "stats.png"
_DISTRIBUTIONS = ("tokens_per_document", "segments_per_document", "mentions_per_segment")


def build_report(manifest: Dict[str, Any],
                 vocabulary: Optional[Sequence[Tuple[int, str, int]]] = None) -> Dict[str, Any]:
  """The ``stats.json`` content."""
  m = manifest
  segment = m.get("stages", {}).get("segment", {})
  mentions = {k: segment.get(f"mentions_{k}", 0) for k in ("labels", "unmappable", "cut", "lost")}
  report: Dict[str, Any] = {
      "job": m.get("job"), "counts": m["counts"], "stage_counts": m.get("stage_counts", []),
      "skipped_by_reason": m.get("skipped_by_reason", {}),
      "rejected_by_reason": m.get("rejected_by_reason", {}),
      "examples": m.get("examples", {}),
      "distributions": {k: m.get("distributions", {}).get(k) for k in _DISTRIBUTIONS
                        if k in m.get("distributions", {})},
      # Mentions placed in a segment (``labels``, once per segment holding them) and those
      # that could not be: no token covers them (unmappable), cut by every window holding a
      # part of them (cut: counted per window), or in no window at all (lost).
      "mentions": mentions,
  }
  if vocabulary is not None:
    counts = [c for _, _, c in vocabulary]
    report["entities"] = {
        "vocabulary": len(vocabulary), "mentions": sum(counts),
        "top": [{"entity_id": i, "title": t, "count": c} for i, t, c in vocabulary[:20]],
        "count_at_rank": {str(r): counts[r - 1] for r in (1, 10, 100, 1000, 10000, 100000,
                                                          1000000) if r <= len(counts)},
    }
  return report


def _bars(ax, distribution: Optional[Dict[str, Any]], title: str) -> None:
  hist = (distribution or {}).get("histogram", {})
  labels = list(hist)
  ax.bar(range(len(labels)), [hist[k] for k in labels], color="#4c72b0")
  ax.set_xticks(range(len(labels)))
  ax.set_xticklabels([k.split("-")[0] for k in labels], rotation=60, fontsize=7)
  ax.set_title(title, fontsize=9)
  ax.set_xlabel("bucket lower bound (powers of two)", fontsize=7)


def plot_report(report: Dict[str, Any], counts: Sequence[int] = ()) -> bytes:
  """``stats.png`` (headless matplotlib): pages by outcome, tokens/document,
  segments/document, mentions/segment, entity frequency by rank (log-log)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
  outcome: Dict[str, int] = {"written": report["counts"]["written"]}
  outcome.update({f"skipped: {k}": v for k, v in report["skipped_by_reason"].items()})
  outcome.update({f"rejected: {k}": v for k, v in report["rejected_by_reason"].items()})
  ax = axes[0][0]
  ax.barh(range(len(outcome)), list(outcome.values()), color="#55a868")
  ax.set_yticks(range(len(outcome)))
  ax.set_yticklabels(list(outcome), fontsize=7)
  ax.set_title(f"input {report['counts']['input']:,}: by outcome", fontsize=9)
  dists = report["distributions"]
  _bars(axes[0][1], dists.get("tokens_per_document"), "tokens per document")
  _bars(axes[0][2], dists.get("segments_per_document"), "segments per document")
  _bars(axes[1][0], dists.get("mentions_per_segment"), "mentions per segment")
  ax = axes[1][1]
  if counts:
    ax.loglog(range(1, len(counts) + 1), counts, color="#c44e52")
  ax.set_title("entity frequency by rank (log-log)", fontsize=9)
  ax.set_xlabel("rank", fontsize=7)
  ax.set_ylabel("mentions", fontsize=7)
  ax = axes[1][2]
  mentions = report["mentions"]
  ax.bar(range(len(mentions)), list(mentions.values()), color="#8172b2")
  ax.set_xticks(range(len(mentions)))
  ax.set_xticklabels(["placed", "unmappable", "cut", "lost"], fontsize=7)
  ax.set_title("mentions placed / not placed", fontsize=9)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
  plt.close(fig)
  return buf.getvalue()


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
  m = report["mentions"]
  lines.append(f"mentions placed in segments {m['labels']:,}; not placed: unmappable "
               f"{m['unmappable']:,}, lost {m['lost']:,} (cut by a window edge {m['cut']:,})")
  if "entities" in report:
    e = report["entities"]
    top = ", ".join(f"{t['title']} ({t['count']:,})" for t in e["top"][:5])
    lines.append(f"entity vocabulary {e['vocabulary']:,} entities; most frequent: {top}")
  return lines


def write_report(manifest: Dict[str, Any], output_dir: str,
                 vocabulary: Optional[Sequence[Tuple[int, str, int]]] = None) -> Dict[str, Any]:
  """Writes ``stats.json`` and ``stats.png``; logs the summary; returns the report."""
  report = build_report(manifest, vocabulary)
  writer.write_atomically(FileSystems.join(output_dir, STATS_JSON),
                          [json.dumps(report, indent=1, sort_keys=True).encode("utf-8")])
  counts = [c for _, _, c in vocabulary] if vocabulary else []
  writer.write_atomically(FileSystems.join(output_dir, STATS_PNG), [plot_report(report, counts)])
  for line in summary_lines(report):
    LOGGER.info("%s", line)
  return report
