"""The records of one JSON source file given as byte chunks: a JSON list, the list under a key
of a JSON object, or JSON lines.  No Beam here; :mod:`pipelines.beam.read` runs it per file.

Forms.  A file whose first non-whitespace byte (after an optional UTF-8 BOM) is ``[`` is one
JSON list (source ids ``path#<index>``).  With ``list_key`` (e.g. ``"Data"`` for TriviaQA's
``{"Data": [...], "Domain": ..., ...}``) a file starting with ``{`` is one JSON object holding
the records as the list under that key, anywhere among its keys (the values of the other keys
are checked, not kept).  Any other file is JSON lines (``path:<line>``, see
:mod:`pipelines.sources.json_lines`).

How.  A list (or object) file is first read with ``ijson`` (its C backend, ``yajl2_c``), item
by item, memory near one item plus a chunk.  When ``ijson`` fails (any damage, but also
``NaN`` / ``Infinity`` and numbers beyond 64-bit integers or floats, which Python's ``json``
reads), or the file holds something on which the two could differ (a ``\\uD800``-``\\uDFFF``
escape that is not half of a pair; more than ``max_item_chars`` bytes without an item ending;
an object without exactly one ``list_key`` holding a list), the file is read again from its
start by the tolerant reader, :class:`~pipelines.sources.json_list_recovery.JsonListReader`,
and its events after the items already yielded follow.  So the events (items, dead letters
and their texts) are the tolerant reader's, whatever the chunking; ``ijson`` yields an item
only once nothing after it can change that.  Chunks given as a one-shot iterator (not
iterable twice) go to the tolerant reader directly.

What is recovered (each unreadable unit is one :class:`Unreadable`, a dead letter):

* Invalid UTF-8 costs the item / line that holds it (``invalid_utf8``); a lone surrogate from
  a ``\\udc80`` JSON escape is kept in the value and flagged (``Item.escapes``).
* A corrupt list item costs that item (``invalid_json``, ``path#<index>``): reading resumes at
  the next plausible item (the kind of value, and for objects one of the first keys, the good
  items have) that decodes and is followed by ``,`` or by the list's end; a missing ``,``
  between two whole items costs nothing (:class:`Repaired`).
* A truncated list keeps every whole item before the cut; the rest is one *uncertain* dead
  letter (the number of items lost is unknown).
* A bad JSON line costs that line; text after the list is one dead letter.

What is not recovered (one dead letter with the path as source id, uncertain): a file that is
not UTF-8 JSON text at all (UTF-16/32, binary or compressed data without its extension, seen
from its first bytes), a non-list file none of whose first lines is JSON or that is one JSON
value over several lines, an object file without its ``list_key`` list or damaged before it;
a dead letter whose region may have held several items (adjacent corrupt items, damage in
front of an item) says so (*uncertain*) rather than guessing their number.  Limits of the
resynchronisation: see :class:`~pipelines.sources.json_list_recovery.JsonListReader`.

The one difference from the tolerant reader alone: an item of a whole file nested deeper than
Python's recursion limit (about 1,000 levels) is read by ``ijson``, where the tolerant reader
would dead-letter it (``RecursionError``).
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from collections.abc import Iterator as OneShot
from typing import Any, Iterable, Iterator, List, Optional, Tuple

import ijson

from pipelines.sources.json_events import (DEFAULT_CHUNK_SIZE, DEFAULT_MAX_ITEM_CHARS,
                                           LONE_SURROGATE_ESCAPE, WS_BYTES, Event, Item,
                                           Repaired, Unreadable, whole_file)
from pipelines.sources.json_lines import read_lines
from pipelines.sources.json_list_recovery import JsonListReader

_SNIFF = 64  # bytes looked at to tell JSON text from other data
_MAX_INDENT = 1 << 20  # leading blanks on one line beyond this are dropped, not buffered
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # decoded pairs are one character; these not
# The bytes form of json_events.LONE_SURROGATE_ESCAPE: ijson decodes such an escape
# differently from Python's json (as "?", or joined with the next escape).
_LONE_SURROGATE_ESCAPE = re.compile(LONE_SURROGATE_ESCAPE.pattern.encode("ascii"))
_SURROGATE_START = re.compile(rb"\\u[dD][89a-fA-F]")  # where one may start: found fast
_PAIR = 12  # bytes of an escaped surrogate pair


_MAGIC = ((b"\x1f\x8b", "gzip-compressed data"), (b"PK\x03\x04", "a zip archive"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed data"), (b"\xfd7zXZ\x00", "xz-compressed data"))
_WIDE_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32-BE"), (b"\xff\xfe\x00\x00", "UTF-32-LE"),
              (b"\xfe\xff", "UTF-16-BE"), (b"\xff\xfe", "UTF-16-LE"))


def _sniff(body: bytes) -> Optional[Tuple[str, str]]:
  """``(reason, detail)`` if the file, from its first non-blank bytes, is no UTF-8 JSON text at
  all (another encoding, binary or compressed data); None otherwise."""
  for bom, name in _WIDE_BOMS:
    if body.startswith(bom):
      return "invalid_utf8", (f"the file is {name} text (byte order mark {bom.hex()}), not "
                              f"UTF-8; not read")
  for magic, name in _MAGIC:
    if body.startswith(magic):
      return "invalid_json", (f"the file is {name} (it starts with {body[:8]!r}), not JSON "
                              f"text; a compressed file whose name lacks its extension? Not read")
  if re.match(rb"BZh[1-9]1AY&SY", body):
    return "invalid_json", ("the file is bzip2-compressed data, not JSON text; a compressed "
                            "file whose name lacks its extension? Not read")
  if b"\x00" in body[:4]:
    return "invalid_json", (f"the file starts with NUL bytes ({body[:8]!r}): binary data or "
                            f"UTF-16/32 text, not UTF-8 JSON; not read")
  return None


def _split_head(chunks: Iterator[bytes]) -> Tuple[bytes, int, int, int]:
  """Reads the file's first bytes, to ``_SNIFF`` bytes past its first non-blank byte (or to the
  end): ``(head, BOM length, blank bytes dropped, newlines among them)``.  ``head`` follows a
  UTF-8 BOM; leading blank lines are dropped as they come (so a run of them costs no memory)."""
  bom = codecs.BOM_UTF8
  head, skipped, blanks, newlines = b"", -1, 0, 0
  for data in chunks:
    head += data
    if skipped < 0:
      if len(head) < len(bom) and bom.startswith(head):
        continue
      skipped = len(bom) if head.startswith(bom) else 0
      head = head[skipped:]
    body = head.lstrip(WS_BYTES)
    if not body:
      # Drops whole blank lines (the first line keeps its indentation, so its column numbers
      # do not depend on the chunks), or a blank run too long to be an indentation.
      cut = len(head) if len(head) > _MAX_INDENT else head.rfind(b"\n") + 1
      blanks += cut
      newlines += head.count(b"\n", 0, cut)
      head = head[cut:]
    elif len(body) >= _SNIFF:
      break
  if skipped < 0:  # the file is shorter than a BOM and a prefix of one
    skipped = 0
  return head, skipped, blanks, newlines



def read_json_stream(chunks: Iterable[bytes], path: str, chunk_size: int = DEFAULT_CHUNK_SIZE,
                     max_item_chars: int = DEFAULT_MAX_ITEM_CHARS,
                     list_key: Optional[str] = None) -> Iterator[Event]:
  """The records and unreadable items of one file given as byte chunks.

  ``chunks``: iterable again (a list, a :class:`~pipelines.sources.byte_stream.ByteSource`) for
  the ``ijson`` pass with a re-read on damage, or a one-shot iterator (tolerant reader only).
  ``list_key``: a file starting with ``{`` is an object whose ``list_key`` holds the records
  (see the module docstring)."""
  stream = iter(chunks)
  head, bom, blanks, newlines = _split_head(stream)
  body = head.lstrip(WS_BYTES)
  verdict = _sniff(body)
  if verdict is not None:
    return iter([whole_file(path, *verdict)])
  rest = itertools.chain([head] if head else [], stream)
  in_object = list_key is not None and body.startswith(b"{")
  if not (body.startswith(b"[") or in_object):
    return read_lines(rest, path, max_item_chars, bom + blanks, newlines)
  if isinstance(chunks, OneShot) or (in_object and "." in list_key):  # no ijson prefix for it
    return iter(JsonListReader(rest, path, chunk_size, max_item_chars, bom + blanks, blanks,
                               list_key))
  return _read_list(rest, chunks, path, chunk_size, max_item_chars,
                    list_key if in_object else None)


def _read_list(rest: Iterator[bytes], chunks: Iterable[bytes], path: str, chunk_size: int,
               max_item_chars: int, list_key: Optional[str]) -> Iterator[Event]:
  """``ijson``'s items of the list; if it cannot give the tolerant reader's result, that
  reader's events over ``chunks`` read again, after the items already yielded."""
  yielded = 0
  try:
    for value in _whole_items(rest, max_item_chars, list_key):
      yield Item(f"{path}#{yielded}", value)
      yielded += 1
    return
  except _NotWhole:
    pass
  stream = iter(chunks)
  head, bom, blanks, _ = _split_head(stream)
  events = iter(JsonListReader(itertools.chain([head] if head else [], stream), path,
                               chunk_size, max_item_chars, bom + blanks, blanks, list_key))
  for index, event in enumerate(itertools.islice(events, yielded)):
    if not isinstance(event, Item) or event.source_id != f"{path}#{index}":
      raise AssertionError(f"{path}: the tolerant reader disagrees with ijson at item {index}")
  yield from events


class _NotWhole(Exception):
  """``ijson`` cannot give the tolerant reader's result for this file."""


class _Shape:
  """Watches the top level of an object file's parse events: ``list_key`` must occur once and
  hold a list (``ijson`` alone reads a second such list too, and nothing for a missing one)."""

  def __init__(self, list_key: str):
    self.list_key = list_key
    self.keys = 0
    self.lists = 0

  @property
  def whole(self) -> bool:
    return self.keys == 1 and self.lists == 1

  @ijson.utils.coroutine
  def watch(self, target):
    send, key, after_key = target.send, self.list_key, False
    while True:
      event = yield
      if after_key:
        self.lists += event[1] == "start_array"
        after_key = False
      elif event[0] == "" and event[1] == "map_key" and event[2] == key:
        self.keys += 1
        after_key = True
      send(event)


def _whole_items(chunks: Iterator[bytes], max_item_chars: int,
                 list_key: Optional[str]) -> Iterator[Any]:
  """The items of the top-level list (``list_key``: of the list under that key of the
  top-level object), parsed by ``ijson`` as they come; raises :class:`_NotWhole`, before any
  item it might have got differently, where the tolerant reader must decide."""
  out = ijson.utils.sendable_list()
  shape = None
  if list_key is None:
    parser = ijson.items_coro(out, "item", use_float=True)
  else:
    shape = _Shape(list_key)
    backend = ijson.get_backend(ijson.backend)
    parser = ijson.utils.chain(out, (backend.items_basecoro, (f"{list_key}.item",), {}),
                               (shape.watch, (), {}), (backend.parse_basecoro, (), {}),
                               (backend.basic_parse_basecoro, (), {"use_float": True}))
  fed, window = 0, 0

  def feed(piece: Optional[bytes]) -> List[Any]:
    """Parses ``piece`` (None: the end); the items it completed."""
    nonlocal fed, window
    start = fed
    if piece:
      fed += len(piece)
    _send(parser, piece)
    # An item longer than max_item_chars spans more bytes than that from the start of the
    # piece where the item before it ended (or of the file): the tolerant reader decides.
    if fed - window > max_item_chars or (shape is not None and shape.keys > 1):
      raise _NotWhole
    if piece is None and shape is not None and not shape.whole:
      raise _NotWhole
    items = list(out)
    del out[:]
    if items:
      window = start
    return items

  # A byte is parsed once every escape that starts before it is decided (a lone surrogate
  # escape needs the 6 bytes after it, and the 6 before): no item that holds a lone surrogate
  # escape is yielded.  ``behind``: the last bytes parsed; ``held``: bytes not parsed yet.
  behind, held = b"", b""
  for data in chunks:
    text = behind + held + data
    ready = len(text) - _PAIR + 1  # escapes that start before this are decided
    at = _lone_surrogate_escape(text, len(behind))
    if at is not None and at < ready:
      raise _NotWhole
    if ready <= len(behind):
      held = text[len(behind):]
      continue
    piece = text[len(behind):ready]
    behind, held = text[max(0, ready - _PAIR // 2):ready], text[ready:]
    yield from feed(piece)
  if _lone_surrogate_escape(behind + held, len(behind)) is not None:
    raise _NotWhole
  if held:
    yield from feed(held)
  yield from feed(None)


def _lone_surrogate_escape(text: bytes, start: int) -> Optional[int]:
  """Where the first lone surrogate escape at or after ``start`` begins (None: nowhere)."""
  for m in _SURROGATE_START.finditer(text, start):
    if _LONE_SURROGATE_ESCAPE.match(text, m.start()):
      return m.start()
  return None


def _send(parser, data: Optional[bytes]) -> None:
  """Feeds ``data`` to the parser (None: the end of the file)."""
  try:
    if data is None:
      parser.close()
    else:
      parser.send(data)
  except Exception as e:  # pylint: disable=broad-except
    raise _NotWhole from e  # ijson's errors (syntax, UTF-8, numbers, ...) all mean: re-read


def iter_json_list(text: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[Any]:
  """Yields the items of a JSON list one at a time; raises json.JSONDecodeError at the first
  unreadable item (a strict front end to the tolerant reader)."""
  data = text.encode("utf-8", "surrogatepass")
  chunks = (data[k:k + chunk_size] for k in range(0, len(data), max(1, chunk_size)))
  for event in JsonListReader(chunks, "", chunk_size):
    if isinstance(event, Unreadable):
      raise json.JSONDecodeError(event.detail, text, min(event.offset, len(text)))
    if isinstance(event, Repaired):
      raise json.JSONDecodeError(event.detail, text, 0)
    yield event.value


def replace_lone_surrogates(value: Any) -> Tuple[Any, int]:
  """``value`` with every lone UTF-16 surrogate in its strings (keys too) replaced by U+FFFD,
  and how many were replaced.  JSON allows ``"\\udc80"``; UTF-8 cannot encode it."""
  if isinstance(value, str):
    return _LONE_SURROGATE.subn("\ufffd", value)
  if isinstance(value, list):
    out, n = [], 0
    for v in value:
      v, k = replace_lone_surrogates(v)
      out.append(v)
      n += k
    return out, n
  if isinstance(value, dict):
    out, n = {}, 0
    for key, v in value.items():
      key, k1 = replace_lone_surrogates(key)
      out[key], k2 = replace_lone_surrogates(v)
      n += k1 + k2
    return out, n
  return value, 0
