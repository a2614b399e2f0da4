"""Checks of a finished job's stats report (``stats.json``, ``stats.png``) shared by the job
tests in ``tests/pipelines/datasets/<name>/test_report.py``: the PNG is valid and is exactly the
figure of ``stats.json``; every panel is labelled and logarithmic where its counts span decades;
the numbers reconcile with the manifest."""

from __future__ import annotations

import json
import os
import struct
import zlib
from typing import Any, Dict, List

from pipelines.beam import report, report_figure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def load(out: str) -> Dict[str, Any]:
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    manifest = json.load(f)
  with open(os.path.join(out, report.STATS_JSON), encoding="utf-8") as f:
    stats = json.load(f)
  with open(os.path.join(out, report.STATS_PNG), "rb") as f:
    png = f.read()
  return {"manifest": manifest, "stats": stats, "png": png}


def png_size(png: bytes) -> tuple:
  """(width, height) of a PNG, after checking its signature and every chunk's CRC."""
  assert png[:8] == PNG_SIGNATURE
  pos, size, kinds = 8, None, []
  while pos < len(png):
    (length,) = struct.unpack(">I", png[pos:pos + 4])
    kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
    (crc,) = struct.unpack(">I", png[pos + 8 + length:pos + 12 + length])
    assert zlib.crc32(kind + data) == crc, f"bad CRC in chunk {kind!r}"
    if kind == b"IHDR":
      size = struct.unpack(">II", data[:8])
    kinds.append(kind)
    pos += 12 + length
  assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
  assert b"tEXt" not in kinds or b"Software" not in png  # no tool/version stamp
  return size


def panel_counts(stats: Dict[str, Any], panel: str) -> List[float]:
  """The counts a panel draws (what decides its log scale)."""
  if panel in stats.get("histograms", {}):
    return stats["histograms"][panel]["counts"]
  if panel == "outcome":
    return ([stats["counts"]["written"]] + list(stats["skipped_by_reason"].values())
            + list(stats["rejected_by_reason"].values()))
  if panel == "coverage":
    return [stats["coverage"][k] for k in report.COVERAGE]
  if panel == "oracle":
    o = stats["oracle"]
    return o["span_rouge_l"]["counts"] + o["best_rouge_l"]["counts"]
  if panel == "mentions":
    return list(stats["mentions"].values())
  if panel == "packs":
    return list(stats["packs"]["segments_in_pack"]["values"].values())
  return []


def check_figure(stats: Dict[str, Any], fig=None) -> List[str]:
  """Checks the figure of ``stats`` (``fig``: built from it, by default here); returns the
  panels drawn on a logarithmic count axis."""
  fig = fig if fig is not None else report_figure.build_figure(stats)
  assert fig._suptitle is not None and fig._suptitle.get_text()  # pylint: disable=protected-access
  assert stats["job"] in fig._suptitle.get_text()  # pylint: disable=protected-access
  assert report.plural(stats["counts"]["written"], "document") + " written" in (
      fig._suptitle.get_text())  # pylint: disable=protected-access
  axes = fig.get_axes()
  assert len(axes) == len(stats["panels"])
  logged = []
  for ax, panel in zip(axes, stats["panels"]):
    assert ax.get_title().strip(), panel
    assert ax.get_xlabel().strip() and ax.get_ylabel().strip(), panel
    scales = {ax.get_xscale(), ax.get_yscale()}
    if panel == "entities":
      assert scales == {"log"}
      continue
    log = "log" in scales
    assert log == report_figure.needs_log(panel_counts(stats, panel)), panel
    if log:
      logged.append(panel)
      assert "log scale" in ax.get_xlabel() + ax.get_ylabel(), panel
  return logged


def check_report(out: str) -> Dict[str, Any]:
  """Every check of the report of the job that wrote ``out``; returns the loaded files and the
  panels on a log scale (``logged``)."""
  files = load(out)
  m, stats, png = files["manifest"], files["stats"], files["png"]
  width, height = png_size(png)
  assert width > 600 and height > 300
  # The PNG is exactly the figure of stats.json (nothing else goes into it).
  fig = report_figure.build_figure(stats)
  assert report_figure.render_png(fig) == png
  files["logged"] = check_figure(stats, fig)

  assert stats["job"] == m["job"] and stats["counts"] == m["counts"]
  assert stats["examples"] == m["examples"]
  assert stats["panels"][:3] == ["outcome", "tokens_per_document", "segments_per_document"]
  # Documents: the distributions count the segmented documents; the stages after the segmenter
  # drop the difference (skipped duplicates, unlabelled questions of labelled files).
  segmented = m["stages"]["segment"]["documents"]
  after = [r for r in m["stage_counts"]
           if r["stage"] in ("labels", "dedup")]
  dropped = sum(r["skipped"] + r["rejected"] for r in after)
  assert segmented - dropped == m["counts"]["written"]
  for name, hist in stats["histograms"].items():
    assert sum(hist["counts"]) == hist["count"], name
    assert len(hist["bin_edges"]) == len(hist["counts"]) + 1, name
    assert hist["bin_edges"][0] <= hist["min"] and hist["max"] < hist["bin_edges"][-1], name
  for name in ("tokens_per_document", "segments_per_document"):
    assert stats["histograms"][name]["count"] == segmented
  assert stats["histograms"]["segments_per_document"]["min"] >= 1
  # Packs: the record shards' counts.
  p, ex = stats["packs"], m["examples"]
  assert p["packs"] == ex["packs"] == sum(s["packs"] for s in m["shards"])
  in_pack = {int(k): v for k, v in p["segments_in_pack"]["values"].items()}
  assert sum(in_pack.values()) == p["packs"]
  assert sum(k * v for k, v in in_pack.items()) == ex["segments"]
  docs = {int(k): v for k, v in p["sub_documents_in_pack"]["values"].items()}
  assert sum(k * v for k, v in docs.items()) == ex["sub_documents"]
  assert p["segment_slots"] == p["packs"] * m["config"]["segments_per_pack"]
  assert p["segments"] + p["padding_segments"] == p["segment_slots"]
  # Mentions: the segmenter's counters.
  seg = m["stages"]["segment"]
  assert stats["mentions"] == {k: seg.get(f"mentions_{k}", 0)
                               for k in ("labels", "unmappable", "cut", "lost")}
  if "coverage" in stats:
    cov = stats["coverage"]
    assert sum(cov[k] for k in report.COVERAGE) == cov["questions"]
    labels = m["labels"].values()
    assert cov["questions"] == sum(f["labelled"] + f["unlabelled"] for f in labels)
    assert cov["no_answer"] == sum(f["unlabelled"] for f in labels)
    assert cov["answerable"] == sum(f["labelled"] for f in labels)
    assert "answers_per_question" in stats["panels"]
  # The manifest holds no report-only stats.
  assert "report" not in m["stages"] and not any(k.startswith("report")
                                                 for k in m["distributions"])
  return files


# Small segments, so that small inputs still make several segments and packs (as the golden
# outputs' runs).
FLAGS = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "12", "--log_level", "WARNING",
         "--max_error_fraction", "1"]  # the inputs mix in bad records on purpose
