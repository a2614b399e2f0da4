"""The model commands on unusable records or models: one ``<prog>: error:`` line naming the file
(and, for a corrupt TFRecord, the record index), exit 1, no traceback, no output file."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

from schemas import manifest as manifest_lib
from tests.model import packs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARD = "records-00000-of-00001.tfrecord"


def _run(module, *args):
  env = dict(os.environ)
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=env,
                        text=True, capture_output=True, timeout=600)


def _run_main(capsys, module, *args):
  """:func:`_run` as the command's ``main(argv)`` in this process (``python -m`` calls the same
  function: the process boundary is checked by the other case of each test below)."""
  import importlib  # pylint: disable=g-import-not-at-top
  capsys.readouterr()
  status = importlib.import_module(module).main([str(a) for a in args])
  out, err = capsys.readouterr()
  return subprocess.CompletedProcess([module, *args], status, out, err)


def _one_error(proc, module):
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  lines = proc.stderr.splitlines()
  assert len(lines) == 1, proc.stderr[-3000:]
  assert lines[0].startswith(f"python -m {module}: error: "), lines[0]
  return lines[0]


def _record_spans(path):
  """(begin, end) byte offsets of each record's payload in a TFRecord file."""
  data = open(path, "rb").read()
  spans, i = [], 0
  while i < len(data):
    n = int.from_bytes(data[i:i + 8], "little")
    spans.append((i + 12, i + 12 + n))
    i += 12 + n + 4
  return spans


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  """Good records, a corrupt copy (a byte flipped in record 1), a truncated copy (cut inside
  record 1), records of another seq_length, an empty run, an unfinished run; and a model
  trained for one step on the good records."""
  base = tmp_path_factory.mktemp("cli_errors")
  good = packs.qa_output_dir(str(base / "good"), num_packs=3)
  out = {"good": good}
  spans = _record_spans(os.path.join(good, SHARD))
  flipped = packs.as_job(good, "hotpotqa", str(base / "flipped"))
  data = bytearray(open(os.path.join(flipped, SHARD), "rb").read())
  data[(spans[1][0] + spans[1][1]) // 2] ^= 0x40
  open(os.path.join(flipped, SHARD), "wb").write(bytes(data))
  out["flipped"] = flipped
  cut = packs.as_job(good, "hotpotqa", str(base / "cut"))
  with open(os.path.join(cut, SHARD), "r+b") as f:
    f.truncate((spans[1][0] + spans[1][1]) // 2)
  out["cut"] = cut
  out["long"] = packs.qa_output_dir(str(base / "long"), seq_length=48, num_packs=1)
  empty = packs.as_job(good, "hotpotqa", str(base / "empty"))
  path = os.path.join(empty, manifest_lib.MANIFEST_FILE)
  m = json.load(open(path))
  m["counts"] = {"input": 1, "written": 0, "skipped": 0, "rejected": 1}
  m["rejected_by_reason"] = {"parse/invalid_json": 1}
  m["examples"] = {"documents": 0, "packs": 0}
  m["shards"] = []
  open(path, "w").write(manifest_lib.dumps(m))
  out["empty"] = empty
  unfinished = packs.as_job(good, "hotpotqa", str(base / "unfinished"))
  os.remove(os.path.join(unfinished, manifest_lib.COMPLETED_FILE))
  out["unfinished"] = unfinished
  model = str(base / "model")  # (trained in this process: the commands under test are not this)
  from model import configs  # pylint: disable=g-import-not-at-top
  from model.training import train_lib  # pylint: disable=g-import-not-at-top
  train_lib.train(good, model, train_config=configs.TrainConfig(steps=1), log_fn=lambda m: 0)
  out["model"] = model
  out["base"] = str(base)
  return out


# Each corruption once as a process (exit status, stderr) and once in this process.
@pytest.mark.parametrize("which, what, in_process", [
    ("flipped", "bad data checksum in record 1", True), ("cut", "truncated record 1", False)])
@pytest.mark.slow
def test_predict_names_the_corrupt_file_and_record(dirs, which, what, in_process, capsys):
  output = os.path.join(dirs["base"], f"pred_{which}.json")
  run = functools.partial(_run_main, capsys) if in_process else _run
  proc = run("model.predict", "--records_dir", dirs[which], "--model_dir", dirs["model"],
             "--output", output)
  line = _one_error(proc, "model.predict")
  assert line == (f"python -m model.predict: error: corrupt records: "
                  f"{os.path.join(dirs[which], SHARD)}: {what}")
  assert not os.path.exists(output)


@pytest.mark.parametrize("which, what, in_process", [
    ("flipped", "bad data checksum in record 1", False), ("cut", "truncated record 1", True)])
@pytest.mark.slow
def test_train_names_the_corrupt_file_and_record(dirs, which, what, in_process, tmp_path,
                                                  capsys):
  run = functools.partial(_run_main, capsys) if in_process else _run
  proc = run("model.train", "--records_dir", dirs[which], "--model_dir", tmp_path / "m",
             "--steps", 4, "--noshuffle")
  line = _one_error(proc, "model.train")
  assert line.endswith(f"corrupt records: {os.path.join(dirs[which], SHARD)}: {what}"), line


@pytest.mark.slow
def test_pretrain_names_the_corrupt_file_and_record(dirs, tmp_path):
  proc = _run("model.pretrain", "--records_dir", dirs["flipped"], "--model_dir", tmp_path / "m",
              "--preset", "tiny", "--steps", 4, "--noshuffle")
  line = _one_error(proc, "model.pretrain")
  assert line.endswith(f"corrupt records: {os.path.join(dirs['flipped'], SHARD)}: "
                       "bad data checksum in record 1"), line


# The errors below come after TensorFlow loads; in this process (the corrupt-record cases
# above check the same one-line error of predict and train as processes).
@pytest.mark.slow
def test_predict_on_records_longer_than_the_model(dirs, capsys):
  output = os.path.join(dirs["base"], "pred_long.json")
  proc = _run_main(capsys, "model.predict", "--records_dir", dirs["long"], "--model_dir",
                   dirs["model"], "--output", output)
  line = _one_error(proc, "model.predict")
  assert "max_seq_length 24 < records seq_length 48" in line, line
  assert not os.path.exists(output)


@pytest.mark.parametrize("which, what", [
    ("missing", "does not exist or is not a directory"),
    ("empty", "holds no records (its manifest counts 0 written documents)"),
    ("unfinished", "has no COMPLETED: its pipeline run failed or has not finished")])
@pytest.mark.slow
def test_predict_and_train_refuse_unusable_dirs(dirs, which, what, tmp_path):
  records = dirs.get(which, os.path.join(dirs["base"], "no_such_dir"))
  proc = _run("model.predict", "--records_dir", records, "--model_dir", dirs["model"],
              "--output", tmp_path / "p.json")
  assert what in _one_error(proc, "model.predict")
  assert not (tmp_path / "p.json").exists()
  proc = _run("model.train", "--records_dir", records, "--model_dir", tmp_path / "m")
  assert what in _one_error(proc, "model.train")
  assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_predict_with_a_missing_model_dir(dirs, tmp_path, capsys):
  proc = _run_main(capsys, "model.predict", "--records_dir", dirs["good"], "--model_dir",
                   tmp_path / "nope", "--output", tmp_path / "p.json")
  assert "config.json" in _one_error(proc, "model.predict")
  assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("module, argv, prefix", [
    ("model.train", ["--model_dir", "{m}"], "--records_dir: "),
    ("model.finetune", ["--task", "hotpotqa", "--model_dir", "{m}"], ""),
    ("model.pretrain", ["--model_dir", "{m}"], ""),
    ("model.predict", ["--model_dir", "{m}", "--output", "{m}.json"], ""),
    ("model.export", ["--model_dir", "{m}", "--output_dir", "{m}_export"], "")])
def test_an_unusable_records_dir_is_refused_before_tensorflow_loads(module, argv, prefix,
                                                                    tmp_path):
  """The commands read a local records dir's manifest (schemas.records_dir) before they import
  TensorFlow: a mistyped path is the library's own one line, at once, and nothing is written."""
  m = str(tmp_path / "m")
  missing = str(tmp_path / "no_such_dir")
  code = ("import sys; from {mod} import main; rc = main(sys.argv[1:]); "
          "print('tensorflow' in sys.modules); sys.exit(rc)").format(mod=module)
  env = dict(os.environ)
  proc = subprocess.run([sys.executable, "-c", code, "--records_dir", missing]
                        + [a.format(m=m) for a in argv], cwd=ROOT, env=env, text=True,
                        capture_output=True, timeout=120)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert proc.stdout.split() == ["False"], proc.stdout  # TensorFlow was never imported
  assert proc.stderr.splitlines() == [
      f"python -m {module}: error: {prefix}{missing} does not exist or is not a directory "
      "(expected a pipeline's --output_dir)"]
  assert os.listdir(tmp_path) == []
