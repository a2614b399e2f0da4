"""Spilling segmented documents to temporary files, so that memory does not grow with the input.

The shard count is derived from the total segment count, so no shard can be written before
every document is segmented.  Holding the segmented documents until then is what made memory
grow with the input (a runner buffers a PCollection in memory until its consumers may run).
Instead, each bundle of the segment stage appends its documents' payloads to one temporary file
under ``<output_dir>/.tmp/spill/`` as they are produced, and only a small :class:`Entry` per
document (ids, sizes, where its payload lies) travels on through Beam.  Once the shard count
is known, each shard's writer reads back just its own documents, so a worker holds one shard's
documents at a time (bounded by ``--segments_per_shard``), whatever the input size.  The tokens
of a text that several documents read one after the other (a story's questions) are written
once per bundle, and those documents' sub-documents without them (``SubDocument.detached``).

A retried bundle writes a new file (the failed attempt's entries are never committed, so its
file is never read); the job's whole ``.tmp/`` directory is deleted once the output is complete
or the job failed (``pipelines.beam.writer.delete_tmp``).
"""

from __future__ import annotations

import collections
import contextlib
import pickle
import uuid
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from pipelines.errors import UserError, disk_full_message, is_disk_full

SPILL_DIR = "spill"  # under the job's .tmp/ (pipelines.beam.writer.TMP_DIR)


class Ref(NamedTuple):
  """Where one payload lies: ``length`` bytes at ``offset`` of ``path``."""
  path: str
  offset: int
  length: int


class Entry(NamedTuple):
  """One segmented document, without its tokens: what the stages after segmentation need.

  ``labelled`` is None for a document without a question, else whether its question has an
  answer.  The document's spilled payloads lie at ``offset`` of ``path``: its sub-documents
  (``records``, ``records_length`` bytes), then its documents side-file line (``side``).  When
  ``context_offset >= 0`` the sub-documents were spilled without their context tokens, which
  lie in ``context`` (the whole tokenised text, written once for all the documents of a
  bundle that read it, e.g. a story's questions).
  Kept flat and small (~150 bytes pickled): a runner may buffer every entry between stages.
  """
  id: str
  source_id: str
  question_id: str
  labelled: Optional[bool]
  segments: int
  sub_documents: int
  path: str
  offset: int
  records_length: int
  side_length: int
  sub_segments: Tuple[int, ...]  # segments of each sub-document, in order
  context_offset: int = -1
  context_length: int = 0

  @property
  def records(self) -> Ref:
    return Ref(self.path, self.offset, self.records_length)

  @property
  def context(self) -> Optional[Ref]:
    if self.context_offset < 0:
      return None
    return Ref(self.path, self.context_offset, self.context_length)

  @property
  def side(self) -> Ref:
    return Ref(self.path, self.offset + self.records_length, self.side_length)


def encode(value: Any) -> bytes:
  """Spill encoding: pickle protocol 5 (numpy arrays as raw buffers).  The files live only for
  the duration of one job, written and read by the same code."""
  return pickle.dumps(value, protocol=5)


def decode(payload: bytes) -> Any:
  return pickle.loads(payload)


class SpillWriter:
  """Appends payloads to one new file under ``directory``, opened on the first write; writes
  in blocks of ``buffer_bytes`` (one file-system call per block, not per payload)."""

  def __init__(self, directory: str, buffer_bytes: int = 8 << 20):
    self._directory = directory
    self._buffer_bytes = buffer_bytes
    self._file = None
    self._path = ""
    self._offset = 0
    self._buffer = bytearray()

  def write(self, payload: bytes) -> Ref:
    if self._file is None:
      self._path = FileSystems.join(self._directory, f"bundle-{uuid.uuid4().hex}.bin")
      with _disk_full_names(self._path):
        self._file = FileSystems.create(self._path)
      self._offset = 0
    self._buffer += payload
    ref = Ref(self._path, self._offset, len(payload))
    self._offset += len(payload)
    if len(self._buffer) >= self._buffer_bytes:
      self._flush()
    return ref

  def _flush(self) -> None:
    if self._buffer:
      with _disk_full_names(self._path):
        self._file.write(bytes(self._buffer))
      self._buffer.clear()

  def close(self) -> None:
    if self._file is not None:
      self._flush()
      with _disk_full_names(self._path):
        self._file.close()
      self._file = None


@contextlib.contextmanager
def _disk_full_names(path: str):
  """A full disk while writing the spill file ``path`` is one line naming it (a UserError, which
  crosses the worker boundary); the job's cleanup deletes the spill files."""
  try:
    yield
  except OSError as e:
    if is_disk_full(e):
      raise UserError(disk_full_message(path)) from e
    raise


def read(refs: Iterable[Ref]) -> Dict[Ref, bytes]:
  """The payloads of ``refs``, reading each file once, in offset order."""
  by_path: Dict[str, List[Ref]] = collections.defaultdict(list)
  for ref in refs:
    by_path[ref.path].append(ref)
  out: Dict[Ref, bytes] = {}
  for path, group in by_path.items():
    group.sort(key=lambda r: r.offset)
    with FileSystems.open(path, compression_type="uncompressed") as f:
      position = 0
      for ref in group:
        if ref.offset != position:
          f.seek(ref.offset)
        data = f.read(ref.length)
        if len(data) != ref.length:
          raise IOError(f"spill file {path} is shorter than expected ({ref})")
        out[ref] = data
        position = ref.offset + ref.length
  return out


def delete(directory: str) -> int:
  """Deletes the spill files under ``directory`` and the directory; returns how many files."""
  paths = [m.path for m in FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list]
  if paths:
    FileSystems.delete(paths)
  if FileSystems.exists(directory):
    try:
      FileSystems.delete([directory])
    except Exception:  # pylint: disable=broad-except  # object stores have no directories
      pass
  return len(paths)


def spill_dir(output_dir: str) -> str:
  return FileSystems.join(output_dir, ".tmp", SPILL_DIR)

