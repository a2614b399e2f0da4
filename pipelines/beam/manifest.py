"""The job's manifest (``manifest.json``) and ``COMPLETED``, written last, once everything else
is written.  The format is documented and validated in ``schemas/manifest.py``."""

from __future__ import annotations

import collections
import datetime
import logging
from typing import Any, Dict, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from schemas import records
from pipelines.beam import spill, writer
from schemas import fault_hook as faults
from pipelines.beam.stats import REPORT_PREFIX, SumStats, report_stats, split_stats
from pipelines.errors import UserError

LOGGER = logging.getLogger("pipelines")
# Stages in pipeline order; a stage appears in ``stage_counts`` when it ran.
STAGE_ORDER = ("read", "parse", "evidence", "annotate", "answers", "segment", "labels", "dedup")
_COMMON_KINDS = ("records", "documents", "dead_letter", "skipped")
_STAGE_IO = {  # stage -> (input counter, output counter) in the stats
    "parse": ("parse/input", "parse/output"),
    "evidence": ("evidence/input", "evidence/output"),  # TriviaQA: plans -> documents
    "annotate": ("annotate/input", "annotate/output"),
    "answers": ("answers/input", "answers/output"),
    "segment": ("segment/input", "segment/documents"),
    "labels": ("labels/input", "labels/output"),
    "dedup": ("dedup/input", "dedup/output"),
}


def stage_counts(input_count: int, counters: Dict[str, int], rejected: Dict[str, int],
                 skipped: Dict[str, int]) -> List[Dict[str, Any]]:
  """Per stage, in order: ``input``, ``output``, ``skipped``, ``rejected`` (each counted where
  it happens, so that ``input = output + skipped + rejected`` is a real check)."""
  def by_stage(reasons):
    out: Dict[str, int] = collections.Counter()
    for k, v in reasons.items():
      out[k.partition("/")[0]] += v
    return out

  rej, skip = by_stage(rejected), by_stage(skipped)
  rows = []
  read_out = counters.get("read/records", input_count - rej.get("read", 0))
  rows.append({"stage": "read", "input": input_count, "output": read_out,
               "skipped": skip.get("read", 0), "rejected": rej.get("read", 0)})
  for stage in STAGE_ORDER[1:]:
    i, o = _STAGE_IO[stage]
    if i not in counters and not rej.get(stage) and not skip.get(stage):
      continue
    rows.append({"stage": stage, "input": counters.get(i, 0), "output": counters.get(o, 0),
                 "skipped": skip.get(stage, 0), "rejected": rej.get(stage, 0)})
  return rows


def build_manifest(header: Dict[str, Any], input_count: int, stats: Dict[str, Any],
                   reasons: List[Tuple[str, int]], shards: List[Dict[str, Any]],
                   labels: Dict[str, Dict] | None = None,
                   created_at: str | None = None) -> Dict:
  """Assembles (and validates) the manifest from the pipeline's aggregated counters."""
  counters, dists = split_stats(stats)
  rejected_by_reason = dict(sorted(reasons))
  skipped_by_reason = {k[len("skipped/"):]: v for k, v in counters.items()
                       if k.startswith("skipped/")}
  stages: Dict[str, Dict[str, int]] = collections.defaultdict(dict)
  for k, v in counters.items():
    stage, _, name = k.partition("/")
    if stage != "skipped":
      stages[stage][name] = v
  for k, v in rejected_by_reason.items():
    stage, _, reason = k.partition("/")
    stages[stage][f"rejected:{reason}"] = v
  record_shards = sorted((s for s in shards if s["kind"] == "records"), key=lambda s: s["path"])
  rows = stage_counts(input_count, counters, rejected_by_reason, skipped_by_reason)
  # What was written: the last stage's output, and the record shards' own counts.
  examples = {"documents": rows[-1]["output"],
              "sub_documents": sum(s["sub_documents"] for s in record_shards),
              "segments": sum(s["segments"] for s in record_shards),
              "packs": sum(s["packs"] for s in record_shards),
              "padding_segments": sum(s["padding_segments"] for s in record_shards)}
  docs = max(examples["documents"], 1)
  examples["segments_per_document"] = round(examples["segments"] / docs, 3)

  def side_files(kind, directory):
    return sorted(f"{directory}/{s['path']}" for s in shards if s["kind"] == kind)

  m = dict(header)
  m.update(
      manifest_version=manifest_schema.MANIFEST_VERSION,
      schema_name=records.SCHEMA_NAME, schema_version=records.SCHEMA_VERSION,
      created_at=created_at or datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      counts={"input": input_count, "written": examples["documents"],
              "skipped": sum(skipped_by_reason.values()),
              "rejected": sum(rejected_by_reason.values())},
      # False when the read stage met an unreadable region that may have held several records
      # (each such region counts as one input record).
      input_count_exact=counters.get("read/uncertain_regions", 0) == 0,
      stage_counts=rows,
      rejected_by_reason=rejected_by_reason, skipped_by_reason=skipped_by_reason,
      stages={k: dict(sorted(v.items())) for k, v in sorted(stages.items())},
      distributions={k.partition("/")[2] or k: d.describe() for k, d in sorted(dists.items())},
      labels=labels or {},
      examples=examples,
      shards=[{k: s[k] for k in ("path", "records", "bytes", "packs", "segments",
                                 "sub_documents", "padding_segments")} for s in record_shards],
      documents=side_files("documents", documents_schema.DOCUMENTS_DIR),
      dead_letter=side_files("dead_letter", manifest_schema.DEAD_LETTER_DIR),
      skipped=side_files("skipped", manifest_schema.SKIPPED_DIR))
  others = sorted((s for s in shards if s["kind"] not in _COMMON_KINDS), key=lambda s: s["path"])
  if others:
    m["other_files"] = [{"kind": s["kind"], "path": s["path"], "bytes": s.get("bytes")}
                        for s in others]
  return m


def report_inputs(stats: Dict[str, Any], shards: List[Dict[str, Any]]) -> Dict[str, Any]:
  """The report-only stats (``report/`` keys, prefix removed; not in the manifest) of the
  stages and of the written shards (e.g. segments per pack), summed."""
  combine = SumStats()
  acc = combine.add_input(combine.create_accumulator(), report_stats(stats))
  for s in shards:
    combine.add_input(acc, report_stats({k: v for k, v in s.items()
                                         if k.startswith(REPORT_PREFIX)}))
  return combine.extract_output(acc)


def check_error_fraction(counts: Dict[str, int], max_error_fraction: float,
                         output_dir: str,
                         rejected_by_reason: Optional[Dict[str, int]] = None) -> None:
  """Raises a UserError if ``counts`` reject more than ``max_error_fraction`` of the input
  (one line: the share, the top reasons, where to look and how to accept more)."""
  rejected, total = counts["rejected"], counts["input"]
  if total and rejected / total > max_error_fraction:
    reasons = f" ({top_reasons(rejected_by_reason)})" if rejected_by_reason else ""
    raise UserError(
        f"{rejected} of {total} input records were rejected{reasons}: {rejected / total:.2%}, "
        f"more than --max_error_fraction={max_error_fraction:g}; the job is not COMPLETED; see "
        f"{FileSystems.join(output_dir, manifest_schema.DEAD_LETTER_DIR)}/ and "
        f"{FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE)}; fix the input, or "
        f"accept the share with --max_error_fraction 1 (the rerun replaces this output)")


def top_reasons(by_reason: Dict[str, int], shown: int = 3) -> str:
  """``reason n, reason n, ...`` of ``by_reason`` (``stage/reason`` keys merged by reason),
  most frequent first, at most ``shown`` of them."""
  merged: Dict[str, int] = collections.Counter()
  for key, n in by_reason.items():
    merged[key.rpartition("/")[2]] += n
  ranked = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))
  text = ", ".join(f"{reason} {n}" for reason, n in ranked[:shown])
  more = len(ranked) - shown
  return text + (f", {more} more reason{'' if more == 1 else 's'}" if more > 0 else "")


def empty_run_message(counts: Dict[str, int], rejected_by_reason: Dict[str, int],
                      skipped_by_reason: Dict[str, int], output_dir: str) -> str:
  """The one line of a run that wrote no document: what happened to the input (the top
  reasons) and where to look."""
  top = top_reasons

  def records(n: int) -> str:
    return f"{n} input record{'' if n == 1 else 's'}"

  if not counts["input"]:
    what = "the input holds no records"
  else:
    parts = []
    if counts["rejected"]:
      parts.append(f"{records(counts['rejected'])} rejected ({top(rejected_by_reason)})")
    if counts["skipped"]:
      parts.append(f"{records(counts['skipped'])} skipped ({top(skipped_by_reason)})")
    what = "; ".join(parts) or records(counts["input"]) + " read"
  where = (f"; see {FileSystems.join(output_dir, manifest_schema.DEAD_LETTER_DIR)}/"
           if counts["rejected"] else "")
  return (f"no document was written: {what}{where}; the job is not COMPLETED (--allow_empty "
          f"accepts an empty output)")


def check_not_empty(manifest: Dict[str, Any], output_dir: str) -> None:
  """Raises a UserError if ``manifest`` says that no document was written."""
  if not manifest["counts"]["written"]:
    raise UserError(empty_run_message(manifest["counts"], manifest["rejected_by_reason"],
                                      manifest["skipped_by_reason"], output_dir))


# A header key (not written to the manifest): the token of the output dir's claim, which the
# job's last step releases when the launcher does not wait for the job (--nowait).
RELEASE_CLAIM_KEY = "_release_claim"


def write_manifest(_, output_dir: str, header: Dict[str, Any], input_count: int,
                   stats: Dict[str, Any], reasons: List[Tuple[str, int]],
                   shards: List[Dict[str, Any]], labels: Dict[str, Dict],
                   spill_dir: str | None = None, report=None, report_input=None,
                   max_error_fraction: float = 1.0, allow_empty: bool = True):
  """FlatMap body: deletes the temporary files (``.tmp/``), writes ``manifest.json``, then
  (when given) ``report(manifest, output_dir, report_input, stats=...)``'s files (``stats``:
  :func:`report_inputs`), then ``COMPLETED``;
  yields the manifest.  When more than ``max_error_fraction`` of the input records were
  rejected, or no document was written and not ``allow_empty``, it raises a UserError after
  writing the manifest (kept for diagnosis) and before the report and ``COMPLETED``, so the
  job fails with one line and never looks complete."""
  header = dict(header)
  release_token = header.pop(RELEASE_CLAIM_KEY, None)
  m = build_manifest(header, input_count, stats, reasons, shards, labels)
  deleted = writer.delete_tmp(output_dir)
  if spill_dir is not None and not spill_dir.startswith(writer.tmp_dir_of(output_dir)):
    deleted += spill.delete(spill_dir)
  LOGGER.info("deleted %d temporary file(s) under %s", deleted, writer.tmp_dir_of(output_dir))
  text = manifest_schema.dumps(m)  # validates: raises if the counters do not reconcile
  writer.write_atomically(FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE),
                          [text.encode("utf-8")])
  if not allow_empty:  # first: a run that wrote nothing says so (with its top reasons)
    check_not_empty(m, output_dir)
  check_error_fraction(m["counts"], max_error_fraction, output_dir, m["rejected_by_reason"])
  if report is not None:
    report(m, output_dir, report_input, stats=report_inputs(stats, shards))
  faults.fault_point("completed")  # test-only (READTWICE_FAULT_AT)
  writer.write_atomically(FileSystems.join(output_dir, manifest_schema.COMPLETED_FILE), [])
  LOGGER.info("manifest: %s", FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE))
  if release_token:
    from pipelines.beam import claim  # pylint: disable=g-import-not-at-top
    claim.release_token(output_dir, release_token)
  yield m
