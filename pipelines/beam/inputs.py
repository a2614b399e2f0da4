"""Resolving a job's ``--input`` (paths, globs, comma-separated lists; local or gs://)."""

from __future__ import annotations

from typing import Dict, List

from apache_beam.io.filesystems import FileSystems


def match_inputs(pattern: str, flag: str = "--input") -> List[str]:
  """Sorted, de-duplicated paths matching a comma-separated list of paths/globs.

  Raises FileNotFoundError naming ``flag`` and the part that matches nothing.
  """
  return [d["path"] for d in describe_inputs(pattern, flag)]


def describe_inputs(pattern: str, flag: str = "--input") -> List[Dict]:
  """``[{"path": ..., "bytes": ...}]`` for the files ``pattern`` matches (sorted by path)."""
  found: Dict[str, int] = {}
  for part in [p.strip() for p in pattern.split(",") if p.strip()]:
    metadata = FileSystems.match([part])[0].metadata_list
    if not metadata:
      raise FileNotFoundError(f"{flag} {part!r} matches no file")
    for m in metadata:
      found[m.path] = int(m.size_in_bytes)
  if not found:
    raise FileNotFoundError(f"{flag} {pattern!r} names no file")
  return [{"path": p, "bytes": found[p]} for p in sorted(found)]
