"""TFRecord file framing (length, masked CRC32C, payload, masked CRC32C) without TensorFlow.

Record files may be gzip-compressed (the pipelines' ``--compression gzip``): one plain gzip
stream around the usual framing, which is what ``tf.data.TFRecordDataset(files,
compression_type="GZIP")`` reads, named ``*.tfrecord.gz``.  Readers take the compression from
the manifest (``config.compression``, see :func:`manifest_compression`) when they have one; else
(``compression=None``) they decide per file: a ``.gz`` name is gzip, and otherwise the first
bytes tell (a valid TFRecord header is uncompressed; the gzip magic ``1f 8b`` is gzip).  Files
are streamed in both cases, never read whole.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Any, BinaryIO, Iterator, Mapping, Optional

import google_crc32c

_MASK_DELTA = 0xA282EAD8

NONE = "none"
GZIP = "gzip"
COMPRESSIONS = (NONE, GZIP)
GZIP_SUFFIX = ".gz"
GZIP_MAGIC = b"\x1f\x8b"
_HEADER = 12  # uint64 length + masked CRC32C of the length


def _masked_crc(data: bytes) -> int:
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def encode_record(payload: bytes) -> bytes:
  """One framed TFRecord entry."""
  length = struct.pack("<Q", len(payload))
  return b"".join((length, struct.pack("<I", _masked_crc(length)), payload,
                   struct.pack("<I", _masked_crc(payload))))


class CorruptRecordError(ValueError):
  pass


def check_compression(compression: Optional[str], where: str = "compression") -> None:
  if compression is not None and compression not in COMPRESSIONS:
    raise ValueError(f"{where} must be one of {COMPRESSIONS}, got {compression!r}")


def manifest_compression(manifest: Optional[Mapping[str, Any]]) -> Optional[str]:
  """``config.compression`` of a pipeline manifest ("gzip" or "none").

  None when there is no manifest or it predates the key (its files are uncompressed; readers
  given None detect per file, which finds exactly that).
  """
  if manifest is None:
    return None
  compression = manifest.get("config", {}).get("compression")
  check_compression(compression, "manifest config.compression")
  return compression


def compression_of_path(path: str, compression: Optional[str] = None) -> Optional[str]:
  """``compression`` if given, "gzip" for a ``.gz`` name, else None (look at the bytes)."""
  check_compression(compression)
  if compression is not None:
    return compression
  return GZIP if str(path).endswith(GZIP_SUFFIX) else None


def _looks_like_gzip(head: bytes) -> bool:
  """Gzip magic at the start and not a valid TFRecord length header (which has a CRC)."""
  if not head.startswith(GZIP_MAGIC):
    return False
  if len(head) >= _HEADER:
    length_crc = struct.unpack("<I", head[8:_HEADER])[0]
    if _masked_crc(head[:8]) == length_crc:
      return False
  return True


class _Prefixed:
  """A read-only stream replaying ``head`` (bytes already read) before the rest of ``stream``."""

  def __init__(self, head: bytes, stream: BinaryIO):
    self._head = head
    self._stream = stream

  def read(self, size: int = -1) -> bytes:
    if not self._head:
      return self._stream.read(size)
    if size is None or size < 0:
      out, self._head = self._head + self._stream.read(), b""
      return out
    out, self._head = self._head[:size], self._head[size:]
    if len(out) < size:
      out += self._stream.read(size - len(out))
    return out


class _GzipReader:
  """Streams the decompressed bytes of a gzip stream; bad gzip data -> CorruptRecordError."""

  def __init__(self, stream: BinaryIO, name: str):
    self._gz = gzip.GzipFile(filename="", mode="rb", fileobj=stream)
    self._name = name

  def read(self, size: int = -1) -> bytes:
    try:
      return self._gz.read(size)
    except EOFError as e:
      raise CorruptRecordError(f"{self._name}: truncated gzip stream ({e}).") from e
    except (gzip.BadGzipFile, zlib.error) as e:
      raise CorruptRecordError(f"{self._name}: invalid gzip data ({e}).") from e


def open_stream(stream: BinaryIO, compression: Optional[str] = None,
                name: str = "<stream>") -> BinaryIO:
  """The decompressed bytes of ``stream`` (a binary file opened as is, e.g. with ``open``).

  ``compression``: "gzip", "none", or None to decide from ``name``'s suffix, else the first
  bytes.  Decompression is streamed; corrupt gzip data raises CorruptRecordError when read.
  """
  compression = compression_of_path(name, compression)
  if compression is None:
    head = stream.read(_HEADER)
    stream = _Prefixed(head, stream)
    compression = GZIP if _looks_like_gzip(head) else NONE
  return _GzipReader(stream, name) if compression == GZIP else stream


def iter_records(stream: BinaryIO, name: str = "<stream>",
                 compression: Optional[str] = NONE) -> Iterator[bytes]:
  """Yields payloads of a TFRecord stream, verifying both checksums.

  ``compression`` is "none" (the default: ``stream`` holds the framing itself), "gzip", or
  None to detect it (:func:`open_stream`).
  """
  if compression != NONE:
    stream = open_stream(stream, compression, name)
  index = 0
  while True:
    header = stream.read(_HEADER)
    if not header:
      return
    if len(header) != _HEADER:
      raise CorruptRecordError(f"{name}: truncated header of record {index}.")
    length, length_crc = struct.unpack("<QI", header)
    if _masked_crc(header[:8]) != length_crc:
      raise CorruptRecordError(f"{name}: bad length checksum in record {index}.")
    payload = stream.read(length)
    footer = stream.read(4)
    if len(payload) != length or len(footer) != 4:
      raise CorruptRecordError(f"{name}: truncated record {index}.")
    if struct.unpack("<I", footer)[0] != _masked_crc(payload):
      raise CorruptRecordError(f"{name}: bad data checksum in record {index}.")
    yield payload
    index += 1


def read_records(path: str, compression: Optional[str] = None) -> Iterator[bytes]:
  """Payloads of a local record file; ``compression`` None detects it (``.gz`` or bytes)."""
  with open(path, "rb") as f:
    yield from iter_records(f, str(path), compression)
