"""The README's quick starts, run as written: each quick start's ``bash`` block (found by its
heading) on a data folder laid out as the quick start says, built from the small samples of the
real files in ``../shared/samples`` under their official names (skipped when the samples are
absent), each command a separate process in ``tmp_path`` as a user runs them.

The block's first line sets the data folder (``DATA=...``); ``$DATA`` is replaced by the folder
built here and ``python`` by this interpreter; outputs go under ``runs/`` in ``tmp_path``.  Each
command's last stdout line is its JSON summary: records written, training steps, one prediction
per dev question, the task's metrics.  The wall time of every command and of the whole quick
start is printed (``pytest -s``) and, with ``QUICKSTART_TIMES=FILE``, appended to FILE as JSON
lines: the README's quick-start times come from this run.  The 20-step fine-tunes train all 20
steps (no ``--patience``) and evaluate on the dev set every 10 (``--eval_every 10``).

Each pipeline command's ``--estimate`` (:mod:`pipelines.estimate`) runs right before it, under
the same load: the quick start's summed estimate must be within +-30% of its pipeline commands'
summed wall time (a miss is measured once more, in a fresh folder: another job's load on a
shared 2-core machine changes within seconds).  ``tests/pipelines/test_estimate_annotation.py``
checks the estimate's parts; the runs it is compared with are these.

Without ``QUICKSTART_TIMES`` (``make check``) the trainings are shortened, the one change to the
commands: ``--steps 20`` runs :data:`SHORT_STEPS` steps (pre-training, which evaluates once at
its end: :data:`SHORT_PRETRAIN_STEPS`, each step ~3 s, its MLM head over 50,265 tokens) and
``--eval_every 10`` evaluates every :data:`SHORT_EVAL_EVERY`, so that a fine-tune still
evaluates on dev twice and every command, flag and output is exercised as written, in a
fraction of the time (issue 42).  Then the fine-tune, predict and evaluate commands also run in
the test's process (their ``main(argv)`` in the work folder, as ``python -m`` calls it: the same
flags, outputs and summary line, without a TensorFlow load per command); the pipelines and the
pre-training stay processes of their own (the estimates are compared with whole runs, and the
pre-training's ~5 GB peak is kept out of the test worker).  ``tests/test_cli_contract.py`` runs
every command's ``python -m`` entry point.
"""

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import REPO_ROOT

SAMPLES = REPO_ROOT.parent / "shared" / "samples"
README = REPO_ROOT / "README.md"
SHORT_STEPS, SHORT_PRETRAIN_STEPS, SHORT_EVAL_EVERY = 2, 1, 1


def short_steps(module: str) -> int:
  """The ``--steps`` that :func:`shortened` gives ``module``'s training."""
  return SHORT_PRETRAIN_STEPS if module == "model.pretrain" else SHORT_STEPS


def shortened(argv):
  """``argv`` of a model command with ``--steps`` / ``--eval_every`` values made small."""
  out = list(argv)
  values = {"--steps": short_steps(argv[2]), "--eval_every": SHORT_EVAL_EVERY}
  for i, a in enumerate(out[:-1]):
    if a in values and argv[2].startswith("model."):
      assert int(out[i + 1]) >= values[a], argv  # only ever shorter
      out[i + 1] = str(values[a])
  return out


def quickstart(heading: str):
  """``(variable, value, commands)`` of the first ``bash`` block under ``heading``."""
  text = README.read_text(encoding="utf-8")
  assert f"\n{heading}\n" in text, f"README.md has no heading {heading!r}"
  rest = text[text.index(f"\n{heading}\n") + len(heading) + 2:]
  block = re.search(r"^```bash\n(.*?)^```", rest, re.S | re.M)
  following = re.search(r"^#{1,6} ", rest, re.M)
  assert block and (following is None or block.start() < following.start()), \
      f"{heading}: no bash block before the next heading"
  lines = [line.strip() for line in block.group(1).replace("\\\n", " ").splitlines()]
  lines = [line for line in lines if line and not line.startswith("#")]
  variable, _, value = lines[0].partition("=")
  assert re.fullmatch(r"[A-Z_]+", variable), f"{heading}: the block starts with {lines[0]!r}"
  return variable, value.split("#")[0].strip(), lines[1:]


def _link(target: Path, source: Path) -> None:
  target.parent.mkdir(parents=True, exist_ok=True)
  target.symlink_to(source, target_is_directory=source.is_dir())


# --- the data folders, as each quick start's tree shows them --------------------------------

def hotpotqa_data(root: Path) -> Path:
  # The sample is the first 20 questions of the dev set; it stands in for the train file too.
  sample = SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.head20.json"
  _link(root / "hotpot_train_v1.1.json", sample)
  _link(root / "hotpot_dev_distractor_v1.json", sample)
  return root


def triviaqa_data(root: Path) -> Path:
  _link(root / "qa", SAMPLES / "triviaqa" / "qa")
  _link(root / "evidence", SAMPLES / "triviaqa" / "evidence")
  return root


# The samples' own NarrativeQA stories are excerpts without their start markers; the one whole
# story is The Time Machine (its real documents.csv row and Gutenberg text), which stands in for
# a train and a valid story here, with questions about it.
TIME_MACHINE = "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58"
TM_QUESTIONS = [
    ("train", "Who are the Eloi afraid of?", "The Morlocks.", "the Morlocks"),
    ("train", "What does the Time Traveller find in his pocket?", "Two strange white flowers.",
     "white flowers"),
    ("valid", "Who is Weena?", "A little Eloi woman he saves from drowning.", "an Eloi woman"),
]


def narrativeqa_data(root: Path) -> Path:
  nqa = SAMPLES / "narrativeqa"
  with open(nqa / "documents_full.csv", encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f))
  (root / "tmp").mkdir(parents=True)
  with open(root / "documents.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(rows[0])
    story = next(r for r in rows[1:] if r and r[0] == TIME_MACHINE)
    for split in ("train", "valid"):
      w.writerow([story[0], split] + story[2:])
  with open(root / "qaps.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["document_id", "set", "question", "answer1", "answer2", "question_tokenized",
                "answer1_tokenized", "answer2_tokenized"])
    for split, q, a1, a2 in TM_QUESTIONS:
      w.writerow([TIME_MACHINE, split, q, a1, a2, "", "", ""])
  _link(root / "third_party", nqa / "third_party")
  # A copy, not a symlink: a story file that links out of its folder is refused (issue 40).
  shutil.copyfile(nqa / "stories" / f"{TIME_MACHINE}.content",
                  root / "tmp" / f"{TIME_MACHINE}.content")
  return root


def jsonl_qa_data(root: Path) -> Path:
  del root
  return REPO_ROOT  # the block's DATA is a folder of the repository


def pretraining_data(root: Path) -> Path:
  # A real enwiki excerpt (5 articles, one bz2 stream) under the multistream dump's name; with
  # no index beside it the job reads it whole.
  _link(root / "enwiki" / "enwiki-latest-pages-articles-multistream.xml.bz2",
        SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2")
  for split in ("train", "validation"):
    _link(root / "pg19" / split, SAMPLES / "books" / "pg19" / split)
  return root


# --- what each quick start must end with --------------------------------------------------

def hotpotqa_questions(data: Path) -> int:
  with open(data / "hotpot_dev_distractor_v1.json", encoding="utf-8") as f:
    return len(json.load(f))


def triviaqa_questions(data: Path) -> int:
  with open(data / "qa" / "wikipedia-dev.json", encoding="utf-8") as f:
    return len(json.load(f)["Data"])


def narrativeqa_questions(data: Path) -> int:
  with open(data / "qaps.csv", encoding="utf-8", newline="") as f:
    return sum(row["set"] == "valid" for row in csv.DictReader(f))


def jsonl_qa_questions(data: Path) -> int:
  with open(data / "examples.jsonl", encoding="utf-8") as f:
    return sum(1 for line in f if line.strip())


METRICS = {"hotpotqa": {"em", "f1", "sp_em", "sp_f1", "joint_em", "joint_f1"},
           "triviaqa": {"exact_match", "f1"},
           "narrativeqa": {"rouge_l", "bleu_1", "bleu_4", "meteor"},
           "extractive_qa": {"exact_match", "f1"}}

QUICKSTARTS = {
    "### HotpotQA": (hotpotqa_data, hotpotqa_questions),
    "### TriviaQA": (triviaqa_data, triviaqa_questions),
    "### NarrativeQA": (narrativeqa_data, narrativeqa_questions),
    "### Your own QA data (JSON lines)": (jsonl_qa_data, jsonl_qa_questions),
    "### Pre-training corpora: Wikipedia and books": (pretraining_data, None),
}


@pytest.mark.parametrize("heading", list(QUICKSTARTS))
def test_the_quick_start_is_data_then_the_pipeline_then_the_model(heading):
  variable, value, cmds = quickstart(heading)
  assert variable == "DATA" and value
  modules = [shlex.split(c)[2] for c in cmds]
  assert all(shlex.split(c)[:2] == ["python", "-m"] for c in cmds), cmds
  n_pipelines = sum(m.startswith("pipelines") for m in modules)
  assert n_pipelines >= 1 and all(m.startswith("pipelines") for m in modules[:n_pipelines])
  rest = modules[n_pipelines:]
  assert rest in (["model.finetune", "model.predict", "model.evaluate"], ["model.pretrain"]), rest
  for cmd in cmds:  # every input under the data folder, every output under runs/
    for a in shlex.split(cmd):
      assert not a.startswith("/") and not a.startswith("~"), f"{heading}: {a}"


# The commands that run in the test's process when the trainings are shortened (see above).
IN_PROCESS = ("model.finetune", "model.predict", "model.evaluate")


@pytest.mark.slow
@pytest.mark.usefixtures("restore_logging")  # (the in-process commands install a log handler)
@pytest.mark.parametrize("heading", list(QUICKSTARTS))
def test_the_quick_start_runs_as_written(heading, tmp_path, monkeypatch):
  build, questions = QUICKSTARTS[heading]
  if build is not jsonl_qa_data and not SAMPLES.is_dir():  # the JSON-lines sample is ours
    pytest.skip("no ../shared/samples")
  variable, value, cmds = quickstart(heading)
  data = build(tmp_path / "data")
  if data == REPO_ROOT:
    data = REPO_ROOT / value
  else:
    _copy_links(data)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT),
             **{variable: str(data)})
  work = tmp_path / "work"
  work.mkdir()
  as_written = bool(os.environ.get("QUICKSTART_TIMES"))
  results, times, estimates = [], [], []
  for cmd in cmds:
    argv = shlex.split(cmd.replace(f"${variable}", str(data)))
    assert argv[0] == "python"
    if not as_written:
      argv = shortened(argv)
    if argv[2].startswith("pipelines"):  # (the model commands have no --estimate)
      estimates.append(_estimate(argv, work, env))
    if not as_written and argv[2] in IN_PROCESS:
      summary, seconds = _run_in_process(argv, work, monkeypatch)
    else:
      summary, seconds = _run(argv, work, env, cmd)
    times.append((argv[2], seconds))
    results.append((argv[2], summary))
  total = sum(t for _, t in times)  # (the estimates apart)
  print(f"\n{heading}: {total:.1f} s in all; " +
        ", ".join(f"{m} {t:.1f} s" for m, t in times))
  if os.environ.get("QUICKSTART_TIMES"):  # a JSON-lines file to collect the times in
    with open(os.environ["QUICKSTART_TIMES"], "a", encoding="utf-8") as f:
      f.write(json.dumps({"heading": heading, "total_s": round(total, 1),
                          "commands": [[m, round(t, 1)] for m, t in times],
                          "summaries": [s for _, s in results]}) + "\n")

  _check_estimates(heading, [c for c in cmds if shlex.split(c)[2].startswith("pipelines")],
                   variable, data, env, tmp_path, estimates,
                   [t for m, t in times if m.startswith("pipelines")])

  for module, summary in results:
    if module.startswith("pipelines"):
      assert summary["counts"]["written"] > 0, (module, summary)
      assert summary["examples"]["packs"] > 0
  by_module = dict(results)
  if "model.pretrain" in by_module:
    summary = by_module["model.pretrain"]
    assert summary["steps"] == (20 if as_written else short_steps("model.pretrain"))
    assert summary["final_eval"] is not None
    return
  finetune, predict, metrics = (by_module[m] for m in
                                ("model.finetune", "model.predict", "model.evaluate"))
  assert finetune["steps"] == (20 if as_written else short_steps("model.finetune"))
  assert finetune["final_eval"] is not None
  assert (work / "runs").is_dir()
  assert predict["predictions"] == questions(data)
  assert METRICS[predict["task"]] <= set(metrics), sorted(metrics)
  if build is triviaqa_data:  # every official evaluation key of the dev questions, and no other
    from model.evaluation import triviaqa as official  # pylint: disable=g-import-not-at-top
    with open(work / "runs" / "triviaqa" / "predictions.json", encoding="utf-8") as f:
      predicted = set(json.load(f))
    with open(data / "qa" / "wikipedia-dev.json", encoding="utf-8") as f:
      assert predicted == set(official.key_to_answer(json.load(f), per_document=False))
    assert metrics["n_missing"] == 0
  if build is jsonl_qa_data:  # the shipped sample: every count is known
    job = by_module["pipelines"]
    assert job["counts"] == {"input": 5, "written": 5, "skipped": 0, "rejected": 0}
    assert finetune["final_eval"]["n_gold"] == 5 and predict["task"] == "extractive_qa"
    with open(work / "runs" / "my_qa" / "pred.json", encoding="utf-8") as f:
      predicted = set(json.load(f))
    with open(data / "examples.jsonl", encoding="utf-8") as f:
      assert predicted == {json.loads(line)["id"] for line in f if line.strip()}
    assert metrics["n_gold"] == 5 and metrics["n_missing"] == 0 and metrics["n_ignored"] == 0
    assert 0 <= metrics["exact_match"] <= metrics["f1"] <= 100
    # evaluate scores what predict wrote, the same way finetune's dev evaluation did.
    assert metrics["f1"] == pytest.approx(finetune["final_eval"]["f1"])


# --- the pipeline commands' --estimate against their runs -----------------------------------

ESTIMATE_TOLERANCE = 0.30


def _run(argv, cwd, env, cmd):
  """(last stdout line as JSON, wall seconds) of ``argv`` (``python -m ...``) run in ``cwd``."""
  t0 = time.perf_counter()
  proc = subprocess.run([sys.executable] + argv[1:], cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=1200)
  seconds = time.perf_counter() - t0
  assert proc.returncode == 0, f"{cmd}\n{proc.stderr[-3000:]}"
  return json.loads(proc.stdout.strip().splitlines()[-1]), seconds


def _run_in_process(argv, cwd, monkeypatch):
  """:func:`_run` of a model command (``python -m <module> ...``) as its ``main(argv)`` in
  this process, with ``cwd`` as the working directory."""
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  with monkeypatch.context() as m:
    m.chdir(cwd)
    t0 = time.perf_counter()
    lines = common.run_main(argv[1:], str(cwd / "in_process.log"))  # raises on a failure
    seconds = time.perf_counter() - t0
  return json.loads(lines[-1]), seconds


def _estimate(argv, cwd, env) -> float:
  """The local seconds that ``argv --estimate`` predicts for the pipeline command ``argv``."""
  e, _ = _run(argv + ["--estimate"], cwd, env, shlex.join(argv + ["--estimate"]))
  assert (e["annotation"] is not None) == ("--ner" in argv), e["annotation"]
  return e["local"]["hours"] * 3600


def _check_estimates(heading, cmds, variable, data, env, tmp_path, estimates, runs):
  """The pipeline commands' summed estimate within ESTIMATE_TOLERANCE of their summed runs; on
  a miss they are estimated and run once more, in a fresh folder."""
  assert cmds and len(estimates) == len(runs) == len(cmds), f"{heading}: no pipeline command"
  for attempt in range(2):
    estimated, measured = sum(estimates), sum(runs)
    print(f"{heading}: the pipelines' estimate {estimated:.1f} s, run {measured:.1f} s; "
          + "; ".join(f"{_output_dir(c)} {e:.1f} vs {r:.1f} s"
                      for c, e, r in zip(cmds, estimates, runs)))
    if attempt or abs(estimated - measured) <= ESTIMATE_TOLERANCE * measured:
      break
    again = tmp_path / "estimate_again"
    again.mkdir()
    estimates, runs = [], []
    for cmd in cmds:
      argv = shlex.split(cmd.replace(f"${variable}", str(data)))
      estimates.append(_estimate(argv, again, env))
      runs.append(_run(argv, again, env, cmd)[1])
  assert abs(estimated - measured) <= ESTIMATE_TOLERANCE * measured, (
      f"{heading}: estimate {estimated:.1f} s vs run {measured:.1f} s")


def _output_dir(cmd: str) -> str:
  argv = shlex.split(cmd)
  return argv[argv.index("--output_dir") + 1] if "--output_dir" in argv else argv[2]


def _copy_links(root) -> None:
  """Symlinks of the data folder replaced by copies (a run refuses a story or an evidence file
  that resolves outside its folder; the estimate measures the files the run reads)."""
  for d, dirs, files in os.walk(root):
    for name in dirs + files:
      p = os.path.join(d, name)
      if os.path.islink(p):
        target = os.path.realpath(p)
        os.unlink(p)
        (shutil.copytree if os.path.isdir(target) else shutil.copy)(target, p)
