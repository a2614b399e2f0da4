"""The ``readtwice`` console command: every dataset and model command behind one name, the same
code as the ``python -m`` modules, usage and errors naming what the user typed."""

import filecmp
import os
import subprocess
import sys

import pytest

from pipelines import datasets
from readtwice import __main__ as console
from tests import REPO_ROOT

SAMPLE = REPO_ROOT / "pipelines" / "datasets" / "jsonl_qa" / "sample" / "examples.jsonl"


def run(*args, executable=None):
  cmd = [executable] if executable else [sys.executable, "-m", "readtwice"]
  return subprocess.run(cmd + list(args), cwd=REPO_ROOT, capture_output=True, text=True,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300)


def test_help_lists_every_dataset_and_command_without_importing_tensorflow():
  probe = ("import sys; from readtwice import __main__ as m; "
           "assert m.main(['--help']) == 0; print('TF' if 'tensorflow' in sys.modules else 'noTF')")
  out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=120).stdout
  assert out.strip().splitlines()[-1] == "noTF"
  listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
  assert listed == set(datasets.DATASETS) | set(console.COMMANDS)


@pytest.mark.parametrize("argv, message", [
    (["finetun"], "readtwice: error: unknown command 'finetun' (did you mean finetune?)"),
    (["hotpotq"], "readtwice: error: unknown command 'hotpotq' (did you mean hotpotqa?)"),
    ([], "readtwice: error: the first argument is the command"),
    (["--input", "x"], "readtwice: error: the first argument is the command"),
])
def test_usage_errors_are_one_line_exit_2(argv, message, capsys):
  assert console.main(argv) == 2
  err = capsys.readouterr().err
  assert err.startswith(message) and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(console.COMMANDS) + ["hotpotqa", "jsonl_qa"])
def test_each_command_names_itself_as_typed(command):
  proc = run(command, "--help")
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.startswith(f"usage: readtwice {command} ")
  example = proc.stdout.split("example:\n", 1)[1]
  assert example.lstrip().startswith(f"readtwice {command} ")
  assert "python -m" not in example.split("\n(")[0].splitlines()[0]
  bad = run(command, "--no_such_flag")
  assert bad.returncode == 2
  assert bad.stderr.startswith(f"readtwice {command}: error: unknown flag --no_such_flag")


@pytest.mark.slow
def test_a_dataset_job_writes_the_same_records_as_python_m(tmp_path):
  a, b = tmp_path / "console", tmp_path / "module"
  assert run("jsonl_qa", "--input", str(SAMPLE), "--output_dir", str(a)).returncode == 0
  module = subprocess.run([sys.executable, "-m", "pipelines", "jsonl_qa", "--input", str(SAMPLE),
                           "--output_dir", str(b)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
  assert module.returncode == 0, module.stderr
  shard = "records-00000-of-00001.tfrecord"
  assert filecmp.cmp(a / shard, b / shard, shallow=False)
  assert (a / "COMPLETED").exists()


def test_the_installed_console_script():
  script = os.path.join(os.path.dirname(sys.executable), "readtwice")
  if not os.path.exists(script):
    pytest.skip("the package is not installed in this environment (pip install -e .)")
  proc = run("evaluate", "--task", "hotpotqa", "--predictions", "/nonexistent.json", "--gold",
             "/nonexistent.json", executable=script)
  assert proc.returncode == 1
  assert proc.stderr.startswith("readtwice evaluate: error: cannot read predictions file")
