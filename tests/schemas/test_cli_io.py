"""The command line's two safety rules (``schemas/cli.py``): a flag that takes one value
given twice is refused, and an output that is, contains or is inside an input (symlinks
resolved, globs expanded) is refused, both in one line before any work.  Every command's
parser is checked against the same rules in tests/test_cli_contract.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from schemas import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _parser() -> cli.Parser:
  p = cli.Parser("tool", "A tool.", "python -m tool --input a --output_dir o")
  p.add_argument("--input", required=True, io=cli.READS_GLOB,
                 help="paths or globs, comma-separated")
  p.add_argument("--records_dir", action="append", default=None, io=cli.READS,
                 help="records dir (repeatable)")
  p.add_argument("--model_dir", default=None, io=cli.READS, help="model dir")
  p.add_argument("--output_dir", required=True, io=cli.WRITES, help="where to write")
  p.add_argument("--steps", type=int, default=1, help="steps")
  cli.bool_flag(p, "overwrite", False, "replace")
  return p


def _refusal(capsys, argv):
  with pytest.raises(SystemExit) as e:
    _parser().parse(argv)
  return e.value.code, capsys.readouterr().err.splitlines()


def test_a_single_valued_flag_given_twice_is_a_usage_error(capsys):
  assert _refusal(capsys, ["--input", "a", "--output_dir", "o", "--steps", "1", "--steps=2"]) == (
      2, ["python -m tool: error: --steps given more than once; it takes one value (the last "
          "would silently win)"])
  assert _refusal(capsys, ["--input", "a", "--input", "b", "--output_dir", "o"])[1] == [
      "python -m tool: error: --input given more than once; it takes one value (the last would "
      "silently win); give several as one comma-separated value"]


def test_flags_that_take_several_values_accept_them_all(tmp_path):
  args, _ = _parser().parse(["--input", "a,b", "--output_dir", str(tmp_path / "o"),
                             "--records_dir", "r1", "--records_dir", "r2", "--overwrite",
                             "--overwrite"])
  assert args.records_dir == ["r1", "r2"] and args.input == "a,b" and args.overwrite


@pytest.mark.parametrize("output, relation", [
    ("{d}/in", "is --input {d}/in"),
    ("{d}/in/sub", "is inside --input {d}/in"),
    ("{d}", "contains --input {d}/in"),
])
def test_an_output_over_an_input_is_refused(tmp_path, capsys, output, relation):
  d = str(tmp_path)
  code, err = _refusal(capsys, ["--input", f"{d}/in", "--output_dir", output.format(d=d)])
  assert code == 1
  assert err == [f"python -m tool: error: --output_dir {output.format(d=d)} "
                 f"{relation.format(d=d)}, which this command reads; write the output "
                 "somewhere apart from the inputs"]


def test_symlinks_are_resolved_and_globs_expanded(tmp_path, capsys):
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "x.json").write_text("[]")
  (tmp_path / "model").mkdir()
  os.symlink(tmp_path / "model", tmp_path / "link")
  code, err = _refusal(capsys, ["--input", str(tmp_path / "elsewhere"), "--model_dir",
                                str(tmp_path / "link"), "--output_dir",
                                str(tmp_path / "model")])
  assert code == 1 and f"--output_dir {tmp_path}/model is --model_dir {tmp_path}/link (both " \
      f"{os.path.realpath(tmp_path / 'model')})" in err[0]
  code, err = _refusal(capsys, ["--input", f"{tmp_path}/nothing,{tmp_path}/data/*.json",
                                "--output_dir", str(tmp_path / "data")])
  assert code == 1 and f"contains --input {tmp_path}/data/x.json" in err[0]
  code, err = _refusal(capsys, ["--input", "a", "--records_dir", "r1", "--records_dir",
                                str(tmp_path / "r2"), "--output_dir", str(tmp_path / "r2/o")])
  assert code == 1 and f"is inside --records_dir {tmp_path}/r2" in err[0]


def test_outputs_apart_from_inputs_pass(tmp_path):
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "x.json").write_text("[]")
  # Beside the inputs, a sibling with a common prefix, a glob matching nothing there.
  for out in (tmp_path / "out", tmp_path / "data2", tmp_path / "data" / "out"):
    _parser().parse(["--input", f"{tmp_path}/data/x.json", "--output_dir", str(out)])
  _parser().parse(["--input", f"{tmp_path}/data/*.csv", "--output_dir", str(tmp_path / "data")])


def test_remote_paths_are_normalised():
  assert cli.overlap([("--output_dir", "gs://b/runs/../data/out")],
                     [("--input", "gs://b/data")]) == (
      "--output_dir gs://b/runs/../data/out is inside --input gs://b/data, which this command "
      "reads; write the output somewhere apart from the inputs")
  assert cli.overlap([("--output_dir", "gs://b/data2")], [("--input", "gs://b/data")]) is None
  assert cli.overlap([("--output_dir", "gs://b/data")], [("--input", "/b/data")]) is None


def test_io_must_be_a_known_role():
  with pytest.raises(ValueError, match="io='read'"):
    _parser().add_argument("--x", io="read", help="x")


def _kill_self(signum):
  def body():
    os.kill(os.getpid(), signum)
    raise AssertionError("the signal did not stop the command")
  return body


@pytest.mark.parametrize("signum, code, what", [
    (signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted (SIGINT)")])
def test_a_stop_signal_while_a_command_runs_is_one_line(capsys, signum, code, what):
  # As a command starts: Python's defaults (whatever handlers earlier tests left behind).
  saved = {s: signal.signal(s, h) for s, h in ((signal.SIGTERM, signal.SIG_DFL),
                                               (signal.SIGINT, signal.default_int_handler))}
  try:
    assert cli.run_command("python -m tool", _kill_self(signum)) == code
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
  except KeyboardInterrupt:  # never let it reach pytest, which would stop the whole session
    pytest.fail("the SIGINT escaped run_command")
  finally:
    for s, h in saved.items():
      signal.signal(s, h)
  assert capsys.readouterr().err.splitlines() == [
      f"python -m tool: error: {what}; the command stopped before it finished"]


def test_an_outer_stop_handler_keeps_the_signal(capsys):
  """A wrapper that already turns SIGTERM into an exception (model.faults.command, which
  cleans up partial outputs) gets it: run_command does not swallow it."""
  class Outer(BaseException):
    pass

  def outer(signum, frame):
    raise Outer()

  previous = signal.signal(signal.SIGTERM, outer)
  try:
    with pytest.raises(Outer):
      cli.run_command("python -m tool", _kill_self(signal.SIGTERM))
    assert signal.getsignal(signal.SIGTERM) is outer
  finally:
    signal.signal(signal.SIGTERM, previous)
  assert capsys.readouterr().err == ""


def test_module_command_is_only_the_packages_own_command(monkeypatch):
  monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "model.predict", "--x"])
  assert cli.module_command("model") == "python -m model.predict"
  assert cli.module_command("pipelines") is None
  monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest", "-q"])
  assert cli.module_command("model") is None


@pytest.mark.slow
@pytest.mark.parametrize("signum, code, what", [
    (signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted (SIGINT)")])
def test_a_stop_signal_while_tensorflow_loads_is_one_line(tmp_path, signum, code, what):
  """``python -m model.<command>`` is stopped while it still imports TensorFlow (~5 s; the
  signal comes at 1.5 s): one line, even though TensorFlow's import captures fd 2.  (The records
  dir is a ``gs://`` path: a local one that does not exist is refused before TensorFlow loads;
  this one is left to ``tf.io.gfile``, so the command imports TensorFlow.)"""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.Popen([sys.executable, "-m", "model.predict", "--records_dir",
                           "gs://readtwice-no-such-bucket/r", "--model_dir", str(tmp_path / "m"),
                           "--output", str(tmp_path / "p.json")],
                          cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
  time.sleep(1.5)
  proc.send_signal(signum)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == code, err
  assert err.splitlines() == [
      f"python -m model.predict: error: {what} while starting; nothing was written"]
  assert out == "" and os.listdir(tmp_path) == []


_MATPLOTLIB_AFTER_TENSORFLOW = """
import json, sys
import model  # installs the import hook that hides TensorFlow's banners
import tensorflow
loaded = "matplotlib" in sys.modules
from keras.src.visualization import plot_bounding_box_gallery, plot_image_gallery
import matplotlib.patches, matplotlib.pyplot
print(json.dumps({"loaded_with_tensorflow": loaded,
                  "plt": plot_image_gallery.plt.figure is matplotlib.pyplot.figure,
                  "patches": plot_bounding_box_gallery.patches.Patch is matplotlib.patches.Patch}))
"""


@pytest.mark.slow
def test_tensorflow_loads_without_matplotlib_and_keras_helpers_still_find_it():
  """Keras imports matplotlib (0.4 s) for two figure helpers: a model command's TensorFlow
  import leaves it out, and the helpers get the real modules on first use."""
  proc = subprocess.run([sys.executable, "-c", _MATPLOTLIB_AFTER_TENSORFLOW], cwd=REPO,
                        text=True, capture_output=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.splitlines()[-1]) == {
      "loaded_with_tensorflow": False, "plt": True, "patches": True}


def test_an_input_that_is_a_fifo_or_a_device_is_refused(tmp_path, capsys):
  fifo = tmp_path / "pipe"
  os.mkfifo(fifo)
  code, err = _refusal(capsys, ["--input", f"{tmp_path}/p*", "--output_dir", str(tmp_path / "o")])
  assert (code, err) == (1, [f"python -m tool: error: --input {fifo} is a FIFO, not a regular "
                             "file or directory; give a file"])
  code, err = _refusal(capsys, ["--input", "a", "--model_dir", "/dev/zero", "--output_dir",
                                str(tmp_path / "o")])
  assert (code, err) == (1, ["python -m tool: error: --model_dir /dev/zero is a device, not a "
                             "regular file or directory; give a file"])


def test_a_full_disk_in_a_command_is_one_line(capsys):
  def body():
    raise OSError(errno.ENOSPC, "No space left on device", "/data/out.json")
  assert cli.run_command("python -m tool", body) == 1
  assert capsys.readouterr().err.splitlines() == [
      "python -m tool: error: no space left on device writing /data/out.json; free space and "
      "rerun"]


def test_holds_resolves_links_and_normalises_urls(tmp_path):
  (tmp_path / "m").mkdir()
  os.symlink(tmp_path / "m", tmp_path / "link")
  assert cli.holds(str(tmp_path), str(tmp_path / "link" / "x"))
  assert cli.holds(str(tmp_path / "link"), str(tmp_path / "m"))
  assert not cli.holds(str(tmp_path / "m"), str(tmp_path / "m2"))
  assert cli.holds("gs://b/runs", "gs://b/x/../runs/m")
  assert not cli.holds("gs://b/runs", "gs://b/runs2")
