"""A records dir (one pipeline run's ``--output_dir``) read the one way every reader shares.

A records dir holds the record shards (``records-SSSSS-of-NNNNN.tfrecord[.gz]``, one pack per
record, see :mod:`schemas.records`), the documents side files (:mod:`schemas.documents`),
``manifest.json`` (:mod:`schemas.manifest`) and, when the run finished, an empty ``COMPLETED``.
This module is the only reader of that layout:

* :func:`read_manifest`: the validated manifest of a finished run that wrote records (one-line
  errors for a missing dir or manifest, a run without ``COMPLETED``, one that wrote nothing);
  :func:`load_manifest` validates without the two run checks (``None`` without a manifest), for
  readers that accept unfinished or manifest-less dirs (the inspector, the side-file reader);
* :func:`check_compatible`: several records dirs agree on the segment geometry and tokenizer;
* :func:`shard_paths`: the shards the manifest lists (a ``records-*`` glob for manifests
  without a shard list);
* :func:`iter_packs` / :func:`decode_pack`: every record of a dir parsed into a dict of feature
  lists (``schemas.example_proto``), its ``schema_version`` checked.

File access goes through a :class:`FileSystem` (``open`` for binary reading, ``exists``,
``glob``, ``isdir``): :data:`LOCAL` here; ``model.input.GFILE`` (``tf.io.gfile``: ``gs://``,
``ram://``) in the trainer; Beam's ``FileSystems`` in the inspector.  Importable without
TensorFlow or Beam.
"""

from __future__ import annotations

import glob
import os
from typing import Any, BinaryIO, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence

from schemas import example_proto
from schemas import manifest as manifest_lib
from schemas import records
from schemas import tfrecord_io

# The shards' names (plain and gzip); a manifest's ``shards`` names them exactly.
RECORDS_GLOBS = ("records-*.tfrecord", "records-*.tfrecord.gz")


class FileSystem(Protocol):
  """The file operations a records dir is read with.  ``isdir`` is needed by
  :func:`read_manifest` only."""

  def open(self, path: str) -> BinaryIO:
    """``path`` opened for binary reading."""

  def exists(self, path: str) -> bool:
    """Whether ``path`` exists."""

  def glob(self, pattern: str) -> List[str]:
    """The paths matching ``pattern`` (any order)."""

  def isdir(self, path: str) -> bool:
    """Whether ``path`` is a directory."""


class LocalFiles:
  """:class:`FileSystem` on local paths."""

  exists = staticmethod(os.path.exists)
  glob = staticmethod(glob.glob)
  isdir = staticmethod(os.path.isdir)

  @staticmethod
  def open(path: str) -> BinaryIO:
    """The file opened for binary reading."""
    return open(path, "rb")


LOCAL = LocalFiles()


class IncompatibleRecordsError(ValueError):
  """Records dirs read together that differ in segment geometry or tokenizer."""


def manifest_path(records_dir: str) -> str:
  return os.path.join(records_dir, manifest_lib.MANIFEST_FILE)


def is_completed(records_dir: str, fs: FileSystem = LOCAL) -> bool:
  """Whether the run that wrote ``records_dir`` finished (its ``COMPLETED`` marker exists)."""
  return fs.exists(os.path.join(records_dir, manifest_lib.COMPLETED_FILE))


def load_manifest(records_dir: str, fs: FileSystem = LOCAL) -> Optional[Dict[str, Any]]:
  """The validated ``manifest.json`` of ``records_dir``, or None if it has none.

  Raises:
    SchemaVersionError: The manifest is of another major schema version.
    ManifestError: It is incomplete or its counters do not reconcile.
  """
  path = manifest_path(records_dir)
  if not fs.exists(path):
    return None
  with fs.open(path) as f:
    text = f.read().decode("utf-8")
  return manifest_lib.loads(text, source=f"manifest {path}")


def read_manifest(records_dir: str, fs: FileSystem = LOCAL) -> Dict[str, Any]:
  """The validated manifest of a finished run that wrote records.

  Raises:
    FileNotFoundError: ``records_dir`` is not a directory, or has no ``manifest.json``.
    SchemaVersionError: The manifest is of another major schema version.
    ManifestError: The manifest is invalid, the run has no ``COMPLETED`` (it failed or is
      running), or it wrote no records.
  """
  if not fs.isdir(records_dir):
    raise FileNotFoundError(f"{records_dir} does not exist or is not a directory (expected a "
                            "pipeline's --output_dir)")
  manifest = load_manifest(records_dir, fs)
  if manifest is None:
    raise FileNotFoundError(f"{manifest_path(records_dir)} does not exist: {records_dir} is not "
                            "the output directory of a finished pipeline run")
  if not is_completed(records_dir, fs):
    raise manifest_lib.ManifestError(
        f"{records_dir} has no {manifest_lib.COMPLETED_FILE}: its pipeline run failed or has "
        "not finished")
  if not manifest.get("counts", {}).get("written", 1) and not manifest.get(
      "examples", {}).get("packs"):
    raise manifest_lib.ManifestError(
        f"{records_dir} holds no records (its manifest counts 0 written documents); see "
        f"{records_dir}/{manifest_lib.DEAD_LETTER_DIR}/ for why")
  return manifest


# What records read together (trained on, rendered in one page) must agree on.
_GEOMETRY = (("seq_length", lambda m: m.get("config", {}).get("seq_length")),
             ("segments_per_pack", lambda m: m.get("config", {}).get("segments_per_pack")),
             ("tokenizer", lambda m: m.get("tokenizer", {}).get("fingerprint")))


def check_compatible(records_dirs: Sequence[str], manifests: Sequence[Mapping[str, Any]]
                     ) -> None:
  """IncompatibleRecordsError unless every manifest has the first one's ``seq_length``,
  ``segments_per_pack`` and tokenizer fingerprint (``manifests[i]`` is ``records_dirs[i]``'s)."""
  first = manifests[0]
  for d, m in zip(records_dirs[1:], manifests[1:]):
    for what, get in _GEOMETRY:
      if get(m) != get(first):
        raise IncompatibleRecordsError(
            f"{d} has {what} {get(m)!r} but {records_dirs[0]} has {get(first)!r}; records "
            "trained together must agree")


def shard_paths(records_dir: str, manifest: Optional[Mapping[str, Any]],
                fs: FileSystem = LOCAL) -> List[str]:
  """The record shards of ``records_dir``: those ``manifest`` lists, else (no manifest, or one
  written before the shard list) the dir's ``records-*.tfrecord[.gz]`` files, sorted."""
  listed = [os.path.join(records_dir, s["path"]) for s in (manifest or {}).get("shards", [])]
  if listed:
    return listed
  return sorted({p for pattern in RECORDS_GLOBS
                 for p in fs.glob(os.path.join(records_dir, pattern))})


def iter_records(path: str, compression: Optional[str] = None,
                 fs: FileSystem = LOCAL) -> Iterator[bytes]:
  """The payloads of one shard, streamed, checksums verified (CorruptRecordError).
  ``compression``: "gzip", "none", or None to detect it (``.gz`` name, else the first bytes)."""
  with fs.open(path) as f:
    yield from tfrecord_io.iter_records(f, path, compression)


def decode_pack(payload: bytes, where: str = "record") -> Dict[str, List]:
  """One record parsed into ``{feature: list}``; SchemaVersionError if its ``schema_version`` is
  missing or of another major version (``where`` names the record in the message)."""
  features = example_proto.decode_example(payload)
  version = features.get("schema_version")
  if not version:
    raise records.SchemaVersionError(f"{where} has no schema_version feature.")
  records.check_version(version[0], where)
  return features


def iter_packs(records_dir: str, manifest: Optional[Mapping[str, Any]] = None,
               fs: FileSystem = LOCAL) -> Iterator[Dict[str, List]]:
  """Every record (pack) of ``records_dir``, shard by shard, as :func:`decode_pack` returns it.

  ``manifest`` defaults to :func:`read_manifest`'s (a finished run's); its
  ``config.compression`` decides how the shards are read.
  """
  if manifest is None:
    manifest = read_manifest(records_dir, fs)
  compression = tfrecord_io.manifest_compression(manifest)
  for path in shard_paths(records_dir, manifest, fs):
    for i, payload in enumerate(iter_records(path, compression, fs)):
      yield decode_pack(payload, f"{path} record {i}")
