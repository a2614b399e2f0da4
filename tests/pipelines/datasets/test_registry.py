"""The dataset registry and the generic job's top level (``python -m pipelines``)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys

import pytest

import pipelines
from pipelines import __main__ as generic
from pipelines import datasets
from pipelines import estimate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_every_registered_dataset_has_its_folder_and_spec():
  specs = datasets.specs()
  assert tuple(specs) == datasets.DATASETS
  for name, spec in specs.items():
    assert spec.name == name
    assert os.path.isdir(os.path.join(REPO, "pipelines", "datasets", name))
    assert spec.summary and "\n" not in spec.summary
    assert callable(spec.build)
    # --estimate's numbers come from the folder's cost.py (a measured cost and its unit).
    assert isinstance(spec.cost, estimate.DatasetCost), name
    assert spec.cost.measured.cpu_s_per_mb > 0 and spec.cost.work, name
    assert type(spec.cost).__module__ == "pipelines.estimate.costs"
    assert spec.cost is importlib.import_module(f"pipelines.datasets.{name}.cost").COST
  assert specs["jsonl_qa"].model_task == "extractive_qa"
  assert specs["hotpotqa"].model_task == "hotpotqa"


def test_jobs_are_the_deployed_datasets():
  assert pipelines.JOBS == ("hotpotqa", "wikipedia", "books", "triviaqa", "narrativeqa")
  assert "jsonl_qa" in datasets.DATASETS and "jsonl_qa" not in pipelines.JOBS
  with pytest.raises(KeyError):
    datasets.get("squad")


def test_help_lists_every_dataset_on_one_line(capsys):
  assert generic.main(["--help"]) == 0
  out = capsys.readouterr().out
  for name, spec in datasets.specs().items():
    assert f"  {name} " in out and spec.summary in out


def test_no_dataset_named_is_a_usage_error(capsys):
  assert generic.main([]) == 2
  assert generic.main(["--input", "x"]) == 2
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 2 and all(line.startswith("python -m pipelines: error: the first argument "
                                               "names the dataset") for line in err)


@pytest.mark.slow
def test_a_job_imports_only_its_own_dataset():
  """``python -m pipelines books --help`` (the generic job's top level, then the dataset's
  command line) loads only the books folder of the registry."""
  code = ("import json, sys; from pipelines import __main__ as generic\n"
          "try:\n  generic.main(['books', '--help'])\nexcept SystemExit:\n  pass\n"
          "print(json.dumps(sorted(m for m in sys.modules\n"
          "                        if m.startswith('pipelines.datasets.'))))")
  proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 0, proc.stderr
  loaded = json.loads(proc.stdout.strip().splitlines()[-1])
  assert loaded and all(m.startswith("pipelines.datasets.books") for m in loaded), loaded


def recipe_files() -> list:
  """The files docs/architecture.md's "A dataset" recipe lists for a dataset folder."""
  with open(os.path.join(REPO, "docs", "architecture.md"), encoding="utf-8") as f:
    text = f.read()
  assert "<!-- dataset-files" in text, "docs/architecture.md lost its dataset-files list"
  block = text.split("<!-- dataset-files", 1)[1].split("\n\n", 1)[0]
  return re.findall(r"^- `([a-z_]+\.py)`", block, re.M)


def test_every_registered_dataset_has_the_files_the_recipe_lists():
  files = recipe_files()
  assert files == ["reader.py", "dataset.py", "cost.py", "fake_input.py"]
  for name, spec in datasets.specs().items():
    folder = os.path.join(REPO, "pipelines", "datasets", name)
    assert [f for f in files if not os.path.isfile(os.path.join(folder, f))] == [], name
    # The benchmarks' input comes from the folder's fake_input.py, through the spec.
    assert spec.fake_input is importlib.import_module(
        f"pipelines.datasets.{name}.fake_input").write, name


@pytest.mark.parametrize("name", datasets.DATASETS)
def test_a_fake_input_is_read_by_its_arguments(name, tmp_path):
  """Each dataset's fake input at a tiny scale: its files exist, its arguments parse into the
  dataset's options as the command line would build them, and --estimate sizes it."""
  spec = datasets.get(name)
  fake = spec.fake_input(str(tmp_path / name), 0.001)
  assert isinstance(fake, datasets.FakeInput) and fake.argv[:2] == ["--input", fake.input]
  from pipelines.beam.inputs import describe_inputs  # pylint: disable=g-import-not-at-top
  inputs = describe_inputs(fake.input)
  assert inputs and all(i["bytes"] > 0 for i in inputs)
  options = spec.options_for(fake.argv)
  work = estimate.measure(name, inputs, options)
  assert work.work_bytes >= sum(i["bytes"] for i in inputs) * (0.5 if name == "wikipedia" else 1)
  if name == "triviaqa":
    assert options.evidence_dir == str(tmp_path / name / "evidence")
  if name == "narrativeqa":
    assert options.split == "test"


def test_options_for_reads_only_the_datasets_own_flags(tmp_path):
  spec = datasets.get("triviaqa")
  (tmp_path / "wikipedia").mkdir()
  options = spec.options_for(["--input", "x", "--evidence_dir", str(tmp_path), "--seq_length",
                              "9", "--runner", "DirectRunner"])
  assert options.evidence_dir == str(tmp_path) and options.annotation.ner == "none"
  with pytest.raises(ValueError, match="--evidence_dir"):  # checked as the command line does
    spec.options_for(["--input", "x", "--evidence_dir", str(tmp_path / "none")])
  assert datasets.get("narrativeqa").options_for(["--split", "valid"]).split == "valid"
  with pytest.raises(SystemExit):  # a dataset flag's bad value is the command line's error
    datasets.get("narrativeqa").options_for(["--split", "tset"])


@pytest.mark.parametrize("name", datasets.DATASETS)
def test_a_datasets_own_flags_are_its_options_settings(name, tmp_path):
  """Each dataset's flags are declared once, as the settings of its options' fields
  (:mod:`schemas.settings`), and unset they give the options' defaults."""
  from schemas import cli, settings  # pylint: disable=g-import-not-at-top
  spec = datasets.get(name)
  parser = cli.Parser(f"pipelines {name}", spec.summary, spec.example)
  spec.add_flags(parser.add_argument_group("settings"))
  shown = [s[2:] for a in parser._actions  # pylint: disable=protected-access
           if a.help != argparse.SUPPRESS for s in a.option_strings if s.startswith("--")]
  argv = []
  if name == "triviaqa":  # its one flag a run needs
    (tmp_path / "wikipedia").mkdir()
    argv = ["--evidence_dir", str(tmp_path)]
  options = spec.options_for(argv)
  assert shown[1:] == settings.flag_names(type(options))  # (after --help)
  assert options == dataclasses.replace(type(options)(), **(
      {"evidence_dir": str(tmp_path)} if name == "triviaqa" else {}))


@pytest.mark.parametrize("name", ["hotpotqa", "wikipedia"])
def test_a_fake_input_command_refuses_a_typo_with_one_line(name, tmp_path):
  """``python -m pipelines.datasets.<name>.fake_input`` (the generators with a command line)
  follows the command-line contract: a misspelt flag is one line naming the real one, exit 2."""
  proc = subprocess.run([sys.executable, "-m", f"pipelines.datasets.{name}.fake_input",
                         "--outptu", str(tmp_path / "x")], cwd=REPO, capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == 2 and proc.stdout == ""
  assert proc.stderr == (f"python -m pipelines.datasets.{name}.fake_input: error: unknown flag "
                         f"--outptu (did you mean --output?); see --help\n")
