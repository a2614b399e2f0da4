"""The Beam read stage of JSON source files: paths -> ``(source_id, record)``, dead letters, an
input count and ``read/...`` stats per file.

Each file is opened as a :class:`~pipelines.sources.byte_stream.ByteSource` (local or
``gs://``; ``.gz`` / ``.bz2`` / ``.xz`` ... decompressed by extension) and streamed in chunks
through :func:`~pipelines.sources.json_items.read_json_stream`, so memory stays near one record
plus a few chunks, never the whole file.  Forms (a JSON list, the list under ``list_key`` of a
JSON object, JSON lines), source ids, and what damage costs: see
:mod:`pipelines.sources.json_items`.  A compressed file that is damaged or truncated ends the
read there, as one uncertain ``invalid_compression`` dead letter (storage errors are raised,
so that Beam retries).

``expand`` (optional) splits each readable item into the records it stands for, e.g. one per
TriviaQA question-document pair, the unit of that dataset's evaluation: every record counts as
one input (``read/records``, ``input_count``) and ``read/items`` counts the items.  An item it
returns nothing for, or that it fails on, is passed on as it is (the parser decides).

A dead letter whose region may have held any number of records (a truncated file, a region with
several item-like starts, text outside the list) is *uncertain* (``read/uncertain_regions``):
the manifest's input count is then not exact.

Large files are read in byte ranges by all workers (:mod:`pipelines.sources.json_ranges`): a
planning step reads each uncompressed file of at least twice ``split_bytes`` once, on one
worker, for the item boundaries and reader state every ``split_bytes``; the ranges are
reshuffled, and each is read (parsed, and everything fused after the read: parsing into
Documents, tokenising, ...) where it lands.  The records, dead letters and source ids are those
of a whole-file read.  Compressed and smaller files are one range (read whole).

Outputs: ``records`` (main), ``dead_letter``, ``input_count`` (one int per range) and ``stats``
(one dict of ``read/...`` counters per range, :data:`STAT_KEYS`; ``read/files`` counts a file
once, ``read/splits`` the ranges of a file read in more than one).  Per file, the sum of
``input_count`` equals records plus dead letters.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from schemas import fault_hook as faults
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.progress import Progress
from pipelines.sources.byte_stream import ByteSource, file_size, is_compressed
from pipelines.sources.json_events import (DEFAULT_CHUNK_SIZE, DEFAULT_MAX_ITEM_CHARS, Event,
                                           Item, Repaired, Unreadable)
from pipelines.sources.json_items import replace_lone_surrogates
from pipelines.sources.json_ranges import DEFAULT_SPLIT_BYTES, JsonRange, plan_ranges, read_range

INPUT_COUNT = "input_count"
STATS = "stats"
RECORDS = "records"

# Counters of the ``stats`` output, per file.  ``read/bytes``: the (decompressed) bytes read (of
# a file given up early, e.g. not JSON, what was read); ``read/invalid_*``: dead letters by
# reason; ``read/uncertain_regions``: dead letters that may stand for any number of records.
STAT_KEYS = ("read/files", "read/bytes", "read/records", "read/invalid_json",
             "read/invalid_utf8", "read/invalid_compression", "read/uncertain_regions",
             "read/missing_separators", "read/lone_surrogates")

_NAMESPACE = "readtwice.read"


def _with_source_error(events: Iterable[Event], source: ByteSource, path: str) -> Iterator[Event]:
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


# Splits one item (source id, value) into the records it stands for (see ``expand`` above).
Expander = Callable[[str, Any], Iterable[Tuple[str, Any]]]


def _expand_item(expand: Expander, source_id: str, value: Any) -> List[Tuple[str, Any]]:
  """``expand``'s records of an item; the item itself if it returns none or fails."""
  try:
    out = list(expand(source_id, value))
  except Exception:  # pylint: disable=broad-except
    out = []
  return out or [(source_id, value)]


class _PlanRangesFn(beam.DoFn):
  """One path -> its :class:`~pipelines.sources.json_ranges.JsonRange` s (one, the whole file,
  unless it is an uncompressed file of at least twice ``split_bytes``)."""

  def __init__(self, split_bytes: int = DEFAULT_SPLIT_BYTES,
               chunk_size: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, progress_every_s: float = 10.0,
               list_key: Optional[str] = None):
    super().__init__()
    self._split_bytes = split_bytes
    self._chunk_size = chunk_size
    self._max_item_chars = max_item_chars
    self._progress_every_s = progress_every_s
    self._list_key = list_key

  def splittable(self, path: str, size: Optional[int]) -> bool:
    """Whether ``path`` (of ``size`` bytes, None if unknown) is worth planning (readers of
    other kinds of file say no)."""
    return (self._split_bytes > 0 and not is_compressed(path) and size is not None
            and size >= 2 * self._split_bytes)

  def process(self, path: str):
    size = file_size(path)
    if not self.splittable(path, size):
      yield JsonRange(path, file_size=size)
      return
    progress = Progress("read", every_s=self._progress_every_s)
    source = ByteSource(path, self._chunk_size, lambda: progress.update(
        0, lambda _n, elapsed: f"{path}: planning ranges, {100.0 * source.bytes / size:.1f}%"))
    with source:
      ranges = plan_ranges(source, path, self._split_bytes, self._chunk_size,
                           self._max_item_chars, self._list_key)
    progress.done(lambda _n, elapsed: (
        f"{path}: {len(ranges):,} range(s) of ~{self._split_bytes / 1e6:,.1f} MB planned in "
        f"{elapsed:,.1f} s ({source.bytes / 1e6 / max(elapsed, 1e-9):,.0f} MB/s)"))
    for rng in ranges:  # the readers need not ask the file system again
      yield rng._replace(file_size=size)


class _ReadJsonRangeFn(beam.DoFn):
  """One range of a file -> its records; dead letters, the input count and ``read/...`` stats
  per range."""

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

  def process(self, rng: JsonRange):
    path = rng.path
    stats = dict.fromkeys(self._keys, 0)
    stats["read/files"] = int(rng.number == 0)
    if rng.count > 1 and rng.number == 0:
      stats["read/splits"] = rng.count
    name = path if rng.count == 1 else f"{path} [range {rng.number + 1}/{rng.count}]"
    size = rng.file_size if rng.file_size is not None else file_size(path)
    start = time.monotonic()
    progress = Progress("read", every_s=self._progress_every_s)
    dead = 0
    source = ByteSource(path, self._chunk_size, lambda: progress.update(
        0, lambda _n, elapsed: _progress_line(name, size, source, stats, elapsed)),
                        start=rng.start_byte)
    with source:
      faults.fault_point("read", path)  # test-only (READTWICE_FAULT_AT)
      events = read_range(source, rng, self._chunk_size, self._max_item_chars, self._list_key)
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
    stats["read/bytes"] = (source.bytes if rng.last
                           else rng.stop_byte - rng.start_byte)  # the range's own bytes
    for key, counter in self._counters.items():
      if stats[key]:
        counter.inc(stats[key])
    self._dead.inc(dead)
    progress.done(lambda _n, _e: (
        f"{name}: {stats['read/records']:,} records, {dead:,} dead letters, "
        f"{stats['read/bytes'] / 1e6:,.1f} MB in {time.monotonic() - start:,.1f} s"))
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, stats["read/records"] + dead)
    yield beam.pvalue.TaggedOutput(STATS, stats)


def _progress_line(name: str, size: Optional[int], source: ByteSource, stats: dict,
                   elapsed: float) -> str:
  """``<path> <percent of the stored bytes>% (<n> records, <MB/s>)``; MB instead of a percent
  where the position in the stored (compressed) file is unknown."""
  rate = source.bytes / 1e6 / elapsed if elapsed > 0 else 0.0
  pos = source.position()
  where = (f"{100.0 * pos / size:.1f}%" if size and pos is not None
           else f"{source.bytes / 1e6:,.1f} MB")
  return f"{name} {where} ({stats['read/records']:,} records, {rate:,.1f} MB/s)"


class ReadJsonRecords(beam.PTransform):
  """Paths -> ``(source_id, record)``; outputs ``dead_letter``, ``input_count`` and ``stats``.

  The source id (``path#index`` or ``path:line``; a dead letter for a whole file: ``path``)
  maps every record and dead letter back to its input.
  ``chunk_size`` (bytes per read) and ``max_item_chars`` (largest item / line buffered) bound
  the memory of the read.  ``list_key``: a file that is one JSON object holds its records as
  the list under this key (e.g. ``"Data"``, TriviaQA); ``expand``: splits each item into the
  records it stands for (both: see the module docstring).  ``split_bytes``: the nominal size of
  the byte ranges a large file is read in (0: every file whole).
  """

  def __init__(self, paths: List[str], chunk_size: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, progress_every_s: float = 10.0,
               list_key: Optional[str] = None, expand: Optional[Expander] = None,
               split_bytes: int = DEFAULT_SPLIT_BYTES):
    super().__init__()
    self._paths = paths
    self._plan = _PlanRangesFn(split_bytes, chunk_size, max_item_chars, progress_every_s,
                               list_key)
    self._fn = _ReadJsonRangeFn(chunk_size, max_item_chars, progress_every_s, list_key, expand)

  def expand(self, pbegin: beam.pvalue.PBegin) -> beam.pvalue.DoOutputsTuple:
    return read_ranges(pbegin, self._paths, self._plan, self._fn)


def read_ranges(pbegin: beam.pvalue.PBegin, paths: List[str], plan: beam.DoFn,
                read: beam.DoFn) -> beam.pvalue.DoOutputsTuple:
  """Paths -> ranges (``plan``), spread over the workers -> records (``read``, with the
  outputs of :class:`ReadJsonRecords`)."""
  return (pbegin | "Paths" >> beam.Create(paths)
          | "PlanRanges" >> beam.ParDo(plan)
          | "SpreadRanges" >> beam.Reshuffle()
          | "Read" >> beam.ParDo(read).with_outputs(
              DEAD_LETTER, INPUT_COUNT, STATS, main=RECORDS))
