"""Reading a Wikipedia job's entity tables (``<dir>/entities/``) from any Beam filesystem.

Workers on Dataflow read ``gs://`` paths with the job's own credentials, through
``apache_beam.io.filesystems.FileSystems``; the formats are :mod:`schemas.entities`.
"""

from __future__ import annotations

import io

import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from schemas import entities as entities_schema


def _read(path: str) -> io.BytesIO:
  with FileSystems.open(path) as f:
    return io.BytesIO(f.read())


def entities_path(output_dir: str, *parts: str) -> str:
  """``<output_dir>/entities/<parts...>`` (a Wikipedia job's output dir)."""
  return FileSystems.join(output_dir, entities_schema.ENTITIES_DIR, *parts)


def has_entities(output_dir: str) -> bool:
  """Whether ``output_dir`` holds a Wikipedia job's entity vocabulary."""
  return FileSystems.exists(entities_path(output_dir, entities_schema.VOCABULARY_FILE))


def read_vocabulary(output_dir: str) -> pa.Table:
  """The entity vocabulary of a Wikipedia job's ``output_dir``."""
  path = entities_path(output_dir, entities_schema.VOCABULARY_FILE)
  return entities_schema.read_vocabulary(_read(path), path)


def alias_paths(output_dir: str) -> list:
  """The alias files of a Wikipedia job's ``output_dir``, sorted; FileNotFoundError when there
  is none."""
  pattern = entities_path(output_dir, f"{entities_schema.ALIASES_PREFIX}-*.parquet")
  paths = sorted(m.path for r in FileSystems.match([pattern]) for m in r.metadata_list)
  if not paths:
    raise FileNotFoundError(f"no alias files match {pattern}")
  return paths


def read_aliases(output_dir: str) -> pa.Table:
  """The alias table of a Wikipedia job's ``output_dir`` (all partitions, counts summed)."""
  paths = alias_paths(output_dir)
  return entities_schema.read_aliases([_read(p) for p in paths], paths)
