"""A new dataset is one folder and one registry line: a copy of ``jsonl_qa`` named ``my_qa``,
made in a temporary copy of ``pipelines/`` and ``schemas/`` with no other file touched, is in
``python -m pipelines --help``, runs as ``python -m pipelines my_qa`` and has its own
``--estimate`` (from the folder's ``cost.py``).  (The benchmarks' input makers and the Dataflow
templates still list their datasets: docs/architecture.md says so.)"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys

import pytest

from pipelines import datasets
from pipelines import estimate
from tests import REPO_ROOT

NEW = "my_qa"


def _add_dataset(root) -> None:
  """The new folder (jsonl_qa's files, its own module paths and name) and the registry line."""
  source = root / "pipelines" / "datasets" / "jsonl_qa"
  folder = root / "pipelines" / "datasets" / NEW
  shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
  for path in folder.glob("*.py"):
    text = path.read_text(encoding="utf-8")
    text = text.replace("pipelines.datasets.jsonl_qa", f"pipelines.datasets.{NEW}")
    path.write_text(text.replace('name="jsonl_qa"', f'name="{NEW}"'), encoding="utf-8")
  registry = root / "pipelines" / "datasets" / "__init__.py"
  text = registry.read_text(encoding="utf-8")
  assert '    "jsonl_qa",\n)' in text
  registry.write_text(text.replace('    "jsonl_qa",\n)', f'    "jsonl_qa",\n    "{NEW}",\n)'),
                      encoding="utf-8")


def _changed(before, after, rel="") -> list:
  """Files of ``after`` that differ from or are not in ``before`` (relative paths)."""
  out = []
  cmp = filecmp.dircmp(before, after, ignore=["__pycache__"])
  out += [os.path.join(rel, n) for n in cmp.right_only + cmp.diff_files]
  for sub in cmp.common_dirs:
    out += _changed(os.path.join(before, sub), os.path.join(after, sub), os.path.join(rel, sub))
  return sorted(out)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
  root = tmp_path_factory.mktemp("repo")
  for package in ("pipelines", "schemas"):
    shutil.copytree(REPO_ROOT / package, root / package,
                    ignore=shutil.ignore_patterns("__pycache__"))
  _add_dataset(root)
  return root


def _run(root, *argv) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "pipelines", *argv], cwd=root,
                        env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
                        text=True, timeout=300)


@pytest.mark.slow
def test_a_copy_of_a_dataset_folder_and_one_registry_line_make_a_new_dataset(copy, tmp_path):
  assert _changed(REPO_ROOT / "pipelines", copy / "pipelines") == sorted(
      ["datasets/__init__.py", f"datasets/{NEW}"])
  assert _changed(REPO_ROOT / "schemas", copy / "schemas") == []

  listed = _run(copy, "--help")
  assert listed.returncode == 0, listed.stderr
  assert f"  {NEW} " in listed.stdout and "  jsonl_qa " in listed.stdout

  sample = str(copy / "pipelines" / "datasets" / NEW / "sample" / "examples.jsonl")
  out = str(tmp_path / "out")
  e = _run(copy, NEW, "--input", sample, "--output_dir", out, "--estimate")
  assert e.returncode == 0, e.stderr
  figure = json.loads(e.stdout.strip().splitlines()[-1])
  assert figure["job"] == NEW and not os.path.exists(out)
  jsonl_qa = estimate.measured_costs()["jsonl_qa"]  # the copy's cost.py: the same numbers
  assert figure["cost_model"]["cpu_s_per_mb"] == jsonl_qa.cpu_s_per_mb
  assert not [a for a in figure["assumptions"] if a.startswith("no measured cost")]
  assert figure["work"]["measure"] == datasets.get("jsonl_qa").cost.work

  run = _run(copy, NEW, "--input", sample, "--output_dir", out)
  assert run.returncode == 0, run.stderr
  summary = json.loads(run.stdout.strip().splitlines()[-1])
  assert summary["counts"] == {"input": 5, "written": 5, "skipped": 0, "rejected": 0}
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    manifest = json.load(f)
  assert manifest["job"] == NEW and manifest["task"] == "extractive_qa"


def test_the_copy_is_checked_against_the_registry_line():
  """Control: without the registry line the folder is no dataset (the test above would fail)."""
  with pytest.raises(KeyError):
    datasets.get(NEW)
