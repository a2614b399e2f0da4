"""JSON lines: one record per non-blank line, source id ``path:<line number>``.

Lines are split at ``\\n`` from byte chunks, so a line is buffered whole only up to
``max_line_bytes`` (a longer line is skipped, not buffered, and is one dead letter).  Each line
is decoded and parsed on its own: invalid UTF-8 or bad JSON costs that line only (reasons
``invalid_utf8`` / ``invalid_json``, source id ``path:<line>``).  Until the first record, bad
lines are held back, to tell a file that is not JSON lines at all (one dead letter for the
whole file, source id ``path``) from one with a few bad lines: see :func:`read_lines`.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator, List, NamedTuple, Optional, Tuple

from pipelines.sources.json_events import (SNIPPET, SURROGATE_ESCAPE, WS_BYTES, Event, Item,
                                           Unreadable, byte_len, whole_file)

_MAX_LEADING_BAD_LINES = 1000  # none of these is JSON: the file is not JSON lines


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
  if not line.strip(WS_BYTES):
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
    value = json.loads(text)
    return Item(source_id, value, SURROGATE_ESCAPE.search(text) is not None), False
  except json.JSONDecodeError as e:
    at = offset + byte_len(text[:e.pos])
    return Unreadable(source_id, "invalid_json",
                      f"{e.msg} at byte {at} (line {lineno}, column {e.colno}): "
                      f"{text[:SNIPPET]!r}", False, offset), e.pos >= len(text.rstrip())
  except (ValueError, RecursionError) as e:
    return Unreadable(source_id, "invalid_json",
                      f"{type(e).__name__}: {str(e)[:200]} (line {lineno}, byte {offset})",
                      False, offset), False


class LineCheckpoint(NamedTuple):
  """Where :func:`read_lines` may resume: the line after line ``line`` starts at byte ``byte``,
  and a record has been read before it (so every line from there stands alone)."""
  byte: int
  line: int


def read_lines(chunks: Iterable[bytes], path: str, max_line_bytes: int, start_byte: int = 0,
               start_line: int = 0, resume: Optional[LineCheckpoint] = None,
               stop_byte: Optional[int] = None,
               checkpoints: Optional[List[LineCheckpoint]] = None,
               checkpoint_every: int = 0) -> Iterator[Event]:
  """JSON lines: one record per non-blank line, source id ``path:<line number>``.

  Until the first record, bad lines are held back: a file with no JSON line (and at least
  two non-blank lines), or whose first ``_MAX_LEADING_BAD_LINES`` non-blank lines are all bad
  (the rest is not read), or whose first line is an unfinished JSON value (``{``) and second
  line is bad too (one pretty-printed JSON document, e.g. a top-level object, not read
  further) is not JSON lines: one dead letter for the whole file (source id ``path``).
  Once a record is read, every line stands alone.

  Ranges (:mod:`pipelines.sources.json_ranges`): ``resume`` (the chunks then start at its byte)
  reads on from a checkpoint, ``stop_byte`` ends the read before the first line starting at or
  after it.  Planning: with ``checkpoints`` (a list) the first line starting at or after each
  multiple of ``checkpoint_every`` bytes, once a record was read, is appended to it, and lines
  after the first record are not parsed (nothing is yielded for them).
  """
  if resume is not None:
    start_byte, start_line = resume.byte, resume.line
  held: List[Unreadable] = []  # bad lines before the first record
  unfinished = False
  reading = resume is not None
  planning = checkpoints is not None and checkpoint_every > 0
  next_checkpoint = checkpoint_every
  for lineno, offset, line in _iter_lines(chunks, max_line_bytes, start_byte, start_line):
    if reading and (planning or stop_byte is not None):
      if stop_byte is not None and offset >= stop_byte:
        return
      if planning:
        if offset >= next_checkpoint:
          checkpoints.append(LineCheckpoint(offset, lineno - 1))
          next_checkpoint = (offset // checkpoint_every + 1) * checkpoint_every
        continue
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
      yield whole_file(path, "invalid_json",
                        f"not a JSON list ('[' ...) or JSON lines: the file is one JSON value "
                        f"spread over several lines (a pretty-printed object?), not read "
                        f"further; line 1 is unfinished: {held[0].detail}")
      return
    if len(held) >= _MAX_LEADING_BAD_LINES:
      yield whole_file(path, _reason(held),
                        f"not JSON lines: none of the first {len(held)} non-blank lines is "
                        f"JSON, the rest of the file is not read; the first: {held[0].detail}")
      return
  if len(held) >= 2:
    yield whole_file(path, _reason(held),
                      f"not JSON lines: none of its {len(held)} non-blank lines is JSON; the "
                      f"first: {held[0].detail}")
  else:
    yield from held


def _reason(held: List[Unreadable]) -> str:
  return "invalid_utf8" if all(e.reason == "invalid_utf8" for e in held) else "invalid_json"


