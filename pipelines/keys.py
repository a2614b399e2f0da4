"""Sort/shard keys shared by the segmenter, the writer and the dead-letter/skipped side files.

A key is ``<group>\\x1f<rest>``: the writer shards on the group (the part before the first
separator), so every element of a group (e.g. all sub-documents of one document) lands in the
same shard, and sorts on the whole key.
"""

from __future__ import annotations

import re
from typing import Tuple

GROUP_SEPARATOR = "\x1f"
# A source id names where a record came from: ``<path>#<index>`` (JSON list item) or
# ``<path>:<line>`` (JSON lines); other forms (e.g. a whole-file id) have no index.
_INDEXED_SOURCE = re.compile(r"^(.*)[#:](\d+)$")


def join_key(*parts: str) -> str:
  """``parts`` joined by GROUP_SEPARATOR; the first part is the shard group."""
  return GROUP_SEPARATOR.join(parts)


def group_of(key: str) -> str:
  """The shard group of a key: the part before the first GROUP_SEPARATOR."""
  return key.split(GROUP_SEPARATOR, 1)[0]


def split_source_id(source_id: str) -> Tuple[str, int]:
  """``(input file, index)`` of a source id; ``(source_id, -1)`` when it has no index."""
  m = _INDEXED_SOURCE.match(source_id)
  return (m.group(1), int(m.group(2))) if m else (source_id, -1)
