"""Every benchmark runs alone on a tiny input (``python -m benchmarks.<name>``, as a user runs
it) and ends with its one-line JSON figure (they are not run anywhere else in CI, so an API
change would otherwise break them silently)."""

import json
import os
import subprocess
import sys

import pytest
from tests import REPO_ROOT

REPO = str(REPO_ROOT)


@pytest.mark.parametrize("name, args", [
    ("hotpotqa_throughput", ["--num_questions", "30", "--pairs", "1"]),
    ("all", ["--scale", "0.005", "--pairs", "1"]),
    ("pipeline_memory", ["--questions", "100,200"]),
    ("read_memory", ["--sizes_mb", "1,2"]),
    ("segment_windows", ["--repeats", "1", "--calls", "3"]),
    ("wikipedia_throughput", ["--pages", "60", "--words_per_page", "100", "--pairs", "1"]),
    ("wikitext_parsers", ["--pages", "40", "--rounds", "1", "--ceiling_pairs", "1", "--scale",
                          "0.01"]),
    ("ner_throughput", ["--pages", "40", "--pairs", "1"]),
    ("linker_quality", []),
    ("oracle", ["--words", "3000", "--questions", "6", "--repeats", "1"]),
    ("narrativeqa_memory", ["--words", "5000", "--questions", "3"]),
    ("model_step", ["--small"]),
    ("scale_out", ["--sizes_mb", "0.2,0.4", "--runs", "1"]),
    ("job_cost", ["--reps", "1", "--scale", "0.02", "--only", "hotpotqa", "--nomultiprocess"]),
    # (pre-trained readers only: from scratch is the quick ladder's, tests/model)
    ("memory_ladder", ["--rungs", "R3", "--models", "E,E(SS)", "--inits", "pretrained",
                       "--seeds", "1", "--steps", "4", "--pretrain_steps", "4", "--dev_packs",
                       "1", "--parallel", "1", "--log_every", "2"]),
    ("book_memory", ["--reps", "1", "--words", "6000", "--max_segments_per_document", "2"]),
    ("input_pipeline", ["--pages", "30", "--seq_length", "128", "--segments_per_pack", "8",
                        "--max_mentions", "128", "--seconds", "1", "--repeats", "1"]),
])
@pytest.mark.slow
def test_benchmark_prints_its_figure_last(name, args, tmp_path):
  # Caches (the memory ladder's pre-trained readers) go to a private dir, not ~/.cache.
  proc = subprocess.run([sys.executable, "-m", "benchmarks", name] + args,
                        cwd=REPO, capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
  assert proc.returncode == 0, proc.stderr[-3000:]
  figure = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {"metric", "value", "target", "unit"} <= set(figure)
  assert figure["value"] is not None
  # A figure's own parts that can be skipped (an API they call changed) must not be.
  assert figure.get("breakdown", "ok") == "ok", figure["breakdown"]


@pytest.mark.parametrize("name, args", [
    ("memory_use", ["--train_docs", "12", "--heldout_docs", "4", "--no_samples", "--seeds",
                    "1", "--steps", "4"]),
    # (whole-book memory, the figure's two models: book scope and the default sub-document
    # scope; the E(SS) ablation trains in the memory_ladder and memory_use runs, and the
    # default models are test_memory_gap_default_models' below)
    ("memory_gap", ["--train_docs", "16", "--dev_docs", "8", "--seeds", "1", "--steps", "4",
                    "--log_every", "2", "--sub_document_segments", "3", "--parallel", "1",
                    "--models", "e_book,e"]),
])
@pytest.mark.slow
def test_benchmark_with_an_output_dir_prints_its_figure_last(name, args, tmp_path):
  proc = subprocess.run([sys.executable, "-m", "benchmarks", name,
                         "--out_dir", str(tmp_path / "out")] + args,
                        cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  figure = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {"metric", "value", "target", "unit"} <= set(figure)
  assert figure["value"] is not None
  if "--sub_document_segments" in args:  # whole-book memory: book scope against sub-document
    assert figure["metric"] == "readtwice_e_book_minus_sub_document_dev_f1"
    assert set(figure["models"]) == {"e_book", "e"}


def test_memory_gap_default_models():
  from benchmarks.experiments import memory_gap  # pylint: disable=g-import-not-at-top
  assert memory_gap.parse_args([])[1] == ["e", "e_ss", "plain"]
  assert memory_gap.parse_args(["--sub_document_segments", "3"])[1] == ["e_book", "e", "e_ss"]
  assert memory_gap.parse_args(["--models", " e_book, e ,"])[1] == ["e_book", "e"]
  with pytest.raises(SystemExit):
    memory_gap.parse_args(["--models", "e,nope"])


@pytest.mark.slow
def test_memory_corpus_prints_its_stats_and_figure_last_and_refuses_a_second_build(tmp_path):
  out = str(tmp_path / "out")
  cmd = [sys.executable, "-m", "benchmarks", "memory_corpus", "--out_dir", out]
  proc = subprocess.run(cmd + ["--seed", "3", "--train_docs", "12", "--heldout_docs", "4",
                               "--no_samples"], cwd=REPO, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.strip().splitlines()
  figure = json.loads(lines[-1])
  assert {"metric", "value", "target", "unit"} <= set(figure)
  assert figure["value"] is not None
  with open(os.path.join(out, "corpus.json"), encoding="utf-8") as f:
    result = json.load(f)
  for split, docs in (("train", 12), ("heldout", 4)):
    assert figure[f"{split}_documents"] == docs == result["splits"][split]["documents"]
    assert figure[f"{split}_mentions"] == result["splits"][split]["mentions"]
    assert any(line.startswith(f"{split} ") and f"{docs} docs" in line for line in lines)
  assert result["config"]["train_docs"] == 12 and result["seed"] == 3
  assert result["shared_entity_titles"] == 0
  for name in ("wikipedia", "books"):
    assert result["real"][name] is None
    assert any(line.startswith(f"real_{name}: ") and "skipped" in line for line in lines)
  # A second build into the same directory is refused before anything is written.
  before = os.path.getmtime(result["splits"]["train"]["dump"])
  again = subprocess.run(cmd + ["--train_docs", "2", "--heldout_docs", "1", "--no_samples"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
  assert again.returncode == 1 and "memory_corpus: error:" in again.stderr
  assert "earlier build" in again.stderr
  assert os.path.getmtime(result["splits"]["train"]["dump"]) == before


# (benchmarks/__main__.py is python -m benchmarks: tests/benchmarks/test_harness.py.)
SCRIPTS = sorted(os.path.join(folder, n[:-3]) for folder in ("", "experiments")
                 for n in os.listdir(os.path.join(REPO, "benchmarks", folder))
                 if n.endswith(".py") and n not in ("__init__.py", "__main__.py", "common.py"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_benchmark_run_as_a_file_names_the_harness_or_runs(name, tmp_path):
  """``python benchmarks/<name>.py --help`` (the path form, from another directory): the
  benchmarks are a package of the checkout, not installed, and no script puts the checkout on
  ``sys.path``; one that needs the package says in one line how to run it (``python -m
  benchmarks <name>``, exit 2), one that needs only installed packages runs."""
  path = os.path.join(REPO, "benchmarks", f"{name}.py")
  with open(path, encoding="utf-8") as f:
    assert "sys.path" not in f.read()
  proc = subprocess.run([sys.executable, path, "--help"], cwd=str(tmp_path), capture_output=True,
                        text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if proc.returncode == 0:
    assert "usage:" in proc.stdout
  else:
    assert proc.returncode == 2 and proc.stderr == (
        f"error: run it from the repository root as: python -m benchmarks "
        f"{os.path.basename(name)}\n")
