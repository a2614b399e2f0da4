"""The tolerant reader of one JSON list (or of the list under a key of a JSON object): every
readable item is read, each unreadable item or region is one dead letter.

:func:`pipelines.sources.json_items.read_json_stream` reads every list and object file with
it, damaged or not, in one pass (why no other parser goes first: see that module).  What it
recovers and what not, file by file: :mod:`pipelines.sources.json_items`; how it resumes
after damage, and where that can be fooled: :class:`JsonListReader`.

Why this module is over 500 lines: it is one class, a parser over one text buffer whose
parts (buffer and offsets, items, resynchronisation, the object around the list) share that
buffer's positions; split apart they would pass the buffer state back and forth.
"""

from __future__ import annotations

import codecs
import collections
import json
import re
from typing import Any, FrozenSet, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from pipelines.sources.json_events import (DEFAULT_CHUNK_SIZE, DEFAULT_MAX_ITEM_CHARS, SNIPPET,
                                           SURROGATE_ESCAPE, Event, Item, Repaired, Unreadable,
                                           byte_len, whole_file)

_WS = re.compile(r"[ \t\n\r]*")
_ESCAPED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, after surrogateescape
_KEY_AT = re.compile(r'\{[ \t\n\r]*"((?:[^"\\]|\\.)*)"[ \t\n\r]*:')
_DECODER = json.JSONDecoder()
_END_MARGIN = 16   # a parse error this close to the buffer end may just be the chunk boundary
_MIN_WINDOW = 4096  # characters decoded at a time at least
_KEY_SPAN = 1024  # an item's first key is looked for this far
_MAX_KEYS = 16     # more distinct first keys than this: resync checks the value type only
_PREFIX_SPAN = 1024  # how far into a corrupt region an item with no ',' before it is looked for
_TAIL = 16  # the last characters of a corrupt region kept to see how it ends
_OBJECT_TAIL = 4096  # the same inside an object (list_key), whose rest follows the list

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


class ListCheckpoint(NamedTuple):
  """Where a :class:`JsonListReader` may resume: the start of item ``index`` at byte ``byte``
  (character ``char``) of the file, with the reader's resync reference at that point (the kinds
  of the good items so far with their counts, their first keys, whether any key goes) and
  whether the list is inside an object (``list_key``).  Reading on from it gives exactly the
  events a reader of the whole file gives from there.  ``kinds`` keeps the counter's insertion
  order, which breaks ties between equally common kinds."""
  byte: int
  char: int
  index: int
  kinds: Tuple[Tuple[Optional[str], int], ...]
  keys: Tuple[str, ...]
  any_key: bool
  in_object: bool


def _kind(ch: str) -> Optional[str]:
  if ch in "{[\"":
    return ch
  if ch in "-0123456789":
    return _NUMBER
  if ch in "tfnNI":
    return _LITERAL
  return None


def _json_key(raw: str) -> Optional[str]:
  try:
    return json.loads(f'"{raw}"')
  except ValueError:
    return None


class JsonListReader:
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

  Ranges: every decision above depends only on the text from the current item on and on the
  state at the item's start (its index, the reference, the byte and character offsets), so a
  reader started from a :class:`ListCheckpoint` (``resume``; its chunks start at the
  checkpoint's byte) gives exactly the events the whole-file reader gives from there, and one
  given ``stop_byte`` ends before the first item starting at or after it.  A planning read
  (``checkpoints``, ``checkpoint_every``) appends the state at the first item start at or after
  every multiple of ``checkpoint_every`` bytes.
  """

  def __init__(self, chunks: Iterable[bytes], path: str, chunk_chars: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, start_byte: int = 0,
               start_char: int = 0, list_key: Optional[str] = None,
               resume: Optional[ListCheckpoint] = None, stop_byte: Optional[int] = None,
               checkpoints: Optional[List[ListCheckpoint]] = None, checkpoint_every: int = 0):
    if resume is not None:
      start_byte, start_char = resume.byte, resume.char
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
    # Ranges (:mod:`pipelines.sources.json_ranges`): where this reader resumes, where it stops,
    # and, when planning, the list it appends a checkpoint to every ``checkpoint_every`` bytes.
    self._resume = resume
    self._stop = stop_byte
    self._checkpoints = checkpoints
    self._every = max(0, checkpoint_every) if checkpoints is not None else 0
    self._next_checkpoint = self._every
    if resume is not None:
      self._kinds.update(dict(resume.kinds))
      self._keys = set(resume.keys)
      self._any_key = resume.any_key
      self._in_object = resume.in_object
      self._tail = _OBJECT_TAIL if resume.in_object else _TAIL

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
      self._mark_b += byte_len(self._buf[self._mark_i:i])
    else:
      self._mark_b -= byte_len(self._buf[i:self._mark_i])
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
    if self._resume is not None:
      yield from self._items(self._skip_ws(0), self._resume.index)
      return
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
    if i < len(self._buf) and self._buf[i] == "]":
      yield from self._trailer(i + 1, 0)
      return
    yield from self._items(i, 0)

  def _at_boundary(self, i: int, index: int) -> bool:
    """At the start of item ``index`` (``buf[i]``): leaves a checkpoint if one is due (when
    planning); whether the range being read ends here (``stop_byte``)."""
    b = self._byte_at(i)
    if self._every and b >= self._next_checkpoint:
      self._checkpoints.append(ListCheckpoint(
          b, self._base + i, index, tuple(self._kinds.items()),
          tuple(sorted(self._keys)), self._any_key, self._in_object))
      self._next_checkpoint = (b // self._every + 1) * self._every
    return self._stop is not None and b >= self._stop

  def _items(self, i: int, index: int) -> Iterator[Event]:
    """The items from ``buf[i]``, the start of item ``index``, to the list's end (or to
    ``stop_byte``), then what follows the list."""
    while True:
      i -= self._maybe_compact(i)
      if i < len(self._buf) and (self._every or self._stop is not None) and self._at_boundary(
          i, index):
        return
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
                     SURROGATE_ESCAPE.search(self._buf, i, end) is not None)
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
    self._extend_to(p + SNIPPET)
    snippet = self._buf[p:p + SNIPPET]
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
      return whole_file(self._path, reason,
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
        self._extend_to(i + SNIPPET)
        yield fail("invalid_json", f"expecting a key of the top-level object, found "
                   f"{self._buf[i:i + SNIPPET]!r}", i)
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
        self._extend_to(at + SNIPPET)
        yield Unreadable(self._id(index), "invalid_json",
                         f"{message}, after the {self._list_key!r} list ({self._where(at)}): "
                         f"{self._buf[at:at + SNIPPET]!r}", uncertain, self._base + at)
      return
    i = self._skip_ws(i)
    if i < len(self._buf):
      self._extend_to(i + _KEY_SPAN)
      head = self._buf[i:i + _KEY_SPAN]
      itemlike = "{" in head or "[" in head
      yield Unreadable(self._id(index), "invalid_json",
                       f"extra data after the closing ']' at {self._where(i)}: "
                       f"{self._buf[i:i + SNIPPET]!r}"
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

