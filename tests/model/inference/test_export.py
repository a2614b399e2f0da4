"""model.export: the in-graph span decoding against NumPy, the CLI's one-line errors, and a
trained model's SavedModel served in a process that cannot import this repository, whose outputs
equal the Keras model's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
import tensorflow as tf

from model import configs, export
from model.inference import spans
from model.network import readtwice
from model.training import train_lib
from model.inference import export_lib
from schemas import records
from tests import REPO_ROOT

S, Q, C, P = (records.TOKEN_KIND_SPECIAL, records.TOKEN_KIND_QUESTION,
              records.TOKEN_KIND_CONTEXT, records.TOKEN_KIND_PAD)


def numpy_best_span(begin: np.ndarray, end: np.ndarray, kinds: np.ndarray,
                    max_answer_tokens: int):
  """``(begin, end, score)`` of one segment by brute force: the best context pair with
  ``begin <= end < begin + max_answer_tokens`` (ties: lowest begin, then shortest)."""
  best = (-1, -1, -np.inf)
  context = np.flatnonzero(kinds == C)
  for b in context:
    for e in context:
      if b <= e < b + max_answer_tokens:
        score = np.float32(begin[b]) + np.float32(end[e])
        if score > best[2]:
          best = (int(b), int(e), float(score))
  return best


def decode_all(out, kinds, max_answer_tokens):
  return [numpy_best_span(out["begin_logits"][s], out["end_logits"][s], kinds[s],
                          max_answer_tokens) for s in range(len(kinds))]


def test_best_spans_equal_numpy_and_model_spans():
  rng = np.random.RandomState(0)
  n, l = 6, 16
  kinds = np.full([n, l], P)
  for s in range(n - 1):  # the last segment is padding: no context
    kinds[s, 0], kinds[s, 1:4], kinds[s, 4] = S, Q, S
    kinds[s, 5:5 + 3 + 2 * s] = C
  begin = rng.normal(size=[n, l]).astype(np.float32)
  end = rng.normal(size=[n, l]).astype(np.float32)
  for m in (1, 2, 4, 30):
    b, e, score = (t.numpy() for t in export_lib.best_spans(begin, end, kinds, m))
    want = [numpy_best_span(begin[s], end[s], kinds[s], m) for s in range(n)]
    assert [(int(x), int(y)) for x, y in zip(b, e)] == [w[:2] for w in want], m
    np.testing.assert_allclose(score[:-1], [w[2] for w in want[:-1]], rtol=0, atol=1e-6)
    assert score[-1] == -np.inf and (b[-1], e[-1]) == (-1, -1)
    for s in range(n - 1):  # model.inference.spans over every context token, before word snapping
      found = spans.best_span(begin[s], end[s], kinds[s], top_k=l, max_answer_tokens=m)
      assert (found[1], found[2]) == (b[s], e[s])
      assert abs(found[0] - score[s]) < 1e-5


def test_errors_are_one_line(tmp_path, capsys):
  model_dir = str(tmp_path / "model")
  out = str(tmp_path / "out")
  argv = ["--model_dir", model_dir, "--output_dir", out, "--segments_per_pack", "2",
          "--seq_length", "8"]
  assert export.main(argv) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.export: error: --model_dir {model_dir} does not exist"]
  configs.save_configs(model_dir, configs.tiny(vocab_size=32, max_seq_length=8))
  assert export.main(argv) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.export: error: no checkpoint in {model_dir} (train the model first, "
      "or pass --checkpoint)"]
  os.makedirs(out)
  assert export.main(argv) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.export: error: --output_dir {out} exists; pass --overwrite to "
      "replace it"]
  with pytest.raises(SystemExit) as e:  # refused by the command line, before any work
    export.main(argv[:3] + [str(tmp_path), "--overwrite"] + argv[4:])
  assert e.value.code == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.export: error: --output_dir {tmp_path} contains --model_dir "
      f"{model_dir}, which this command reads; write the output somewhere apart from the inputs"]
  assert os.path.exists(os.path.join(model_dir, "config.json"))
  assert export.main(argv[:4] + ["--seq_length", "8"]) == 1
  assert "pass --records_dir" in capsys.readouterr().err
  with pytest.raises(SystemExit) as e:
    export.main(argv + ["--max_answer_tokens", "0"])
  assert e.value.code == 2


# Runs in a fresh interpreter: -I (no PYTHONPATH, no cwd, no user site) and -S (no .pth
# files: the venv's editable install of this repository is one), with only the interpreter's
# site-packages on sys.path.
_SERVE = r"""
import json, os, sys
sys.path.extend(json.loads(sys.argv[1]))
repo = os.path.realpath(sys.argv[2])
assert all(os.path.realpath(p or ".") != repo for p in sys.path), sys.path
for name in ("model", "schemas", "pipelines"):
  try:
    __import__(name)
  except ModuleNotFoundError:
    pass
  else:
    raise AssertionError(f"{name} is importable: {sys.modules[name]}")
import numpy as np
import tensorflow as tf
for saved, pack, result in json.loads(sys.argv[3]):
  serve = tf.saved_model.load(saved).signatures["serving_default"]
  inputs = {k: tf.constant(v) for k, v in np.load(pack).items()}
  np.savez(result, **{k: v.numpy() for k, v in serve(**inputs).items()})
print("served")
"""


def _serve_elsewhere(jobs, cwd):
  paths = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
  env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  proc = subprocess.run([sys.executable, "-I", "-S", "-c", _SERVE, json.dumps(paths),
                         str(REPO_ROOT), json.dumps(jobs)], cwd=cwd, env=env, text=True,
                        capture_output=True, timeout=300)
  assert proc.returncode == 0 and proc.stdout.strip() == "served", proc.stderr[-3000:]


def _entity_model_dir(model_dir: str, vocab_size: int, seq_length: int):
  """An untrained entity-memory model saved as a model dir (config.json + ckpt-1)."""
  mc = configs.preset("tiny_e", vocab_size=vocab_size, max_seq_length=seq_length)
  model = readtwice.build_model(mc, seq_length, 4)
  configs.save_configs(model_dir, mc)
  tf.train.Checkpoint(model=model).save(os.path.join(model_dir, "ckpt"))
  return mc


@pytest.mark.slow
def test_saved_model_serves_without_the_repository(tmp_path, capsys):
  from model.data import pack_reader as input_lib
  from tests.model import packs
  records_dir = packs.qa_output_dir(str(tmp_path / "records"), num_packs=2)
  model_dir = str(tmp_path / "model")
  mc = train_lib.config_from_manifest(records_dir, "tiny")
  train_lib.train(records_dir, model_dir, mc,
              configs.TrainConfig(learning_rate=3e-3, steps=2, seed=0), log_fn=lambda d: None)
  entity_dir = str(tmp_path / "entity_model")
  emc = _entity_model_dir(entity_dir, 64, 24)

  exported, jobs, expected = {}, [], {}
  for name, mdir, config in (("cls", model_dir, mc), ("entity", entity_dir, emc)):
    out = str(tmp_path / f"exported_{name}")
    capsys.readouterr()
    assert export.main(["--model_dir", mdir, "--output_dir", out, "--records_dir",
                        records_dir, "--max_answer_tokens", "3"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["output_dir"] == out and summary["checkpoint"].endswith("ckpt-2" if
                                                                          name == "cls" else
                                                                          "ckpt-1")
    info = json.load(open(os.path.join(out, "export.json")))
    assert (info["seq_length"], info["segments_per_pack"], info["max_answer_tokens"]) == (
        24, 4, 3)
    assert info["inputs"]["token_ids"] == {"dtype": "int32", "shape": [4, 24]}
    assert info["outputs"]["best_span_begin"] == {"dtype": "int32", "shape": [4]}
    assert (json.load(open(os.path.join(out, "config.json"))) ==
            json.load(open(os.path.join(mdir, "config.json"))))
    assert ("mentions_begin" in info["inputs"]) == (name == "entity")
    exported[name] = out

    # One parsed pack, exactly the signature's inputs; the entity model gets mentions.
    k = readtwice.max_mentions(config)
    features = next(iter(input_lib.dataset_from_output_dir(records_dir, max_mentions=k)))
    pack = {key: features[key].numpy() for key in info["inputs"]}
    if k:
      for key, values in (("mentions_segment", [0, 1, 2, 3]), ("mentions_begin", [5, 6, 5, 7]),
                          ("mentions_end", [6, 6, 8, 7]), ("mentions_entity_id", [7, 7, 9, 9]),
                          ("mentions_mask", [1, 1, 1, 1])):
        pack[key][:4] = values
    path = str(tmp_path / f"pack_{name}.npz")
    np.savez(path, **pack)
    model, _ = train_lib.load_model(mdir)
    out_keras = {key: v.numpy() for key, v in
                 model({key: tf.constant(v) for key, v in pack.items()}, training=False).items()}
    expected[name] = (pack, out_keras)
    jobs.append([out, path, str(tmp_path / f"served_{name}.npz")])

  _serve_elsewhere(jobs, str(tmp_path))
  for (name, (pack, out_keras)), (_, _, result) in zip(expected.items(), jobs):
    served = dict(np.load(result))
    assert sorted(served) == sorted(export_lib.LOGIT_KEYS + export_lib.SPAN_KEYS)
    for key in export_lib.LOGIT_KEYS:
      assert served[key].shape == out_keras[key].shape, (name, key)
      assert np.max(np.abs(served[key] - out_keras[key])) <= 1e-5, (name, key)
    want = decode_all(out_keras, pack["token_kind"], 3)
    got = list(zip(served["best_span_begin"].tolist(), served["best_span_end"].tolist()))
    assert got == [w[:2] for w in want], name
    np.testing.assert_allclose(served["best_span_score"], [w[2] for w in want], atol=1e-5)
    assert all(b >= 0 for b, _ in got)  # every segment of this pack has context

  # An existing output dir is refused, and replaced with --overwrite.
  argv = ["--model_dir", model_dir, "--output_dir", exported["cls"], "--records_dir",
          records_dir]
  assert export.main(argv) == 1
  assert "exists; pass --overwrite" in capsys.readouterr().err
  assert export.main(argv + ["--overwrite"]) == 0
  assert json.load(open(os.path.join(exported["cls"], "export.json")))[
      "max_answer_tokens"] == export_lib.DEFAULT_MAX_ANSWER_TOKENS


def test_overwrite_replaces_only_an_earlier_export_never_through_a_symlink(tmp_path, capsys):
  model_dir, other, earlier = tmp_path / "m", tmp_path / "other", tmp_path / "earlier"
  for d in (model_dir, other, earlier):
    d.mkdir()
  configs.save_configs(str(model_dir), configs.tiny(vocab_size=32, max_seq_length=8))
  (other / "notes.txt").write_text("mine")
  (earlier / export_lib.EXPORT_FILE).write_text("{}")
  os.symlink(earlier, tmp_path / "link")
  export_lib._check_replaceable(str(earlier))  # an earlier export may be replaced
  with pytest.raises(export_lib.ExportError, match="is not an earlier export"):
    export_lib._check_replaceable(str(other))
  with pytest.raises(export_lib.ExportError, match="is a symlink"):
    export_lib._check_replaceable(str(tmp_path / "link"))
  argv = ["--model_dir", str(model_dir), "--seq_length", "8", "--segments_per_pack", "2",
          "--overwrite", "--output_dir"]
  assert export.main(argv + [str(other)]) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.export: error: --output_dir {other} exists and is not an earlier "
      "export (no export.json in it); --overwrite replaces only what model.export wrote: "
      "choose another --output_dir"]
  # The model dir behind a symlink: refused by the command line, the model untouched.
  os.symlink(model_dir, tmp_path / "model_link")
  with pytest.raises(SystemExit) as e:
    export.main(["--model_dir", str(tmp_path / "model_link"), "--seq_length", "8",
                 "--overwrite", "--output_dir", str(model_dir)])
  assert e.value.code == 1
  assert "is --model_dir" in capsys.readouterr().err
  assert (other / "notes.txt").read_text() == "mine"
  assert sorted(os.listdir(model_dir)) == ["config.json"]
