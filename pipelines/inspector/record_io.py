"""The inspector's reading side: a records dir (or record files) to decoded records.

The records dir layout, manifest validation, the geometry check across dirs, shard lists and
record decoding are :mod:`schemas.records_dir`'s; this module adds what the inspector does
differently from the trainer: it reads through Beam's ``FileSystems`` (so ``gs://`` works
without TensorFlow), it warns instead of failing on a dir without ``COMPLETED`` or without a
manifest (whose ``records-*.tfrecord[.gz]`` files are then read), and it collects the entity
titles that the rendering shows.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from pipelines.inspector.inspect_error import InspectError
from schemas import entities as entities_schema
from schemas import manifest as manifest_schema
from schemas import records_dir as records_dir_lib
from schemas import tfrecord_io

# Keys added to each decoded record by load_records (not features).
FILE_KEY = "_file"
INDEX_KEY = "_index"
# Keys added to the manifest by read_manifest: {directory: compression} and {entity id: title}.
COMPRESSION_KEY = "_compression"
ENTITY_TITLES_KEY = "_entity_titles"


class BeamFiles:
  """:class:`schemas.records_dir.FileSystem` through Beam's ``FileSystems`` (local, ``gs://``).
  Beam is imported on first use."""

  @staticmethod
  def open(path: str) -> BinaryIO:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    return FileSystems.open(path, compression_type="uncompressed")

  @staticmethod
  def exists(path: str) -> bool:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    return FileSystems.exists(path)

  @staticmethod
  def glob(pattern: str) -> List[str]:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    return [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]

  @staticmethod
  def isdir(path: str) -> bool:
    """Local paths only (object stores have no directories): False for ``scheme://``."""
    return "://" not in path and os.path.isdir(path)


BEAM = BeamFiles()


def _dirname(path: str) -> str:
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  return FileSystems.split(path)[0]


def match_paths(patterns: str | Sequence[str]) -> List[str]:
  """Files matching a glob, a comma-separated list of globs, or a list of them (gs:// too);
  for Python use (the command reads a directory's manifest: :func:`records_dir_paths`)."""
  from pipelines.beam.inputs import match_inputs  # pylint: disable=g-import-not-at-top
  from pipelines.errors import UserError  # pylint: disable=g-import-not-at-top

  try:
    return match_inputs(patterns if isinstance(patterns, str) else ",".join(patterns),
                        flag="records")
  except (FileNotFoundError, UserError) as e:
    raise InspectError(getattr(e, "message", None) or str(e)) from e


def records_dir_paths(records_dir: str) -> Tuple[List[str], Optional[Dict[str, Any]], List[str]]:
  """``(shard paths, manifest or None, warnings)`` of a job's output directory.

  The shards are those the manifest lists; without a manifest, the directory's
  ``records-*.tfrecord[.gz]`` files (a warning says so).  A directory without ``COMPLETED``
  gets a warning (its job failed or is still running).  InspectError when the directory is
  missing, is a file or a glob, or a listed shard is missing.
  """
  if any(c in records_dir for c in "*?["):
    parent = _dirname(records_dir.split("*")[0].split("?")[0].split("[")[0]) or "."
    raise InspectError(f"--records_dir takes a job's output directory (where manifest.json "
                       f"lists the shards), not a glob: try --records_dir {parent}")
  local = "://" not in records_dir
  directory = records_dir.rstrip("/") or "/" if local else records_dir.rstrip("/")
  if local and os.path.isfile(directory):
    raise InspectError(f"--records_dir {records_dir} is a file; give the job's output "
                       f"directory (the one holding manifest.json)")
  if local and not os.path.isdir(directory):
    raise InspectError(f"--records_dir {records_dir} does not exist")
  warnings: List[str] = []
  if not BEAM.exists(records_dir_lib.manifest_path(directory)):
    found = records_dir_lib.shard_paths(directory, None, BEAM)
    if not found:
      raise InspectError(f"--records_dir {records_dir} has no manifest.json and no "
                         f"records-*.tfrecord files: is it a job's --output_dir?")
    warnings.append(f"{directory} has no manifest.json (not a complete job's output): reading "
                    f"its {len(found)} records-*.tfrecord file(s); N, L and the tokenizer are "
                    f"not checked")
    return found, None, warnings
  manifest = read_manifest_dirs([directory])
  if not records_dir_lib.is_completed(directory, BEAM):
    warnings.append(f"{directory} has no {manifest_schema.COMPLETED_FILE}: the job that wrote "
                    f"it failed or is still running; its records may be incomplete")
  paths = records_dir_lib.shard_paths(directory, manifest, BEAM)
  missing = [p for p in paths if not BEAM.exists(p)]
  if missing:
    raise InspectError(f"{len(missing)} shard(s) that "
                       f"{records_dir_lib.manifest_path(directory)} lists are missing, e.g. "
                       f"{missing[0]}")
  return paths, manifest, warnings


def read_manifest(paths: Sequence[str]) -> Optional[Dict[str, Any]]:
  """The ``manifest.json`` of the directory holding ``paths``, or None if there is none.

  Raises InspectError when the files lie in several directories whose manifests disagree on
  ``seq_length``, ``segments_per_pack`` or the tokenizer fingerprint.
  """
  return read_manifest_dirs(sorted({_dirname(p) for p in paths}))


def read_manifest_dirs(directories: Sequence[str]) -> Optional[Dict[str, Any]]:
  """:func:`read_manifest` of the manifests in ``directories``: the first one, plus
  ``_paths`` (the manifest files), :data:`COMPRESSION_KEY` and :data:`ENTITY_TITLES_KEY`."""
  found: Dict[str, Dict[str, Any]] = {}  # directory -> manifest
  for directory in sorted(directories, key=records_dir_lib.manifest_path):
    manifest = records_dir_lib.load_manifest(directory, BEAM)
    if manifest is not None:
      found[directory] = manifest
  if not found:
    return None
  try:
    records_dir_lib.check_compatible(list(found), list(found.values()))
  except records_dir_lib.IncompatibleRecordsError as e:
    raise InspectError(str(e)) from None
  manifest = dict(next(iter(found.values())))
  manifest["_paths"] = [records_dir_lib.manifest_path(d) for d in found]
  # Compression of each directory's records ("gzip"/"none"; None: the manifest does not say).
  manifest[COMPRESSION_KEY] = {d: tfrecord_io.manifest_compression(m) for d, m in found.items()}
  # Entity titles by id, from the entity vocabulary a pretraining-corpus job writes beside its
  # records (schemas/entities.py), or the one an annotated job linked with (--entities_dir).
  titles: Dict[int, str] = {}
  sources = set(found) | {m["config"]["entities_dir"] for m in found.values()
                          if (m.get("config") or {}).get("entities_dir")}
  from pipelines.entities import tables as entity_tables  # pylint: disable=g-import-not-at-top
  for directory in sorted(sources):
    if entity_tables.has_entities(directory):
      titles.update(entities_schema.titles_by_id(entity_tables.read_vocabulary(directory)))
  manifest[ENTITY_TITLES_KEY] = titles
  return manifest


def file_compression(path: str, manifest: Optional[Dict[str, Any]] = None) -> Optional[str]:
  """The compression the manifest of ``path``'s directory states, else None (detect)."""
  if not manifest:
    return None
  return manifest.get(COMPRESSION_KEY, {}).get(_dirname(path))


def load_records(paths: Sequence[str], max_records: Optional[int] = None,
                 manifest: Optional[Dict[str, Any]] = None) -> List[Dict]:
  """Decoded records (``{feature: list}``, schema version checked) of ``paths`` in order, at
  most ``max_records``.

  Each dict also holds ``_file`` (its path) and ``_index`` (its position in that file).  Files
  are gzip or not as ``manifest`` (from :func:`read_manifest`) says, else as detected.
  """
  out: List[Dict] = []
  cfg = (manifest or {}).get("config") or {}
  for path in paths:
    payloads = records_dir_lib.iter_records(path, file_compression(path, manifest), BEAM)
    for i, payload in enumerate(payloads):
      if max_records is not None and len(out) >= max_records:
        return out
      rec = records_dir_lib.decode_pack(payload, f"{path} record {i}", cfg.get("seq_length"),
                                        cfg.get("segments_per_pack"))
      rec[FILE_KEY] = path
      rec[INDEX_KEY] = i
      out.append(rec)
  return out
