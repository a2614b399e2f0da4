"""Reading JSON source files (a JSON list per file, or JSON lines) into ``(source_id, record)``.

Every file is streamed through ``FileSystems.open`` (local, ``gs://``; ``.gz`` / ``.bz2`` / ``.xz``
... are decompressed by extension) in chunks, so memory stays near one record plus a few chunks,
never the whole file.  A file whose first non-whitespace byte (after an optional UTF-8 BOM) is
``[`` is one JSON list; any other file is JSON lines.

With ``list_key`` (e.g. ``"Data"`` for TriviaQA's ``{"Data": [...], "Domain": ..., ...}``) a file
whose first non-whitespace byte is ``{`` is one JSON object holding the list of records under
that key, anywhere among its keys: the values of the keys before it are skipped (decoded one at
a time, never the whole file), then the list is streamed exactly like a top-level list (same
damage handling and dead letters, source ids ``path#index``), and what follows the list must
close the object (``, "key": value ... }``; other keys are not kept).  A file starting with
``[`` is still a list and any other file JSON lines.  An object without the key, or whose key
holds no list, is one dead letter (source id: the path); so is a JSON-lines file (its first line
is read as the object).

``expand`` (optional) splits each readable item into the records it stands for, e.g. one per
TriviaQA question-document pair, the unit of that dataset's evaluation: every record counts as
one input (``read/records``, ``input_count``) and ``read/items`` counts the items.  An item it
returns nothing for, or that it fails on, is passed on as it is (the parser decides).

Damage costs only the records it touches:

* Invalid UTF-8 dead-letters only the item / line that holds it (reason ``invalid_utf8``).  List
  chunks are decoded with an incremental ``surrogateescape`` decoder, so a bad byte becomes a
  lone surrogate U+DC80..U+DCFF in the text; an item whose raw text holds one is rejected (a
  ``\\udc80`` JSON escape is ASCII in the raw text and is not flagged; the lone surrogate it
  decodes to is replaced by U+FFFD and counted in ``read/lone_surrogates``).
* A corrupt list item is one dead letter (``invalid_json``, ``path#<index>``) and reading resumes
  at the next item: the reader searches forward for a plausible item start (the kind of value the
  good items have, e.g. ``{``, right after ``,`` and whitespace, or after damage in front of an
  item; for objects also one of the first keys the good items have) and accepts it only if it
  decodes to such a value followed by ``,`` or by ``]`` and the end of the file.  A missing
  ``,`` between two whole items costs nothing (both are read; counted in
  ``read/missing_separators``).  See :class:`_JsonListReader` for the limits.
* A JSON-lines line that is not JSON is one dead letter (``path:<line>``).
* A file that is not JSON text at all is one dead letter with the path as source id: UTF-16/32,
  binary or compressed data without its extension (seen from its first bytes), or a non-list
  file none of whose lines is JSON, or that is one JSON value over several lines (e.g. a
  pretty-printed top-level object).
* A compressed file that is damaged or truncated ends the read there, as one
  ``invalid_compression`` dead letter (storage errors are raised, so that Beam retries).

A dead letter whose region may have held any number of records (a truncated file, a region with
several item-like starts, text outside the list) is *uncertain* (``read/uncertain_regions``):
the manifest's input count is then not exact.

Outputs: ``records`` (main), ``dead_letter``, ``input_count`` (one int per file) and ``stats``
(one dict of ``read/...`` counters per file, :data:`STAT_KEYS`).  Per file, ``input_count``
equals records plus dead letters.
"""

from __future__ import annotations

import codecs
import collections
import itertools
import json
import lzma
import re
import time
import zlib
from typing import (Any, Callable, FrozenSet, Iterable, Iterator, List, NamedTuple, Optional,
                    Tuple, Union)

import apache_beam as beam
from apache_beam.io.filesystem import CompressedFile, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.progress import Progress

INPUT_COUNT = "input_count"
STATS = "stats"
RECORDS = "records"

DEFAULT_CHUNK_SIZE = 1 << 20        # bytes read at a time
DEFAULT_MAX_ITEM_CHARS = 256 << 20  # the most characters buffered for one item / line
# Counters of the ``stats`` output, per file.  ``read/bytes``: the (decompressed) bytes read (of
# a file given up early, e.g. not JSON, what was read); ``read/invalid_*``: dead letters by
# reason; ``read/uncertain_regions``: dead letters that may stand for any number of records.
STAT_KEYS = ("read/files", "read/bytes", "read/records", "read/invalid_json",
             "read/invalid_utf8", "read/invalid_compression", "read/uncertain_regions",
             "read/missing_separators", "read/lone_surrogates")

_NAMESPACE = "readtwice.read"
_WS_BYTES = b" \t\n\r"
_WS = re.compile(r"[ \t\n\r]*")
_ESCAPED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, after surrogateescape
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a JSON escape of a UTF-16 surrogate
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # decoded pairs are one character; these not
_KEY_AT = re.compile(r'\{[ \t\n\r]*"((?:[^"\\]|\\.)*)"[ \t\n\r]*:')
_DECODER = json.JSONDecoder()
_END_MARGIN = 16   # a parse error this close to the buffer end may just be the chunk boundary
_MIN_WINDOW = 4096  # characters decoded at a time at least
_KEY_SPAN = 1024  # an item's first key is looked for this far
_MAX_KEYS = 16     # more distinct first keys than this: resync checks the value type only
_SNIPPET = 60
_PREFIX_SPAN = 1024  # how far into a corrupt region an item with no ',' before it is looked for
_TAIL = 16  # the last characters of a corrupt region kept to see how it ends
_OBJECT_TAIL = 4096  # the same inside an object (list_key), whose rest follows the list
_SNIFF = 64  # bytes looked at to tell JSON text from other data
_MAX_INDENT = 1 << 20  # leading blanks on one line beyond this are dropped, not buffered
_MAX_LEADING_BAD_LINES = 1000  # none of these is JSON: the file is not JSON lines

# The kinds of JSON value, by first character, and where an item of that kind may start.
_OBJECT, _ARRAY, _STRING, _NUMBER, _LITERAL = "{", "[", '"', "0", "t"
_CANDIDATES = {
    _OBJECT: re.compile(r",[ \t\n\r]*\{"),
    _ARRAY: re.compile(r",[ \t\n\r]*\["),
    _STRING: re.compile(r',[ \t\n\r]*"'),
    _NUMBER: re.compile(r",[ \t\n\r]*[-0-9]"),
    _LITERAL: re.compile(r",[ \t\n\r]*[tfnNI]"),
    None: re.compile(r",[ \t\n\r]*[{\[]"),  # nothing known: any container
}


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


def _kind(ch: str) -> Optional[str]:
  if ch in "{[\"":
    return ch
  if ch in "-0123456789":
    return _NUMBER
  if ch in "tfnNI":
    return _LITERAL
  return None


def _byte_len(text: str) -> int:
  return len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))


def _json_key(raw: str) -> Optional[str]:
  try:
    return json.loads(f'"{raw}"')
  except ValueError:
    return None


class _JsonListReader:
  """Streams the items of one JSON list from byte chunks: :class:`Item` / :class:`Unreadable`.

  The text is decoded chunk by chunk into a buffer that is compacted as items are consumed
  (bounded by about twice one item plus a chunk).  ``raw_decode`` parses a window of the buffer
  that starts at the item; a parse that fails or ends within ``_END_MARGIN`` characters of the
  window's end (or is an unterminated string) may only be cut by the window or chunk boundary,
  so the window (and the buffer) is doubled and the item retried (geometric, so a large item
  costs linear time) up to ``max_item_chars``.  A parse error further from the end is final:
  the parser reads left to right, so more text cannot repair it.  Hence the results do not
  depend on the chunk size.

  Resynchronisation after a corrupt item at ``p``: the reference is the most common kind of the
  good items so far (and, for objects, the set of their first keys), or, before any good item,
  the corrupt item's own first character and first key.  Candidates are that kind's start
  character (for objects, with one of the reference keys first) after ``,`` + whitespace,
  scanned once from ``p`` (so ``,,`` costs only the empty slot), and, for containers, anywhere
  in the first ``_PREFIX_SPAN`` characters of the region before its first ``,`` (damage in front
  of an item, e.g. ``, \xff {...}``).  A candidate must decode to a value of the reference kind
  followed by ``,``, or by ``]`` and the end of the file.  The skipped region is one dead
  letter; it is *uncertain* (counted in ``read/uncertain_regions``) if item-like candidates
  inside it failed to decode (they may have been further corrupt items), if it is text after a
  good item or in front of an item (0 or 1 items), or if it runs to the end of the file, unless
  it then ends with the kind's closing character and the list's ``]`` (one corrupt last item).
  A good item followed by something other than ``,`` / ``]`` is read; if a valid candidate
  starts right there only the ``,`` was missing (:class:`Repaired`), else the text from there
  is such a region.  Text after the closing ``]`` is one dead letter, uncertain if it has a
  ``{`` or ``[`` near its start (e.g. a second list appended).

  Limits: a nested value of the reference kind with the same first key, right after a ``,``
  inside a corrupt item (e.g. a tree of ``{"id": ...}`` objects), is taken as the next item; a
  corrupt first item whose first key is itself damaged leaves no reference key, so any object
  is accepted; a file truncated right after a nested ``}]`` inside its last item looks like one
  corrupt last item; an item longer than ``max_item_chars`` is dead-lettered.  The scan for a
  candidate keeps only the unscanned text, so a long corrupt region costs linear time and no
  extra memory.
  """

  def __init__(self, chunks: Iterable[bytes], path: str, chunk_chars: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, start_byte: int = 0,
               start_char: int = 0, list_key: Optional[str] = None):
    self._chunks = iter(chunks)
    self._list_key = list_key  # the file is {..., list_key: [items], ...} when it starts with {
    self._in_object = False    # reading the list inside such an object
    self._tail = _TAIL
    self._path = path
    self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    self._chunk_chars = max(1, chunk_chars)
    self._max_item = max(1, max_item_chars)
    self._buf = ""
    self._eof = False
    self._window = _MIN_WINDOW
    self._base = start_char            # characters dropped before buf[0]
    self._mark_i, self._mark_b = 0, start_byte  # buf index <-> absolute byte offset
    self._kinds: collections.Counter = collections.Counter()
    self._keys: set = set()
    self._any_key = False

  # -- the buffer --------------------------------------------------------------------------

  def _read_text(self) -> Optional[str]:
    if self._eof:
      return None
    data = next(self._chunks, None)
    if data is None:
      self._eof = True
      return self._decoder.decode(b"", final=True)
    return self._decoder.decode(data)

  def _extend_to(self, n: int) -> bool:
    """Reads until the buffer holds ``n`` characters (True) or the file ends (False)."""
    have = len(self._buf)
    if have >= n:
      return True
    parts = [self._buf]
    while have < n:
      text = self._read_text()
      if text is None:
        break
      parts.append(text)
      have += len(text)
    self._buf = "".join(parts)
    return have >= n

  def _more(self) -> bool:
    return self._extend_to(len(self._buf) + 1)

  def _compact(self, k: int) -> int:
    """Drops ``buf[:k]``; returns ``k``, by which every held position must be shifted."""
    if k <= 0:
      return 0
    b = self._byte_at(k)
    self._buf = self._buf[k:]
    self._base += k
    self._mark_i, self._mark_b = 0, b
    return k

  def _maybe_compact(self, i: int) -> int:
    if i > self._chunk_chars and 2 * i > len(self._buf):
      return self._compact(i)
    return 0

  def _byte_at(self, i: int) -> int:
    """Absolute byte offset of ``buf[i]`` (cheap for positions near the last one asked)."""
    if i >= self._mark_i:
      self._mark_b += _byte_len(self._buf[self._mark_i:i])
    else:
      self._mark_b -= _byte_len(self._buf[i:self._mark_i])
    self._mark_i = i
    return self._mark_b

  def _where(self, i: int) -> str:
    return f"byte {self._byte_at(i)}, char {self._base + i}"

  def _skip_ws(self, i: int) -> int:
    while True:
      i = _WS.match(self._buf, i).end()
      if i < len(self._buf) or not self._more():
        return i

  def _decode(self, p: int) -> Tuple[bool, Any, Any]:
    """``(True, value, end)`` or ``(False, message, error_position)`` for the value at p.

    Decodes a copy of a window of the buffer (about twice the last item), not the buffer in
    place: a ``JSONDecodeError`` counts the lines before its position, which would cost the
    whole buffer per error.
    """
    window = self._window
    limit = self._max_item + _END_MARGIN + 1  # enough to see that an item is too long
    while True:
      n = len(self._buf)
      w = min(n - p, window, limit)
      doc = self._buf[p:p + w]
      final = self._eof and p + w == n
      try:
        value, end = _DECODER.raw_decode(doc)
        # A number may go on past the window ("1." + "5"): only a later character ends it.
        cut = end > w - _END_MARGIN and _kind(doc[0]) == _NUMBER
        if (end < w and not cut) or final:
          if end > self._max_item:
            return False, f"item longer than {self._max_item} characters", p
          self._window = max(_MIN_WINDOW, 2 * end)
          return True, value, p + end
      except json.JSONDecodeError as e:
        if final or (e.pos < w - _END_MARGIN and not e.msg.startswith("Unterminated string")):
          return False, e.msg, p + e.pos
      except (ValueError, RecursionError) as e:
        return False, f"{type(e).__name__}: {str(e)[:200]}", p
      if w >= limit:
        return False, f"item longer than {self._max_item} characters", p
      window = max(2 * w, _MIN_WINDOW)
      if p + w < n:  # more text is already buffered
        continue
      self._extend_to(min(p + limit, n + max(n - p, self._chunk_chars)))

  # -- the items ---------------------------------------------------------------------------

  def _id(self, index: int) -> str:
    return f"{self._path}#{index}"

  def __iter__(self) -> Iterator[Event]:
    i = self._skip_ws(0)
    if self._list_key is not None and i < len(self._buf) and self._buf[i] == "{":
      i = yield from self._enter_object(i)
      if i is None:
        return
    if i >= len(self._buf) or self._buf[i] != "[":
      yield Unreadable(self._id(0), "invalid_json", f"Expecting '[' ({self._where(i)})",
                       False, self._base + i)
      return
    i = self._skip_ws(i + 1)
    index = 0
    if i < len(self._buf) and self._buf[i] == "]":
      yield from self._trailer(i + 1, index)
      return
    while True:
      i -= self._maybe_compact(i)
      if i >= len(self._buf):
        yield Unreadable(self._id(index), "invalid_json",
                         f"the file ends inside the list, before item {index} "
                         f"({self._where(i)}); the number of lost items is unknown",
                         True, self._base + i)
        return
      if self._buf[i] == "]":  # after a ','
        yield Unreadable(self._id(index), "invalid_json",
                         f"trailing ',' before ']' ({self._where(i)})", False, self._base + i)
        yield from self._trailer(i + 1, index + 1)
        return
      ok, value, end = self._decode(i)
      junk = False
      if ok:
        q = self._skip_ws(end)
        sep = self._buf[q] if q < len(self._buf) else ""
        if _ESCAPED.search(self._buf, i, end):
          bad = self._buf[_ESCAPED.search(self._buf, i, end).start()]
          yield Unreadable(self._id(index), "invalid_utf8",
                           f"byte 0x{ord(bad) - 0xDC00:02x} is not UTF-8 (item at "
                           f"{self._where(i)})", False, self._base + i)
        else:
          self._learn(self._buf[i], value)
          yield Item(self._id(index), value,
                     _SURROGATE_ESCAPE.search(self._buf, i, end) is not None)
        index += 1
        if sep == "]":
          yield from self._trailer(q + 1, index)
          return
        if not sep:
          yield Unreadable(self._id(index), "invalid_json",
                           f"the file ends after item {index - 1} before the list is closed "
                           f"({self._where(q)}); the number of lost items is unknown",
                           True, self._base + q)
          return
        if sep == ",":
          i = self._skip_ws(q + 1)
          continue
        kind, keys = self._reference(q)
        if self._candidate(q, kind, keys):  # only the ',' is missing: nothing is lost
          yield Repaired(self._id(index), f"missing ',' before item {index} ({self._where(q)})")
          i = q
          continue
        i, value, end, junk = q, "Expecting ',' or ']' after the item", q, True
      nxt = yield from self._resync(i, index, value, end, junk)
      if nxt is None:
        return
      i, index = nxt, index + 1

  def _learn(self, ch: str, value: Any) -> None:
    """Remembers the kind (and first key) of a good item: the reference for resyncs."""
    kind = _kind(ch)
    self._kinds[kind] += 1
    if kind == _OBJECT and not self._any_key:
      if not value:
        self._any_key = True
      else:
        self._keys.add(next(iter(value)))
        self._any_key = len(self._keys) > _MAX_KEYS

  def _reference(self, p: int) -> Tuple[Optional[str], Optional[FrozenSet[str]]]:
    if self._kinds:
      kind = self._kinds.most_common(1)[0][0]
      keys = frozenset(self._keys) if kind == _OBJECT and not self._any_key else None
      return kind, keys
    kind = _kind(self._buf[p])
    if kind == _OBJECT:
      self._extend_to(p + _KEY_SPAN)
      m = _KEY_AT.match(self._buf, p, p + _KEY_SPAN)
      key = _json_key(m.group(1)) if m else None
      return kind, (frozenset([key]) if key is not None else None)
    return kind, None

  def _candidate(self, c: int, kind: Optional[str],
                 keys: Optional[FrozenSet[str]]) -> Optional[bool]:
    """Whether an item plausibly starts at ``buf[c]``: None if it does not even look like one
    (wrong first character or first key), else whether it decodes to a value followed by ``,``,
    or by ``]`` and the end of the file.  May extend the buffer; never compacts it."""
    if c >= len(self._buf) or (_kind(self._buf[c]) != kind if kind is not None
                               else self._buf[c] not in "{["):
      return None
    if keys is not None:
      self._extend_to(c + _KEY_SPAN)
      m = _KEY_AT.match(self._buf, c, c + _KEY_SPAN)
      if not m or _json_key(m.group(1)) not in keys:
        return None
    ok, _, end = self._decode(c)
    if not ok:
      return False
    q = self._skip_ws(end)
    if q >= len(self._buf) or self._buf[q] == ",":
      return True
    return self._buf[q] == "]" and self._closes(q + 1)

  def _closes(self, i: int) -> bool:
    """Whether the list's closing ``]`` may be right before ``buf[i]``: the end of the file
    follows (a top-level list), or the rest of the enclosing object (see ``list_key``)."""
    if self._in_object:
      return self._object_rest(i)[0] is None
    return self._skip_ws(i) >= len(self._buf)

  def _resync(self, p: int, index: int, message: str, err: int, junk: bool):
    """Skips the corrupt item (or, if ``junk``, the text after a good item) at ``buf[p]``:
    yields its dead letter, returns where the next item starts (None: at the end of file)."""
    kind, keys = self._reference(p)
    start_b, start_c = self._byte_at(p), self._base + p
    err_b, err_c = self._byte_at(err), self._base + err
    self._extend_to(p + _SNIPPET)
    snippet = self._buf[p:p + _SNIPPET]
    what = (f"{message} at byte {err_b} (char {err_c}); the unreadable "
            f"{'text after the previous item' if junk else 'item'} starts at byte {start_b} "
            f"(char {start_c}): {snippet!r}")
    failed, escaped, found, prefix = 0, False, None, False
    # Damage right before an item (``, \xff {...}``, ``{...} x {...}``) leaves no ',' in front
    # of it: a container of the reference kind before the region's first ',' is a candidate.
    starts = {_OBJECT: "{", _ARRAY: "[", None: "{["}.get(kind, "")
    if starts:
      self._extend_to(p + _PREFIX_SPAN + 1)
      stop = min(len(self._buf), p + _PREFIX_SPAN)
      comma = self._buf.find(",", p, stop)
      for c in range(p + 1, stop if comma < 0 else comma):
        if self._buf[c] in starts:
          verdict = self._candidate(c, kind, keys)
          if verdict:
            found, prefix = c, True
            break
          failed += verdict is False
    s, checked = p, p  # from p: a region that is a bare ',' (``,,``) ends at the next item
    tail, origin = "", p  # the region's last characters dropped from the buffer; its start
    while found is None:
      scanned = self._buf  # candidates may extend self._buf; positions stay valid
      for m in _CANDIDATES[kind].finditer(scanned, s):
        verdict = self._candidate(m.end() - 1, kind, keys)
        if verdict:
          found = m.end() - 1
          break
        failed += verdict is False
      if found is not None:
        break
      # Rescan from a trailing ',' + whitespace whose value may start in the next chunk.
      t = len(scanned)
      while t > s and scanned[t - 1] in " \t\n\r":
        t -= 1
      s = t - 1 if t > s and scanned[t - 1] == "," else t
      if len(self._buf) > len(scanned):
        continue
      escaped = escaped or bool(_ESCAPED.search(self._buf, checked, s))
      if s > origin:
        tail = (tail + self._buf[max(origin, s - self._tail):s])[-self._tail:]
      shift = self._compact(s)
      s, checked, origin = s - shift, s - shift, max(0, origin - shift)
      if not self._more():
        end_b = self._byte_at(len(self._buf))
        reason = ("invalid_utf8" if escaped or _ESCAPED.search(self._buf, checked)
                  else "invalid_json")
        # One corrupt last item: the region ends with the kind's closing character and the
        # list's ']', and held no further item-like start.
        closer = {_OBJECT: "}", _ARRAY: "]", _STRING: '"'}.get(kind)
        last = (tail + self._buf[origin:]).rstrip(" \t\n\r")
        one = (not failed and not junk and closer is not None
               and self._ends_last_item(last, closer))
        if one:
          note = "it was the last item of the list"
        else:
          note = "the number of lost items is unknown"
        yield Unreadable(self._id(index), reason,
                         f"{what}; no further item up to the end of the file (byte {end_b}): "
                         f"{end_b - start_b} bytes unreadable, {note}", not one, start_c)
        return None
    escaped = escaped or bool(_ESCAPED.search(self._buf, checked, found))
    end_b = self._byte_at(found)
    if failed:
      note = (f"; {failed} further item-like start(s) inside did not parse, so it may hold up "
              f"to {failed + 1} items")
    elif junk or prefix:
      note = "; it may be a damaged item or text that was never one (0 or 1 items)"
    else:
      note = ""
    yield Unreadable(self._id(index), "invalid_utf8" if escaped else "invalid_json",
                     f"{what}; skipped {end_b - start_b} bytes, reading resumes at byte "
                     f"{end_b}{note}", bool(failed) or junk or prefix, start_c)
    return found

  def _ends_last_item(self, last: str, closer: str) -> bool:
    """Whether the end of a corrupt region, ``last``, is the kind's closing character, the
    list's ``]`` and (inside an object) the rest of the object."""
    if not self._in_object:
      return last.endswith("]") and last[:-1].rstrip(" \t\n\r").endswith(closer)
    k = len(last)
    for _ in range(8):  # the rest of the object may hold ']' itself: try the last few
      k = last.rfind("]", 0, k)
      if k < 0:
        return False
      if (last[:k].rstrip(" \t\n\r").endswith(closer)
          and _is_object_rest(last[k + 1:], self._list_key)):
        return True
    return False

  # -- the object around the list (``list_key``) -------------------------------------------

  def _enter_object(self, i: int):
    """Reads the top-level object at ``buf[i]`` up to the value of ``list_key``: returns the
    position of its ``[``, or None after yielding the file's one dead letter (no such key,
    not a list, or damage before it)."""
    key_name = self._list_key
    seen: List[str] = []

    def fail(reason, message, at):
      where = self._where(min(at, len(self._buf)))
      return _whole_file(self._path, reason,
                         f"{message} ({where}); the records of a JSON object file are the items "
                         f"of its {key_name!r} list; not read further")

    i = self._skip_ws(i + 1)
    while True:
      i -= self._maybe_compact(i)
      if i >= len(self._buf):
        yield fail("invalid_json", f"the file ends inside the top-level object before its "
                   f"{key_name!r} key", i)
        return None
      if self._buf[i] == "}":
        keys = ", ".join(repr(k) for k in seen[:10]) or "none"
        yield fail("invalid_json", f"the top-level object has no {key_name!r} key (its keys: "
                   f"{keys})", i)
        return None
      if self._buf[i] != '"':
        self._extend_to(i + _SNIPPET)
        yield fail("invalid_json", f"expecting a key of the top-level object, found "
                   f"{self._buf[i:i + _SNIPPET]!r}", i)
        return None
      ok, key, end = self._decode(i)
      if not ok:
        yield fail("invalid_json", f"unreadable key of the top-level object: {key}", end)
        return None
      j = self._skip_ws(end)
      if j >= len(self._buf) or self._buf[j] != ":":
        yield fail("invalid_json", f"expecting ':' after the key {key!r}", j)
        return None
      j = self._skip_ws(j + 1)
      if key == key_name:
        if j < len(self._buf) and self._buf[j] == "[":
          self._in_object = True
          self._tail = _OBJECT_TAIL
          return j
        ok, value, end = self._decode(j)
        what = type(value).__name__ if ok else "unreadable value"
        what = {"dict": "an object", "str": "a string", "NoneType": "null"}.get(what, what)
        yield fail("invalid_json", f"{key_name!r} is {what}, not a list", j)
        return None
      ok, value, end = self._decode(j)  # a value before the list: skipped
      if not ok:
        yield fail(_reason_at(self._buf, j, end), f"unreadable value of the key {key!r} "
                   f"before {key_name!r}: {value}", end)
        return None
      seen.append(key)
      j = self._skip_ws(end)
      if j < len(self._buf) and self._buf[j] == ",":
        i = self._skip_ws(j + 1)
      elif j < len(self._buf) and self._buf[j] == "}":
        i = j
      else:
        yield fail("invalid_json", f"expecting ',' or '}}' after the value of {key!r}", j)
        return None

  def _object_rest(self, i: int) -> Tuple[Optional[str], int, bool]:
    """Checks that ``buf[i:]`` (after the list) closes the object: ``(, "key": value)* }`` and
    the end of the file.  ``(None, end, False)`` or ``(message, position, uncertain)``;
    uncertain: a second ``list_key`` (a list not read).  Extends the buffer, never compacts."""
    i = self._skip_ws(i)
    while True:
      if i >= len(self._buf):
        return "the file ends before the top-level object is closed", i, False
      ch = self._buf[i]
      if ch == "}":
        j = self._skip_ws(i + 1)
        if j < len(self._buf):
          return "text after the top-level object's closing '}'", j, False
        return None, j, False
      if ch != ",":
        return "expecting ',' or '}' in the top-level object", i, False
      i = self._skip_ws(i + 1)
      if i >= len(self._buf) or self._buf[i] != '"':
        return "expecting a key of the top-level object", i, False
      ok, key, end = self._decode(i)
      if not ok:
        return f"unreadable key of the top-level object ({key})", end, False
      if key == self._list_key:
        return f"a second {key!r} key (not read; it may hold further items)", i, True
      j = self._skip_ws(end)
      if j >= len(self._buf) or self._buf[j] != ":":
        return f"expecting ':' after the key {key!r}", j, False
      ok, value, end = self._decode(self._skip_ws(j + 1))
      if not ok:
        return f"unreadable value of the key {key!r} ({value})", end, False
      i = self._skip_ws(end)

  def _trailer(self, i: int, index: int) -> Iterator[Event]:
    """Text after the list's closing ``]``: one dead letter, uncertain if it may hold items
    (a ``{`` or ``[`` in its first characters, e.g. a second list appended to the file).
    Inside an object (``list_key``): the rest of the object, a dead letter if it is not one."""
    if self._in_object:
      message, at, uncertain = self._object_rest(i)
      if message is not None:
        self._extend_to(at + _SNIPPET)
        yield Unreadable(self._id(index), "invalid_json",
                         f"{message}, after the {self._list_key!r} list ({self._where(at)}): "
                         f"{self._buf[at:at + _SNIPPET]!r}", uncertain, self._base + at)
      return
    i = self._skip_ws(i)
    if i < len(self._buf):
      self._extend_to(i + _KEY_SPAN)
      head = self._buf[i:i + _KEY_SPAN]
      itemlike = "{" in head or "[" in head
      yield Unreadable(self._id(index), "invalid_json",
                       f"extra data after the closing ']' at {self._where(i)}: "
                       f"{self._buf[i:i + _SNIPPET]!r}"
                       + ("; it may hold further items" if itemlike else ""),
                       itemlike, self._base + i)


def _reason_at(buf: str, begin: int, end: int) -> str:
  return "invalid_utf8" if _ESCAPED.search(buf, begin, max(begin, end) + 1) else "invalid_json"


def _is_object_rest(text: str, list_key: Optional[str]) -> bool:
  """Whether ``text`` (what follows a list) closes an object: ``(, "key": value)* }``."""
  rest = text.strip(" \t\n\r")
  if rest == "}":
    return True
  if not rest.startswith(","):
    return False
  try:
    value = json.loads("{" + rest[1:])
  except (ValueError, RecursionError):
    return False
  return isinstance(value, dict) and bool(value) and list_key not in value


def _iter_lines(chunks: Iterable[bytes], max_line_bytes: int, start_byte: int = 0,
                start_line: int = 0) -> Iterator[Tuple[int, int, Optional[bytes]]]:
  """``(line number, byte offset, line)`` split at ``\\n``; ``line`` is None for a line longer
  than ``max_line_bytes`` (its bytes are skipped, not buffered)."""
  parts: List[bytes] = []
  size, lineno, offset, too_long = 0, start_line, start_byte, False
  for data in chunks:
    start = 0
    while True:
      nl = data.find(b"\n", start)
      if nl < 0:
        break
      lineno += 1
      if too_long:
        yield lineno, offset, None
      else:
        yield lineno, offset, b"".join(parts) + data[start:nl] if parts else data[start:nl]
      offset += size + nl - start + 1
      parts, size, too_long = [], 0, False
      start = nl + 1
    size += len(data) - start
    if not too_long and start < len(data):
      parts.append(data[start:])
      if size > max_line_bytes:
        parts, too_long = [], True
  if size:
    yield lineno + 1, offset, None if too_long else b"".join(parts)


def _line_event(path: str, lineno: int, offset: int, line: Optional[bytes],
                max_line_bytes: int) -> Tuple[Optional[Event], bool]:
  """``(the line's event or None for a blank line, whether the line is an unfinished JSON
  value such as ``{`` or ``{"data": [``: the first line of a pretty-printed document)``."""
  source_id = f"{path}:{lineno}"
  if line is None:
    return Unreadable(source_id, "invalid_json",
                      f"line {lineno} is longer than {max_line_bytes} bytes (at byte {offset})",
                      False, offset), False
  if not line.strip(_WS_BYTES):
    return None, False
  try:
    text = line.decode("utf-8")
  except UnicodeDecodeError as e:
    return Unreadable(source_id, "invalid_utf8",
                      f"{e.reason}: byte 0x{line[e.start]:02x} at byte {offset + e.start} "
                      f"(line {lineno}, column {e.start + 1}) is not UTF-8",
                      False, offset + e.start), False
  if text.startswith("\ufeff"):  # a BOM inside the file: JSON-lines files concatenated
    text = text[1:]
    offset += 3
  try:
    return Item(source_id, json.loads(text), _SURROGATE_ESCAPE.search(text) is not None), False
  except json.JSONDecodeError as e:
    at = offset + _byte_len(text[:e.pos])
    return Unreadable(source_id, "invalid_json",
                      f"{e.msg} at byte {at} (line {lineno}, column {e.colno}): "
                      f"{text[:_SNIPPET]!r}", False, offset), e.pos >= len(text.rstrip())
  except (ValueError, RecursionError) as e:
    return Unreadable(source_id, "invalid_json",
                      f"{type(e).__name__}: {str(e)[:200]} (line {lineno}, byte {offset})",
                      False, offset), False


def _whole_file(path: str, reason: str, detail: str) -> Unreadable:
  """The one dead letter of a file that is neither a JSON list nor JSON lines (source id: the
  path).  Uncertain: how many records it was meant to hold is unknown."""
  return Unreadable(path, reason, detail, True, 0)


def _read_lines(chunks: Iterable[bytes], path: str, max_line_bytes: int, start_byte: int = 0,
                start_line: int = 0) -> Iterator[Event]:
  """JSON lines: one record per non-blank line, source id ``path:<line number>``.

  Until the first record, bad lines are held back: a file with no JSON line (and at least
  two non-blank lines), or whose first ``_MAX_LEADING_BAD_LINES`` non-blank lines are all bad
  (the rest is not read), or whose first line is an unfinished JSON value (``{``) and second
  line is bad too (one pretty-printed JSON document, e.g. a top-level object, not read
  further) is not JSON lines: one dead letter for the whole file (source id ``path``).
  Once a record is read, every line stands alone.
  """
  held: List[Unreadable] = []  # bad lines before the first record
  unfinished = False
  reading = False
  for lineno, offset, line in _iter_lines(chunks, max_line_bytes, start_byte, start_line):
    event, open_value = _line_event(path, lineno, offset, line, max_line_bytes)
    if event is None:
      continue
    if reading:
      yield event
      continue
    if isinstance(event, Item):
      reading = True
      yield from held
      held = []
      yield event
      continue
    if not held:
      unfinished = open_value
    held.append(event)
    if unfinished and len(held) == 2:
      yield _whole_file(path, "invalid_json",
                        f"not a JSON list ('[' ...) or JSON lines: the file is one JSON value "
                        f"spread over several lines (a pretty-printed object?), not read "
                        f"further; line 1 is unfinished: {held[0].detail}")
      return
    if len(held) >= _MAX_LEADING_BAD_LINES:
      yield _whole_file(path, _reason(held),
                        f"not JSON lines: none of the first {len(held)} non-blank lines is "
                        f"JSON, the rest of the file is not read; the first: {held[0].detail}")
      return
  if len(held) >= 2:
    yield _whole_file(path, _reason(held),
                      f"not JSON lines: none of its {len(held)} non-blank lines is JSON; the "
                      f"first: {held[0].detail}")
  else:
    yield from held


def _reason(held: List[Unreadable]) -> str:
  return "invalid_utf8" if all(e.reason == "invalid_utf8" for e in held) else "invalid_json"


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
    body = head.lstrip(_WS_BYTES)
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
  """The records and unreadable items of one file given as byte chunks (no Beam needed).

  ``list_key``: a file starting with ``{`` is an object whose ``list_key`` holds the records
  (see the module docstring)."""
  chunks = iter(chunks)
  head, bom, blanks, newlines = _split_head(chunks)
  body = head.lstrip(_WS_BYTES)
  verdict = _sniff(body)
  if verdict is not None:
    return iter([_whole_file(path, *verdict)])
  stream = itertools.chain([head] if head else [], chunks)
  if body.startswith(b"[") or (list_key is not None and body.startswith(b"{")):
    return iter(_JsonListReader(stream, path, chunk_size, max_item_chars, bom + blanks, blanks,
                                list_key))
  return _read_lines(stream, path, max_item_chars, bom + blanks, newlines)


def iter_json_list(text: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[Any]:
  """Yields the items of a JSON list one at a time; raises json.JSONDecodeError at the first
  unreadable item (a strict front end to the streaming reader)."""
  data = text.encode("utf-8", "surrogatepass")
  chunks = (data[k:k + chunk_size] for k in range(0, len(data), max(1, chunk_size)))
  for event in _JsonListReader(chunks, "", chunk_size):
    if isinstance(event, Unreadable):
      raise json.JSONDecodeError(event.detail, text, min(event.offset, len(text)))
    if isinstance(event, Repaired):
      raise json.JSONDecodeError(event.detail, text, 0)
    yield event.value


def _open(path: str, chunk_size: int) -> Tuple[Any, Optional[Any]]:
  """``(file, stored)``: ``file`` yields the file's bytes, decompressed by its extension (``.gz``,
  ``.bz2``, ``.zst``, ... as ``FileSystems.open`` would); ``stored`` is the raw compressed file
  (None if uncompressed).  Beam's default decompresses 16 MiB of input at a time; here each read
  takes ``chunk_size`` bytes of input, which bounds memory and makes the position exact."""
  compression = CompressionTypes.detect_compression_type(path)
  raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  if compression == CompressionTypes.UNCOMPRESSED:
    return raw, None
  return CompressedFile(raw, compression_type=compression, read_size=chunk_size), raw


def is_decompression_error(e: Exception) -> bool:
  if isinstance(e, (zlib.error, lzma.LZMAError, EOFError)):
    return True
  if type(e).__module__.startswith("zstandard"):
    return True
  return isinstance(e, OSError) and "Invalid data stream" in str(e)  # bz2


def raise_if_truncated(f) -> None:
  """Raises EOFError if ``f`` (as ``FileSystems.open`` returns it), read to its end, is a
  compressed file that ended inside its compressed stream: Beam's ``CompressedFile`` then
  returns what it decoded as if it were the whole file."""
  decompressor = getattr(f, "_decompressor", None)
  if decompressor is not None and not getattr(decompressor, "eof", True):
    raise EOFError("the compressed file is truncated: it ends inside its compressed stream")


def _with_source_error(events: Iterable[Event], source: "_Source", path: str) -> Iterator[Event]:
  """``events``; if the compressed file broke off, that is one uncertain ``invalid_compression``
  dead letter: the last one, amended, if the reader's last event was the region it cut short,
  else a new one (source id: the path)."""
  last = None
  for event in events:
    if last is not None:
      yield last
    last = event
  if source.error is not None:
    if isinstance(last, Unreadable):
      last = last._replace(reason="invalid_compression", uncertain=True,
                           detail=f"{source.error}; {last.detail}")
    else:
      if last is not None:
        yield last
      last = Unreadable(path, "invalid_compression",
                        f"{source.error}; what followed is lost, the number of records in it is "
                        f"unknown", True, source.bytes)
  if last is not None:
    yield last


class _Source:
  """A file's byte chunks; counts bytes and knows the position in the stored file."""

  def __init__(self, f, stored, chunk_size: int, on_chunk: Callable[[], None]):
    self._f = f
    self._stored = stored
    self._chunk_size = chunk_size
    self._on_chunk = on_chunk
    self.bytes = 0
    self.error: Optional[str] = None

  def chunks(self) -> Iterator[bytes]:
    """The bytes; a compressed file that is damaged or truncated ends early and sets
    ``error`` (read errors of the storage itself are raised, so that Beam retries)."""
    while True:
      try:
        data = self._f.read(self._chunk_size)
      except Exception as e:  # pylint: disable=broad-except
        if self._stored is None or not is_decompression_error(e):
          raise
        self.error = (f"the compressed file is damaged after {self.bytes} decompressed bytes "
                      f"({type(e).__name__}: {str(e)[:200]})")
        return
      if not data:
        decompressor = getattr(self._f, "_decompressor", None)
        if self._stored is not None and not getattr(decompressor, "eof", True):
          self.error = (f"the compressed file is truncated: it ends inside its compressed "
                        f"stream, after {self.bytes} decompressed bytes")
        return
      self.bytes += len(data)
      self._on_chunk()
      yield data

  def position(self) -> Optional[int]:
    """Bytes of the stored file consumed so far (None if unknown)."""
    if self._stored is None:
      return self.bytes
    try:
      return self._stored.tell()
    except Exception:  # pylint: disable=broad-except
      return None


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


def _file_size(path: str) -> Optional[int]:
  try:
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes
  except Exception:  # pylint: disable=broad-except
    return None


# Splits one item (source id, value) into the records it stands for (see ``expand`` above).
Expander = Callable[[str, Any], Iterable[Tuple[str, Any]]]


def _expand_item(expand: Expander, source_id: str, value: Any) -> List[Tuple[str, Any]]:
  """``expand``'s records of an item; the item itself if it returns none or fails."""
  try:
    out = list(expand(source_id, value))
  except Exception:  # pylint: disable=broad-except
    out = []
  return out or [(source_id, value)]


class _ReadJsonFileFn(beam.DoFn):
  """One path -> its records; dead letters, the input count and ``read/...`` stats per file."""

  def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, progress_every_s: float = 10.0,
               list_key: Optional[str] = None, expand: Optional[Expander] = None):
    super().__init__()
    self._chunk_size = chunk_size
    self._max_item_chars = max_item_chars
    self._progress_every_s = progress_every_s
    self._list_key = list_key
    self._expand = expand
    self._keys = STAT_KEYS + (("read/items",) if expand is not None else ())

  def setup(self):
    self._counters = {k: Metrics.counter(_NAMESPACE, k.split("/", 1)[1]) for k in self._keys}
    self._dead = Metrics.counter(_NAMESPACE, "dead_letters")

  def process(self, path: str):
    stats = dict.fromkeys(self._keys, 0)
    stats["read/files"] = 1
    size = _file_size(path)
    start = time.monotonic()
    progress = Progress("read", every_s=self._progress_every_s)
    dead = 0
    f, stored = _open(path, self._chunk_size)
    with f:
      source = _Source(f, stored, self._chunk_size, lambda: progress.update(
          0, lambda _n, elapsed: _progress_line(path, size, source, stats, elapsed)))
      events = read_json_stream(source.chunks(), path, self._chunk_size, self._max_item_chars,
                                self._list_key)
      for event in _with_source_error(events, source, path):
        if isinstance(event, Item):
          value = event.value
          if event.escapes:
            value, replaced = replace_lone_surrogates(value)
            stats["read/lone_surrogates"] += replaced
          if self._expand is None:
            stats["read/records"] += 1
            yield event.source_id, value
            continue
          stats["read/items"] += 1
          for record in _expand_item(self._expand, event.source_id, value):
            stats["read/records"] += 1
            yield record
        elif isinstance(event, Repaired):
          stats["read/missing_separators"] += 1
        else:
          dead += 1
          stats[f"read/{event.reason}"] += 1
          stats["read/uncertain_regions"] += int(event.uncertain)
          yield beam.pvalue.TaggedOutput(
              DEAD_LETTER, dead_letter("read", event.reason, event.source_id, event.detail))
    stats["read/bytes"] = source.bytes
    for key, counter in self._counters.items():
      if stats[key]:
        counter.inc(stats[key])
    self._dead.inc(dead)
    progress.done(lambda _n, _e: (
        f"{path}: {stats['read/records']:,} records, {dead:,} dead letters, "
        f"{source.bytes / 1e6:,.1f} MB in {time.monotonic() - start:,.1f} s"))
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, stats["read/records"] + dead)
    yield beam.pvalue.TaggedOutput(STATS, stats)


def _progress_line(path: str, size: Optional[int], source: _Source, stats: dict,
                   elapsed: float) -> str:
  """``<path> <percent of the stored bytes>% (<n> records, <MB/s>)``; MB instead of a percent
  where the position in the stored (compressed) file is unknown."""
  rate = source.bytes / 1e6 / elapsed if elapsed > 0 else 0.0
  pos = source.position()
  where = (f"{100.0 * pos / size:.1f}%" if size and pos is not None
           else f"{source.bytes / 1e6:,.1f} MB")
  return f"{path} {where} ({stats['read/records']:,} records, {rate:,.1f} MB/s)"


class ReadJsonRecords(beam.PTransform):
  """Paths -> ``(source_id, record)``; outputs ``dead_letter``, ``input_count`` and ``stats``.

  The source id (``path#index`` or ``path:line``; a dead letter for a whole file: ``path``)
  maps every record and dead letter back to its input.
  ``chunk_size`` (bytes per read) and ``max_item_chars`` (largest item / line buffered) bound
  the memory of the read.  ``list_key``: a file that is one JSON object holds its records as
  the list under this key (e.g. ``"Data"``, TriviaQA); ``expand``: splits each item into the
  records it stands for (both: see the module docstring).
  """

  def __init__(self, paths: List[str], chunk_size: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, progress_every_s: float = 10.0,
               list_key: Optional[str] = None, expand: Optional[Expander] = None):
    super().__init__()
    self._paths = paths
    self._fn = _ReadJsonFileFn(chunk_size, max_item_chars, progress_every_s, list_key, expand)

  def expand(self, pbegin: beam.pvalue.PBegin) -> beam.pvalue.DoOutputsTuple:
    return (pbegin | "Paths" >> beam.Create(self._paths)
            | "Read" >> beam.ParDo(self._fn).with_outputs(
                DEAD_LETTER, INPUT_COUNT, STATS, main=RECORDS))
