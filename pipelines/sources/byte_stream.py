"""A source file by path as byte chunks: local or ``gs://`` (through Beam's ``FileSystems``),
decompressed by its extension (``.gz``, ``.bz2``, ``.xz``, ``.zst``, ``.deflate``, as
``FileSystems.open`` would).

A damaged or truncated compressed file is told apart from a storage error: the first ends the
chunks early and is reported (:attr:`ByteSource.error`), the second is raised, so that the
runner retries.  Each iteration of a :class:`ByteSource` opens the file anew.
"""

from __future__ import annotations

import lzma
import zlib
from typing import Any, Callable, Iterator, Optional, Tuple

from apache_beam.io.filesystem import CompressedFile, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipelines.sources.json_events import DEFAULT_CHUNK_SIZE


def open_file(path: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Tuple[Any, Optional[Any]]:
  """``(file, stored)``: ``file`` yields the file's bytes, decompressed by its extension (``.gz``,
  ``.bz2``, ``.zst``, ... as ``FileSystems.open`` would); ``stored`` is the raw compressed file
  (None if uncompressed).  Beam's default decompresses 16 MiB of input at a time; here each read
  takes ``chunk_size`` bytes of input, which bounds memory and makes the position exact."""
  compression = CompressionTypes.detect_compression_type(path)
  raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  if compression == CompressionTypes.UNCOMPRESSED:
    return raw, None
  return CompressedFile(raw, compression_type=compression, read_size=chunk_size), raw


def is_compressed(path: str) -> bool:
  """Whether ``path`` is read decompressed (by its extension), hence cannot be read from a byte
  offset."""
  return CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED


def is_decompression_error(e: Exception) -> bool:
  """Whether ``e``, raised reading a compressed file, means the file's data is damaged (not that
  the storage failed)."""
  if isinstance(e, (zlib.error, lzma.LZMAError, EOFError)):
    return True
  if type(e).__module__.startswith("zstandard"):
    return True
  return isinstance(e, OSError) and "Invalid data stream" in str(e)  # bz2


def _ended_inside_stream(f) -> bool:
  """Whether ``f`` (as ``FileSystems.open`` returns it), read to its end, is a compressed file
  that ended inside its compressed stream.

  Beam's ``CompressedFile`` then returns what it decoded as if it were the whole file, and has
  no public way to tell; its decompressor (a ``zlib`` / ``bz2`` / ``lzma`` / ``zstandard``
  object, whose ``eof`` is public) is its private ``_decompressor``.  This is the one use of a
  Beam private name in the project's readers: the alternative, decompressing here, would
  duplicate ``CompressedFile`` (concatenated members, every format it supports)."""
  decompressor = getattr(f, "_decompressor", None)
  return decompressor is not None and not getattr(decompressor, "eof", True)


def raise_if_truncated(f) -> None:
  """Raises EOFError if ``f`` (as ``FileSystems.open`` returns it), read to its end, is a
  compressed file that ended inside its compressed stream."""
  if _ended_inside_stream(f):
    raise EOFError("the compressed file is truncated: it ends inside its compressed stream")


def file_size(path: str) -> Optional[int]:
  """The stored size of ``path`` in bytes (None if unknown)."""
  try:
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes
  except Exception:  # pylint: disable=broad-except
    return None


class ByteSource:
  """A file's (decompressed) byte chunks; counts bytes and knows the position in the stored file.

  Iterating opens the file and yields its chunks of ``chunk_size`` bytes; iterating again opens
  it anew (``bytes`` and ``error`` then describe the new read).  A compressed file that is
  damaged or truncated ends early and sets ``error``; read errors of the storage itself are
  raised.  ``on_chunk`` is called after each chunk (progress).  ``start``: the first byte read
  (an uncompressed file only; ``bytes`` counts from there).  Close it (or use ``with``).
  """

  def __init__(self, path: str, chunk_size: int = DEFAULT_CHUNK_SIZE,
               on_chunk: Optional[Callable[[], None]] = None, start: int = 0):
    self._path = path
    self._start = start
    self._chunk_size = chunk_size
    self._on_chunk = on_chunk
    self._file = None
    self._stored = None
    self.bytes = 0
    self.error: Optional[str] = None

  def __iter__(self) -> Iterator[bytes]:
    self.close()
    self.bytes, self.error = 0, None
    self._file, self._stored = open_file(self._path, self._chunk_size)
    if self._start:
      if self._stored is not None:
        raise ValueError(f"{self._path}: a compressed file cannot be read from byte "
                         f"{self._start}")
      self._file.seek(self._start)
    return self._chunks(self._file, self._stored)

  def _chunks(self, f, stored) -> Iterator[bytes]:
    while True:
      try:
        data = f.read(self._chunk_size)
      except Exception as e:  # pylint: disable=broad-except
        if stored is None or not is_decompression_error(e):
          raise
        self.error = (f"the compressed file is damaged after {self.bytes} decompressed bytes "
                      f"({type(e).__name__}: {str(e)[:200]})")
        return
      if not data:
        if stored is not None and _ended_inside_stream(f):
          self.error = (f"the compressed file is truncated: it ends inside its compressed "
                        f"stream, after {self.bytes} decompressed bytes")
        return
      self.bytes += len(data)
      if self._on_chunk is not None:
        self._on_chunk()
      yield data

  def position(self) -> Optional[int]:
    """Bytes of the stored file consumed so far (None if unknown)."""
    if self._stored is None:
      return self._start + self.bytes
    try:
      return self._stored.tell()
    except Exception:  # pylint: disable=broad-except
      return None

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
      self._file, self._stored = None, None

  def __enter__(self) -> ByteSource:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
