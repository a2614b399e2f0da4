"""Deterministic shard names and atomic file writes, for every writer of a job's output dir
(the record/side-file shards of :mod:`pipelines.beam.writer`, the entity tables of
:mod:`pipelines.entities`): plain functions over Beam's ``FileSystems`` (local, ``gs://``), no
pipeline code, so any layer may use them.

``write_atomically`` writes to a temporary file (under the job's ``.tmp/``, or ``.tmp-<uuid>-``
beside the target: never a name an output glob such as ``records-*`` matches), optionally
gzipped (level 1, mtime 0: byte-identical runs) by a write-behind thread, then renames it over
the target; a failed write deletes its temporary file.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import queue
import threading
import uuid
from typing import Any, Callable, Iterable, Optional

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from schemas import tfrecord_io
from pipelines import keys
from schemas import fault_hook as faults
from pipelines.errors import UserError, disk_full_message, is_disk_full

LOGGER = logging.getLogger("pipelines")


def shard_of(key: str, num_shards: int) -> int:
  """Shard of a key; only its group (:func:`pipelines.keys.group_of`) counts, so all elements
  of one group (e.g. the sub-documents of a document) land in the same shard."""
  group = keys.group_of(key)
  digest = hashlib.sha256(group.encode("utf-8")).digest()
  return int.from_bytes(digest[:8], "big") % num_shards


def shard_name(prefix: str, shard: int, num_shards: int, suffix: str) -> str:
  return f"{prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


def frame_tfrecord(payload: bytes) -> bytes:
  return tfrecord_io.encode_record(payload)


def frame_line(payload: bytes) -> bytes:
  return payload + b"\n"


# Output compression (``--compression``): "gzip" is a plain gzip stream around the file's
# bytes (TFRecord framing inside, as ``tf.data.TFRecordDataset(compression_type="GZIP")`` and
# ``TFRecordWriter`` with GZIP options read and write it; JSON lines inside for side files).
# Level 1 (fast; ~29% of the raw record bytes); mtime 0 and no file name in the header, so the
# bytes depend on the content only.
# The values and the ``.gz`` suffix are the contract's (``schemas.tfrecord_io``), which the
# readers follow.
COMPRESSIONS = tfrecord_io.COMPRESSIONS
GZIP_LEVEL = 1


def compressed_suffix(compression: str) -> str:
  return tfrecord_io.GZIP_SUFFIX if compression == tfrecord_io.GZIP else ""


class _Counting:
  """A write-only file wrapper counting the bytes that reach the file."""

  def __init__(self, f):
    self._f = f
    self.size = 0

  def write(self, data: bytes) -> int:
    self._f.write(data)
    self.size += len(data)
    return len(data)

  def flush(self) -> None:
    pass


class _WriteBehind:
  """Calls ``write`` on the chunks it is given, in order, in a thread of its own.

  File writes and gzip compression release the GIL, so the caller makes the next chunks while
  the previous ones reach the file.  At most ``depth`` chunks wait.  A failed write is raised
  again in the caller (at its next ``put`` or at the end); nothing after it is written.
  """

  def __init__(self, write: Callable[[bytes], Any], depth: int = 8):
    self._write = write
    self._queue: "queue.Queue[Optional[bytes]]" = queue.Queue(maxsize=depth)
    self._error: Optional[BaseException] = None
    self._thread = threading.Thread(target=self._run, name="write-behind", daemon=True)

  def _run(self) -> None:
    while True:
      chunk = self._queue.get()
      if chunk is None:
        return
      if self._error is None:
        try:
          self._write(chunk)
        except BaseException as e:  # pylint: disable=broad-except  # re-raised by the caller
          self._error = e

  def put(self, chunk: bytes) -> None:
    if self._error is not None:
      raise self._error
    self._queue.put(chunk)

  def __enter__(self) -> "_WriteBehind":
    self._thread.start()
    return self

  def __exit__(self, *exc_info) -> None:
    self._queue.put(None)
    self._thread.join()
    if self._error is not None and exc_info[0] is None:
      raise self._error


TMP_DIR = ".tmp"  # a job's temporary files: <output_dir>/.tmp/ (spill files, shards being written)
TMP_PREFIX = ".tmp-"  # a temporary file written next to its final path (no tmp_dir given)


def tmp_dir_of(output_dir: str) -> str:
  """Where a job keeps its temporary files: no records (or other output) glob matches them."""
  return FileSystems.join(output_dir, TMP_DIR)


def write_atomically(path: str, chunks: Iterable[bytes], compression: str = "none",
                     tmp_dir: Optional[str] = None) -> int:
  """Writes to a temporary file and renames it over ``path``; returns the file's bytes.

  The temporary file is ``<tmp_dir>/<uuid>-<name>`` when ``tmp_dir`` is given (a job's
  ``.tmp/``), else ``.tmp-<uuid>-<name>`` beside ``path``: never a name that an output glob
  such as ``records-*`` matches.  It is deleted when the write fails.  The chunks are written
  (and compressed) by a :class:`_WriteBehind` thread while the caller's iterator makes the
  next ones."""
  if compression not in COMPRESSIONS:
    raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
  directory, name = FileSystems.split(path)
  tmp = (FileSystems.join(tmp_dir, f"{uuid.uuid4().hex}-{name}") if tmp_dir
         else FileSystems.join(directory, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name}"))
  try:
    # Uncompressed: the bytes are exactly the given ones (Beam would gzip a .gz name itself).
    with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      counting = _Counting(f)
      gz = (gzip.GzipFile(filename="", mode="wb", fileobj=counting, compresslevel=GZIP_LEVEL,
                          mtime=0) if compression == tfrecord_io.GZIP else None)
      with _WriteBehind(gz.write if gz is not None else counting.write) as behind:
        for chunk in chunks:
          behind.put(chunk)
      if gz is not None:
        gz.close()
      faults.fault_point(_fault_phase(name), path)  # test-only (READTWICE_FAULT_AT)
    size = counting.size
    if FileSystems.exists(path):
      FileSystems.delete([path])
    elif "://" not in path:  # rename does not make the directory (create did, for tmp's)
      os.makedirs(directory or ".", exist_ok=True)
    FileSystems.rename([tmp], [path])
  except BaseException as e:
    try:
      if FileSystems.exists(tmp):
        FileSystems.delete([tmp])
    except Exception:  # pylint: disable=broad-except  # keep the write's own error
      pass
    if is_disk_full(e):  # one line naming the file (a UserError crosses the worker boundary)
      raise UserError(disk_full_message(path)) from e
    raise
  return size


def _fault_phase(name: str) -> str:
  """The phase of :mod:`schemas.fault_hook` that writing a file called ``name`` is."""
  if name.startswith("records-"):
    return "shards"
  if name == "manifest.json":
    return "manifest"
  if name.startswith(("documents-", "dead_letter-", "skipped-")):
    return "side"
  return ""
