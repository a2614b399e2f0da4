"""The manifest every pipeline writes last, next to an empty ``COMPLETED`` marker.

Format (JSON object)::

  {
    "manifest_version": 1,
    "schema_name": "readtwice.segments", "schema_version": "1.0.0",
    "job": "hotpotqa", "git_revision": "<sha or 'unknown'>", "created_at": "<UTC ISO time>",
    "tokenizer": {"name": ..., "fingerprint": "sha256:...", "vocab_size": ..., "special_ids": {...}},
    "config": {"seq_length": 512, "segments_per_pack": 128, "compression": "none", ...},
    "inputs": [{"path": "...", "bytes": n}],
    "counts": {"input": n, "written": n, "skipped": n, "rejected": n},
    "input_count_exact": true,
    "stage_counts": [{"stage": "read", "input": n, "output": n, "skipped": n, "rejected": n},
                     {"stage": "parse", ...}, ...],
    "skipped_by_reason": {"<stage>/<reason>": n}, "rejected_by_reason": {"<stage>/<reason>": n},
    "stages": {"<stage>": {"<counter>": n}},
    "distributions": {"tokens_per_document": {"count", "min", "max", "sum", "mean",
                                              "histogram": {"<lo>-<hi>": n}}, ...},
    "labels": {"<input file>": {"mode": "labelled|unlabelled|mixed", "labelled": n,
                                "unlabelled": n}},
    "examples": {"documents": n, "sub_documents": n, "segments": n, "packs": n, ...},
    "shards": [{"path": "records-00000-of-00004.tfrecord", "records": n, "segments": n}],
    "documents": ["documents/documents-00000-of-00004.jsonl"],
    "dead_letter": ["dead_letter/dead_letter-00000-of-00001.jsonl"],
    "skipped": ["skipped/skipped-00000-of-00001.jsonl"]
  }

``config.compression`` is "none" or "gzip" (``--compression``); a manifest without it (written
before the option existed) means "none".  With "gzip" the record shards are
``records-SSSSS-of-NNNNN.tfrecord.gz`` (one gzip stream around the TFRecord framing, i.e.
TFRecord ``GZIP`` as ``tf.data.TFRecordDataset(..., compression_type="GZIP")`` reads it) and the
documents side files ``documents/documents-SSSSS-of-NNNNN.jsonl.gz`` (gzip JSON lines); dead
letters and skipped items stay uncompressed.  ``shards[].path`` and ``documents`` always name the
real files (relative to the output dir), and readers (``model.data.pack_reader``,
``schemas.documents``,
``pipelines.inspector``, ``schemas.tfrecord_io``) follow ``config.compression``.

``counts.input == written + skipped + rejected`` always holds, and so does ``input == output +
skipped + rejected`` for every stage of ``stage_counts``, each stage's input being the previous
stage's output; :func:`validate` checks both.  ``input_count_exact`` is false when an unreadable
region of an input file may have held more than the one record it is counted as.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping

from schemas import records
from schemas import safe_json

MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"
COMPLETED_FILE = "COMPLETED"
DEAD_LETTER_DIR = "dead_letter"
SKIPPED_DIR = "skipped"  # one JSON line per skipped item (e.g. a duplicate id), like dead letters
DEAD_LETTER_FIELDS = ("stage", "reason", "source_id")


class ManifestError(ValueError):
  pass


def validate(manifest: Mapping[str, Any], source: str = "manifest") -> None:
  """Raises ManifestError if the manifest is incomplete or its counters do not reconcile.

  The schema version is checked first (SchemaVersionError naming ``source``), so a manifest of
  another major version is reported as such even if its other fields differ.
  """
  if "schema_version" in manifest:
    records.check_version(manifest["schema_version"], source)
  for key in ("schema_version", "counts", "tokenizer", "config", "shards"):
    if key not in manifest:
      raise ManifestError(f"{source} lacks {key!r}")
  counts = manifest["counts"]
  for key in ("input", "written", "skipped", "rejected"):
    if not isinstance(counts.get(key), int):
      raise ManifestError(f"manifest counts lack integer {key!r}: {counts}")
  if counts["input"] != counts["written"] + counts["skipped"] + counts["rejected"]:
    raise ManifestError(f"counts do not reconcile: {counts}")
  for key, total in (("rejected_by_reason", "rejected"), ("skipped_by_reason", "skipped")):
    by_reason = manifest.get(key, {})
    if sum(by_reason.values()) != counts[total]:
      raise ManifestError(f"{key} sums to {sum(by_reason.values())}, counts.{total}="
                          f"{counts[total]}")
  _validate_stage_counts(manifest.get("stage_counts"), counts)


def _validate_stage_counts(rows, counts) -> None:
  if rows is None:  # manifests written before stage counts existed
    return
  previous = None
  for row in rows:
    name = row.get("stage")
    if row["input"] != row["output"] + row["skipped"] + row["rejected"]:
      raise ManifestError(f"stage {name!r} does not reconcile: {row}")
    if previous is not None and row["input"] != previous["output"]:
      raise ManifestError(f"stage {name!r} received {row['input']} items but stage "
                          f"{previous['stage']!r} passed on {previous['output']}")
    previous = row
  if rows:
    if rows[0]["input"] != counts["input"] or rows[-1]["output"] != counts["written"]:
      raise ManifestError(f"stage counts {rows} do not match counts {counts}")
    for key in ("skipped", "rejected"):
      if sum(r[key] for r in rows) != counts[key]:
        raise ManifestError(f"stage counts' {key} sum to {sum(r[key] for r in rows)}, "
                            f"counts.{key}={counts[key]}")


def dumps(manifest: Mapping[str, Any]) -> str:
  validate(manifest)
  return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def loads(text: str, source: str = "manifest") -> Dict[str, Any]:
  manifest = safe_json.loads(text, source)
  if not isinstance(manifest, dict):
    raise ManifestError(f"{source} is not a JSON object")
  validate(manifest, source)
  return manifest
