"""TF-free readers of gzip-compressed outputs: record files and the documents side files."""

import gzip
import io
import json
import os

import pytest

from schemas import documents, records, tfrecord_io

PAYLOADS = [b"first", b"", b"x" * 70000, b"last"]


def _framed(payloads=PAYLOADS) -> bytes:
  return b"".join(tfrecord_io.encode_record(p) for p in payloads)


def _gz(data: bytes) -> bytes:
  return gzip.compress(data, compresslevel=1, mtime=0)


def test_read_records_gzip_by_suffix_by_magic_and_by_argument(tmp_path):
  (tmp_path / "r.tfrecord.gz").write_bytes(_gz(_framed()))
  (tmp_path / "r.tfrecord").write_bytes(_framed())
  (tmp_path / "unnamed").write_bytes(_gz(_framed()))
  for name in ("r.tfrecord.gz", "r.tfrecord", "unnamed"):
    assert list(tfrecord_io.read_records(str(tmp_path / name))) == PAYLOADS, name
  assert list(tfrecord_io.read_records(str(tmp_path / "unnamed"), "gzip")) == PAYLOADS
  # The caller's (manifest's) compression wins over the name.
  with pytest.raises(tfrecord_io.CorruptRecordError):
    list(tfrecord_io.read_records(str(tmp_path / "r.tfrecord.gz"), "none"))
  with pytest.raises(tfrecord_io.CorruptRecordError, match="gzip"):
    list(tfrecord_io.read_records(str(tmp_path / "r.tfrecord"), "gzip"))
  with pytest.raises(ValueError, match="compression"):
    list(tfrecord_io.read_records(str(tmp_path / "r.tfrecord"), "zstd"))
  # Streams: the default stays uncompressed; None detects.
  assert list(tfrecord_io.iter_records(io.BytesIO(_framed()))) == PAYLOADS
  assert list(tfrecord_io.iter_records(io.BytesIO(_gz(_framed())), compression=None)) == PAYLOADS
  assert list(tfrecord_io.iter_records(io.BytesIO(b""), compression=None)) == []
  assert list(tfrecord_io.iter_records(io.BytesIO(_gz(b"")), compression="gzip")) == []


def test_uncompressed_file_starting_like_gzip_magic_is_not_gunzipped():
  # A first record of 0x8b1f bytes starts with the gzip magic 1f 8b; its length CRC tells.
  payloads = [b"a" * 0x8B1F, b"b"]
  blob = _framed(payloads)
  assert blob.startswith(tfrecord_io.GZIP_MAGIC)
  assert list(tfrecord_io.iter_records(io.BytesIO(blob), compression=None)) == payloads


def test_corrupt_and_truncated_gzip_raise_corrupt_record_error():
  blob = _gz(_framed())
  with pytest.raises(tfrecord_io.CorruptRecordError, match="truncated gzip"):
    list(tfrecord_io.iter_records(io.BytesIO(blob[:-20]), "t.gz", compression="gzip"))
  broken = bytearray(blob)
  broken[len(broken) // 2] ^= 0xFF
  with pytest.raises(tfrecord_io.CorruptRecordError):
    list(tfrecord_io.iter_records(io.BytesIO(bytes(broken)), "b.gz", compression="gzip"))


class _CountingStream(io.BytesIO):

  def __init__(self, data):
    super().__init__(data)
    self.consumed = 0

  def read(self, size=-1):
    out = super().read(size)
    self.consumed += len(out)
    return out


def test_gzip_records_are_streamed():
  import random  # incompressible payloads, so the compressed file is big
  rng = random.Random(0)
  payloads = [rng.randbytes(100_000) for _ in range(20)]
  stream = _CountingStream(_gz(_framed(payloads)))
  it = tfrecord_io.iter_records(stream, "big.gz", compression=None)
  assert next(it) == payloads[0]
  assert stream.consumed < len(stream.getvalue()) // 4
  assert list(it) == payloads[1:]


def test_manifest_compression():
  assert tfrecord_io.manifest_compression(None) is None
  assert tfrecord_io.manifest_compression({"config": {}}) is None  # older manifests
  assert tfrecord_io.manifest_compression({"config": {"compression": "gzip"}}) == "gzip"
  assert tfrecord_io.manifest_compression({"config": {"compression": "none"}}) == "none"
  with pytest.raises(ValueError, match="config.compression"):
    tfrecord_io.manifest_compression({"config": {"compression": "bz2"}})


DOCS = [{"document_id": f"d{i}", "text": f"text {i} é"} for i in range(4)]


def _lines(docs) -> bytes:
  return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8")


def _write(path, data: bytes):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)


def _manifest(out, **fields):
  """A valid manifest (the side-file reader validates it) holding ``fields``."""
  manifest = {"schema_version": records.SCHEMA_VERSION, "tokenizer": {}, "config": {},
              "counts": {"input": 0, "written": 0, "skipped": 0, "rejected": 0}, "shards": []}
  with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(dict(manifest, **fields), f)


def test_documents_load_follows_the_manifest(tmp_path):
  out = str(tmp_path / "out")
  _write(f"{out}/documents/documents-00000-of-00002.jsonl.gz", _gz(_lines(DOCS[:2])))
  _write(f"{out}/documents/documents-00001-of-00002.jsonl.gz", _gz(_lines(DOCS[2:])))
  _write(f"{out}/documents/stray.jsonl", _lines([{"document_id": "stray"}]))
  want = {d["document_id"]: d for d in DOCS}
  _manifest(out, config={"compression": "gzip"},
            documents=[f"documents/documents-0000{i}-of-00002.jsonl.gz" for i in range(2)])
  assert documents.load(out) == want  # only the listed files
  # An explicit manifest: its compression wins over the names.
  with pytest.raises(ValueError):
    documents.load(out, {"config": {"compression": "none"},
                         "documents": ["documents/documents-00000-of-00002.jsonl.gz"]})


def test_documents_load_without_list_globs_plain_and_gzip(tmp_path):
  out = str(tmp_path / "out")
  _write(f"{out}/documents/documents-00000-of-00003.jsonl.gz", _gz(_lines(DOCS[:1])))
  _write(f"{out}/documents/documents-00001-of-00003.jsonl", _lines(DOCS[1:2]))
  _write(f"{out}/documents/documents-00002-of-00003.jsonl", _gz(_lines(DOCS[2:])))  # magic
  want = {d["document_id"]: d for d in DOCS}
  assert documents.load(out) == want  # no manifest
  _manifest(out, config={"seq_length": 8})  # a manifest from before documents/compression
  assert documents.load(out) == want
  assert documents.document_files(out) == sorted(
      os.path.join(out, "documents", n) for n in os.listdir(os.path.join(out, "documents")))


def test_documents_load_reports_corrupt_gzip(tmp_path):
  out = str(tmp_path / "out")
  _write(f"{out}/documents/documents-00000-of-00001.jsonl.gz", _gz(_lines(DOCS))[:-12])
  with pytest.raises(ValueError, match="documents-00000-of-00001.jsonl.gz"):
    documents.load(out)
