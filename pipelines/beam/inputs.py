"""Resolving a job's ``--input`` (paths, globs, comma-separated lists; local or gs://)."""

from __future__ import annotations

import collections
import os
from typing import Dict, List, Optional

from apache_beam.io.filesystems import FileSystems

from pipelines.errors import UserError


def match_inputs(pattern: str, flag: str = "--input") -> List[str]:
  """Sorted, de-duplicated paths matching a comma-separated list of paths/globs.

  Raises FileNotFoundError naming ``flag`` and the part that matches nothing.
  """
  return [d["path"] for d in describe_inputs(pattern, flag)]


def _directory(part: str) -> Optional[str]:
  """The directory ``part`` names (with or without a trailing slash), else None: a local
  directory, or a remote path ending with "/" or that only prefixes objects."""
  if any(c in part for c in "*?["):
    return None
  if "://" not in part:
    return part.rstrip("/") or "/" if os.path.isdir(part) else None
  if part.endswith("/"):
    return part.rstrip("/")
  if FileSystems.exists(part):
    return None
  return part if FileSystems.match([part + "/*"], limits=[1])[0].metadata_list else None


def directory_error(part: str, directory: str, flag: str = "--input") -> UserError:
  """The one line for a directory given where files are expected: suggests a glob of its
  commonest file extension."""
  names = [FileSystems.split(m.path)[1]
           for m in FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list]
  names = [n for n in names if not n.startswith(".")]
  extensions = collections.Counter(os.path.splitext(n)[1] for n in names)
  if extensions:
    ext, n = max(extensions.items(), key=lambda kv: (kv[1], kv[0] != "", kv[0]))
    kind = f"{ext} " if ext else ""
    example = FileSystems.join(directory, f"*{ext}")
    return UserError(f"{flag} {part} is a directory; give files or a glob such as "
                     f"{example} (it holds {n} {kind}file{'' if n == 1 else 's'})")
  return UserError(f"{flag} {part} is a directory (holding no files); give files or a glob "
                   f"such as {FileSystems.join(directory, '*.json')}")


def describe_inputs(pattern: str, flag: str = "--input") -> List[Dict]:
  """``[{"path": ..., "bytes": ...}]`` for the files ``pattern`` matches (sorted by path).

  A directory (with or without a trailing slash) is refused with a UserError suggesting a
  glob; FileNotFoundError when a part matches nothing."""
  found: Dict[str, int] = {}
  for part in [p.strip() for p in pattern.split(",") if p.strip()]:
    directory = _directory(part)
    if directory is not None:
      raise directory_error(part, directory, flag)
    metadata = FileSystems.match([part])[0].metadata_list
    if not metadata:
      raise FileNotFoundError(f"{flag} {part!r} matches no file")
    for m in metadata:
      if "://" not in m.path and os.path.isdir(m.path):  # a glob matching a directory
        raise directory_error(m.path, m.path, flag)
      found[m.path] = int(m.size_in_bytes)
  if not found:
    raise FileNotFoundError(f"{flag} {pattern!r} names no file")
  return [{"path": p, "bytes": found[p]} for p in sorted(found)]
