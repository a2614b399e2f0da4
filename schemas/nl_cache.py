"""The Cloud Natural Language result cache: what ``analyzeEntities`` returned for a text.

A cache is a directory (local or ``gs://``) of Parquet files ``part-<time>-<uuid>.parquet``
(:data:`CACHE_SCHEMA`), each written whole by one worker (new results of one bundle), never
modified afterwards, so jobs running at the same time can share a directory.  One row per
request text (a document, or a piece of a long document):

* ``key``: :func:`cache_key` (SHA-256 over the API version, the request options and the text);
  the same key in several files holds the same result (two workers paid for it once each);
* ``api_version`` (e.g. ``language_v1``), ``options`` (the request options as canonical JSON,
  e.g. ``{"encoding_type": "UTF32", "language": ""}``), ``characters`` (code points of the text,
  what the API bills: one unit per started 1,000), ``language`` (as the API detected it) and
  ``created_at`` (ISO 8601, UTC);
* ``mentions``: every entity mention of the response, in response order, as
  :data:`MENTION_TYPE` structs: ``begin``/``end`` code-point offsets into the request text
  (``encoding_type=UTF32``), the mention's ``mention_type`` (``PROPER``/``COMMON``), and its
  entity's ``name``, ``entity_type`` (``PERSON``, ...), ``wikipedia_url`` and ``mid`` (``""``
  when absent) and ``salience``.  Filtering (which mention types a job keeps) happens when a
  result is used, so one cached result serves every setting.

Pure pyarrow: importable by the pipelines and by analysis tools.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any, Dict, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

CACHE_VERSION = "1.0.0"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"

MENTION_TYPE = pa.struct([("begin", pa.int64()), ("end", pa.int64()),
                          ("mention_type", pa.string()), ("name", pa.string()),
                          ("entity_type", pa.string()), ("wikipedia_url", pa.string()),
                          ("mid", pa.string()), ("salience", pa.float32())])
CACHE_SCHEMA = pa.schema([("key", pa.string()), ("api_version", pa.string()),
                          ("options", pa.string()), ("characters", pa.int64()),
                          ("language", pa.string()), ("created_at", pa.string()),
                          ("mentions", pa.list_(MENTION_TYPE))],
                         metadata={b"readtwice.nl_cache.version": CACHE_VERSION.encode()})


def canonical_options(options: Mapping[str, Any]) -> str:
  """The request options as the JSON that keys the cache (sorted keys, no spaces)."""
  return json.dumps(dict(options), sort_keys=True, separators=(",", ":"))


def cache_key(api_version: str, options: str, text: str) -> str:
  """The hex SHA-256 of ``api_version``, ``options`` (:func:`canonical_options`) and ``text``."""
  h = hashlib.sha256()
  for part in (api_version, options, text):
    data = part.encode("utf-8", "surrogatepass")
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)
  return h.hexdigest()


def part_bytes(rows: Iterable[Dict[str, Any]]) -> bytes:
  """One cache file for ``rows`` (dicts with :data:`CACHE_SCHEMA`'s fields)."""
  table = pa.Table.from_pylist(list(rows), schema=CACHE_SCHEMA)
  sink = io.BytesIO()
  pq.write_table(table, sink, compression="zstd")
  return sink.getvalue()


def read_part(data: bytes, path: str = "<bytes>") -> pa.Table:
  """A cache file's table; ValueError naming ``path`` when it is not a cache file of this
  version (other columns, or another major version)."""
  try:
    table = pq.read_table(io.BytesIO(data))
  except (pa.ArrowInvalid, OSError) as e:
    raise ValueError(f"{path}: not a Parquet file ({e})") from None
  version = (table.schema.metadata or {}).get(b"readtwice.nl_cache.version", b"").decode()
  if version.split(".")[0] != CACHE_VERSION.split(".")[0]:
    raise ValueError(f"{path}: cache version {version or 'missing'!r}, this code reads "
                     f"{CACHE_VERSION}")
  if not table.schema.remove_metadata().equals(CACHE_SCHEMA.remove_metadata()):
    raise ValueError(f"{path}: columns {table.schema.names} differ from the cache schema "
                     f"{CACHE_SCHEMA.names}")
  return table
