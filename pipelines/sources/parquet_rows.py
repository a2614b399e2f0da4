"""The rows of a Parquet file (e.g. a Hugging Face Hub dataset shard) as Python dicts, one batch
of rows in memory at a time.  No Beam pipeline code: only Beam's ``FileSystems`` to open the
file, so that local paths and ``gs://`` work alike.

Hub datasets are stored as Parquet (``<config>/<split>-00000-of-0000N.parquet``, one row per
example, nested ``struct`` / ``list`` columns for the ``datasets`` ``Sequence`` features).  The
file is opened with ``pyarrow.parquet.ParquetFile`` over the (seekable) file ``FileSystems.open``
returns: pyarrow reads the footer, then the requested columns of one row group at a time
(``iter_batches``), so memory stays near one batch of rows, never the whole file.

:func:`is_parquet` tells a Parquet file by its name (``.parquet``) or its first four bytes
(``PAR1``).  :func:`iter_rows` checks that the file is Parquet and has the required columns
(nested fields named with dots: ``entity_pages.wiki_context``) before the first row; a file
that is not Parquet, or lacks a column, raises :class:`ParquetError` with a reason
(``invalid_parquet``, ``missing_columns``) and a one-line detail naming what is missing.
A file damaged after its footer raises :class:`ParquetError` (``invalid_parquet``) where the
damage is met, after the rows before it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

PARQUET_MAGIC = b"PAR1"
PARQUET_SUFFIX = ".parquet"
DEFAULT_BATCH_SIZE = 256  # rows per batch: Hub rows of TriviaQA / NarrativeQA hold whole texts


class ParquetError(ValueError):
  """A file that cannot be read as the expected Parquet table: ``reason`` (``invalid_parquet``,
  ``missing_columns``) and a one-line ``detail``."""

  def __init__(self, reason: str, detail: str):
    super().__init__(detail)
    self.reason = reason
    self.detail = detail


def _open(path: str):
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def is_parquet(path: str) -> bool:
  """Whether ``path`` is to be read as Parquet: its name ends with ``.parquet``, or its first
  four bytes are Parquet's magic ``PAR1`` (a file that cannot be opened is not)."""
  if path.lower().endswith(PARQUET_SUFFIX):
    return True
  try:
    with _open(path) as f:
      return f.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC
  except Exception:  # pylint: disable=broad-except  # the JSON reader then says what is wrong
    return False


def _field_type(schema: pa.Schema, dotted: str) -> Optional[pa.DataType]:
  """The type of a (nested, dotted) column; lists are looked through (``a.b`` of a
  ``list<struct<b>>``); None if there is no such field."""
  parts = dotted.split(".")
  if parts[0] not in schema.names:
    return None
  t = schema.field(parts[0]).type
  for name in parts[1:]:
    while pa.types.is_list(t) or pa.types.is_large_list(t):
      t = t.value_type
    if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
      return None
    t = t.field(name).type
  return t


def missing_columns(schema: pa.Schema, required: Sequence[str]) -> List[str]:
  """The columns of ``required`` (dotted for nested fields) that ``schema`` lacks."""
  return [c for c in required if _field_type(schema, c) is None]


def open_parquet(f, path: str, required: Sequence[str] = ()) -> pq.ParquetFile:
  """``f`` (an open, seekable file) as a ParquetFile with the ``required`` columns;
  ParquetError otherwise."""
  try:
    parquet = pq.ParquetFile(f)
  except (pa.ArrowException, ValueError) as e:
    raise ParquetError("invalid_parquet", f"{path} is not a Parquet file "
                       f"({type(e).__name__}: {str(e)[:200]})") from e
  missing = missing_columns(parquet.schema_arrow, required)
  if missing:
    raise ParquetError("missing_columns", f"{path} has no column(s) {', '.join(missing)} "
                       f"(columns: {', '.join(parquet.schema_arrow.names)})")
  return parquet


def iter_rows(path: str, required: Sequence[str] = (), columns: Optional[Sequence[str]] = None,
              batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[Dict[str, Any]]:
  """The rows of the Parquet file ``path`` in file order, as dicts (nested structs as dicts,
  lists as lists), reading ``batch_size`` rows of one row group at a time.

  ``required``: columns (dotted for nested fields) the file must have; ``columns``: the
  top-level columns to read (None: all).  ParquetError if the file is not Parquet, lacks a
  required column, or is damaged (then after the rows before the damage); storage errors are
  raised as they are."""
  with _open(path) as f:
    parquet = open_parquet(f, path, required)
    present = parquet.schema_arrow.names
    wanted = None if columns is None else [c for c in columns if c in present]
    try:
      for batch in parquet.iter_batches(batch_size=batch_size, columns=wanted):
        yield from batch.to_pylist()
    except (pa.ArrowException, ValueError, OSError) as e:
      if isinstance(e, OSError) and not is_data_error(e):
        raise  # a storage error: the runner retries
      raise ParquetError("invalid_parquet", f"{path} is damaged "
                         f"({type(e).__name__}: {str(e)[:200]})") from e


# What pyarrow's OSErrors say when the file's bytes, not the storage, are at fault.
_DATA_ERRORS = ("thrift", "page header", "corrupt", "invalid", "decompress", "snappy", "zstd",
                "gzip", "unexpected end", "out of bounds", "parquet")


def is_data_error(e: OSError) -> bool:
  """Whether an OSError raised by pyarrow while decoding means damaged Parquet data (pyarrow
  raises those as OSError too; storage errors are left to the runner, which retries)."""
  text = str(e).lower()
  return any(k in text for k in _DATA_ERRORS)
