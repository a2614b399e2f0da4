"""Fault injection for the model commands (and the records readers they share with the
inspector): every fault is one ``<prog>: error:`` line, a non-zero exit, and no temporary state.

Fast tests call the readers and :mod:`model.faults` in-process; the slow ones run commands:
in-process where only the output matters, as subprocesses where the process boundary is the
point (signals, a real full disk on a tmpfs mounted in a user namespace).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model import configs as configs_lib
from model.training import train_lib
from model.training import driver
from model import faults
from model.data import pack_reader as input_lib
from model.inference import predict_lib
from model.roberta_import import checkpoint as roberta_checkpoint
from model.roberta_import import mapping as roberta_mapping
from model.data import training_data
from model.evaluation import common as evaluation_common
from schemas import documents as documents_lib
from schemas import example_proto
from schemas import jsonl_qa
from schemas import records_dir
from schemas import safe_json
from schemas import tfrecord_io
from tests.model import packs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARD = "records-00000-of-00001.tfrecord"
DEEP = "[" * 200_000


def _copy(src: str, dst) -> str:
  return shutil.copytree(src, str(dst))


def _replace_record(d: str, index: int, payload: bytes) -> str:
  """Rewrites record ``index`` of ``d``'s shard with ``payload`` (valid checksums)."""
  path = os.path.join(d, SHARD)
  payloads = list(tfrecord_io.read_records(path))
  payloads[index] = payload
  with open(path, "wb") as f:
    f.write(b"".join(tfrecord_io.encode_record(p) for p in payloads))
  return d


def _bad_payloads():
  wrong_dtype = packs.empty_pack(4, 24)
  wrong_dtype["token_ids"] = [b"x"] * (4 * 24)
  dtypes = dict(packs.DTYPES, token_ids="bytes")
  flat = {k: (np.asarray(v).reshape(-1).tolist() if dtypes[k] == "int64" else list(v))
          for k, v in wrong_dtype.items()}
  return {
      "garbage": (b"\xff\xfe not a protocol buffer " * 8, "is not a tf.train.Example"),
      "features": (example_proto.encode_example({"schema_version": ["1.0.0"], "pack_id": ["x"]},
                                               packs.DTYPES), "lacks the features token_ids"),
      "dtype": (example_proto.encode_example(flat, dtypes),
                "feature 'token_ids' holds bytes values, expected int64"),
      "size": (packs.encode_pack(packs.empty_pack(4, 12)), "'token_ids' has 48 values"),
  }


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  base = tmp_path_factory.mktemp("faults")
  good = packs.qa_output_dir(str(base / "good"), num_packs=3)
  out = {"base": base, "good": good,
         "long": packs.qa_output_dir(str(base / "long"), seq_length=48, num_packs=1)}
  out["missing"] = _copy(good, base / "missing")
  os.remove(os.path.join(out["missing"], SHARD))
  for name, (payload, _) in _bad_payloads().items():
    out[name] = _replace_record(_copy(good, base / name), 2, payload)
  return out


# --- a listed shard deleted ----------------------------------------------------------------


def test_a_missing_shard_is_named_before_anything_is_read(dirs):
  d = dirs["missing"]
  want = (f"shard {d}/{SHARD} listed in {d}/manifest.json is missing: the records dir {d} is "
          "incomplete")
  with pytest.raises(FileNotFoundError) as e:
    records_dir.read_manifest(d)
  assert str(e.value).startswith(want)
  with pytest.raises(FileNotFoundError, match="is missing"):
    input_lib.read_manifest(d)  # through tf.io.gfile, as the trainer and predict read it
  with pytest.raises(training_data.TrainingError, match="is missing"):
    training_data.read_manifests([dirs["good"], d])
  # A shard deleted while a run reads it: TensorFlow's NotFoundError gets the same line.
  error = tf.errors.NotFoundError(None, None, f"{d}/{SHARD}; No such file or directory")
  assert input_lib.records_error(error, [d]).startswith(want)


# --- valid checksums around a payload that is not a pack ---------------------------------


@pytest.mark.parametrize("name", sorted(_bad_payloads()))
def test_a_bad_payload_is_named_with_its_file_and_index(dirs, name):
  d = dirs[name]
  message = _bad_payloads()[name][1]
  with pytest.raises(records_dir.BadRecordError, match=message) as e:
    list(records_dir.iter_packs(d))
  assert str(e.value).startswith(f"{d}/{SHARD} record 2")
  # What tf.data raises on such a record (an invalid argument, or a UnicodeDecodeError when
  # the garbage lands in TensorFlow's message) becomes one line naming the same record.
  for error in (tf.errors.InvalidArgumentError(None, None, "Could not parse example input"),
                UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")):
    line = input_lib.records_error(error, [d])
    assert line.startswith(f"bad record {d}/{SHARD} record 2") and message in line


def test_sound_records_leave_other_errors_alone(dirs):
  """An error the records did not cause is not blamed on them (it stays a bug)."""
  error = tf.errors.InvalidArgumentError(None, None, "Incompatible shapes: [2] vs. [3]")
  assert input_lib.records_error(error, [dirs["good"]]) is None
  assert input_lib.records_error(ValueError("x"), [dirs["garbage"]]) is None


# --- records dirs read together ------------------------------------------------------------


def test_records_dirs_read_together_must_agree(dirs):
  with pytest.raises(training_data.TrainingError) as e:
    training_data.read_manifests([dirs["good"], dirs["long"]])
  assert str(e.value) == (f"{dirs['long']} has seq_length 48 but {dirs['good']} has 24; "
                          "records trained together must agree")


# --- deep JSON in every reader of a user file ----------------------------------------------


def test_deep_json_is_one_line_in_every_reader(dirs, tmp_path):
  deep = tmp_path / "deep.json"
  deep.write_text(DEEP)
  too_deep = "JSON nested 200000 levels deep"
  man = _copy(dirs["good"], tmp_path / "deep_manifest")
  (tmp_path / "deep_manifest" / "manifest.json").write_text(DEEP)
  with pytest.raises(safe_json.JsonTooDeepError, match=f"deep_manifest/manifest.json: {too_deep}"):
    records_dir.read_manifest(man)
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  (model_dir / "config.json").write_text(DEEP)
  with pytest.raises(safe_json.JsonTooDeepError, match=f"model/config.json: {too_deep}"):
    configs_lib.load_configs(str(model_dir))
  with pytest.raises(safe_json.JsonTooDeepError, match=f"--model_config x: {too_deep}"):
    configs_lib.ModelConfig.from_json(DEEP, "--model_config x")
  with pytest.raises(evaluation_common.InputError, match=f"gold file {deep}: {too_deep}"):
    evaluation_common.load_json(str(deep), "gold")
  hf = tmp_path / "hf"
  hf.mkdir()
  (hf / "config.json").write_text(DEEP)
  with pytest.raises(roberta_checkpoint.CheckpointError, match=too_deep):
    roberta_checkpoint.read_hf_config(str(hf))
  side = _copy(dirs["good"], tmp_path / "deep_side")
  [doc] = documents_lib.document_files(side)
  with open(doc, "a") as f:
    f.write(DEEP + "\n")
  with pytest.raises(safe_json.JsonTooDeepError, match=too_deep):
    documents_lib.load(side)
  with pytest.raises(jsonl_qa.FormatError, match=too_deep) as e:
    jsonl_qa.parse_line('{"id": ' + DEEP[1:])
  assert e.value.reason == "json_too_deep"


# --- half-written checkpoints, full disks, signals -----------------------------------------


def _fake_checkpoints(d, steps, state):
  d.mkdir(parents=True, exist_ok=True)
  for step in steps:
    (d / f"ckpt-{step}.index").write_bytes(b"i")
    (d / f"ckpt-{step}.data-00000-of-00001").write_bytes(b"d")
  (d / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{state}"\n'
                                f'all_model_checkpoint_paths: "ckpt-{state}"\n')


def test_half_written_checkpoints_are_removed(tmp_path):
  d = tmp_path / "m"
  _fake_checkpoints(d, [1, 2, 3], state=2)  # ckpt-3 written, never recorded
  (d / "ckpt-4_temp").mkdir()
  (d / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"x")
  _fake_checkpoints(d / "best", [5], state=5)
  (d / "best" / "ckpt-6_temp").mkdir()
  removed = faults.remove_checkpoint_temp(str(d))
  assert sorted(os.path.relpath(p, d) for p in removed) == [
      "best/ckpt-6_temp", "ckpt-3.data-00000-of-00001", "ckpt-3.index", "ckpt-4_temp"]
  assert sorted(os.listdir(d)) == ["best", "checkpoint", "ckpt-1.data-00000-of-00001",
                                   "ckpt-1.index", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]


def _command(body):
  @faults.command("model.test")
  def main():
    faults.on_failure(lambda: cleaned.append(True))
    return body()
  cleaned = []
  return main, cleaned


def _raise(error):
  def body():
    raise error
  return body


@pytest.mark.parametrize("error, status, line", [
    (OSError(errno.ENOSPC, "No space left on device", "/d/out.json.tmp-7"), 1,
     "no space left on device writing /d/out.json; partial outputs were removed: free space "
     "and run the command again"),
    (tf.errors.ResourceExhaustedError(None, None, "{{function_node SaveV2}} /m/ckpt-3_temp/part"
                                      "-00000.tempstate1; No space left on device [Op:SaveV2]"),
     1, "no space left on device writing /m/ckpt-3; partial outputs were removed: free space and "
     "run the command again"),
    (KeyboardInterrupt(), 130, "interrupted (Ctrl-C); partial outputs were removed"),
])
def test_full_disk_and_ctrl_c_are_one_line_after_the_cleanup(error, status, line, capfd):
  main, cleaned = _command(_raise(error))
  assert main() == status
  assert capfd.readouterr().err == f"python -m model.test: error: {line}\n"
  assert cleaned == [True]


def test_sigterm_is_exit_143_after_the_cleanup(capfd):
  main, cleaned = _command(lambda: os.kill(os.getpid(), signal.SIGTERM) or __import__(
      "time").sleep(5))
  previous = signal.getsignal(signal.SIGTERM)
  assert main() == 143
  assert capfd.readouterr().err == ("python -m model.test: error: terminated (SIGTERM); partial "
                                    "outputs were removed\n")
  assert cleaned == [True] and signal.getsignal(signal.SIGTERM) is previous


def test_other_errors_keep_their_traceback_but_are_cleaned_up():
  main, cleaned = _command(_raise(RuntimeError("a bug")))
  with pytest.raises(RuntimeError, match="a bug"):
    main()
  assert cleaned == [True]


def test_a_prediction_file_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
  out = tmp_path / "predictions.json"
  out.write_text("earlier\n")
  monkeypatch.setenv(faults.FAULT_ENV, "predict:ENOSPC")
  with pytest.raises(OSError) as e:
    predict_lib.write_json_atomically(str(out), {"q": "a"})
  assert e.value.errno == errno.ENOSPC and faults.full_disk_path(e.value).endswith(".tmp-"
                                                                                   f"{os.getpid()}")
  assert os.listdir(tmp_path) == ["predictions.json"] and out.read_text() == "earlier\n"
  monkeypatch.delenv(faults.FAULT_ENV)
  predict_lib.write_json_atomically(str(out), {"q": "a"})
  assert json.loads(out.read_text()) == {"q": "a"} and os.listdir(tmp_path) == [
      "predictions.json"]


# --- RoBERTa dirs ---------------------------------------------------------------------------

H = 32


def _hf_dir(path, vocab=True, position_width=H) -> str:
  """A one-layer Hugging Face RoBERTa dir (safetensors written with NumPy) whose vocab.json
  covers our default tokens."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  ours = roberta_mapping.default_tokens()
  rng = np.random.RandomState(0)
  t = {"embeddings.word_embeddings.weight": (len(ours), H),
       "embeddings.position_embeddings.weight": (26, position_width),
       "embeddings.token_type_embeddings.weight": (1, H),
       "embeddings.LayerNorm.weight": (H,), "embeddings.LayerNorm.bias": (H,)}
  for name, shape in (("attention.self.query", (H, H)), ("attention.self.key", (H, H)),
                      ("attention.self.value", (H, H)), ("attention.output.dense", (H, H)),
                      ("intermediate.dense", (2 * H, H)), ("output.dense", (H, 2 * H))):
    t[f"encoder.layer.0.{name}.weight"] = shape
    t[f"encoder.layer.0.{name}.bias"] = shape[:1]
  for name in ("attention.output.LayerNorm", "output.LayerNorm"):
    t[f"encoder.layer.0.{name}.weight"] = t[f"encoder.layer.0.{name}.bias"] = (H,)
  os.makedirs(path)
  save_file({k: rng.normal(size=s).astype(np.float32) for k, s in t.items()},
            os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(dict(model_type="roberta", vocab_size=len(ours), hidden_size=H,
                   num_attention_heads=2, num_hidden_layers=1, intermediate_size=2 * H,
                   max_position_embeddings=26, type_vocab_size=1, layer_norm_eps=1e-12,
                   pad_token_id=1, hidden_act="gelu"), f)
  if vocab:
    with open(os.path.join(path, "vocab.json"), "w") as f:
      json.dump({tok: i for i, tok in enumerate(ours)}, f)
  return str(path)


def test_a_roberta_dir_without_vocab_json_is_named(tmp_path):
  d = _hf_dir(tmp_path / "hf", vocab=False)
  with pytest.raises(training_data.TrainingError) as e:
    driver.check_roberta_dir(d)
  assert str(e.value).startswith(f"--init_roberta {d} has no vocab.json: the dir must hold")
  os.remove(os.path.join(d, "model.safetensors"))
  with pytest.raises(training_data.TrainingError,
                     match="has no vocab.json, no model.safetensors or pytorch_model.bin"):
    driver.check_roberta_dir(d)


# --- the commands ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(dirs):
  d = str(dirs["base"] / "model")
  train_lib.train(dirs["good"], d, train_config=configs_lib.TrainConfig(steps=1), log_fn=lambda m: 0)
  return d


# TensorFlow's C++ log lines: a command silences them (it sets TF_CPP_MIN_LOG_LEVEL=2 before
# TensorFlow loads); in this process TensorFlow was loaded before, so they are left out here.
_TF_LOG = re.compile(r"^([IWEF]\d{4} [\d:.]+ +\d+ \w+\.cc:\d+\]|\t \[\[)")


def _one_line(capfd, prog):
  err = capfd.readouterr().err
  lines = [line for line in err.splitlines() if not _TF_LOG.match(line)]
  assert len(lines) == 1 and lines[0].startswith(f"python -m {prog}: error: "), err[-3000:]
  return lines[0]


@pytest.mark.slow
def test_predict_and_finetune_on_hostile_records(dirs, model_dir, tmp_path, capfd):
  from model import finetune, predict  # pylint: disable=g-import-not-at-top
  out = tmp_path / "p.json"
  for name, want in (("missing", "is missing"), ("garbage", "record 2: the payload is not")):
    assert predict.main(["--records_dir", dirs[name], "--model_dir", model_dir,
                         "--output", str(out)]) == 1
    assert want in _one_line(capfd, "model.predict")
  assert predict.main(["--records_dir", dirs["long"], "--model_dir", model_dir,
                       "--output", str(out)]) == 1
  assert _one_line(capfd, "model.predict").endswith(
      f"--model_dir {model_dir} does not fit --records_dir {dirs['long']}: model max_seq_length "
      "24 < records seq_length 48")
  assert not out.exists()
  # Garbage in the last record: training starts, then stops at it with one line.
  m = tmp_path / "ft"
  assert finetune.main(["--task", "hotpotqa", "--records_dir", dirs["missing"], "--model_dir",
                        str(m), "--preset", "tiny", "--steps", "3", "--noshuffle"]) == 1
  assert "is missing" in _one_line(capfd, "model.finetune") and not m.exists()
  assert finetune.main(["--task", "hotpotqa", "--records_dir", dirs["dtype"], "--model_dir",
                        str(m), "--preset", "tiny", "--steps", "3", "--noshuffle",
                        "--log_every", "1"]) == 1
  assert _one_line(capfd, "model.finetune").endswith(
      f"bad record {dirs['dtype']}/{SHARD} record 2: feature 'token_ids' holds bytes values, "
      "expected int64")


@pytest.mark.slow
def test_finetune_from_a_roberta_tensor_of_the_wrong_shape(tmp_path, capfd):
  from model import finetune  # pylint: disable=g-import-not-at-top
  records = packs.qa_output_dir(str(tmp_path / "r"), vocab_size=50261, num_packs=1)
  bad = _hf_dir(tmp_path / "hf", position_width=16)
  args = ["--task", "hotpotqa", "--records_dir", records, "--model_dir", str(tmp_path / "m"),
          "--preset", "tiny", "--steps", "1"]
  assert finetune.main(args + ["--init_roberta", bad]) == 1
  assert _one_line(capfd, "model.finetune").endswith(
      f"--init_roberta: {bad}/model.safetensors: tensor 'embeddings.position_embeddings.weight' "
      "has shape (26, 16), expected ('any', 32)")
  assert not (tmp_path / "m").exists()
  os.remove(os.path.join(bad, "vocab.json"))
  assert finetune.main(args + ["--init_roberta", bad]) == 1
  assert "has no vocab.json" in _one_line(capfd, "model.finetune")


def _run(module, *args, env=None, **kwargs):
  e = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
  return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=e,
                        text=True, capture_output=True, timeout=120, **kwargs)


def _temp_state(d):
  return [os.path.join(r, n) for r, ds, fs in os.walk(d) for n in ds + fs
          if "_temp" in n or ".tmp-" in n]


@pytest.mark.slow
def test_signals_at_each_training_phase_are_one_line_and_leave_no_temp_state(dirs, tmp_path):
  m = tmp_path / "m"
  train = ["model.train", "--records_dir", dirs["good"], "--model_dir", m, "--steps", "3",
           "--checkpoint_every", "1"]
  for phase, sig, status in (("build", "SIGTERM", 143), ("train", "SIGINT", 130),
                             ("checkpoint", "SIGTERM", 143)):
    proc = _run(*train, env={faults.FAULT_ENV: f"{phase}:{sig}"})
    assert proc.returncode == status, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1].startswith("python -m model.train: error: "), proc.stderr
    assert len(proc.stderr.splitlines()) <= 2 and not _temp_state(m)
    # Killed while writing its first checkpoint: its files are gone, nothing to resume from.
    assert tf.train.latest_checkpoint(str(m)) is None and not list(m.glob("ckpt-*"))
  proc = _run(*train)
  assert proc.returncode == 0 and tf.train.latest_checkpoint(str(m)).endswith("ckpt-3")


@pytest.mark.slow
def test_signals_while_predict_and_export_write_leave_no_output(dirs, model_dir, tmp_path):
  out = tmp_path / "p.json"
  proc = _run("model.predict", "--records_dir", dirs["good"], "--model_dir", model_dir,
              "--output", out, env={faults.FAULT_ENV: "predict:SIGTERM"})
  assert proc.returncode == 143 and proc.stderr.splitlines() == [
      "python -m model.predict: error: terminated (SIGTERM); partial outputs were removed"]
  assert not out.exists() and not _temp_state(tmp_path)
  proc = _run("model.export", "--model_dir", model_dir, "--output_dir", tmp_path / "e",
              "--segments_per_pack", "4", env={faults.FAULT_ENV: "export:SIGINT"})
  assert proc.returncode == 130 and proc.stderr.splitlines() == [
      "python -m model.export: error: interrupted (Ctrl-C); partial outputs were removed"]
  assert not (tmp_path / "e").exists()


_TMPFS_SCRIPT = r"""
set -e
mount -t tmpfs -o size=3m tmpfs "$1"
cd "$2"
set +e
"$3" -m model.train --records_dir "$4" --model_dir "$1/m" --steps 3 --checkpoint_every 1 \
    --max_checkpoints 5 > /dev/null 2> "$5/full.err"
echo $? > "$5/full.rc"
ls -a "$1/m" > "$5/full.ls"
rm "$1"/m/ckpt-1.*
"$3" -m model.train --records_dir "$4" --model_dir "$1/m" --steps 3 --checkpoint_every 1 \
    --max_checkpoints 1 > /dev/null 2> "$5/rerun.err"
echo $? > "$5/rerun.rc"
ls -a "$1/m" > "$5/rerun.ls"
"""


@pytest.mark.slow
def test_a_full_disk_while_training_is_one_line_and_a_rerun_resumes(dirs, tmp_path):
  """A real full disk: a 3 MB tmpfs holds two checkpoints of the tiny model, not three."""
  if shutil.which("unshare") is None:
    pytest.skip("no unshare to mount a tmpfs")
  probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs "
                          f"{tmp_path}"], capture_output=True, text=True)
  if probe.returncode:
    pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
  disk, logs = tmp_path / "disk", tmp_path / "logs"
  disk.mkdir()
  logs.mkdir()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  subprocess.run(["unshare", "-rm", "sh", "-c", _TMPFS_SCRIPT, "sh", str(disk), ROOT,
                  sys.executable, dirs["good"], str(logs)], check=True, env=env, timeout=180)
  err = (logs / "full.err").read_text().splitlines()
  assert (logs / "full.rc").read_text().strip() == "1"
  assert err == [f"python -m model.train: error: no space left on device writing {disk}/m/ckpt-3"
                 "; partial outputs were removed: free space and run the command again; a rerun "
                 "resumes from the last checkpoint"]
  assert "_temp" not in (logs / "full.ls").read_text()
  assert (logs / "rerun.rc").read_text().strip() == "0", (logs / "rerun.err").read_text()
  assert "resuming from" in (logs / "rerun.err").read_text()
  assert (logs / "rerun.ls").read_text().split() == [
      ".", "..", "checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index", "config.json",
      "metrics.json", "tb"]
