"""Trainer-side file access through ``tf.io.gfile``: everything works on TF's in-memory ``ram://``
filesystem (standing in for ``gs://``) exactly as on local disk.

A small pipeline output dir and a tiny model are written locally, copied file by file into
``ram://``, and every reader / writer is compared with its local run (and, where one exists, with
an implementation that reads local files only, e.g. :func:`schemas.documents.load`).
"""

import gc
import gzip
import json
import os
import uuid
import weakref

import numpy as np
import pytest
import tensorflow as tf

from model import configs
from model.evaluation import evaluate_lib
from model.inference import decoding
from model.network import readtwice
from model.training import train_lib
from model.inference import predict_lib
from model.data import pack_reader as input_lib
from model.evaluation import hotpotqa, narrativeqa
from schemas import documents as documents_lib
from tests.model import packs

SEQ_LENGTH, SEGMENTS = 24, 4


def _copy_tree(local_dir: str, remote_dir: str) -> None:
  """Copies every file under ``local_dir`` to ``remote_dir`` with ``tf.io.gfile``."""
  for root, _, files in os.walk(local_dir):
    rel = os.path.relpath(root, local_dir)
    target = remote_dir if rel == "." else os.path.join(remote_dir, rel)
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(root, name), os.path.join(target, name), overwrite=True)


def _write(path: str, data: bytes) -> str:
  with tf.io.gfile.GFile(path, "wb") as f:
    f.write(data)
  return path


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  """``(local_root, ram_root)``, each with ``records/`` (a pipeline output dir) and ``model/``
  (config.json + one checkpoint of a tiny model); the model object itself is returned too."""
  local = str(tmp_path_factory.mktemp("gfile"))
  ram = f"ram:///test_gfile_paths_{uuid.uuid4().hex}"
  packs.qa_output_dir(os.path.join(local, "records"), seq_length=SEQ_LENGTH,
                      segments_per_pack=SEGMENTS, vocab_size=64, num_packs=2)
  tf.keras.utils.set_random_seed(3)
  mc = configs.tiny(vocab_size=64, max_seq_length=SEQ_LENGTH)
  model = readtwice.build_model(mc, SEQ_LENGTH, SEGMENTS)
  model_dir = os.path.join(local, "model")
  configs.save_configs(model_dir, mc)
  tf.train.Checkpoint(model=model).save(os.path.join(model_dir, "ckpt"))
  _copy_tree(local, ram)
  assert tf.io.gfile.exists(os.path.join(ram, "model", "checkpoint"))
  yield local, ram, model
  tf.io.gfile.rmtree(ram)


def _packs(ds):
  return [{k: v.numpy() for k, v in f.items()} for f in ds]


def _assert_same_packs(got, want):
  assert len(got) == len(want) == 2
  for g, w in zip(got, want):
    assert sorted(g) == sorted(w)
    for k in w:
      np.testing.assert_array_equal(g[k], w[k], err_msg=k)


@pytest.mark.slow
def test_dataset_from_ram_output_dir(dirs):
  local, ram, _ = dirs
  want = _packs(input_lib.dataset_from_output_dir(os.path.join(local, "records")))
  assert [p["pack_id"] for p in want] == [b"00000-0", b"00000-1"]
  got = _packs(input_lib.dataset_from_output_dir(os.path.join(ram, "records")))
  _assert_same_packs(got, want)
  # The ``records-*`` fallback (a manifest without shards) globs through tf.io.gfile too.
  shards = input_lib.record_files(os.path.join(ram, "records"), {"shards": []})
  assert shards == [os.path.join(ram, "records", "records-00000-of-00001.tfrecord")]
  _assert_same_packs(_packs(input_lib.make_dataset(shards, SEQ_LENGTH, SEGMENTS)), want)


def test_load_documents_from_ram(dirs):
  local, ram, _ = dirs
  want = documents_lib.load(os.path.join(local, "records"))  # local-files-only implementation
  assert sorted(want) == ["doc0_0", "doc0_1", "doc1_0", "doc1_1"]
  assert decoding.load_documents(os.path.join(local, "records")) == want
  assert decoding.load_documents(os.path.join(ram, "records")) == want


def test_load_documents_gzip_rules_on_ram(dirs, tmp_path):
  """No manifest: ``.jsonl.gz`` by name, a gzip ``.jsonl`` by its magic bytes, a plain one."""
  local, ram, _ = dirs
  docs = sorted(documents_lib.load(os.path.join(local, "records")).values(),
                key=lambda d: d["document_id"])
  lines = lambda ds: "".join(json.dumps(d) + "\n" for d in ds).encode("utf-8")
  files = {"documents-00000-of-00003.jsonl.gz": gzip.compress(lines(docs[:1])),
           "documents-00001-of-00003.jsonl": gzip.compress(lines(docs[1:3])),  # magic bytes
           "documents-00002-of-00003.jsonl": lines(docs[3:])}
  out_local, out_ram = str(tmp_path / "out"), os.path.join(ram, "gz_out")
  for out in (out_local, out_ram):
    for name, data in files.items():
      tf.io.gfile.makedirs(os.path.join(out, "documents"))
      _write(os.path.join(out, "documents", name), data)
  want = {d["document_id"]: d for d in docs}
  assert documents_lib.load(out_local) == want
  assert decoding.load_documents(out_ram) == want
  _write(os.path.join(out_ram, "documents", "documents-00000-of-00003.jsonl.gz"),
         gzip.compress(lines(docs[:1]))[:-12])
  with pytest.raises(ValueError, match="documents-00000-of-00003.jsonl.gz"):
    decoding.load_documents(out_ram)


def test_configs_round_trip_on_ram(dirs):
  local, ram, _ = dirs
  mc, tc = configs.tiny(vocab_size=77, memory_top_k=3), configs.TrainConfig(steps=5, seed=2)
  model_dir = os.path.join(ram, "configs", "nested")  # created by save_configs
  path = configs.save_configs(model_dir, mc, tc)
  assert path == os.path.join(model_dir, configs.CONFIG_FILE)
  assert configs.load_configs(model_dir) == (mc, tc)
  with tf.io.gfile.GFile(path) as f:
    payload = json.loads(f.read())
  assert payload == {"model": mc.to_dict(), "train": tc.to_dict()}
  # The copied model dir holds the locally written file, byte for byte readable here.
  assert (configs.load_configs(os.path.join(ram, "model")) ==
          configs.load_configs(os.path.join(local, "model")))
  assert configs.load_configs(os.path.join(ram, "model"))[1] is None
  with pytest.raises(FileNotFoundError, match="config.json"):
    configs.load_configs(os.path.join(ram, "no_such_model"))


@pytest.mark.slow
def test_checkpoint_restores_from_ram(dirs):
  _, ram, model = dirs
  restored, mc = train_lib.load_model(os.path.join(ram, "model"))
  assert mc == model.config
  assert len(restored.weights) == len(model.weights) > 10
  for got, want in zip(restored.weights, model.weights):  # paths differ by the model's name
    assert got.path.split("/", 1)[1] == want.path.split("/", 1)[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=want.path)
  # The already built model (never saved/restored) predicts what the restored one does.
  assert (predict_lib.predict_with_model(model, os.path.join(ram, "records")) ==
          predict_lib.predict_with_model(restored, os.path.join(ram, "records")))


def _gold(records_dir):
  """HotpotQA gold built from the side file (answer "gold", its supporting paragraph)."""
  return [{"_id": d["question_id"], "answer": d["answers"][0],
           "supporting_facts": [[p["title"], 0] for p in d["paragraphs"] if p["supporting"]]}
          for d in documents_lib.load(records_dir).values()]


@pytest.mark.slow
def test_predict_and_evaluate_on_ram(dirs, tmp_path):
  local, ram, _ = dirs
  local_out = str(tmp_path / "p.json")
  ram_out = os.path.join(ram, "out", "p.json")
  tf.keras.utils.set_random_seed(11)  # different seeds: every weight must come from the files
  want = predict_lib.predict(os.path.join(local, "records"), os.path.join(local, "model"), local_out)
  tf.keras.utils.set_random_seed(12)
  got = predict_lib.predict(os.path.join(ram, "records"), os.path.join(ram, "model"), ram_out)
  assert got == want
  assert sorted(want["answer"]) == sorted(want["sp"]) == ["q0_0", "q0_1", "q1_0", "q1_1"]
  texts = {d["question_id"]: d["text"]
           for d in documents_lib.load(os.path.join(local, "records")).values()}
  assert all(a in ("yes", "no") or a in texts[q] for q, a in want["answer"].items())
  with open(local_out) as f, tf.io.gfile.GFile(ram_out) as g:
    local_text = f.read()
    assert g.read() == local_text
  assert json.loads(local_text) == want
  tf.keras.utils.set_random_seed(11)
  restored, _ = train_lib.load_model(os.path.join(ram, "model"))
  assert predict_lib.predict_with_model(restored, os.path.join(ram, "records")) == want

  # Scoring: in memory (score) == from files (run), local and ram://, == the metrics module.
  gold = _gold(os.path.join(local, "records"))
  local_gold = str(tmp_path / "gold.json")
  with open(local_gold, "w") as f:
    json.dump(gold, f)
  ram_gold = _write(os.path.join(ram, "gold.json"), json.dumps(gold).encode("utf-8"))
  expected = hotpotqa.evaluate(json.loads(local_text), gold)
  assert expected["n_gold"] == 4
  assert evaluate_lib.run("hotpotqa", local_out, local_gold) == expected
  assert evaluate_lib.score("hotpotqa", got, ram_gold) == expected
  assert evaluate_lib.score("hotpotqa", got, local_gold) == expected
  metrics_out = os.path.join(ram, "out", "metrics.json")
  assert evaluate_lib.run("hotpotqa", ram_out, ram_gold, metrics_out) == expected
  with tf.io.gfile.GFile(metrics_out) as f:
    assert f.read() == json.dumps(expected, sort_keys=True) + "\n"
  with pytest.raises(evaluate_lib.EvaluationError, match="cannot read predictions file ram:///"):
    evaluate_lib.run("hotpotqa", os.path.join(ram, "absent.json"), ram_gold)
  with pytest.raises(evaluate_lib.EvaluationError, match="cannot read gold file ram:///.*absent"):
    evaluate_lib.score("hotpotqa", got, os.path.join(ram, "absent.json"))
  bad = _write(os.path.join(ram, "bad.json"), b"{not json")
  with pytest.raises(evaluate_lib.EvaluationError, match="not valid JSON"):
    evaluate_lib.run("hotpotqa", bad, ram_gold)
  with pytest.raises(evaluate_lib.EvaluationError, match='"answer"'):
    evaluate_lib.score("hotpotqa", {"sp": {}}, ram_gold)
  with pytest.raises(evaluate_lib.EvaluationError, match="unknown task"):
    evaluate_lib.score("squad", got, ram_gold)


@pytest.mark.slow
def test_predict_with_model_reuses_one_trace(dirs):
  local, ram, model = dirs
  records_dir = os.path.join(ram, "records")
  first = predict_lib.predict_with_model(model, records_dir, task="hotpotqa")
  # One traced forward per memory_chunk (None: the sub-document scope's one-shot read).
  forward = predict_lib._FORWARDS[model][None]  # pylint: disable=protected-access
  second = predict_lib.predict_with_model(model, records_dir, reduction="sum")
  assert predict_lib._FORWARDS[model][None] is forward  # pylint: disable=protected-access
  assert list(predict_lib._FORWARDS[model]) == [None]  # pylint: disable=protected-access
  assert forward.experimental_get_tracing_count() == 1
  assert sorted(first["answer"]) == sorted(second["answer"]) == [
      f"q{k}_{d}" for k in range(2) for d in range(2)]
  # max_packs: only the first pack's questions.
  one = predict_lib.predict_with_model(model, records_dir, max_packs=1)
  full = predict_lib.predict_with_model(model, os.path.join(local, "records"))
  assert sorted(one["answer"]) == ["q0_0", "q0_1"]
  assert one["answer"] == {q: full["answer"][q] for q in ("q0_0", "q0_1")}
  with pytest.raises(ValueError, match="max_packs"):
    predict_lib.predict_with_model(model, records_dir, max_packs=0)


@pytest.mark.slow
def test_forward_cache_does_not_keep_models_alive(dirs):
  _, ram, _ = dirs
  mc = configs.tiny(vocab_size=64, max_seq_length=SEQ_LENGTH)
  model = readtwice.build_model(mc, SEQ_LENGTH, SEGMENTS)
  predict_lib.predict_with_model(model, os.path.join(ram, "records"), max_packs=1)
  assert model in predict_lib._FORWARDS  # pylint: disable=protected-access
  ref = weakref.ref(model)
  del model
  gc.collect()
  assert ref() is None


def test_narrativeqa_gold_from_ram(tmp_path, dirs):
  _, ram, _ = dirs
  header = ",".join(narrativeqa.GOLD_COLUMNS)
  row = 'doc1,test,"Who, then?",Ann,"An ""A"" n",who then,ann,an a n'
  data = ("\ufeff" + header + "\r\n" + row + "\r\n").encode("utf-8")
  local_csv = tmp_path / "qaps.csv"
  local_csv.write_bytes(data)
  want = narrativeqa.load_gold(str(local_csv))
  assert want[0]["question"] == "Who, then?" and want[0]["answer2"] == 'An "A" n'
  assert narrativeqa.load_gold(_write(os.path.join(ram, "qaps.csv"), data)) == want


@pytest.mark.slow
def test_predict_with_model_built_under_mirrored_strategy(dirs):
  """The training driver's model (MirroredVariables, 2 logical CPUs from conftest) predicts,
  outside and inside the strategy's scope, what the same weights predict on one device."""
  _, ram, model = dirs
  records_dir = os.path.join(ram, "records")
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    mirrored = readtwice.build_model(model.config, SEQ_LENGTH, SEGMENTS)
  for var, value in zip(mirrored.weights, model.weights):
    var.assign(value)
  want = predict_lib.predict_with_model(model, records_dir)
  assert predict_lib.predict_with_model(mirrored, records_dir) == want
  with strategy.scope():
    assert predict_lib.predict_with_model(mirrored, records_dir) == want
