"""Tests of pipelines/inspector/record_io.py: records dirs and files to decoded records."""

from __future__ import annotations

import os

import pytest

from pipelines.inspector import cli, inspect_error, record_io
from schemas import manifest as manifest_schema
from schemas import records, tfrecord_io
from tests.pipelines.inspector.builders import make_pack, write_output

def test_other_major_schema_version_fails(tmp_path, tokenizer, capsys):
  pattern = write_output(tmp_path / "v2", [make_pack(tokenizer, schema_version="2.0.0")], None)
  with pytest.raises(records.SchemaVersionError, match="2.0.0"):
    record_io.load_records(record_io.match_paths(pattern))
  assert cli.main(["--records_dir", os.path.dirname(pattern)]) == 1
  assert "2.0.0" in capsys.readouterr().err
  # A minor version bump is still readable.
  ok = write_output(tmp_path / "v1_1", [make_pack(tokenizer, schema_version="1.1.0")], None)
  assert len(record_io.load_records(record_io.match_paths(ok))) == 1


def test_gzip_records_render_like_uncompressed(tmp_path, tokenizer, capsys):
  payloads = [make_pack(tokenizer), make_pack(tokenizer, schema_version="1.1.0")]
  desc = tokenizer.describe()
  texts = {}
  for compression in ("none", "gzip"):
    pattern = write_output(tmp_path / compression, payloads, desc, compression)
    assert cli.main(["--records_dir", os.path.dirname(pattern)]) == 0
    texts[compression] = capsys.readouterr().out.replace(str(tmp_path / compression), "OUT")
  assert "OUT/records-00000-of-00001.tfrecord.gz record 1" in texts["gzip"]
  assert texts["gzip"].replace(".tfrecord.gz", ".tfrecord") == texts["none"]
  assert "⟦ANS#0 1903⟧" in texts["gzip"]
  # No manifest: detected by the .gz name, or by the gzip magic bytes.
  for name in ("records-00000-of-00001.tfrecord.gz", "records-00000-of-00001.tfrecord"):
    pattern = write_output(tmp_path / f"bare-{name}", payloads, None, "gzip", name)
    recs = record_io.load_records(record_io.match_paths(pattern))
    assert [r["schema_version"] for r in recs] == [[records.SCHEMA_VERSION.encode()], [b"1.1.0"]]


def test_manifest_compression_is_followed(tmp_path, tokenizer, capsys):
  # gzip records whose manifest says "none": corrupt, as tf.data would find them.
  pattern = write_output(tmp_path / "lying", [make_pack(tokenizer)], None, "gzip")
  write_output(tmp_path / "manifest_only", [], tokenizer.describe(), "none",
                "records-00000-of-00001.tfrecord.gz")
  os.replace(tmp_path / "manifest_only" / manifest_schema.MANIFEST_FILE,
             tmp_path / "lying" / manifest_schema.MANIFEST_FILE)
  paths = record_io.match_paths(pattern)
  assert [os.path.basename(p) for p in paths] == ["records-00000-of-00001.tfrecord.gz"]
  with pytest.raises(tfrecord_io.CorruptRecordError, match="checksum"):
    record_io.load_records(paths, manifest=record_io.read_manifest(paths))
  assert cli.main(["--records_dir", os.path.dirname(pattern)]) == 1
  assert "checksum" in capsys.readouterr().err
  assert len(record_io.load_records(paths)) == 1  # detected by name without the manifest


def test_manifests_of_dirs_read_together_must_agree(tmp_path, tokenizer):
  desc = tokenizer.describe()
  other = dict(desc, fingerprint="sha256:" + "1" * 64)
  a = write_output(tmp_path / "a", [make_pack(tokenizer)], desc)
  b = write_output(tmp_path / "b", [make_pack(tokenizer)], other)
  paths = record_io.match_paths([a, b])
  assert len(paths) == 2
  with pytest.raises(inspect_error.InspectError) as e:
    record_io.read_manifest(paths)
  assert str(e.value) == (f"{tmp_path / 'b'} has tokenizer {other['fingerprint']!r} but "
                          f"{tmp_path / 'a'} has {desc['fingerprint']!r}; records trained "
                          "together must agree")
  manifest = record_io.read_manifest(record_io.match_paths(a))
  assert manifest["_paths"] == [str(tmp_path / "a" / manifest_schema.MANIFEST_FILE)]


def test_records_dir_shards_warnings_and_a_missing_shard(tmp_path, tokenizer):
  out = os.path.dirname(write_output(tmp_path / "out", [make_pack(tokenizer)],
                                     tokenizer.describe()))
  shard = os.path.join(out, "records-00000-of-00001.tfrecord")
  paths, manifest, warnings = record_io.records_dir_paths(out + "/")
  assert paths == [shard] and manifest["job"] == "test"
  assert warnings == [f"{out} has no COMPLETED: the job that wrote it failed or is still "
                      "running; its records may be incomplete"]
  os.remove(shard)
  with pytest.raises(inspect_error.InspectError) as e:
    record_io.records_dir_paths(out)
  assert str(e.value) == (f"1 shard(s) that {out}/manifest.json lists are missing, e.g. "
                          f"{shard}")
