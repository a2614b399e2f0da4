"""``python -m benchmarks``: every case filed under one subject, listed, and run by name exactly as
``python -m benchmarks.<case>``; an unknown name is one line and exit 2."""

import subprocess
import sys

import pytest

from benchmarks import __main__ as harness
from tests import REPO_ROOT


def test_every_case_is_filed_under_one_subject_and_nothing_else_is():
  filed = [name for names in harness.SUBJECTS.values() for name in names]
  assert len(filed) == len(set(filed)), "a case filed twice"
  assert sorted(filed) == harness.cases()
  assert {"job_cost", "memory_ladder", "all"} <= set(filed)


def test_the_experiments_are_the_experiments_folder():
  """The memory studies live in ``benchmarks/experiments/`` and are filed under their subject;
  ``python -m benchmarks <experiment>`` runs ``benchmarks.experiments.<experiment>``."""
  folder = sorted(p.stem for p in (REPO_ROOT / "benchmarks" / "experiments").glob("*.py")
                  if p.name != "__init__.py")
  assert folder == sorted(harness.SUBJECTS[harness.EXPERIMENTS])
  assert harness.module_of("memory_gap") == "benchmarks.experiments.memory_gap"
  assert harness.module_of("job_cost") == "benchmarks.job_cost"
  assert not [n for names in harness.SUBJECTS.values() for n in names
              if n not in folder and harness.folder_of(n) != ""]


def test_cases_are_the_modules_with_a_main(tmp_path, monkeypatch):
  """Control: a module without ``main`` (a helper) is no case; ``common`` never is."""
  (tmp_path / "with_main.py").write_text('"""A case. More."""\ndef main():\n  pass\n')
  (tmp_path / "helper.py").write_text('"""A helper."""\ndef run():\n  pass\n')
  (tmp_path / "common.py").write_text("def main():\n  pass\n")
  monkeypatch.setattr(harness, "HERE", str(tmp_path))
  assert harness.cases() == ["with_main"]
  assert harness.summary("with_main") == "A case."


def test_list_names_every_case_under_its_subject(capsys):
  assert harness.main(["--list"]) == 0
  out = capsys.readouterr().out
  for subject, names in harness.SUBJECTS.items():
    assert f"{subject}:\n" in out
    for name in names:
      line = next(ln for ln in out.splitlines() if ln.startswith(f"  {name} "))
      assert line.split(None, 1)[1] == harness.summary(name)
      assert len(line) <= 100 and "``" not in line


def test_a_case_runs_as_its_own_module(capsys):
  """``python -m benchmarks train_cost --help`` prints what ``python -m benchmarks.train_cost
  --help`` prints (its own usage line), and leaves ``sys.argv`` as it was."""
  argv = list(sys.argv)
  assert harness.main(["train_cost", "--help"]) == 0
  assert sys.argv == argv
  got = capsys.readouterr().out
  want = subprocess.run([sys.executable, "-m", "benchmarks.train_cost", "--help"], cwd=REPO_ROOT,
                        capture_output=True, text=True, timeout=120)
  assert want.returncode == 0 and got == want.stdout
  assert got.startswith("usage: python -m benchmarks.train_cost")


@pytest.mark.parametrize("argv, rc, want", [
    (["job_cst"], 2, "unknown case 'job_cst' (did you mean job_cost?)"),
    (["nothing_like_it"], 2, "unknown case 'nothing_like_it';"),
    ([], 2, "usage: python -m benchmarks [--list | <case> [flags ...]]"),
])
def test_a_wrong_or_missing_case_is_an_error(capsys, argv, rc, want):
  assert harness.main(argv) == rc
  captured = capsys.readouterr()
  assert want in captured.err and captured.out == ""
  if argv:
    assert captured.err.count("\n") == 1 and captured.err.startswith("python -m benchmarks:")


def test_run_as_a_file_it_says_how_to_run_it(tmp_path):
  proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "__main__.py"), "--list"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 2 and proc.stdout == ""
  assert proc.stderr == ("python -m benchmarks: error: run it as python -m benchmarks "
                         "[--list | <case> ...] from the repository\n")
