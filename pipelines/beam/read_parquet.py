"""The Beam read stage of a job whose inputs may be Parquet (Hugging Face Hub) or JSON files:
paths -> ``(source_id, record)``, with the outputs and counters of the JSON read stage
(:mod:`pipelines.beam.read`), so that the rest of a dataset's graph is the same for both.

Each path is read by its kind (:func:`pipelines.sources.parquet_rows.is_parquet`: a ``.parquet``
name or the magic bytes ``PAR1``): JSON files exactly as :class:`pipelines.beam.read.
ReadJsonRecords` reads them; Parquet files row by row, one batch of a row group at a time
(:func:`pipelines.sources.parquet_rows.iter_rows`), each row mapped by the dataset's
:class:`HubSchema` to the dict its reader parses for the official JSON layout (so parsing,
labelling and ids stay one code path).  A row's source id is ``path#index`` (the row's index in
the file, from 0), as for the items of a JSON list.

A Parquet file that is not Parquet, or lacks a required column, is one uncertain dead letter
(stage ``read``, reason ``invalid_parquet`` / ``missing_columns``, source id: the path; counter
``read/invalid_parquet`` / ``read/missing_columns``); a file damaged after some rows gives
those rows, then such a dead letter.  A row the mapping fails on is a dead letter
``invalid_row``.  ``read/bytes`` of a Parquet file is its stored size.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import apache_beam as beam

from pipelines.beam import read
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.progress import Progress
from pipelines.sources.byte_stream import file_size
from pipelines.sources.json_events import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_ITEM_CHARS
from pipelines.sources.json_ranges import DEFAULT_SPLIT_BYTES, JsonRange
from pipelines.sources.parquet_rows import (DEFAULT_BATCH_SIZE, ParquetError, is_parquet,
                                            iter_rows)


@dataclasses.dataclass(frozen=True)
class HubSchema:
  """How a dataset reads the Hub's Parquet rows: the ``required`` columns (dotted for nested
  fields), the top-level ``columns`` to read (None: all) and ``to_record``, one row (a dict)
  -> the record the dataset's JSON reader would give for it (a module-level function, so that
  it pickles).  ``for_file`` (optional): path -> a function ``(row index, row) -> record``
  used instead of ``to_record`` for that file's rows, for records that depend on the file
  (its name, or other rows)."""
  required: Tuple[str, ...]
  to_record: Callable[[Dict[str, Any]], Any]
  columns: Optional[Tuple[str, ...]] = None
  for_file: Optional[Callable[[str], Callable[[int, Dict[str, Any]], Any]]] = None


class _PlanSourceRangesFn(read._PlanRangesFn):  # pylint: disable=protected-access
  """A path -> its ranges: a Parquet file is one (read whole), a JSON file as
  :class:`pipelines.beam.read.ReadJsonRecords` plans it."""

  def splittable(self, path: str, size: Optional[int]) -> bool:
    return super().splittable(path, size) and not is_parquet(path)


class _ReadSourceRangeFn(read._ReadJsonRangeFn):  # pylint: disable=protected-access
  """One range of a JSON file, or a whole Parquet file -> its records; the outputs of the JSON
  reader's DoFn."""

  def __init__(self, hub: HubSchema, batch_size: int = DEFAULT_BATCH_SIZE, **json_kwargs):
    super().__init__(**json_kwargs)
    self._hub = hub
    self._batch_size = batch_size

  def process(self, rng: JsonRange):
    if not is_parquet(rng.path):
      yield from super().process(rng)
      return
    path = rng.path
    stats = dict.fromkeys(self._keys, 0)
    stats["read/files"] = 1
    stats["read/bytes"] = file_size(path) or 0
    start = time.monotonic()
    dead = items = 0
    rows = iter_rows(path, self._hub.required, self._hub.columns, self._batch_size)
    try:
      to_record = (self._hub.for_file(path) if self._hub.for_file is not None
                   else lambda _index, row: self._hub.to_record(row))
      for index, row in enumerate(rows):
        source_id = f"{path}#{index}"
        try:
          value = to_record(index, row)
        except Exception as e:  # pylint: disable=broad-except
          dead += 1
          stats["read/invalid_row"] = stats.get("read/invalid_row", 0) + 1
          yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
              "read", "invalid_row", source_id, f"{type(e).__name__}: {e}"))
          continue
        if self._expand is None:
          stats["read/records"] += 1
          yield source_id, value
          continue
        items += 1
        for record in read._expand_item(self._expand, source_id, value):  # pylint: disable=protected-access
          stats["read/records"] += 1
          yield record
    except ParquetError as e:
      dead += 1
      stats[f"read/{e.reason}"] = stats.get(f"read/{e.reason}", 0) + 1
      stats["read/uncertain_regions"] += 1
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter("read", e.reason, path, e.detail))
    if self._expand is not None:
      stats["read/items"] = items
    for key, counter in self._counters.items():
      if stats[key]:
        counter.inc(stats[key])
    self._dead.inc(dead)
    print_line = (f"{path}: {stats['read/records']:,} records, {dead:,} dead letters "
                  f"(Parquet) in {time.monotonic() - start:,.1f} s")
    Progress("read", every_s=self._progress_every_s).done(lambda _n, _e: print_line)
    yield beam.pvalue.TaggedOutput(read.INPUT_COUNT, stats["read/records"] + dead)
    yield beam.pvalue.TaggedOutput(read.STATS, stats)


class ReadRecords(beam.PTransform):
  """Paths (JSON or Parquet, chosen per file) -> ``(source_id, record)``; outputs
  ``dead_letter``, ``input_count`` and ``stats`` as :class:`pipelines.beam.read.
  ReadJsonRecords`.  ``hub``: how Parquet rows become records; the other arguments are those of
  ``ReadJsonRecords`` (``expand`` applies to both kinds)."""

  def __init__(self, paths: List[str], hub: HubSchema, chunk_size: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS, progress_every_s: float = 10.0,
               list_key: Optional[str] = None, expand: Optional[read.Expander] = None,
               batch_size: int = DEFAULT_BATCH_SIZE, split_bytes: int = DEFAULT_SPLIT_BYTES):
    super().__init__()
    self._paths = paths
    self._plan = _PlanSourceRangesFn(split_bytes, chunk_size, max_item_chars, progress_every_s,
                                     list_key)
    self._fn = _ReadSourceRangeFn(hub, batch_size, chunk_size=chunk_size,
                                  max_item_chars=max_item_chars,
                                  progress_every_s=progress_every_s, list_key=list_key,
                                  expand=expand)

  def expand(self, pbegin: beam.pvalue.PBegin) -> beam.pvalue.DoOutputsTuple:
    return read.read_ranges(pbegin, self._paths, self._plan, self._fn)


def all_parquet(paths: Sequence[str]) -> bool:
  """Whether every one of ``paths`` is a Parquet file (and there is at least one)."""
  return bool(paths) and all(is_parquet(p) for p in paths)
