"""A command whose output's reader went away (``... | head -1``) exits quietly: status 1 (the
Python docs' recipe for SIGPIPE), nothing on stderr but its own log lines, no traceback.

Every case runs the command with stdout (or stdout and stderr) the write end of a pipe whose
read end is closed before the command starts, so that its first write fails -- deterministic,
unlike a real ``| head``, which may read everything before it exits.  The shared places:
``schemas.cli`` (run_command, Parser, closed_pipe), ``pipelines.runner.run_main``,
``model.faults.command`` (the training commands) and ``readtwice.__main__``.
"""

import io
import json
import os
import subprocess
import sys

import pytest

from schemas import cli
from pipelines.datasets.hotpotqa import fake_input as synth
from tests import REPO_ROOT

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT))


def _start(args, stderr_too=False):
  """Starts ``python <args>`` with stdout a pipe nobody reads (stderr too with
  ``stderr_too``; else stderr captured)."""
  read, write = os.pipe()
  proc = subprocess.Popen([sys.executable] + list(args), stdout=write,
                          stderr=write if stderr_too else subprocess.PIPE, env=ENV,
                          cwd=str(REPO_ROOT))
  os.close(write)
  os.close(read)
  return proc


def _finish(proc, timeout=120):
  _, err = proc.communicate(timeout=timeout)
  return proc.returncode, (err or b"").decode()


def _assert_quiet(proc, *, allowed=None):
  """Exit status 1 and no stderr line other than ``allowed`` (a predicate: a job's logs)."""
  code, err = _finish(proc)
  lines = [x for x in err.splitlines() if x.strip()]
  assert code == 1, (code, err[-2000:])
  assert "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]
  assert [x for x in lines if not (allowed and allowed(x))] == [], err[-2000:]


def test_run_command_body_and_summary_on_a_closed_pipe(capsys, monkeypatch):
  def broken():
    raise BrokenPipeError(32, "Broken pipe")
  assert cli.run_command("prog", broken) == 1
  assert capsys.readouterr().err == ""

  class Closed(io.StringIO):
    def write(self, s):
      raise BrokenPipeError(32, "Broken pipe")
  monkeypatch.setattr(sys, "stdout", Closed())
  assert cli.run_command("prog", lambda: {"n": 1}) == 1  # the JSON summary line fails
  assert cli.run_command("prog", lambda: 0) == 0  # nothing printed: nothing fails
  assert capsys.readouterr().err == ""


def test_parser_help_on_a_closed_pipe():
  """argparse would swallow the error and exit 0; the commands exit 1 like any other write."""
  class Closed(io.StringIO):
    def write(self, s):
      raise BrokenPipeError(32, "Broken pipe")
  parser = cli.Parser("tests.nothing", "a parser", "python -m tests.nothing")
  with pytest.raises(SystemExit) as e:
    parser.print_help(Closed())
  assert e.value.code == 1
  parser.print_help(io.StringIO())  # an open stream: no exit


def test_help_of_light_commands_on_a_closed_pipe():
  procs = [_start(["-m", "pipelines.inspector", "--help"]),
           _start(["-m", "model.evaluate", "--help"], stderr_too=True)]
  for proc in procs:
    _assert_quiet(proc)


def test_another_pipe_breaking_is_still_an_error():
  """Only the command's own output counts: a BrokenPipeError from another pipe (a worker's
  connection, a FIFO output) while stdout is read stays what it was (here: a bug, traceback);
  the same body with stdout's reader gone is quiet."""
  script = ("import os, sys; from schemas import cli\n"
            "def body():\n"
            "  print('working', flush=True)\n"
            "  read, write = os.pipe(); os.close(read); os.write(write, b'x')\n"
            "sys.exit(cli.run_command('tool', body))\n")
  read = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                        env=ENV, cwd=str(REPO_ROOT), timeout=60, check=False)
  assert read.returncode == 1 and read.stdout == "working\n"
  assert read.stderr.strip().splitlines()[-1].startswith("BrokenPipeError"), read.stderr
  _assert_quiet(_start(["-c", script]))


def _hotpot_files(tmp_path):
  questions = synth.make_questions(6, seed=3)
  gold = tmp_path / "gold.json"
  gold.write_text(json.dumps(questions))
  predictions = tmp_path / "predictions.json"
  predictions.write_text(json.dumps({"answer": {q["_id"]: q["answer"] for q in questions},
                                     "sp": {q["_id"]: q["supporting_facts"]
                                            for q in questions}}))
  return gold, predictions


@pytest.mark.slow
def test_commands_on_a_closed_pipe(tmp_path):
  """A pipeline's JSON summary, the inspector's listing, model.evaluate's summary (also with
  stderr on the same closed pipe), a training command (through model.faults.command) and
  ``readtwice --help``: exit 1, quiet; the pipeline's output is still COMPLETED."""
  gold, predictions = _hotpot_files(tmp_path)
  records = tmp_path / "records"
  evaluate = ["-m", "model.evaluate", "--task", "hotpotqa", "--predictions", str(predictions),
              "--gold", str(gold)]
  job = _start(["-m", "pipelines", "hotpotqa", "--input", str(gold), "--output_dir",
                 str(records)])
  training = ("import sys; from model import faults\n"
              "@faults.command('model.train')\n"
              "def main():\n"
              "  for step in range(3):\n"
              "    print(f'step {step}', flush=True)\n"
              "  return 0\n"
              "sys.exit(main())\n")
  others = [_start(evaluate), _start(evaluate, stderr_too=True), _start(["-c", training]),
            _start(["-m", "readtwice", "--help"])]
  # The same evaluation with a reader: it does print its metrics (the pipe is what differs).
  normal = subprocess.run([sys.executable] + evaluate, capture_output=True, env=ENV,
                          cwd=str(REPO_ROOT), timeout=120, check=False)
  assert normal.returncode == 0 and json.loads(normal.stdout.splitlines()[-1])["em"] == 1.0
  for proc in others:
    _assert_quiet(proc)
  _assert_quiet(job, allowed=lambda line: " INFO " in line)  # the job's own progress log
  assert (records / "COMPLETED").exists()
  _assert_quiet(_start(["-m", "pipelines.inspector", "--records_dir", str(records)]))
  _assert_quiet(_start(["-m", "readtwice", "inspect", "--records_dir", str(records)],
                       stderr_too=True))
