"""tf.data reader for the ``schemas.records`` pack TFRecords.

One record is one pack of N segments x L tokens and is one global batch, so the reader does not
batch: every dataset element is the feature dict of one pack:

* token features (``token_ids``, ``input_mask``, ``word_start``, ``token_kind``, ``char_begin``,
  ``char_end``) -> int32 ``[N, L]``;
* segment features -> int32 ``[N]`` (bytes ones -> tf.string ``[N]``);
* pack features (``schema_version``, ``pack_id``) -> tf.string scalars;
* ragged span lists -> int32 ``[S]`` (S varies per pack; ``mention_entity_id`` stays int64);
* densified labels: ``answer_begin_labels``/``answer_end_labels`` and
  ``mention_begin_labels``/``mention_end_labels`` int32 ``[N, L]`` multi-hot maps, and
  ``mention_entity_begin`` int64 ``[N, L]`` (entity id at the mention's first token, 0 elsewhere);
* with ``max_mentions=K`` (static-shape entity mentions, e.g. for the ``"entity"`` memory source
  under XLA): ``mentions_segment``, ``mentions_begin``, ``mentions_end`` (inclusive token
  indices, as in the records), ``mentions_entity_id`` and ``mentions_mask`` (1 real, 0 padding),
  each int32 ``[K]``: the pack's first K mentions in record order, zero-padded; and the int32
  scalar ``mentions_dropped``, how many mentions did not fit (0 when all did).
  ``mentions_entity_id`` is ``tf.cast(int64 id, int32)``: ids in the int32 range are unchanged,
  larger ones (e.g. hashed ids) keep their low 32 bits as a two's-complement int32, so they may
  collide with each other or turn into 0 (= unknown); use the int64 ``mention_entity_id`` when
  exact large ids matter.

Record files may be gzip-compressed (``--compression gzip``: ``*.tfrecord.gz``, read with
``compression_type="GZIP"``).  ``dataset_from_output_dir`` follows the manifest's
``config.compression``; without it (older manifests, or ``make_dataset`` on paths) a file is gzip
when its name ends in ``.gz``.

Every path (output dir, manifest, shards) goes through ``tf.io.gfile`` (:data:`GFILE`, the
file operations :mod:`schemas.records_dir` reads a records dir with: manifest checks and shard
lists are that module's), so local dirs, ``gs://`` and TF's in-memory ``ram://`` filesystem all
work.

Schema versions are checked twice: eagerly on the first record of every file (clear
``SchemaVersionError`` before any training starts) and in-graph on every record.
"""

from __future__ import annotations

import numbers
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from schemas import records
from schemas import records_dir as records_dir_lib
from schemas import tfrecord_io

_MAJOR = records.major_version(records.SCHEMA_VERSION)


def feature_spec(seq_length: int, segments_per_pack: int) -> Dict[str, object]:
  """``tf.io.parse_single_example`` spec for one pack."""
  spec = {}
  for f in records.FEATURES:
    dtype = tf.int64 if f.dtype == "int64" else tf.string
    if f.kind == "ragged":
      spec[f.name] = tf.io.VarLenFeature(dtype)
    else:
      size = {"token": segments_per_pack * seq_length, "segment": segments_per_pack,
              "pack": 1}[f.kind]
      spec[f.name] = tf.io.FixedLenFeature([size], dtype)
  return spec


def _major_of(version: tf.Tensor) -> tf.Tensor:
  head = tf.strings.split(tf.reshape(version, [1]), ".").to_tensor(default_value="")[0, 0]
  return tf.strings.to_number(head, tf.int32)


# Entity ids may exceed int32 (e.g. hashed ids); every other int feature fits int32.
_KEEP_INT64 = ("mention_entity_id",)


def _densify(segment: tf.Tensor, position: tf.Tensor, values: tf.Tensor,
             shape: Tuple[int, int]) -> tf.Tensor:
  """Scatters ``values[i]`` at ``(segment[i], position[i])`` into zeros ``[N, L]``
  (max-combined)."""
  indices = tf.stack([segment, position], axis=1)
  return tf.tensor_scatter_nd_max(tf.zeros(shape, values.dtype), indices, values)


def _check_max_mentions(max_mentions: Optional[int]) -> Optional[int]:
  """``max_mentions`` as a Python int (None stays None); ValueError unless an integer >= 1."""
  if max_mentions is None:
    return None
  if (isinstance(max_mentions, bool) or not isinstance(max_mentions, numbers.Integral) or
      max_mentions < 1):
    raise ValueError(f"max_mentions must be None or an int >= 1, got {max_mentions!r}.")
  return int(max_mentions)


def _static_mentions(out: Dict[str, tf.Tensor], k: int) -> Dict[str, tf.Tensor]:
  """The first ``k`` ragged mentions as int32 ``[k]`` features + mask + dropped count."""
  s = tf.shape(out["mention_segment"])[0]
  kept = tf.minimum(s, k)

  def fixed(values: tf.Tensor) -> tf.Tensor:
    values = tf.cast(values[:k], tf.int32)
    return tf.reshape(tf.pad(values, [[0, k - kept]]), [k])

  return {
      "mentions_segment": fixed(out["mention_segment"]),
      "mentions_begin": fixed(out["mention_begin"]),
      "mentions_end": fixed(out["mention_end"]),
      "mentions_entity_id": fixed(out["mention_entity_id"]),
      "mentions_mask": tf.reshape(tf.cast(tf.range(k) < kept, tf.int32), [k]),
      "mentions_dropped": tf.cast(s - kept, tf.int32),
  }


def parse_pack(serialized: tf.Tensor, seq_length: int, segments_per_pack: int,
               max_mentions: Optional[int] = None) -> Dict[str, tf.Tensor]:
  """Parses one serialized pack into the feature dict described in the module docstring.

  Adds an in-graph assertion that the record's schema major version is this reader's.
  ``max_mentions`` (None: not added) adds the static-shape ``mentions_*`` features and
  ``mentions_dropped``.
  """
  max_mentions = _check_max_mentions(max_mentions)
  n, l = segments_per_pack, seq_length
  parsed = tf.io.parse_single_example(serialized, feature_spec(l, n))
  version = parsed["schema_version"][0]
  check = tf.debugging.Assert(
      tf.equal(_major_of(version), _MAJOR),
      [tf.constant(f"SchemaVersionError: record written with another major schema version; "
                   f"this reader understands {records.SCHEMA_NAME} {_MAJOR}.x "
                   f"(current {records.SCHEMA_VERSION}). Record schema_version:"),
       version, tf.constant("pack_id:"), parsed["pack_id"][0]])
  out: Dict[str, tf.Tensor] = {}
  with tf.control_dependencies([check]):
    for f in records.FEATURES:
      value = parsed[f.name]
      if f.kind == "ragged":
        value = tf.sparse.to_dense(value)
      if f.dtype == "int64" and f.name not in _KEEP_INT64:
        value = tf.cast(value, tf.int32)
      if f.kind == "token":
        value = tf.reshape(value, [n, l])
      elif f.kind == "pack":
        value = value[0]
      out[f.name] = tf.identity(value)
  ones = tf.ones_like(out["answer_segment"])
  out["answer_begin_labels"] = _densify(out["answer_segment"], out["answer_begin"], ones, (n, l))
  out["answer_end_labels"] = _densify(out["answer_segment"], out["answer_end"], ones, (n, l))
  mones = tf.ones_like(out["mention_segment"])
  out["mention_begin_labels"] = _densify(out["mention_segment"], out["mention_begin"], mones,
                                         (n, l))
  out["mention_end_labels"] = _densify(out["mention_segment"], out["mention_end"], mones, (n, l))
  out["mention_entity_begin"] = _densify(out["mention_segment"], out["mention_begin"],
                                         out["mention_entity_id"], (n, l))
  if max_mentions is not None:
    out.update(_static_mentions(out, max_mentions))
  return out


def compression_type(path: str, compression: Optional[str] = None) -> str:
  """``TFRecordDataset``'s ``compression_type`` of ``path``: "GZIP" or "".

  ``compression`` ("gzip"/"none", e.g. the manifest's) wins; None decides by the ``.gz`` suffix.
  """
  return "GZIP" if tfrecord_io.compression_of_path(path, compression) == "gzip" else ""


def check_file_version(path: str, compression: Optional[str] = None) -> Optional[str]:
  """Eagerly reads the first record of ``path``; raises SchemaVersionError on a major mismatch.

  Returns the version string (None for an empty file).  ``compression`` as in
  :func:`compression_type`.
  """
  for raw in tf.data.TFRecordDataset([path], compression_type(path, compression)).take(1):
    parsed = tf.io.parse_single_example(
        raw, {"schema_version": tf.io.FixedLenFeature([1], tf.string, default_value=[b""])})
    version = parsed["schema_version"][0].numpy().decode("utf-8", "replace")
    if not version:
      raise records.SchemaVersionError(f"{path}: first record has no schema_version feature.")
    records.check_version(version, where=f"records in {path}")
    return version
  return None


def _expand(file_pattern_or_list: Union[str, Sequence[str]]) -> List[str]:
  patterns = [file_pattern_or_list] if isinstance(file_pattern_or_list, str) else list(
      file_pattern_or_list)
  files: List[str] = []
  for p in patterns:
    matched = sorted(tf.io.gfile.glob(p)) if any(c in p for c in "*?[") else [p]
    files.extend(matched)
  if not files:
    raise FileNotFoundError(f"No record files match {file_pattern_or_list!r}.")
  return files


def _records_of(path: tf.Tensor, ctype: tf.Tensor) -> tf.data.Dataset:
  return tf.data.TFRecordDataset(path, compression_type=ctype)


def make_dataset(file_pattern_or_list: Union[str, Sequence[str]], seq_length: int,
                 segments_per_pack: int, shuffle: bool = False, repeat: bool = False,
                 seed: Optional[int] = 0, shuffle_buffer: int = 64,
                 check_versions: bool = True,
                 compression: Optional[str] = None,
                 max_mentions: Optional[int] = None) -> tf.data.Dataset:
  """Dataset of parsed packs (one element = one pack = one global batch).

  Args:
    file_pattern_or_list: A glob pattern, a path, or a list of those.
    seq_length: L, tokens per segment.
    segments_per_pack: N, segments per pack.
    shuffle: Shuffle file order and packs (seeded by ``seed``: the same seed gives the same
      order, so a run resumed from an iterator checkpoint reads what the first run would).
    repeat: Repeat forever.
    seed: Shuffle seed.
    shuffle_buffer: Pack shuffle buffer size.
    check_versions: Eagerly check the first record of every file.
    compression: "gzip" or "none" for every file (e.g. the manifest's ``config.compression``);
      None (default): per file, gzip when the name ends in ``.gz``.
    max_mentions: If set (>= 1), every pack also gets the static-shape ``mentions_*`` features
      of its first ``max_mentions`` entity mentions and ``mentions_dropped`` (see the module
      docstring); None (default) adds nothing.

  Raises:
    SchemaVersionError: A file's first record has another major schema version.
  """
  max_mentions = _check_max_mentions(max_mentions)
  files = _expand(file_pattern_or_list)
  types = [compression_type(path, compression) for path in files]
  if check_versions:
    for path, ctype in zip(files, types):
      check_file_version(path, "gzip" if ctype else "none")
  ds = tf.data.Dataset.from_tensor_slices((files, types))
  if shuffle:
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  if shuffle:  # deterministic: a seed gives one order, which a resumed run must reproduce
    ds = ds.interleave(_records_of, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True)
  else:
    ds = ds.flat_map(_records_of)
  if shuffle:
    ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
  if repeat:
    ds = ds.repeat()
  # (no AutoGraph: parse_pack has no control flow on tensors, and converting it costs time)
  ds = ds.map(tf.autograph.experimental.do_not_convert(
      lambda x: parse_pack(x, seq_length, segments_per_pack, max_mentions=max_mentions)),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(2)


class RecordsError(ValueError):
  """Records that cannot be read (corrupt, truncated, of another geometry); one line that names
  the file."""


class GFiles:
  """:class:`schemas.records_dir.FileSystem` through ``tf.io.gfile`` (local, ``gs://``,
  ``ram://``)."""

  exists = staticmethod(tf.io.gfile.exists)
  glob = staticmethod(tf.io.gfile.glob)
  isdir = staticmethod(tf.io.gfile.isdir)

  @staticmethod
  def open(path: str) -> BinaryIO:
    return tf.io.gfile.GFile(path, "rb")


GFILE = GFiles()


def read_manifest(output_dir: str) -> Dict:
  """:func:`schemas.records_dir.read_manifest` through ``tf.io.gfile``: the validated manifest
  of a finished pipeline run that wrote records (one-line errors otherwise)."""
  return records_dir_lib.read_manifest(output_dir, GFILE)


def find_corrupt_record(files: Sequence[str], compression: Optional[str] = None,
                        seq_length: Optional[int] = None,
                        segments_per_pack: Optional[int] = None) -> Optional[str]:
  """``"<file>: bad data checksum in record 50."`` for the first corrupt or truncated record of
  ``files`` (read with Python, checksums verified), or None if every record is sound.  Each
  payload is also decoded (:func:`schemas.records_dir.decode_pack`): one that is not a pack (a
  valid checksum around garbage, features missing or of another dtype or, with the geometry
  given, size) is reported with its file and index too."""
  for path in files:
    try:
      for i, payload in enumerate(records_dir_lib.iter_records(
          path, tfrecord_io.compression_of_path(path, compression), GFILE)):
        records_dir_lib.decode_pack(payload, f"{path} record {i}", seq_length,
                                    segments_per_pack)
    except (tfrecord_io.CorruptRecordError, OSError, EOFError,
            tf.errors.NotFoundError) as e:
      text = str(e)
      return text if path in text else f"{path}: {text}"
    except (records_dir_lib.BadRecordError, records.SchemaVersionError) as e:
      return f"bad record {e}"
  return None


# What tf.data raises on records it cannot read or parse: a corrupt or truncated record (data
# loss, out of range), a payload that is not a pack (invalid argument; UnicodeDecodeError when
# the garbage lands in TensorFlow's error message), a shard gone (not found).
_READ_ERRORS = (tf.errors.DataLossError, tf.errors.OutOfRangeError,
                tf.errors.InvalidArgumentError, tf.errors.NotFoundError,
                tf.errors.PermissionDeniedError, UnicodeDecodeError)


def records_error(error: BaseException, records_dirs: Sequence[str]) -> Optional[str]:
  """The one-line message for a TensorFlow error raised while reading ``records_dirs``' records
  (corrupt or truncated record, a payload that is not a pack: the file and record index; a
  listed shard gone), or None if it is not one (then it is not the records' fault: a bug)."""
  if not isinstance(error, _READ_ERRORS):
    return None
  files: List[str] = []
  compression = None
  geometry = (None, None)
  for d in records_dirs:
    try:
      manifest = read_manifest(d)
    except FileNotFoundError as e:  # a listed shard went away while the run read it
      if isinstance(error, (tf.errors.NotFoundError, tf.errors.PermissionDeniedError)):
        return " ".join(str(e).split())
      continue
    except (OSError, ValueError):
      continue
    compression = tfrecord_io.manifest_compression(manifest)
    cfg = manifest.get("config", {})
    geometry = (cfg.get("seq_length"), cfg.get("segments_per_pack"))
    files.extend(record_files(d, manifest))
  found = find_corrupt_record(files, compression, *geometry)
  if found:
    return found if found.startswith("bad record") else f"corrupt records: {found.rstrip('.')}"
  if not isinstance(error, (tf.errors.DataLossError, tf.errors.OutOfRangeError)):
    return None
  if isinstance(error, tf.errors.DataLossError):
    first = " ".join(str(error.message).split("\n")[0].split())
    return f"corrupt records in {', '.join(records_dirs)}: {first}"
  return None


def record_files(output_dir: str, manifest: Optional[Dict] = None) -> List[str]:
  """:func:`schemas.records_dir.shard_paths` through ``tf.io.gfile`` (``manifest`` defaults to
  :func:`read_manifest`'s)."""
  manifest = manifest if manifest is not None else read_manifest(output_dir)
  return records_dir_lib.shard_paths(output_dir, manifest, GFILE)


def dataset_from_output_dir(output_dir: str, shuffle: bool = False, repeat: bool = False,
                            seed: Optional[int] = 0, max_mentions: Optional[int] = None,
                            **kwargs) -> tf.data.Dataset:
  """``make_dataset`` over a pipeline output dir; N, L and the compression of the shards come
  from ``manifest.json`` (no ``config.compression``: by file name).  ``max_mentions`` as in
  :func:`make_dataset`."""
  manifest = read_manifest(output_dir)
  cfg = manifest["config"]
  kwargs.setdefault("compression", tfrecord_io.manifest_compression(manifest))
  return make_dataset(record_files(output_dir, manifest), int(cfg["seq_length"]),
                      int(cfg["segments_per_pack"]), shuffle=shuffle, repeat=repeat, seed=seed,
                      max_mentions=max_mentions, **kwargs)
