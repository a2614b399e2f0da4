"""The index of a multistream MediaWiki dump (``*-multistream-index.txt.bz2``, lines
``OFFSET:PAGE_ID:TITLE``): its stream offsets (:func:`read_index`) and the byte ranges of
consecutive streams that the read is split into (:func:`plan_splits`), each then read with
:func:`pipelines.datasets.wikipedia.reader.iter_pages_in_range`.  Pure stdlib.
"""

from __future__ import annotations

import re
from typing import BinaryIO, List, Sequence, Tuple

from pipelines.datasets.wikipedia.reader import READ_SIZE, DumpError, decompressed_chunks

_INDEX_BLOCK = re.compile(rb"(?:\d+:\d+:[^\n]*\n)*")
_INDEX_OFFSET = re.compile(rb"^(\d+):", re.M)


def read_index(fileobj: BinaryIO, path: str = "") -> List[int]:
  """The sorted unique stream offsets of a multistream index (bz2 text, or plain text), lines
  ``OFFSET:PAGE_ID:TITLE``; a bad line or an empty index raises DumpError ``bad_index``."""
  offsets = set()
  last = None
  lineno = 0
  try:
    chunks = decompressed_chunks(fileobj, path) if _is_bz2(fileobj) else iter(
        lambda: fileobj.read(READ_SIZE), b"")
    rest = b""
    for chunk in chunks:
      block = rest + chunk
      cut = block.rfind(b"\n") + 1
      block, rest = block[:cut], block[cut:]
      if _INDEX_BLOCK.fullmatch(block):  # the common case, at C speed
        offsets.update(map(int, set(_INDEX_OFFSET.findall(block))))
        lineno += block.count(b"\n")
        continue
      for line in block.split(b"\n")[:-1]:
        lineno += 1
        last = _index_offset(line, lineno, last, offsets, path)
    if rest:
      _index_offset(rest, lineno + 1, last, offsets, path)
  except DumpError as e:
    if e.reason == "bad_index":
      raise
    raise DumpError("bad_index", f"unreadable index: {e.message}", path) from None
  if not offsets:
    raise DumpError("bad_index", "the index has no entries", path)
  return sorted(offsets)


def _is_bz2(fileobj: BinaryIO) -> bool:
  """Whether a seekable file starts with bz2 data (non-seekable: assumed bz2)."""
  try:
    pos = fileobj.tell()
    head = fileobj.read(3)
    fileobj.seek(pos)
  except (AttributeError, OSError, ValueError):
    return True
  return head == b"BZh" or not head


def _index_offset(line: bytes, lineno: int, last, offsets: set, path: str):
  line = line.rstrip(b"\r")
  if not line.strip():
    return last
  off, sep1, rest = line.partition(b":")
  page_id, sep2, _ = rest.partition(b":")
  if not (sep1 and sep2 and off.isdigit() and page_id.isdigit()):
    raise DumpError("bad_index", f"line {lineno} is not OFFSET:PAGE_ID:TITLE: "
                    f"{line[:80].decode('utf-8', 'replace')!r}", path)
  if off != last:
    offsets.add(int(off))
  return off


def plan_splits(offsets: Sequence[int], file_size: int, max_splits: int = 0,
                streams_per_split: int = 1) -> List[Tuple[int, int]]:
  """Contiguous ``[start, end)`` byte ranges that cover every indexed stream once: from the
  first indexed offset to ``file_size`` (the header stream before it is in no range; the
  trailer stream is in the last one).  Ranges of ``streams_per_split`` consecutive streams, or,
  if ``max_splits`` > 0, at most ``max_splits`` ranges of about equal stream counts.  Offsets
  outside ``[0, file_size)`` raise DumpError ``bad_index``."""
  if streams_per_split < 1:
    raise ValueError(f"streams_per_split must be >= 1, got {streams_per_split}")
  if max_splits < 0:
    raise ValueError(f"max_splits must be >= 0, got {max_splits}")
  starts = sorted(set(offsets))
  if not starts:
    return []
  if starts[0] < 0 or starts[-1] >= file_size:
    raise DumpError("bad_index", f"stream offsets {starts[0]}..{starts[-1]} do not lie in the "
                    f"file ({file_size} bytes)")
  n = len(starts)
  if max_splits > 0:
    k = min(max_splits, n)
    firsts = [i * n // k for i in range(k)]
  else:
    firsts = list(range(0, n, streams_per_split))
  bounds = [starts[i] for i in firsts] + [file_size]
  return list(zip(bounds[:-1], bounds[1:]))
