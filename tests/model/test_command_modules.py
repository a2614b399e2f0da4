"""The model commands answer ``--help`` and usage errors before TensorFlow loads (issue 41): each
``model/<command>.py`` is its flags and checks only, over ``model/<command>_lib.py``."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = ("train", "pretrain", "finetune", "predict", "export", "evaluate")


def _python(code, *args):
  return subprocess.run([sys.executable, *args] if not code else [sys.executable, "-c", code],
                        cwd=REPO, capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=REPO))


def test_no_command_module_imports_tensorflow_to_build_its_parser():
  code = "\n".join([
      "import sys, importlib",
      f"for name in {COMMANDS!r}:",
      "  importlib.import_module('model.' + name).build_parser().format_help()",
      "print(sorted(m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules))"])
  proc = _python(code)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() == "[]", proc.stdout


@pytest.mark.parametrize("argv, code, line", [
    (["-m", "model.train", "--records_dir", "r", "--model_dir", "m", "--steps", "0"], 2,
     "python -m model.train: error: --steps must be >= 1, got 0"),
    (["-m", "model.finetune", "--task", "hotpotqa", "--records_dir", "r", "--model_dir", "m",
      "--patience", "2"], 2,
     "python -m model.finetune: error: --patience needs --dev_records_dir and --gold (it stops "
     "on the dev metric)"),
    (["-m", "model.predict", "--records_dir", "r", "--model_dir", "m", "--output", "o.json",
      "--top_k", "0"], 2, "python -m model.predict: error: --top_k must be >= 1, got 0"),
])
def test_a_usage_error_is_one_line_without_tensorflow(argv, code, line):
  # A TensorFlow import would print its start-up lines or take seconds; the parser alone is
  # what answers: the same line as before, from a process that never loaded TensorFlow.
  proc = _python(None, "-X", "importtime", *argv)
  assert proc.returncode == code, proc.stderr
  errors = [l for l in proc.stderr.splitlines() if not l.startswith("import time:")]
  assert errors[-1] == line, proc.stderr
  imported = {l.split("|")[-1].strip() for l in proc.stderr.splitlines()
              if l.startswith("import time:")}
  assert "tensorflow" not in imported and "model.training.trainer" not in imported


def test_help_names_every_command_flag_group():
  proc = _python(None, "-m", "model.finetune", "--help")
  assert proc.returncode == 0, proc.stderr
  for group in ("model:", "distribution:", "optimisation:", "checkpoints and logs:",
                "dev evaluation and early stopping:"):
    assert group in proc.stdout
