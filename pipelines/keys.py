"""Sort/shard keys shared by the segmenter, the writer and the dead-letter/skipped side files.

A key is ``<group>\\x1f<rest>``: the writer shards on the group (the part before the first
separator), so every element of a group (e.g. all sub-documents of one document) lands in the
same shard, and sorts on the whole key.
"""

from __future__ import annotations

GROUP_SEPARATOR = "\x1f"


def join_key(*parts: str) -> str:
  """``parts`` joined by GROUP_SEPARATOR; the first part is the shard group."""
  return GROUP_SEPARATOR.join(parts)


def group_of(key: str) -> str:
  """The shard group of a key: the part before the first GROUP_SEPARATOR."""
  return key.split(GROUP_SEPARATOR, 1)[0]
