"""The README's quick start for users' own QA data, run as written: its four commands (pipeline,
fine-tune, predict, evaluate) on the shipped sample, each a separate process as a user runs them.

Crosses packages (pipelines -> model), hence at this level.  The README block is the source: if
its commands change, this test runs the new ones.
"""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests import REPO_ROOT

SECTION = "### Your own QA data (JSON lines)"


def readme_commands():
  """The commands of the section's first ``bash`` block, continuation lines joined."""
  text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
  section = text[text.index(SECTION):]
  block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
  return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_section_has_the_four_steps():
  cmds = readme_commands()
  assert cmds[0].startswith("DATA=")
  assert [c.split()[2] for c in cmds[1:]] == [
      "pipelines", "model.finetune", "model.predict", "model.evaluate"]


@pytest.mark.slow
def test_readme_commands_run_end_to_end(tmp_path):
  cmds = readme_commands()
  data = str(REPO_ROOT / cmds[0].split("=", 1)[1].split("#")[0].strip())
  env = dict(os.environ, DATA=data, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT))
  results = []
  for cmd in cmds[1:]:
    argv = [a.replace("$DATA", data) for a in shlex.split(cmd)]
    assert argv[0] == "python"
    # The outputs go under tmp_path (runs/my_qa/... in the README), the run is kept short.
    argv = [sys.executable] + [a.replace("runs/my_qa/", f"{tmp_path}/") for a in argv[1:]]
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{cmd}\n{proc.stderr[-3000:]}"
    results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
  job, finetune, predict, metrics = results
  assert job["counts"] == {"input": 5, "written": 5, "skipped": 0, "rejected": 0}
  assert finetune["steps"] >= 1 and finetune["final_eval"]["n_gold"] == 5
  assert predict["task"] == "extractive_qa" and predict["predictions"] == 5
  with open(tmp_path / "pred.json", encoding="utf-8") as f:
    preds = json.load(f)
  with open(os.path.join(data, "examples.jsonl"), encoding="utf-8") as f:
    ids = {json.loads(line)["id"] for line in f if line.strip()}
  assert set(preds) == ids
  assert metrics["n_gold"] == 5 and metrics["n_missing"] == 0 and metrics["n_ignored"] == 0
  assert 0 <= metrics["exact_match"] <= metrics["f1"] <= 100
  # evaluate scores what predict wrote, the same way finetune's dev evaluation did.
  assert metrics["f1"] == pytest.approx(finetune["final_eval"]["f1"])
