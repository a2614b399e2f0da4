"""Progress lines of the training and prediction commands (time-based, also while the first
step compiles), ``--steps`` means steps (early stopping only with ``--patience``, and then
reported), a rerun of a finished run trains nothing, and TensorBoard gets every run's last
step (issue 41, items 4 and 5)."""

import contextlib
import io
import json
import os
import re
import shutil
import time

import pytest
import tensorflow as tf

from model import finetune, predict, progress as progress_lib
from model.training import trainer
from tests.model import packs
from tests.model.training.test_trainer import hotpot_gold

LINE = re.compile(r"^progress: step (\d+)/(\d+) \(\d+%\)")


class FakeClock:

  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_progress_lines_with_a_fake_clock():
  clock, lines = FakeClock(), []
  p = progress_lib.Progress(20, interval=10, clock=clock, write=lines.append, terminal=False)
  p.set_phase("building the model")  # a phase is announced at once
  assert lines == ["progress: step 0/20 (0%), building the model (0 s so far)"]
  clock.now += 4
  p.tick()
  assert len(lines) == 1  # not due yet
  p.set_phase("compiling the first step")
  clock.now += 12
  p.tick()  # the thread's line while the first step compiles
  assert lines[1:] == ["progress: step 0/20 (0%), compiling the first step (0 s so far)",
                       "progress: step 0/20 (0%), compiling the first step (12 s so far)"]
  p.update(1, loss=2.5)  # the first step (its trace) sets no rate
  clock.now += 8
  p.update(5, loss=1.25)  # 4 steps in 8 s: 0.5 steps/s, 15 steps left: 30 s
  assert len(lines) == 3  # 8 s since the last line: none yet
  clock.now += 2
  p.tick()
  assert lines[-1] == "progress: step 5/20 (25%), loss 1.2500, 0.5 steps/s, ETA 30 s"
  clock.now += 200
  p.update(9, loss=1.0)  # 8 steps in 210 s; a line is due at once (no thread needed)
  assert lines[-1] == ("progress: step 9/20 (45%), loss 1.0000, 0.0381 steps/s, "
                       "ETA 4 min 49 s")
  assert len(lines) == 5
  # Prediction counts packs.
  q = progress_lib.Progress(4, unit="packs", what="predicting", interval=10, clock=clock,
                            write=lines.append, terminal=False)
  q.update(1)
  clock.now += 3
  q.update(4)
  clock.now += 10
  q.tick()
  assert lines[-1] == "progress: predicting 4/4 packs (100%), 1 packs/s"


def test_progress_on_a_terminal_prints_only_after_silence():
  clock, lines = FakeClock(), []
  p = progress_lib.Progress(20, interval=10, clock=clock, write=lines.append, terminal=True)
  clock.now += 11
  p.output_shown()  # the progress bar moved
  p.tick()
  assert lines == []
  clock.now += 10
  p.tick()
  assert lines == ["progress: step 0/20 (0%)"]


def test_progress_thread_prints_while_the_main_thread_is_busy():
  lines = []
  with progress_lib.Progress(3, interval=0.02, write=lines.append, terminal=False) as p:
    p.set_phase("compiling the first step", announce=False)
    time.sleep(0.3)  # a long first trace: the main thread prints nothing
  n = len(lines)
  time.sleep(0.05)
  assert len(lines) == n >= 3  # and nothing after the command ended
  assert all(x.startswith("progress: step 0/3 (0%), compiling the first step (") for x in lines)


def test_duration():
  assert [progress_lib.duration(s) for s in (0.4, 59.6, 61, 3600 * 2 + 7 * 60 + 5)] == [
      "0 s", "1 min 00 s", "1 min 01 s", "2 h 07 min"]


def test_checkpoint_step_and_patience_flags(tmp_path, capsys):
  assert trainer.checkpoint_step("/m/ckpt-12") == 12 and trainer.checkpoint_step(None) is None
  assert trainer.checkpoint_step("/m/ckpt-x") is None
  # Early stopping is asked for with a dev set, never by default.
  args = finetune.build_parser().parse_args(["--task", "hotpotqa", "--records_dir", "r",
                                             "--model_dir", "m"])
  assert args.patience is None
  with pytest.raises(SystemExit) as e:
    finetune.main(["--task", "hotpotqa", "--records_dir", str(tmp_path / "r"), "--model_dir",
                   str(tmp_path / "m"), "--patience", "2"])
  assert e.value.code == 2
  assert "--patience needs --dev_records_dir and --gold" in capsys.readouterr().err


# --- tiny runs ------------------------------------------------------------------------------

def _finetune(argv, interval="0.05"):
  """``(code, stdout, stderr)`` of ``model.finetune`` in-process, progress every ``interval``."""
  out, err = io.StringIO(), io.StringIO()
  old = os.environ.get(progress_lib.INTERVAL_ENV)
  os.environ[progress_lib.INTERVAL_ENV] = interval
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      code = finetune.main(argv)
  finally:
    if old is None:
      del os.environ[progress_lib.INTERVAL_ENV]
    else:
      os.environ[progress_lib.INTERVAL_ENV] = old
  return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Two tiny fine-tuning runs with a learning rate too small to improve the dev F1: ``plain``
  (--steps 8, no --patience) and ``patient`` (--steps 20 --patience 2 --log_every 50)."""
  tmp = tmp_path_factory.mktemp("runs")
  records = packs.qa_output_dir(str(tmp / "records"), num_packs=2)
  gold = hotpot_gold(records, str(tmp / "gold.json"))
  common = ["--task", "hotpotqa", "--records_dir", records, "--dev_records_dir", records,
            "--gold", gold, "--preset", "tiny", "--eval_every", "2", "--learning_rate", "1e-12"]
  result = {"records": records, "common": common}
  for name, extra in (("plain", ["--steps", "8", "--checkpoint_every", "4", "--log_every", "1"]),
                      ("patient", ["--steps", "20", "--patience", "2", "--log_every", "50"])):
    argv = common + ["--model_dir", str(tmp / name)] + extra
    result[name] = (argv,) + _finetune(argv)
  return result


def _summary(stdout):
  return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_steps_are_honoured_without_patience(runs):
  _, code, out, err = runs["plain"]
  assert code == 0, err
  summary = _summary(out)
  assert summary["steps"] == summary["planned_steps"] == 8 and not summary["stopped_early"]
  f1 = [e["eval"]["f1"] for e in summary["evaluations"]]
  assert [e["step"] for e in summary["evaluations"]] == [2, 4, 6, 8]
  assert len(set(f1)) == 1  # no improvement after the first: --patience 2 would stop at 6
  assert summary["stop_reason"] is None and summary["best_step"] == 2
  assert "stopped early" not in err


@pytest.mark.slow
def test_progress_lines_of_a_tiny_run(runs):
  _, code, out, _ = runs["plain"]
  lines = out.strip().splitlines()
  progress = [x for x in lines if x.startswith("progress: ")]
  assert not any(x.startswith("progress: ") for x in lines[-1:])  # the summary stays last
  assert progress[0] == ("progress: step 0/8 (0%), building the model, the optimizer and the "
                         "input pipeline (0 s so far)")
  assert any(x.startswith("progress: step 0/8 (0%), compiling the first step (") for x in progress)
  steps = [int(LINE.match(x).group(1)) for x in progress]
  assert all(LINE.match(x).group(2) == "8" for x in progress) and steps == sorted(steps)
  later = [x for x in progress if re.search(r"step [2-7]/8 .*, loss \d+\.\d{4}, "
                                            r"[\d.e+-]+ steps/s, ETA \d+ s", x)]
  assert later, progress  # rate and ETA once the first step is done
  assert any("evaluating on the dev set (" in x for x in progress)
  # The JSON lines are what they were: one per --log_every step, and the evaluations.
  logs = [json.loads(x) for x in lines[:-1] if x.startswith("{")]
  assert [x["step"] for x in logs if "loss" in x] == list(range(1, 9))


def _tb_steps(model_dir, run="train"):
  """``{step: tags}`` of the TensorBoard run ``tb/<run>``."""
  steps = {}
  folder = os.path.join(model_dir, "tb", run)
  for name in os.listdir(folder):
    for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
      for value in event.summary.value:
        steps.setdefault(event.step, set()).add(value.tag)
  return steps


@pytest.mark.slow
def test_patience_stops_reports_and_tensorboard_has_the_last_step(runs):
  argv, code, out, err = runs["patient"]
  assert code == 0, err
  summary = _summary(out)
  model_dir = summary["model_dir"]
  # Evaluations at 2 (the best), 4 and 6 (no improvement twice): stop at 6 of 20.
  assert [e["step"] for e in summary["evaluations"]] == [2, 4, 6]
  assert summary["stopped_early"] and summary["steps"] == summary["stopped_at_step"] == 6
  assert summary["planned_steps"] == 20 and summary["best_step"] == 2
  best = summary["best_metric"]
  reason = f"no improvement of f1 for 2 evaluations (best {best:.4g} at step 2)"
  assert summary["stop_reason"] == reason
  assert err.splitlines() == [f"stopped early at step 6 of 20: {reason}"]
  with open(os.path.join(model_dir, "metrics.json")) as f:
    assert json.load(f)["stop_reason"] == reason
  # --log_every 50 > the 6 steps run: the last step still reaches TensorBoard (and the log).
  tb = _tb_steps(model_dir)
  assert sorted(tb) == [6] and "loss/total" in tb[6]
  assert sorted(_tb_steps(model_dir, "eval")) == [2, 4, 6]
  assert [json.loads(x)["step"] for x in out.splitlines()
          if x.startswith("{") and "loss" in json.loads(x)] == [6]


@pytest.mark.slow
def test_rerun_of_a_finished_run_is_one_line_and_trains_nothing(runs):
  for name, why in (("plain", "it trained all its 8 steps"),
                    ("patient", "it stopped early: no improvement of f1 for 2 evaluations")):
    argv, _, first_out, _ = runs[name]
    model_dir = _summary(first_out)["model_dir"]
    before = {f: os.path.getmtime(os.path.join(model_dir, f)) for f in os.listdir(model_dir)}
    code, out, err = _finetune(argv)
    step = _summary(first_out)["steps"]
    assert code == 0 and len(err.splitlines()) == 1, err
    assert err.startswith(f"{model_dir} already finished at step {step} ({why}")
    assert err.rstrip().endswith("nothing to do: use a new --model_dir, or raise --steps to "
                                 "train on")
    assert out.count("\n") == 1  # only the summary: no progress, no step
    summary = _summary(out)
    assert summary["already_finished"] and summary["steps"] == step
    assert summary["evaluations"] == _summary(first_out)["evaluations"]
    after = {f: os.path.getmtime(os.path.join(model_dir, f)) for f in os.listdir(model_dir)}
    assert after == before  # no checkpoint, no metrics.json, no event file written


@pytest.mark.slow
def test_an_interrupted_run_still_resumes(runs, tmp_path):
  """A run whose last checkpoint is before --steps (as after a kill at step 5) trains on."""
  argv, _, out, _ = runs["plain"]
  src = _summary(out)["model_dir"]
  model_dir = str(tmp_path / "copy")
  shutil.copytree(src, model_dir)
  os.remove(os.path.join(model_dir, "metrics.json"))
  for f in os.listdir(model_dir):
    if f.startswith("ckpt-8"):
      os.remove(os.path.join(model_dir, f))
  tf.compat.v1.train.update_checkpoint_state(model_dir, os.path.join(model_dir, "ckpt-4"),
                                             [os.path.join(model_dir, "ckpt-4")])
  argv = [a if a != src else model_dir for a in argv]
  code, out, err = _finetune(argv)
  assert code == 0, err
  summary = _summary(out)
  assert summary["resumed_from_step"] == 4 and summary["steps"] == 8
  assert [e["step"] for e in summary["evaluations"]] == [6, 8]
  assert err.splitlines() == [f"resuming from {model_dir}/ckpt-4 (step 4 of 8)"]


@pytest.mark.slow
def test_predict_prints_progress(runs, tmp_path, capsys, monkeypatch):
  model_dir = _summary(runs["plain"][2])["model_dir"]
  monkeypatch.setenv(progress_lib.INTERVAL_ENV, "0.02")
  out_file = str(tmp_path / "p.json")
  assert predict.main(["--records_dir", runs["records"], "--model_dir", model_dir,
                       "--output", out_file]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  assert json.loads(lines[-1])["predictions"] > 0
  progress = [x for x in lines if x.startswith("progress: ")]
  assert progress[0] == "progress: predicting 0 packs, loading the model (0 s so far)"
  assert any(x.startswith("progress: predicting 0/2 packs (0%), compiling the model for the "
                          "first pack (") for x in progress), progress
  assert len(progress) == len(lines) - 1
