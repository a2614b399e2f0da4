"""The records of one JSON source file given as byte chunks: a JSON list, the list under a key
of a JSON object, or JSON lines.  No Beam here; :mod:`pipelines.beam.read` runs it per file.

Forms.  A file whose first non-whitespace byte (after an optional UTF-8 BOM) is ``[`` is one
JSON list (source ids ``path#<index>``).  With ``list_key`` (e.g. ``"Data"`` for TriviaQA's
``{"Data": [...], "Domain": ..., ...}``) a file starting with ``{`` is one JSON object holding
the records as the list under that key, anywhere among its keys (the values of the other keys
are checked, not kept).  Any other file is JSON lines (``path:<line>``).

How.  A list or object file is read by the tolerant reader,
:class:`~pipelines.sources.json_list_recovery.JsonListReader` (Python's ``json`` decoder over a
window of incrementally decoded text: memory near one item plus a chunk), JSON lines by
:func:`~pipelines.sources.json_lines.read_lines`.  Values are what ``json.loads`` gives
(``NaN``, ``Infinity`` and integers of any size included), and the events do not depend on the
chunking.

Why not ijson.  A first pass with ``ijson`` (its C backend) over list files, falling back to
the tolerant reader on any error, was tried and taken out.  It was slower, not faster: 0.42 s
for ``ijson``'s items parser on a 50 MB HotpotQA-style list against 0.31 s for the tolerant
reader (the whole read stage: 0.63 s against 0.53 s, medians of 8 runs).  It stops at the first
error and cannot resume, so the tolerant reader was needed anyway and a damaged file was read
twice.  And it reads some files differently from Python's ``json`` (it rejects ``NaN`` and
numbers beyond 64 bits, decodes lone surrogate escapes its own way, reads items nested deeper
than about 1,000 levels that Python's ``json`` cannot), each needing a guard to keep the
records the same.

What is recovered (each unreadable unit is one :class:`~pipelines.sources.json_events.Unreadable`,
a dead letter; every other record of the file is read):

* Invalid UTF-8 costs only the item / line that holds it (``invalid_utf8``).  A ``\\udc80``
  JSON escape is not invalid UTF-8: the item is read with its lone surrogate and flagged
  (``Item.escapes``), and the read stage replaces it by U+FFFD.
* A corrupt list item costs only that item (``invalid_json``, ``path#<index>``): reading
  resumes at the next plausible item (the kind of value, and for objects one of the first keys,
  the good items have) that decodes and is followed by ``,`` or by the list's end.  A corrupt
  last item is one (certain) dead letter too.
* A missing ``,`` between two whole items costs nothing (both are read;
  :class:`~pipelines.sources.json_events.Repaired`); an empty slot (``,,``, ``[,``) or a
  trailing ``, ]`` is one dead letter; damage in front of an item with no ``,`` after it
  (``, \\xff {...}``, ``{...} xx {...}``) costs the damaged text, not the item after it.
* A truncated list (or object) keeps every whole item before the cut; the rest is one
  *uncertain* dead letter (the number of items lost is unknown).
* Text after the list's ``]`` is one dead letter (uncertain if it looks like further items);
  in an object file, damage in the keys after the list is one dead letter after its items.
* A JSON line that is not JSON, not UTF-8 or longer than ``max_item_chars`` costs that line.

What is not recovered:

* A file that is not UTF-8 JSON text at all is one uncertain dead letter with the path as
  source id, not read further: UTF-16/32, binary or compressed data without its extension
  (seen from its first bytes), a non-list file none of whose first 1,000 non-blank lines is
  JSON, or that is one JSON value over several lines (a pretty-printed object without
  ``list_key``); an object file without its ``list_key`` list, or damaged before it.
* Several adjacent corrupt items, or damage across an item boundary, are one uncertain dead
  letter ("may hold up to N items"): the items in it are lost, their number is not known.
* An item longer than ``max_item_chars``, or nested deeper than Python's recursion limit
  (about 1,000 levels), is a dead letter, not read.  A second ``list_key`` list in an object
  file is not read (one uncertain dead letter).
* Resynchronisation can be fooled (see
  :class:`~pipelines.sources.json_list_recovery.JsonListReader`): a nested value of the items'
  kind and first key right after a ``,`` inside a corrupt item is taken for the next item; a
  corrupt first item whose first key is itself damaged leaves any object acceptable; a file cut
  right after a nested ``}]`` in its last item looks like one corrupt last item (certain).
* Whatever follows damage inside a compressed stream is lost (one uncertain dead letter,
  :mod:`pipelines.beam.read`).
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from typing import Any, Iterable, Iterator, Optional, Tuple

from pipelines.sources.json_events import (DEFAULT_CHUNK_SIZE, DEFAULT_MAX_ITEM_CHARS, WS_BYTES,
                                           Event, Repaired, Unreadable, whole_file)
from pipelines.sources.json_lines import read_lines
from pipelines.sources.json_list_recovery import JsonListReader

_SNIFF = 64  # bytes looked at to tell JSON text from other data
_MAX_INDENT = 1 << 20  # leading blanks on one line beyond this are dropped, not buffered
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # decoded pairs are one character; these not


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
                     list_key: Optional[str] = None, stop_byte: Optional[int] = None,
                     checkpoints: Optional[list] = None,
                     checkpoint_every: int = 0) -> Iterator[Event]:
  """The records and unreadable items of one file given as byte chunks, read once.

  ``list_key``: a file starting with ``{`` is an object whose ``list_key`` holds the records
  (see the module docstring).  ``stop_byte``, ``checkpoints`` and ``checkpoint_every``: read
  only the first range of the file, or plan its ranges (:mod:`pipelines.sources.json_ranges`);
  a file that is neither a list nor JSON lines leaves no checkpoint."""
  stream = iter(chunks)
  head, bom, blanks, newlines = _split_head(stream)
  body = head.lstrip(WS_BYTES)
  verdict = _sniff(body)
  if verdict is not None:
    return iter([whole_file(path, *verdict)])
  rest = itertools.chain([head] if head else [], stream)
  if body.startswith(b"[") or (list_key is not None and body.startswith(b"{")):
    return iter(JsonListReader(rest, path, chunk_size, max_item_chars, bom + blanks, blanks,
                               list_key, stop_byte=stop_byte, checkpoints=checkpoints,
                               checkpoint_every=checkpoint_every))
  return read_lines(rest, path, max_item_chars, bom + blanks, newlines, stop_byte=stop_byte,
                    checkpoints=checkpoints, checkpoint_every=checkpoint_every)


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
