"""A new dataset is one folder and one registry line: a copy of ``jsonl_qa`` named ``my_qa``,
made in a temporary copy of the code with no other file touched, is in
``python -m pipelines --help``, runs as ``python -m pipelines my_qa``, has its own
``--estimate`` (from the folder's ``cost.py``), is benchmarked on its own fake input (the
folder's ``fake_input.py``) and is deployed (its copy says ``deployed=True``)."""

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
from tests.deploy import test_dataflow

NEW = "my_qa"
PACKAGES = ("pipelines", "schemas", "benchmarks", "deploy")


def _add_dataset(root) -> None:
  """The new folder (jsonl_qa's files, its own module paths and name, deployed on Dataflow) and
  the registry line."""
  source = root / "pipelines" / "datasets" / "jsonl_qa"
  folder = root / "pipelines" / "datasets" / NEW
  shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
  for path in folder.glob("*.py"):
    text = path.read_text(encoding="utf-8")
    text = text.replace("pipelines.datasets.jsonl_qa", f"pipelines.datasets.{NEW}")
    text = text.replace('name="jsonl_qa"', f'name="{NEW}"')
    path.write_text(text.replace("deployed=False", "deployed=True"), encoding="utf-8")
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
  for package in PACKAGES:
    shutil.copytree(REPO_ROOT / package, root / package,
                    ignore=shutil.ignore_patterns("__pycache__"))
  _add_dataset(root)
  return root


def _run(root, *argv, module="pipelines") -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", module, *argv], cwd=root,
                        env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
                        text=True, timeout=300)


@pytest.mark.slow
def test_a_copy_of_a_dataset_folder_and_one_registry_line_make_a_new_dataset(copy, tmp_path):
  assert _changed(REPO_ROOT / "pipelines", copy / "pipelines") == sorted(
      ["datasets/__init__.py", f"datasets/{NEW}"])
  for package in PACKAGES[1:]:
    assert _changed(REPO_ROOT / package, copy / package) == [], package

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


@pytest.mark.slow
def test_the_new_dataset_is_benchmarked_on_its_own_fake_input(copy):
  listed = _run(copy, "--help", module="benchmarks.all")
  assert listed.returncode == 0, listed.stderr
  assert f",{NEW})" in " ".join(listed.stdout.split())  # --only's default: every dataset
  bench = _run(copy, "--only", NEW, "--scale", "0.001", "--pairs", "1", module="benchmarks.all")
  assert bench.returncode == 0, bench.stderr[-3000:]
  figure = json.loads(bench.stdout.strip().splitlines()[-1])
  assert figure["worst"] == NEW and list(figure["ratios"]) == [NEW]
  assert f"{NEW}: " in bench.stdout and " documents, " in bench.stdout
  # The estimate's calibration sizes the same input as --estimate does.
  code = ("import json, sys; from benchmarks import job_cost\n"
          f"i = job_cost.make_input({NEW!r}, sys.argv[1], 0.001)\n"
          "print(json.dumps({'args': i.args, 'work_mb': i.work_mb}))")
  sized = subprocess.run([sys.executable, "-c", code, str(copy / "cost_input")], cwd=copy,
                         env=dict(os.environ, PYTHONPATH=str(copy)), capture_output=True,
                         text=True, timeout=300)
  assert sized.returncode == 0, sized.stderr[-3000:]
  got = json.loads(sized.stdout.strip().splitlines()[-1])
  assert got["args"][:2] == ["--input", str(copy / "cost_input" / "examples.jsonl")]
  assert got["work_mb"] > 0


@pytest.mark.slow
def test_the_new_dataset_is_deployed(copy, tmp_path):
  """Its Flex Template metadata and its launcher image come from the registry: the copy's
  deploy/ is untouched (the first test checks) and builds them."""
  out = tmp_path / "templates"
  made = subprocess.run([sys.executable, "deploy/dataflow/make_templates.py", "--out_dir",
                         str(out)], cwd=copy, env=dict(os.environ, PYTHONPATH=str(copy)),
                        capture_output=True, text=True, timeout=300)
  assert made.returncode == 0, made.stderr[-3000:]
  assert NEW in (out / "jobs.txt").read_text().split()
  meta = json.loads((out / f"{NEW}.json").read_text())
  assert meta["name"] == f"readtwice-{NEW}"
  assert {"input", "output_dir", "ner"} <= {p["name"] for p in meta["parameters"]}
  # build_images.sh with a docker that logs its calls and answers `docker run` from the copy.
  env, log = test_dataflow._fake_tools(tmp_path, root=str(copy))  # pylint: disable=protected-access
  built = subprocess.run(["bash", "deploy/dataflow/build_images.sh", "registry/img", "t1"],
                         cwd=copy, env=env, capture_output=True, text=True, timeout=300)
  assert built.returncode == 0, built.stderr[-3000:]
  images = test_dataflow.built_images(test_dataflow._calls(log))  # pylint: disable=protected-access
  assert images["registry/img:t1-my_qa"] == {
      "target": "launcher", "args": {"JOB": NEW, "SDK_CONTAINER_IMAGE": "registry/img:t1",
                                     "REVISION": "", "SPACY_MODEL_PACKAGE": "",
                                     "SPACY_MODEL": ""}}
