"""What a user sees of a training run besides its log lines: TensorBoard's ``train`` and
``eval`` runs (dev metrics at every evaluation, on the training scalars' charts where they
measure the same thing), the ``resuming from`` line and ``resumed_from_step``, the older flat
``tb/`` layout carried over, and a changed schedule refused on resume unless
``--allow_schedule_change``."""

from __future__ import annotations

import glob
import json
import os
from typing import Dict

import pytest
import tensorflow as tf

from model import configs, finetune, pretrain, train
from model.training import optimization, trainer
from tests.model import packs
from tests.model.training.test_trainer import hotpot_gold


def _scalars(run_dir: str) -> Dict[str, Dict[int, float]]:
  """tag -> {step: value} of every scalar in the event files of ``run_dir`` (one run)."""
  out: Dict[str, Dict[int, float]] = {}
  for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for v in event.summary.value:
        out.setdefault(v.tag, {})[event.step] = float(tf.make_ndarray(v.tensor))
  return out


def _json_lines(text: str):
  return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
  """Two learnable HotpotQA-like packs and the official-format gold file of their questions."""
  tmp = tmp_path_factory.mktemp("qa")
  records = packs.qa_output_dir(str(tmp / "records"), num_packs=2)
  return records, hotpot_gold(records, str(tmp / "gold.json"))


def _argv(qa, model_dir, steps, *extra, learning_rate="3e-3"):
  records, _ = qa
  return ["--task", "hotpotqa", "--records_dir", records, "--model_dir", model_dir,
          "--preset", "tiny", "--steps", str(steps), "--learning_rate", learning_rate,
          "--log_every", "1", "--checkpoint_every", "3", *extra]


def test_schedule_changes_name_each_changed_setting():
  old = configs.TrainConfig(steps=10, warmup_steps=1, learning_rate=1e-3)
  new = configs.TrainConfig(steps=20, warmup_steps=2, learning_rate=1e-3, optimizer="lamb",
                            log_every=5, checkpoint_every=7)  # not schedule settings
  assert trainer.schedule_changes(old, new) == [
      "steps 10 -> 20", "warmup_steps 1 -> 2", "optimizer adamw -> lamb"]
  assert trainer.schedule_changes(old, old) == []


def test_dev_metrics_share_the_training_charts_where_they_measure_the_same():
  assert trainer._eval_summary_name("mlm_loss") == "loss/mlm"
  assert trainer._eval_summary_name("mlm_accuracy") == "mlm/accuracy"
  assert trainer._eval_summary_name("memory_noop_rate") == "memory/noop_rate"
  assert trainer._eval_summary_name("f1") == "eval/f1"
  assert trainer._eval_summary_name("rouge_l") == "eval/rouge_l"


@pytest.mark.parametrize("module", [finetune, pretrain, train])
def test_allow_schedule_change_is_off_by_default(module):
  p = module.build_parser()
  required = ["--records_dir", "r", "--model_dir", "m"] + (
      ["--task", "hotpotqa"] if module is finetune else [])
  assert p.parse_args(required).allow_schedule_change is False
  assert p.parse_args(required + ["--allow_schedule_change"]).allow_schedule_change is True


@pytest.mark.slow
def test_finetune_writes_a_train_run_and_an_eval_run(qa, tmp_path, capsys):
  records, gold = qa
  model_dir = str(tmp_path / "m")
  assert finetune.main(_argv(qa, model_dir, 6, "--dev_records_dir", records, "--gold", gold,
                             "--eval_every", "3", "--patience", "0")) == 0
  summary = _json_lines(capsys.readouterr().out)[-1]
  tb = os.path.join(model_dir, "tb")
  assert sorted(os.listdir(tb)) == ["eval", "train"]  # two runs, no events at the top
  train, dev = _scalars(os.path.join(tb, "train")), _scalars(os.path.join(tb, "eval"))
  for tag in ("loss/total", "loss/span_begin", "learning_rate", "segments_per_second"):
    assert sorted(train[tag]) == [1, 2, 3, 4, 5, 6], tag
  assert train["loss/total"][6] == pytest.approx(summary["last_loss"])
  assert not any(t.startswith("eval/") for t in train)
  evals = {e["step"]: e["eval"] for e in summary["evaluations"]}
  assert sorted(evals) == [3, 6]
  for name in ("em", "f1", "sp_f1", "joint_f1"):
    assert dev[f"eval/{name}"] == pytest.approx({s: m[name] for s, m in evals.items()}), name
  assert set(dev) == {f"eval/{k}" for k in evals[3]}


@pytest.mark.slow
def test_pretrain_dev_metrics_are_on_the_training_charts(tmp_path, capsys):
  from tests.model.training.test_trainer import PRETRAIN_TINY  # pylint: disable=g-import-not-at-top
  records = packs.qa_output_dir(str(tmp_path / "records"), num_packs=2)
  model_dir = str(tmp_path / "m")
  assert pretrain.main(["--records_dir", records, "--model_dir", model_dir, "--steps", "4",
                        "--log_every", "2", "--dev_records_dir", records, "--eval_every", "2",
                        "--coref_weight", "0"] + PRETRAIN_TINY) == 0
  summary = _json_lines(capsys.readouterr().out)[-1]
  train = _scalars(os.path.join(model_dir, "tb", "train"))
  dev = _scalars(os.path.join(model_dir, "tb", "eval"))
  for tag in ("loss/mlm", "mlm/accuracy"):
    assert sorted(train[tag]) == sorted(dev[tag]) == [2, 4], tag
  assert dev["loss/mlm"][4] == pytest.approx(summary["final_eval"]["mlm_loss"])
  assert dev["eval/packs"][4] == summary["final_eval"]["packs"]


class _Crash(Exception):
  pass


@pytest.mark.slow
def test_resume_says_where_it_resumed_and_keeps_an_old_flat_tb(qa, tmp_path, capsys,
                                                               monkeypatch):
  model_dir = str(tmp_path / "m")

  def crashing_log_fn(self):  # the run dies after writing ckpt-3, during step 5's log
    def log(m):
      if m["step"] == 5:
        raise _Crash()
    return log

  with monkeypatch.context() as m:
    m.setattr(trainer.Trainer, "_default_log_fn", crashing_log_fn)
    with pytest.raises(_Crash):
      finetune.main(_argv(qa, model_dir, 6))
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-3")
  # The layout of older runs: event files directly in tb/.
  tb = os.path.join(model_dir, "tb")
  for path in glob.glob(os.path.join(tb, "train", "*")):
    os.rename(path, os.path.join(tb, os.path.basename(path)))
  os.rmdir(os.path.join(tb, "train"))
  capsys.readouterr()
  assert finetune.main(_argv(qa, model_dir, 6)) == 0
  out = capsys.readouterr()
  ckpt = os.path.join(model_dir, "ckpt-3")
  assert f"resuming from {ckpt} (step 3 of 6)" in out.err.splitlines()
  summary = _json_lines(out.out)[-1]
  assert summary["resumed_from_step"] == 3 and summary["steps"] == 6
  assert sorted(os.listdir(tb)) == ["train"]  # no evaluation: no eval run
  assert len(os.listdir(os.path.join(tb, "train"))) == 2  # the old file and the new one
  assert sorted(_scalars(os.path.join(tb, "train"))["loss/total"]) == [1, 2, 3, 4, 5, 6]
  # A fresh run says nothing of resuming.
  assert finetune.main(_argv(qa, str(tmp_path / "fresh"), 1)) == 0
  out = capsys.readouterr()
  assert "resuming" not in out.err and _json_lines(out.out)[-1]["resumed_from_step"] is None


@pytest.mark.slow
def test_changed_steps_on_resume_is_refused_unless_allowed(qa, tmp_path, capsys):
  model_dir = str(tmp_path / "m")
  assert finetune.main(_argv(qa, model_dir, 3)) == 0
  capsys.readouterr()
  with open(os.path.join(model_dir, "config.json")) as f:
    saved = f.read()
  # 10% warm-up: round(0.3) = 0 steps of 3, round(0.6) = 1 of 6.
  assert finetune.main(_argv(qa, model_dir, 6, learning_rate="1e-3")) == 1
  out = capsys.readouterr()
  assert out.err.splitlines() == [
      f"python -m model.finetune: error: {model_dir} was trained with another schedule: "
      "steps 3 -> 6, warmup_steps 0 -> 1, learning_rate 0.003 -> 0.001; resume with the run's "
      "own flags, or give --allow_schedule_change to train on with the new schedule"]
  with open(os.path.join(model_dir, "config.json")) as f:
    assert f.read() == saved  # nothing written
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-3")

  assert finetune.main(_argv(qa, model_dir, 6, "--allow_schedule_change")) == 0
  out = capsys.readouterr()
  assert [x for x in out.err.splitlines() if x.startswith("warning:")] == [
      f"warning: resuming {model_dir} with a changed schedule: steps 3 -> 6, warmup_steps "
      "0 -> 1; the new one applies from the resumed step on"]
  lines = _json_lines(out.out)
  summary = lines[-1]
  assert summary["resumed_from_step"] == 3 and summary["steps"] == 6
  _, tc = configs.load_configs(model_dir)
  assert (tc.steps, tc.warmup_steps) == (6, 1)  # saved: the next resume compares with it
  # Step 4 (update index 3) uses the new schedule's rate.
  lr = {x["step"]: x["learning_rate"] for x in lines if "learning_rate" in x}
  assert lr[4] == pytest.approx(float(optimization.make_schedule(tc)(3)))


@pytest.mark.slow
def test_model_train_refuses_a_changed_schedule_on_resume_too(qa, tmp_path, capsys):
  records, _ = qa
  model_dir = str(tmp_path / "m")
  argv = ["--records_dir", records, "--model_dir", model_dir, "--preset", "tiny",
          "--checkpoint_every", "2"]
  assert train.main(argv + ["--steps", "2"]) == 0
  capsys.readouterr()
  assert train.main(argv + ["--steps", "3"]) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.train: error: {model_dir} was trained with another schedule: "
      "steps 2 -> 3; resume with the run's own flags, or give --allow_schedule_change to train "
      "on with the new schedule"]
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-2")
  assert train.main(argv + ["--steps", "3", "--allow_schedule_change"]) == 0
  assert json.loads(capsys.readouterr().out.splitlines()[-1])["steps"] == 3
