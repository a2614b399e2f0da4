"""The manifest every pipeline writes last, next to an empty ``COMPLETED`` marker.

Format (JSON object)::

  {
    "manifest_version": 1,
    "schema_name": "readtwice.segments", "schema_version": "1.0.0",
    "job": "hotpotqa", "git_revision": "<sha or 'unknown'>", "created_at": "<UTC ISO time>",
    "tokenizer": {"name": ..., "fingerprint": "sha256:...", "vocab_size": ..., "special_ids": {...}},
    "config": {"seq_length": 512, "segments_per_pack": 128, ...},
    "counts": {"input": n, "written": n, "skipped": n, "rejected": n},
    "skipped_by_reason": {"<stage>/<reason>": n}, "rejected_by_reason": {"<stage>/<reason>": n},
    "stages": {"<stage>": {"<counter>": n}},
    "examples": {"documents": n, "sub_documents": n, "segments": n, "packs": n, ...},
    "shards": [{"path": "records-00000-of-00004.tfrecord", "records": n, "segments": n}],
    "dead_letter": ["dead_letter/dead_letter-00000-of-00001.jsonl"]
  }

``counts.input == written + skipped + rejected`` always holds; :func:`validate` checks it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping

from schemas import records

MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"
COMPLETED_FILE = "COMPLETED"
DEAD_LETTER_DIR = "dead_letter"
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


def dumps(manifest: Mapping[str, Any]) -> str:
  validate(manifest)
  return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def loads(text: str, source: str = "manifest") -> Dict[str, Any]:
  manifest = json.loads(text)
  validate(manifest, source)
  return manifest
