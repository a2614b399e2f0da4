"""TFRecord file framing (length, masked CRC32C, payload, masked CRC32C) without TensorFlow."""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterator

import google_crc32c

_MASK_DELTA = 0xA282EAD8


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


def iter_records(stream: BinaryIO, name: str = "<stream>") -> Iterator[bytes]:
  """Yields payloads of an uncompressed TFRecord stream, verifying both checksums."""
  index = 0
  while True:
    header = stream.read(12)
    if not header:
      return
    if len(header) != 12:
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


def read_records(path: str) -> Iterator[bytes]:
  with open(path, "rb") as f:
    yield from iter_records(f, path)
