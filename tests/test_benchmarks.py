"""Every benchmark runs alone on a tiny input and ends with its one-line JSON figure (they are
not run anywhere else in CI, so an API change would otherwise break them silently)."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("script, args", [
    ("hotpotqa_throughput.py", ["--num_questions", "30", "--pairs", "2"]),
    ("all.py", ["--scale", "0.005", "--pairs", "1"]),
    ("pipeline_memory.py", ["--questions", "100,200"]),
    ("read_memory.py", ["--sizes_mb", "1,2"]),
    ("segment_windows.py", ["--repeats", "1", "--calls", "3"]),
    ("wikipedia_throughput.py", ["--pages", "60", "--words_per_page", "100", "--pairs", "1"]),
    ("ner_throughput.py", ["--pages", "40", "--pairs", "1"]),
    ("linker_quality.py", []),
    ("oracle.py", ["--words", "3000", "--questions", "6", "--repeats", "1"]),
    ("narrativeqa_memory.py", ["--words", "5000", "--questions", "3"]),
    ("model_step.py", ["--small"]),
    ("scale_out.py", ["--sizes_mb", "0.2,0.4", "--runs", "1"]),
    ("memory_ladder.py", ["--rungs", "R3", "--models", "E,E(SS)", "--seeds", "1", "--steps", "4",
                          "--dev_packs", "1", "--parallel", "1", "--log_every", "2"]),
    ("input_pipeline.py", ["--pages", "30", "--seq_length", "128", "--segments_per_pack", "8",
                           "--max_mentions", "128", "--seconds", "1", "--repeats", "1"]),
])
def test_benchmark_prints_its_figure_last(script, args):
  proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", script)] + args,
                        cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  figure = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {"metric", "value", "target", "unit"} <= set(figure)
  assert figure["value"] is not None
  # A figure's own parts that can be skipped (an API they call changed) must not be.
  assert figure.get("breakdown", "ok") == "ok", figure["breakdown"]


@pytest.mark.parametrize("script, args", [
    ("memory_corpus.py", ["--train_docs", "12", "--heldout_docs", "4", "--no_samples"]),
    ("memory_use.py", ["--train_docs", "12", "--heldout_docs", "4", "--no_samples", "--seeds",
                       "1", "--steps", "4"]),
    ("memory_gap.py", ["--train_docs", "16", "--dev_docs", "8", "--seeds", "1", "--steps", "4",
                       "--log_every", "2", "--models", "e,e_ss"]),
])
def test_benchmark_with_an_output_dir_prints_its_figure_last(script, args, tmp_path):
  proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", script),
                         "--out_dir", str(tmp_path / "out")] + args,
                        cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  figure = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {"metric", "value", "target", "unit"} <= set(figure)
  assert figure["value"] is not None
