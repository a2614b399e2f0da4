"""``--compression gzip`` output read back by every reader: tf.data, the inspector, the
documents loader and ``model.predict`` see exactly what they see in the uncompressed run."""

import dataclasses
import glob
import gzip
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from model import configs, predict
from model.training import train_lib
from model.data import pack_reader as input_lib
from pipelines import runner
from pipelines.inspector import decoder, record_io, text_view
from schemas import documents as documents_schema
from schemas import tfrecord_io
from tests.pipelines.helpers import PARIS, SMALL, hotpot_record, write_json



def _records():
  return [
      hotpot_record("q1", "Which city hosts the Louvre?", "Paris", PARIS,
                    supporting=[["Paris", 1], ["Lyon", 1]]),
      hotpot_record("q2", "Is Lyon in France?", "yes", PARIS[:2], supporting=[["Lyon", 0]]),
      hotpot_record("q3", "Where is Nice?", "the coast", PARIS[2:], supporting=[["Nice", 0]]),
  ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Output dirs of the same input: ``none``, ``gzip`` and a second ``gzip`` run."""
  tmp = tmp_path_factory.mktemp("compression")
  path = write_json(tmp / "in.json", _records())
  out = {}
  for name, compression in (("none", "none"), ("gzip", "gzip"), ("gzip2", "gzip")):
    out[name] = str(tmp / name)
    runner.run_dataset("hotpotqa", path, out[name],
                       dataclasses.replace(SMALL, compression=compression))
  return out


def _manifest(out):
  return input_lib.read_manifest(out)


@pytest.mark.slow
def test_gzip_files_are_named_listed_valid_and_deterministic(runs):
  m = _manifest(runs["gzip"])
  assert m["config"]["compression"] == "gzip"
  assert _manifest(runs["none"])["config"]["compression"] == "none"
  assert [s["path"] for s in m["shards"]] == [f"records-0000{i}-of-00002.tfrecord.gz"
                                             for i in range(2)]
  assert m["documents"] == [f"documents/documents-0000{i}-of-00002.jsonl.gz" for i in range(2)]
  gz = [s["path"] for s in m["shards"]] + m["documents"]
  for rel in gz:
    a, b = (os.path.join(runs[r], rel) for r in ("gzip", "gzip2"))
    with open(a, "rb") as fa, open(b, "rb") as fb:
      assert fa.read() == fb.read(), rel  # byte-identical runs
    if shutil.which("gzip"):
      subprocess.run(["gzip", "-t", a], check=True)
    # Inside: exactly the uncompressed run's bytes.
    with gzip.open(a) as f, open(os.path.join(runs["none"], rel[:-3]), "rb") as plain:
      assert f.read() == plain.read(), rel


@pytest.mark.slow
def test_tf_data_reader_reads_gzip_like_uncompressed(runs):
  plain = list(input_lib.dataset_from_output_dir(runs["none"]).as_numpy_iterator())
  packed = list(input_lib.dataset_from_output_dir(runs["gzip"]).as_numpy_iterator())
  assert len(plain) == len(packed) > 0
  for a, b in zip(plain, packed):
    assert sorted(a) == sorted(b)
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], key)
  # The fallback glob (no shards listed) and explicit lists of .gz paths work too.
  files = sorted(glob.glob(os.path.join(runs["gzip"], "records-*")))
  assert input_lib.record_files(runs["gzip"], {"config": {}}) == files
  cfg = _manifest(runs["gzip"])["config"]
  by_name = list(input_lib.make_dataset(files, cfg["seq_length"], cfg["segments_per_pack"])
                 .as_numpy_iterator())
  assert [p["pack_id"] for p in by_name] == [p["pack_id"] for p in plain]


@pytest.mark.slow
def test_inspector_renders_gzip_like_uncompressed(runs):
  texts = {}
  for name in ("none", "gzip"):
    paths = record_io.match_paths(os.path.join(runs[name], "records-*"))
    manifest = record_io.read_manifest(paths)
    tokenizer = decoder.build_tokenizer(manifest)
    recs = record_io.load_records(paths, manifest=manifest)
    text = text_view.render_text(recs, tokenizer, manifest, paths=paths)
    texts[name] = text.replace(runs[name], "OUT").replace(".tfrecord.gz", ".tfrecord")
  assert "=== pack" in texts["gzip"] and "[Q: Which city hosts the Louvre?]" in texts["gzip"]
  assert texts["gzip"] == texts["none"]
  # Without the manifest (the TF-free reader detects gzip by name and by magic bytes).
  gz_paths = sorted(glob.glob(os.path.join(runs["gzip"], "records-*")))
  plain_paths = sorted(glob.glob(os.path.join(runs["none"], "records-*")))
  plain = [p for path in plain_paths for p in tfrecord_io.read_records(path)]
  assert [p for path in gz_paths for p in tfrecord_io.read_records(path)] == plain
  with open(gz_paths[0], "rb") as f:
    assert list(tfrecord_io.iter_records(f, "unnamed", compression=None)) == list(
        tfrecord_io.read_records(plain_paths[0]))


@pytest.mark.slow
def test_documents_loader_reads_gzip_like_uncompressed(runs):
  plain = documents_schema.load(runs["none"])
  assert sorted(plain) == ["q1", "q2", "q3"]
  assert documents_schema.load(runs["gzip"]) == plain


@pytest.mark.slow
def test_predict_on_gzip_equals_uncompressed(runs, tmp_path):
  model_dir = str(tmp_path / "model")
  mc = train_lib.config_from_manifest(runs["gzip"], "tiny")
  train_lib.train(runs["gzip"], model_dir, mc,  # trains on the gzip records through tf.data
              configs.TrainConfig(learning_rate=1e-3, steps=2, seed=0, warmup_steps=0),
              log_fn=lambda d: None)
  outputs = {}
  for name in ("none", "gzip"):
    outputs[name] = str(tmp_path / f"{name}.json")
    assert predict.main(["--records_dir", runs[name], "--model_dir", model_dir,
                         "--output", outputs[name]]) == 0
  preds = [json.load(open(outputs[n])) for n in ("none", "gzip")]
  assert sorted(preds[0]["answer"]) == ["q1", "q2", "q3"]
  assert preds[1] == preds[0]
