"""What the JSON readers yield per item, line or region: :class:`Item`, :class:`Unreadable`,
:class:`Repaired`, and the few text helpers the list and line readers share."""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Union

DEFAULT_CHUNK_SIZE = 1 << 20        # bytes read at a time
DEFAULT_MAX_ITEM_CHARS = 256 << 20  # the most characters buffered for one item / line

WS_BYTES = b" \t\n\r"
SNIPPET = 60  # characters of the damaged text quoted in a dead letter
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a JSON escape of a UTF-16 surrogate


class Item(NamedTuple):
  """A readable record.  ``escapes``: its raw text has ``\\uD800``-``\\uDFFF`` escapes, so the
  value may hold lone surrogates (which UTF-8, hence Beam's coders, cannot encode)."""
  source_id: str
  value: Any
  escapes: bool = False


class Unreadable(NamedTuple):
  """One unreadable item, line or region: a dead letter of the read stage.

  ``uncertain``: the true number of items in the region is unknown (it may have held several,
  or, for text between two good items, none).
  ``offset``: character offset in the decoded text (JSON lists) or byte offset (JSON lines).
  """
  source_id: str
  reason: str
  detail: str
  uncertain: bool = False
  offset: int = 0


class Repaired(NamedTuple):
  """A fault that cost nothing: a missing ``,`` between two whole items (both are read)."""
  source_id: str
  detail: str


Event = Union[Item, Unreadable, Repaired]


def byte_len(text: str) -> int:
  """The UTF-8 length of ``text`` (lone surrogates from ``surrogateescape`` count one byte)."""
  return len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))


def whole_file(path: str, reason: str, detail: str) -> Unreadable:
  """The one dead letter of a file that is neither a JSON list nor JSON lines (source id: the
  path).  Uncertain: how many records it was meant to hold is unknown."""
  return Unreadable(path, reason, detail, True, 0)
