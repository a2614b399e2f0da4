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
  without a shard list); a listed name that is not a plain ``records-*`` file name in the dir
  (``../other/records-...``, an absolute path, a symlink out of the dir, a FIFO) is a one-line
  ManifestError;
* :func:`iter_packs` / :func:`decode_pack`: every record of a dir parsed into a dict of feature
  lists (``schemas.example_proto``), its ``schema_version`` checked.

File access goes through a :class:`FileSystem` (``open`` for binary reading, ``exists``,
``glob``, ``isdir``): :data:`LOCAL` here; ``model.data.pack_reader.GFILE`` (``tf.io.gfile``:
``gs://``,
``ram://``) in the trainer; Beam's ``FileSystems`` in the inspector.  Importable without
TensorFlow or Beam.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from typing import Any, BinaryIO, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence

from schemas import data_paths
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


class BadRecordError(ValueError):
  """A record whose checksums hold but whose payload is not a pack of this schema (not a
  ``tf.train.Example``, features missing, of another dtype or size); the message names the
  file and the record index."""


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
  check_shards(records_dir, manifest, fs)
  return manifest


def check_shards(records_dir: str, manifest: Mapping[str, Any], fs: FileSystem = LOCAL) -> None:
  """FileNotFoundError (one line naming the shard and ``records_dir``) unless every shard the
  manifest lists is a file that can be opened: checked before any training or prediction
  starts, not halfway through it."""
  for path in shard_paths(records_dir, manifest, fs):
    problem = None
    if not fs.exists(path):
      problem = "is missing"
    elif fs.isdir(path):
      problem = "is a directory"
    else:
      try:
        fs.open(path).close()
      except OSError as e:
        problem = f"cannot be opened ({e.strerror or e})"
    if problem:
      raise FileNotFoundError(
          f"shard {path} listed in {manifest_path(records_dir)} {problem}: the records dir "
          f"{records_dir} is incomplete; re-run the pipeline that wrote it")


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
  listed = [_listed_shard(records_dir, s, i)
            for i, s in enumerate((manifest or {}).get("shards", []))]
  if listed:
    return listed
  return sorted({p for pattern in RECORDS_GLOBS
                 for p in fs.glob(os.path.join(records_dir, pattern))})


def _listed_shard(records_dir: str, entry: Any, index: int) -> str:
  """The path of the manifest's ``shards[index]``: a plain ``records-*.tfrecord[.gz]`` file
  name directly in ``records_dir`` (for a local dir: not a symlink out of it, and a regular
  file if it exists), else a one-line ManifestError naming the manifest and the entry
  (:mod:`schemas.data_paths`: a manifest must not make a reader read another dir's files)."""
  source = f"manifest {manifest_path(records_dir)}"
  name = entry.get("path") if isinstance(entry, Mapping) else None
  if not (isinstance(name, str) and name and not any(c in name for c in "/\\\x00")
          and any(fnmatch.fnmatchcase(name, pattern) for pattern in RECORDS_GLOBS)):
    shown = repr(name if isinstance(name, str) else entry)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    raise manifest_lib.ManifestError(
        f"{source} lists shards[{index}] {shown}, which is not a records-*.tfrecord[.gz] file "
        f"name directly in {records_dir}; the manifest is damaged or was edited (rerun the "
        "pipeline to rewrite it)")
  path = os.path.join(records_dir, name)
  if "://" in records_dir:
    return path
  try:
    data_paths.DataPathPolicy().resolve(records_dir, name, f"shards[{index}]")
    mode = os.stat(path).st_mode
  except data_paths.DataPathError as e:
    raise manifest_lib.ManifestError(f"{source}: {e}") from e
  except OSError:  # missing or unreadable: reported by whoever opens it
    return path
  if not stat.S_ISREG(mode):
    raise manifest_lib.ManifestError(
        f"{source} lists shards[{index}] {name!r}, but {path} is not a regular file (a FIFO, "
        "device or directory); replace it with the shard the pipeline wrote")
  return path


def iter_records(path: str, compression: Optional[str] = None,
                 fs: FileSystem = LOCAL) -> Iterator[bytes]:
  """The payloads of one shard, streamed, checksums verified (CorruptRecordError).
  ``compression``: "gzip", "none", or None to detect it (``.gz`` name, else the first bytes)."""
  with fs.open(path) as f:
    yield from tfrecord_io.iter_records(f, path, compression)


def decode_pack(payload: bytes, where: str = "record", seq_length: Optional[int] = None,
                segments_per_pack: Optional[int] = None) -> Dict[str, List]:
  """One record parsed into ``{feature: list}``; SchemaVersionError if its ``schema_version`` is
  missing or of another major version, BadRecordError if the payload is not an Example or
  lacks a feature of :data:`schemas.records.FEATURES` or holds one of another dtype (or, given
  the manifest's ``seq_length`` and ``segments_per_pack``, of another size).  ``where`` names the
  record in the message."""
  try:
    features = example_proto.decode_example(payload)
  except Exception:  # pylint: disable=broad-except  (protobuf's DecodeError and kin)
    raise BadRecordError(f"{where}: the payload is not a tf.train.Example (its checksums hold, "
                         "so it was written so); the shard is damaged or not a readtwice "
                         "records shard") from None
  version = features.get("schema_version")
  if not version:
    raise records.SchemaVersionError(f"{where} has no schema_version feature.")
  records.check_version(version[0], where)
  check_pack(features, where, seq_length, segments_per_pack)
  return features


def check_pack(features: Mapping[str, List], where: str = "record",
               seq_length: Optional[int] = None, segments_per_pack: Optional[int] = None
               ) -> None:
  """BadRecordError unless ``features`` (a decoded record) holds every feature of the schema
  with its dtype (and, with the geometry given, its size)."""
  missing = [f.name for f in records.FEATURES if f.name not in features]
  if missing:
    raise BadRecordError(f"{where} lacks the features {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''}; not a pack of "
                         f"{records.SCHEMA_NAME} {records.SCHEMA_VERSION}")
  for f in records.FEATURES:
    values = features[f.name]
    want = int if f.dtype == "int64" else bytes
    if values and not isinstance(values[0], want):
      raise BadRecordError(f"{where}: feature {f.name!r} holds {type(values[0]).__name__} "
                           f"values, expected {f.dtype}")
  if seq_length is not None and segments_per_pack is not None:
    try:
      records.validate_record(features, int(segments_per_pack), int(seq_length))
    except records.SchemaVersionError:
      raise
    except ValueError as e:
      raise BadRecordError(f"{where}: {e} (the manifest's geometry: {segments_per_pack} "
                           f"segments of {seq_length} tokens)") from None


def iter_packs(records_dir: str, manifest: Optional[Mapping[str, Any]] = None,
               fs: FileSystem = LOCAL) -> Iterator[Dict[str, List]]:
  """Every record (pack) of ``records_dir``, shard by shard, as :func:`decode_pack` returns it.

  ``manifest`` defaults to :func:`read_manifest`'s (a finished run's); its
  ``config.compression`` decides how the shards are read.
  """
  if manifest is None:
    manifest = read_manifest(records_dir, fs)
  compression = tfrecord_io.manifest_compression(manifest)
  cfg = manifest.get("config", {})
  for path in shard_paths(records_dir, manifest, fs):
    for i, payload in enumerate(iter_records(path, compression, fs)):
      yield decode_pack(payload, f"{path} record {i}", cfg.get("seq_length"),
                        cfg.get("segments_per_pack"))
