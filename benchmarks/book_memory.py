"""Whole-book memory at prediction: time and peak memory of ``model.predict --memory_scope book``
against ``sub_document`` on a book longer than one sub-document.

Input: the NarrativeQA test story *The Time Machine* from ``../shared/samples`` (35k words) with
3 questions of our own, or ``--story FILE`` (any long UTF-8 text, e.g. a generated book), written
by ``python -m pipelines narrativeqa`` with ``--max_segments_per_document`` small so that each
question's document has several sub-documents in several packs; a tiny model trained for 2
steps; then the two scopes' predictions interleaved ``--reps`` times, each a fresh process
(wall seconds and peak RSS from ``os.wait4``).  Last line:
``{"metric": "book_over_sub_document_predict_time", ...}`` with min/median/max of each.

  python -m benchmarks.book_memory [--reps 3] [--max_segments_per_document 16]
      [--story F | --words 400000]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

SAMPLES = os.path.join(os.path.dirname(str(REPO_ROOT)), "shared", "samples", "narrativeqa")
STORY_ID = "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58"
QUESTIONS = [("Who are the Eloi afraid of?", "The Morlocks.", "the Morlocks"),
             ("What does the Time Traveller find in his pocket?", "Two strange white flowers.",
              "white flowers"),
             ("Who is Weena?", "A little Eloi woman he saves from drowning.", "an Eloi woman")]


def layout(root: str, story: str) -> str:
  """A NarrativeQA directory with one test story and QUESTIONS; returns the qaps.csv path."""
  os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
  with open(story, "rb") as f:
    text = f.read()
  with open(os.path.join(root, "tmp", f"{STORY_ID}.content"), "wb") as f:
    f.write(text)
  first = text.decode("utf-8", "replace").lstrip("\ufeff").split()
  with open(os.path.join(root, "documents.csv"), "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["document_id", "set", "kind", "story_url", "story_file_size", "wiki_url",
                "wiki_title", "story_word_count", "story_start", "story_end"])
    w.writerow([STORY_ID, "test", "gutenberg", "", len(text), "", "Book", len(first),
                " ".join(first[:3]), " ".join(first[-3:])])
  qaps = os.path.join(root, "qaps.csv")
  with open(qaps, "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["document_id", "set", "question", "answer1", "answer2", "question_tokenized",
                "answer1_tokenized", "answer2_tokenized"])
    for q, a1, a2 in QUESTIONS:
      w.writerow([STORY_ID, "test", q, a1, a2, "", "", ""])
  return qaps


def run(argv, env):
  """Wall seconds and peak RSS (MB) of one process."""
  t0 = time.perf_counter()
  proc = subprocess.Popen(argv, cwd=str(REPO_ROOT), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
  _, status, usage = os.wait4(proc.pid, 0)
  out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
  if os.waitstatus_to_exitcode(status) != 0:
    raise SystemExit(f"{' '.join(argv)} failed:\n{err[-2000:]}")
  return time.perf_counter() - t0, usage.ru_maxrss / 1024, out


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks.book_memory",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--reps", type=int, default=3)
  p.add_argument("--max_segments_per_document", type=int, default=16)
  p.add_argument("--story", default=os.path.join(SAMPLES, "stories", f"{STORY_ID}.content"))
  p.add_argument("--words", type=int, default=0,
                 help="instead of --story: a generated book of this many words "
                      "(pipelines.fake_data.prose; the questions then have no answer in it)")
  args = p.parse_args(argv)
  if args.words:
    from pipelines.fake_data import prose  # pylint: disable=g-import-not-at-top
    generated = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8")
    generated.write(prose.book_body(prose.Prose(0), args.words))
    generated.close()
    args.story = generated.name
  if not os.path.exists(args.story):
    print(f"error: no story {args.story} (give --story FILE)", file=sys.stderr)
    return 2
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT))
  py = sys.executable
  with tempfile.TemporaryDirectory() as tmp:
    qaps = layout(os.path.join(tmp, "nqa"), args.story)
    out = os.path.join(tmp, "records")
    s = str(args.max_segments_per_document)
    run([py, "-m", "pipelines", "narrativeqa", "--input", qaps, "--split", "test", "--output_dir",
         out, "--max_segments_per_document", s, "--segments_per_pack", s], env)
    with open(os.path.join(out, "manifest.json")) as f:
      examples = json.load(f)["examples"]
    model = os.path.join(tmp, "model")
    run([py, "-m", "model.train", "--records_dir", out, "--model_dir", model, "--preset",
         "tiny", "--steps", "2"], env)
    times = {"sub_document": [], "book": []}
    rss = {"sub_document": [], "book": []}
    for _ in range(args.reps):
      for scope in times:
        wall, peak, stdout = run([py, "-m", "model.predict", "--records_dir", out, "--model_dir",
                                  model, "--output", os.path.join(tmp, f"{scope}.json"),
                                  "--memory_scope", scope], env)
        assert json.loads(stdout.strip().splitlines()[-1])["predictions"] == len(QUESTIONS)
        times[scope].append(wall)
        rss[scope].append(peak)
  def mmm(v):
    return [round(min(v), 2), round(statistics.median(v), 2), round(max(v), 2)]
  ratios = [b / s for b, s in zip(times["book"], times["sub_document"])]
  print(f"records: {examples}")
  for scope in times:
    print(f"{scope:>12}: predict wall s min/median/max {mmm(times[scope])}, peak RSS MB "
          f"{mmm(rss[scope])}")
  print(json.dumps({"metric": "book_over_sub_document_predict_time",
                    "value": round(statistics.median(ratios), 3), "target": None,
                    "unit": "ratio", "ratios_min_median_max": mmm(ratios),
                    "sub_documents": examples["sub_documents"], "packs": examples["packs"],
                    "segments": examples["segments"]}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
