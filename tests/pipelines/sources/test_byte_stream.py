"""Opening source files as byte chunks: decompression by extension, re-reading, and damaged
compressed files told apart from storage errors."""

import bz2
import gzip
import lzma

import pytest

from pipelines.sources import byte_stream
from pipelines.sources.byte_stream import (ByteSource, file_size, is_decompression_error,
                                           raise_if_truncated)

DATA = b"".join(b'{"_id": "q%d", "s": "some text"}\n' % i for i in range(2000))


@pytest.mark.parametrize("name,compress", [("in.jsonl", bytes), ("in.jsonl.gz", gzip.compress),
                                           ("in.jsonl.bz2", bz2.compress),
                                           ("in.jsonl.xz", lzma.compress)])
def test_chunks_are_the_decompressed_bytes_and_can_be_read_again(tmp_path, name, compress):
  path = tmp_path / name
  path.write_bytes(compress(DATA))
  with ByteSource(str(path), 1000) as source:
    chunks = list(source)
    assert b"".join(chunks) == DATA and {len(c) for c in chunks[:-1]} == {1000}
    assert (source.bytes, source.error) == (len(DATA), None)
    first = next(iter(source))  # a second read opens the file anew and counts anew
    assert first == DATA[:1000] and source.bytes == 1000
  assert file_size(str(path)) == path.stat().st_size
  assert file_size(str(tmp_path / "missing.json")) is None


def test_progress_is_called_per_chunk_and_the_position_is_in_the_stored_file(tmp_path):
  path = tmp_path / "in.jsonl.gz"
  blob = gzip.compress(DATA)
  path.write_bytes(blob)
  calls = []
  source = ByteSource(str(path), 4096, lambda: calls.append(source.position()))
  with source:
    n = sum(1 for _ in source)
  assert len(calls) == n and calls == sorted(calls) and 0 < calls[-1] <= len(blob)


def test_a_truncated_compressed_file_ends_early_with_an_error(tmp_path):
  path = tmp_path / "in.jsonl.gz"
  path.write_bytes(gzip.compress(DATA)[:-100])
  with ByteSource(str(path), 1000) as source:
    data = b"".join(source)
    assert 0 < len(data) < len(DATA) and DATA.startswith(data)
    assert source.error.startswith("the compressed file is truncated")
    assert f"after {len(data)} decompressed bytes" in source.error
    list(source)  # read again: the same error, not a stale one
    assert source.error.startswith("the compressed file is truncated")


def test_a_damaged_compressed_file_ends_early_with_an_error(tmp_path):
  blob = bytearray(gzip.compress(DATA, compresslevel=1))
  blob[30:60] = b"\x00" * 30
  path = tmp_path / "in.jsonl.gz"
  path.write_bytes(bytes(blob))
  with ByteSource(str(path), 64) as source:
    list(source)
    assert source.error.startswith("the compressed file is damaged after ")


def test_storage_errors_are_raised(tmp_path, monkeypatch):
  class Broken:
    def read(self, n):
      raise OSError("connection reset")

    def close(self):
      pass

  monkeypatch.setattr(byte_stream, "open_file", lambda p, n: (Broken(), Broken()))
  with pytest.raises(OSError, match="connection reset"):
    list(ByteSource("gs://bucket/in.json.gz"))


def test_truncation_and_decompression_errors_are_told(tmp_path):
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  whole, cut = tmp_path / "whole.txt.gz", tmp_path / "cut.txt.gz"
  whole.write_bytes(gzip.compress(DATA))
  cut.write_bytes(gzip.compress(DATA)[:-100])
  with FileSystems.open(str(whole)) as f:
    f.read()
    raise_if_truncated(f)
  with FileSystems.open(str(cut)) as f:
    f.read()
    with pytest.raises(EOFError, match="truncated") as e:
      raise_if_truncated(f)
  assert is_decompression_error(e.value)
  assert not is_decompression_error(OSError("connection reset"))
  assert is_decompression_error(OSError("Invalid data stream"))
