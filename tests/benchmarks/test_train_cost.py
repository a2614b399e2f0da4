"""benchmarks/train_cost.py: the FLOP count docs/cost.md shows, and the command's last line."""

import json
import subprocess
import sys

import pytest

from benchmarks import train_cost
from tests import REPO_ROOT


def test_the_paper_step_counts_as_docs_cost_md_says():
  parts = train_cost.forward_flops_per_token(768, 3072, 14, 512, 4096, 50265, 0.2)
  assert parts["encoder"] == 14 * (8 * 768 ** 2 + 4 * 768 * 3072 + 4 * 512 * 768)
  assert parts["encoder"] / 1e6 == pytest.approx(220.2, abs=0.05)
  assert parts["memory"] / 1e6 == pytest.approx(14.9, abs=0.05)
  assert parts["mlm"] / 1e6 == pytest.approx(15.7, abs=0.05)
  assert train_cost.step_flops(128, 512, 4096, 0.2) == pytest.approx(4.93e13, rel=1e-3)
  assert train_cost.step_flops(128, 512, 4096, 0.0) == pytest.approx(4.62e13, rel=1e-3)
  # The CPU cross-check's shape: 8 x 512 with 128 memories, no MLM head.
  assert train_cost.step_flops(8, 512, 128, 0.0) == pytest.approx(2.74e12, rel=1e-3)


def test_the_command_prints_hours_and_cost_last():
  proc = subprocess.run([sys.executable, "-m", "benchmarks.train_cost", "--finetune_packs",
                         "hotpotqa=2897"], cwd=REPO_ROOT, capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  figure = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {"metric", "value", "target", "unit"} <= set(figure)
  assert figure["value"] == 125  # v4 chip-hours of 1M steps at 40% of peak
  runs = figure["runs"]
  assert round(runs["pretrain"]["v3_8_hours"]) == 70
  assert round(runs["pretrain"]["v4_cost_usd"]) == 401
  assert runs["finetune_hotpotqa"]["v4_chip_hours"] == pytest.approx(2.03, abs=0.01)


def test_utilization_out_of_range_is_a_usage_error():
  proc = subprocess.run([sys.executable, "-m", "benchmarks.train_cost", "--utilization", "0"],
                        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 2 and "--utilization" in proc.stderr
