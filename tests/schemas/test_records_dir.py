"""Tests of schemas/records_dir.py on a real pipeline output (a small HotpotQA job run) and on
hand-broken copies of it: no COMPLETED, no manifest, no records, an incompatible pair."""

from __future__ import annotations

import json
import os
import shutil
from typing import List

import pytest

from schemas import documents, example_proto, records, records_dir, tfrecord_io
from schemas import manifest as manifest_lib
from tests.pipelines.helpers import PARIS, SMALL, hotpot_record, write_json


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory) -> str:
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  base = tmp_path_factory.mktemp("records_dir")
  src = write_json(base / "in.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARIS) for i in range(3)])
  out = str(base / "out")
  runner.run_dataset("hotpotqa", src, out, SMALL)
  return out


def _copy(output_dir: str, tmp_path, name: str) -> str:
  out = str(tmp_path / name)
  shutil.copytree(output_dir, out)
  return out


def _rewrite_manifest(out: str, **changes) -> None:
  path = os.path.join(out, manifest_lib.MANIFEST_FILE)
  with open(path) as f:
    manifest = json.load(f)
  manifest.update(changes)
  with open(path, "w") as f:
    f.write(manifest_lib.dumps(manifest))


@pytest.mark.slow
def test_reads_a_finished_run(output_dir):
  manifest = records_dir.read_manifest(output_dir)
  assert manifest["job"] == "hotpotqa" and records_dir.is_completed(output_dir)
  assert records_dir.load_manifest(output_dir) == manifest
  shards = records_dir.shard_paths(output_dir, manifest)
  assert shards == [os.path.join(output_dir, s["path"]) for s in manifest["shards"]]
  assert len(shards) == SMALL.num_shards and all(os.path.isfile(p) for p in shards)
  packs = list(records_dir.iter_packs(output_dir))
  assert len(packs) == manifest["examples"]["packs"] > 0
  # The same records as a plain read of every shard, decoded.
  plain = [example_proto.decode_example(data) for path in shards
           for data in tfrecord_io.read_records(path)]
  assert packs == plain
  assert {p["schema_version"][0] for p in packs} == {records.SCHEMA_VERSION.encode()}
  # The side file holds the documents the packs' segments come from.
  docs = documents.load(output_dir)
  ids = {d.decode() for p in packs for d, m in zip(p["document_id"], p["segment_mask"]) if m}
  assert ids == set(docs) and len(docs) == 3


def test_a_directory_as_the_shard_list_of_an_old_manifest(output_dir):
  """A manifest without ``shards`` (written before the list existed): the records-* files."""
  manifest = dict(records_dir.read_manifest(output_dir), shards=[])
  assert records_dir.shard_paths(output_dir, manifest) == sorted(
      os.path.join(output_dir, n) for n in os.listdir(output_dir) if n.startswith("records-"))
  assert records_dir.shard_paths(output_dir, None) == records_dir.shard_paths(output_dir, manifest)


class _Prefixed:
  """A FileSystem that serves ``mem://`` paths from a local directory (stands in for gs://)."""

  def __init__(self, root: str):
    self.root = root
    self.calls: List[str] = []

  def _local(self, path: str) -> str:
    assert path.startswith("mem://"), path
    self.calls.append(path)
    return os.path.join(self.root, path[len("mem://"):])

  def open(self, path):
    return open(self._local(path), "rb")

  def exists(self, path):
    return os.path.exists(self._local(path))

  def isdir(self, path):
    return os.path.isdir(self._local(path))

  def glob(self, pattern):
    import glob  # pylint: disable=g-import-not-at-top
    n = len(self.root) + 1
    return ["mem://" + p[n:] for p in glob.glob(self._local(pattern))]


def test_every_file_access_goes_through_the_given_file_system(output_dir):
  fs = _Prefixed(os.path.dirname(output_dir))
  remote = "mem://" + os.path.basename(output_dir)
  manifest = records_dir.read_manifest(remote, fs)
  assert manifest == records_dir.read_manifest(output_dir)
  assert records_dir.shard_paths(remote, {"shards": []}, fs) == [
      p.replace(output_dir, remote) for p in records_dir.shard_paths(output_dir, None)]
  assert list(records_dir.iter_packs(remote, fs=fs)) == list(records_dir.iter_packs(output_dir))
  assert documents.load(remote, fs=fs) == documents.load(output_dir)
  assert fs.calls and all(c.startswith("mem://") for c in fs.calls)


def test_a_missing_dir_or_a_file(output_dir, tmp_path):
  for path in (str(tmp_path / "nowhere"), os.path.join(output_dir, manifest_lib.MANIFEST_FILE)):
    with pytest.raises(FileNotFoundError) as e:
      records_dir.read_manifest(path)
    assert str(e.value) == (f"{path} does not exist or is not a directory (expected a "
                            "pipeline's --output_dir)")


def test_a_dir_without_manifest(output_dir, tmp_path):
  out = _copy(output_dir, tmp_path, "no_manifest")
  os.remove(os.path.join(out, manifest_lib.MANIFEST_FILE))
  with pytest.raises(FileNotFoundError) as e:
    records_dir.read_manifest(out)
  assert str(e.value) == (f"{out}/manifest.json does not exist: {out} is not the output "
                          "directory of a finished pipeline run")
  assert records_dir.load_manifest(out) is None
  # The side files are still found (documents/*.jsonl), as for manifests that predate lists.
  assert documents.load(out) == documents.load(output_dir)


def test_a_run_without_completed(output_dir, tmp_path):
  out = _copy(output_dir, tmp_path, "unfinished")
  os.remove(os.path.join(out, manifest_lib.COMPLETED_FILE))
  with pytest.raises(manifest_lib.ManifestError) as e:
    records_dir.read_manifest(out)
  assert str(e.value) == f"{out} has no COMPLETED: its pipeline run failed or has not finished"
  with pytest.raises(manifest_lib.ManifestError):
    list(records_dir.iter_packs(out))
  assert not records_dir.is_completed(out)
  assert records_dir.load_manifest(out) == records_dir.read_manifest(output_dir)


def test_a_run_that_wrote_no_records(output_dir, tmp_path):
  out = _copy(output_dir, tmp_path, "empty")
  n = records_dir.read_manifest(output_dir)["counts"]["input"]
  _rewrite_manifest(out, counts={"input": n, "written": 0, "skipped": 0, "rejected": n},
                    rejected_by_reason={"segment/empty": n}, skipped_by_reason={},
                    stage_counts=None, examples={"packs": 0}, shards=[])
  with pytest.raises(manifest_lib.ManifestError) as e:
    records_dir.read_manifest(out)
  assert str(e.value) == (f"{out} holds no records (its manifest counts 0 written documents); "
                          f"see {out}/dead_letter/ for why")


def test_an_invalid_or_newer_manifest(output_dir, tmp_path):
  out = _copy(output_dir, tmp_path, "invalid")
  path = os.path.join(out, manifest_lib.MANIFEST_FILE)
  with open(path) as f:
    manifest = json.load(f)
  del manifest["tokenizer"]
  with open(path, "w") as f:
    json.dump(manifest, f)
  with pytest.raises(manifest_lib.ManifestError) as e:
    records_dir.read_manifest(out)
  assert str(e.value) == f"manifest {path} lacks 'tokenizer'"
  with pytest.raises(manifest_lib.ManifestError):  # the side-file reader validates it too
    documents.load(out)
  manifest.update(tokenizer={}, schema_version="2.0.0")
  with open(path, "w") as f:
    json.dump(manifest, f)
  with pytest.raises(records.SchemaVersionError, match=f"manifest {path}"):
    records_dir.load_manifest(out)


def test_an_incompatible_pair(output_dir, tmp_path):
  good = records_dir.read_manifest(output_dir)
  records_dir.check_compatible([output_dir, output_dir], [good, good])
  cases = [
      ("seq_length", dict(config=dict(good["config"], seq_length=64)), "64", "48"),
      ("segments_per_pack", dict(config=dict(good["config"], segments_per_pack=4)), "4", "8"),
      ("tokenizer", dict(tokenizer=dict(good["tokenizer"], fingerprint="sha256:other")),
       "'sha256:other'", repr(good["tokenizer"]["fingerprint"])),
  ]
  for what, changes, theirs, ours in cases:
    other = _copy(output_dir, tmp_path, f"other_{what}")
    _rewrite_manifest(other, **changes)
    dirs = [output_dir, other]
    with pytest.raises(records_dir.IncompatibleRecordsError) as e:
      records_dir.check_compatible(dirs, [records_dir.read_manifest(d) for d in dirs])
    assert str(e.value) == (f"{other} has {what} {theirs} but {output_dir} has {ours}; "
                            "records trained together must agree")


def test_a_pack_of_another_major_version(output_dir):
  [pack] = [p for p in records_dir.iter_packs(output_dir)][:1]
  dtypes = {f.name: f.dtype for f in records.FEATURES}
  payload = example_proto.encode_example(dict(pack, schema_version=[b"2.0.0"]), dtypes)
  with pytest.raises(records.SchemaVersionError, match="^shard.tfrecord record 3"):
    records_dir.decode_pack(payload, "shard.tfrecord record 3")
  assert records_dir.decode_pack(
      example_proto.encode_example(pack, dtypes)) == pack
