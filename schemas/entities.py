"""The entity vocabulary and alias table a pretraining-corpus job writes beside its records.

Both are Parquet files (pyarrow) under ``<output_dir>/entities/``:

* ``vocabulary.parquet`` (:data:`VOCABULARY_SCHEMA`): ``entity_id`` (1..N, in order), ``title``
  (the normalised, redirect-resolved Wikipedia title), ``count`` (mentions in the corpus).
  Ids are sorted by count (descending), then title, so the same corpus and settings give the
  same ids.  Id 0 is reserved for "unknown" (:data:`UNKNOWN_ENTITY_ID`, as ``mention_entity_id``
  in the records); it has no row.
* ``aliases-PPPPP-of-NNNNN.parquet`` (:data:`ALIAS_SCHEMA`): rows (anchor text, entity, count:
  how often that anchor linked to that entity; ``entity_id`` 0 when the entity is outside the
  vocabulary), sorted by alias then title inside a file.  Files are partitions of the link
  targets as written (by a hash of the raw title), so the same (alias, entity) pair can appear
  in several files when redirects lead there: :func:`read_aliases` sums them.  This is the
  entity linker's input.

Pure pyarrow: importable by the pipelines, the trainer and the inspector.
"""

from __future__ import annotations

import io
from typing import Dict, Iterable, List, Sequence, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

ENTITIES_VERSION = "1.0.0"
ENTITIES_DIR = "entities"
VOCABULARY_FILE = "vocabulary.parquet"
ALIASES_PREFIX = "aliases"
UNKNOWN_ENTITY_ID = 0

_META = {b"readtwice.entities.version": ENTITIES_VERSION.encode()}
VOCABULARY_SCHEMA = pa.schema([("entity_id", pa.int64()), ("title", pa.string()),
                               ("count", pa.int64())], metadata=_META)
ALIAS_SCHEMA = pa.schema([("alias", pa.string()), ("entity_id", pa.int64()),
                          ("title", pa.string()), ("count", pa.int64())], metadata=_META)


def rank(counts: Iterable[Tuple[str, int]], min_count: int = 1,
         max_entities: int = 0) -> List[Tuple[int, str, int]]:
  """``(entity_id, title, count)`` rows: titles with ``count >= min_count`` by count
  (descending) then title, at most ``max_entities`` (0: all), ids from 1."""
  kept = sorted(((t, c) for t, c in counts if c >= min_count), key=lambda tc: (-tc[1], tc[0]))
  if max_entities:
    kept = kept[:max_entities]
  return [(i, t, c) for i, (t, c) in enumerate(kept, start=1)]


def _parquet_bytes(table: pa.Table) -> bytes:
  sink = io.BytesIO()
  pq.write_table(table, sink, compression="zstd")
  return sink.getvalue()


def vocabulary_bytes(rows: Sequence[Tuple[int, str, int]]) -> bytes:
  """``vocabulary.parquet`` for :func:`rank`'s rows."""
  ids, titles, counts = (list(c) for c in zip(*rows)) if rows else ([], [], [])
  return _parquet_bytes(pa.table({"entity_id": pa.array(ids, pa.int64()),
                                  "title": pa.array(titles, pa.string()),
                                  "count": pa.array(counts, pa.int64())},
                                 schema=VOCABULARY_SCHEMA))


def aliases_bytes(rows: Sequence[Tuple[str, int, str, int]]) -> bytes:
  """One aliases shard for ``(alias, entity_id, title, count)`` rows (sorted here)."""
  rows = sorted(rows, key=lambda r: (r[0], r[2]))
  cols = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
  alias, ids, titles, counts = cols
  return _parquet_bytes(pa.table({"alias": pa.array(alias, pa.string()),
                                  "entity_id": pa.array(ids, pa.int64()),
                                  "title": pa.array(titles, pa.string()),
                                  "count": pa.array(counts, pa.int64())},
                                 schema=ALIAS_SCHEMA))


def _check(table: pa.Table, schema: pa.Schema, path: str) -> pa.Table:
  version = (table.schema.metadata or {}).get(b"readtwice.entities.version", b"").decode()
  if version.split(".")[0] != ENTITIES_VERSION.split(".")[0]:
    raise ValueError(f"{path}: entity table version {version or 'missing'!r}, this code reads "
                     f"{ENTITIES_VERSION.split('.')[0]}.x")
  if not table.schema.remove_metadata().equals(schema.remove_metadata()):
    raise ValueError(f"{path}: columns {table.schema.names} differ from {schema.names}")
  return table


def read_vocabulary(path, name: str = "") -> pa.Table:
  """A ``vocabulary.parquet`` file (a local or pyarrow filesystem path, or a file object;
  ``name`` for messages), checked."""
  return _check(pq.read_table(path), VOCABULARY_SCHEMA, name or str(path))


def read_aliases(paths: Sequence, names: Sequence[str] = ()) -> pa.Table:
  """The alias files (paths or file objects; ``names`` for messages), checked, as one table
  of (alias, entity) rows sorted by alias then title, the counts of a pair found in several
  files summed."""
  names = list(names) or [str(p) for p in paths]
  tables = [_check(pq.read_table(p), ALIAS_SCHEMA, n) for p, n in zip(paths, names)]
  if not tables:
    return ALIAS_SCHEMA.empty_table()
  table = pa.concat_tables(tables).group_by(["alias", "entity_id", "title"]).aggregate(
      [("count", "sum")]).rename_columns(["alias", "entity_id", "title", "count"])
  return table.select(ALIAS_SCHEMA.names).sort_by([("alias", "ascending"),
                                                   ("title", "ascending")])


def titles_by_id(vocabulary: pa.Table) -> Dict[int, str]:
  """entity id -> title (for inspectors and reports)."""
  return dict(zip(vocabulary.column("entity_id").to_pylist(),
                  vocabulary.column("title").to_pylist()))
