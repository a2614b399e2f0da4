r"""Peak memory and time of the NarrativeQA job on one long book with its questions.

  python -m benchmarks.narrativeqa_memory [--words 400000] [--questions 30] [--seed 0]
                                          [--interval 0.2] [--seq_length 512]

Writes an official-layout NarrativeQA folder (``documents.csv``, ``qaps.csv``,
``tmp/<id>.content``) holding one generated Gutenberg-style book of ``--words`` words (the
longest NarrativeQA books have ~400k) and ``--questions`` questions whose answers are
phrases of the book, some verbatim and some with words changed; then runs

  python -m pipelines narrativeqa --input qaps.csv --split test --output_dir D

as a user would (in-memory runner: one process) and samples the resident memory of its process
tree every ``--interval`` seconds (and the kernel's ``ru_maxrss`` of the job, from
``os.wait4``).  Prints the job's wall time, the records' size on disk and how it grows with the
questions, and as the last line one JSON object with the peak RSS (target: < 2 GB).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "narrativeqa_memory", file=sys.stderr)
  sys.exit(2)

from benchmarks.pipeline_memory import _status_kb, tree
from schemas import records_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TARGET_GB = 2.0


def make_book(words: int, seed: int):
  """(text, list of sentences) of a generated book with ``words`` words."""
  rng = random.Random(seed)
  syllables = ["ka", "lo", "mi", "ra", "ten", "vor", "el", "sa", "du", "ne", "ith", "bar"]
  vocab = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3)))
           for _ in range(20000)]
  common = ["the", "and", "of", "to", "a", "in", "he", "she", "was", "that", "it", "his"]
  cum = list(itertools.accumulate(1.0 / (k + 1) for k in range(len(vocab))))  # Zipf-like
  sentences, count = [], 0
  while count < words:
    n = rng.randint(6, 22)
    drawn = rng.choices(vocab, cum_weights=cum, k=n)
    ws = [rng.choice(common) if rng.random() < 0.35 else w for w in drawn]
    sentences.append(" ".join(ws).capitalize() + ".")
    count += n
  paragraphs, i = [], 0
  while i < len(sentences):
    k = rng.randint(3, 8)
    paragraphs.append("\n".join(_wrap(" ".join(sentences[i:i + k]))))
    i += k
  return "\n\n".join(paragraphs), sentences


def _wrap(text: str, width: int = 70):
  line, out = [], []
  for w in text.split():
    if sum(len(x) + 1 for x in line) + len(w) > width:
      out.append(" ".join(line))
      line = []
    line.append(w)
  if line:
    out.append(" ".join(line))
  return out


def write_layout(root: str, words: int, questions: int, seed: int) -> str:
  os.makedirs(os.path.join(root, "tmp"))
  body, sentences = make_book(words, seed)
  text = ("The Project Gutenberg EBook of A Generated Tale\n\nProduced by The Benchmark\n\n"
          + body + "\n\nTHE END\n\nEnd of the Project Gutenberg EBook.\n")
  with open(os.path.join(root, "tmp", "book.content"), "w", encoding="utf-8") as f:
    f.write(text)
  with open(os.path.join(root, "documents.csv"), "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["document_id", "set", "kind", "story_url", "story_file_size", "wiki_url",
                "wiki_title", "story_word_count", "story_start", "story_end"])
    w.writerow(["book", "test", "gutenberg", "u", len(text), "w", "Tale", words,
                "Produced by The Benchmark", "THE END"])
  rng = random.Random(seed + 1)
  with open(os.path.join(root, "qaps.csv"), "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["document_id", "set", "question", "answer1", "answer2", "question_tokenized",
                "answer1_tokenized", "answer2_tokenized"])
    for k in range(questions):
      ws = rng.choice(sentences).rstrip(".").split()
      phrase = ws[rng.randrange(max(1, len(ws) - 5)):][:rng.randint(3, 7)]
      changed = [x if rng.random() < 0.7 else "something" for x in phrase]
      w.writerow(["book", "test", f"What happened in part {k}?", " ".join(phrase),
                  " ".join(changed), "", "", ""])
  return os.path.join(root, "qaps.csv")


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.narrativeqa_memory",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--words", type=int, default=400_000)
  ap.add_argument("--questions", type=int, default=30)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--interval", type=float, default=0.2)
  ap.add_argument("--seq_length", type=int, default=512)
  args = ap.parse_args()
  with tempfile.TemporaryDirectory(prefix="nqa_memory_") as tmp:
    t0 = time.perf_counter()
    qaps = write_layout(os.path.join(tmp, "nqa"), args.words, args.questions, args.seed)
    print(f"generated a {args.words:,}-word book and {args.questions} questions in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    out = os.path.join(tmp, "out")
    cmd = [sys.executable, "-m", "pipelines", "narrativeqa", "--input", qaps, "--split", "test",
           "--output_dir", out, "--log_level", "WARNING", "--seq_length", str(args.seq_length)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_kb = 0
    while True:
      pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
      if pid:
        break
      peak_kb = max(peak_kb, sum(_status_kb(p, b"VmRSS") for p in tree(proc.pid)))
      time.sleep(args.interval)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if proc.returncode:
      sys.exit(f"the job failed:\n{stderr.decode()[-3000:]}")
    summary = json.loads(stdout.decode().strip().splitlines()[-1])
    m = records_dir.read_manifest(out)
    record_bytes = sum(s["bytes"] for s in m["shards"])
    side_bytes = sum(os.path.getsize(os.path.join(out, p)) for p in m["documents"])
    maxrss_gb = usage.ru_maxrss / 2**20  # KiB -> GiB
    peak_gb = max(peak_kb / 2**20, maxrss_gb)
    seg = m["stages"]["segment"]
    print(f"job: {wall:.1f} s wall; {summary['counts']}; {m['examples']['segments']:,} segments "
          f"in {m['examples']['sub_documents']} sub-documents; texts tokenised "
          f"{seg['texts_tokenised']} (1 book + {args.questions} questions)")
    print(f"on disk: records {record_bytes / 1e6:,.1f} MB, documents side file "
          f"{side_bytes / 1e6:,.1f} MB: {record_bytes / 1e6 / max(args.questions, 1):,.1f} MB "
          f"of records per question (each question repeats the book's segments)")
    print(f"answers: {m['stages']['answers']}")
    print(f"peak tree RSS {peak_kb / 2**20:.2f} GB (sampled), ru_maxrss {maxrss_gb:.2f} GB")
  print(json.dumps({"metric": "narrativeqa_long_book_peak_rss", "value": round(peak_gb, 3),
                    "target": TARGET_GB, "unit": "GB", "words": args.words,
                    "questions": args.questions, "wall_s": round(wall, 1),
                    "records_mb": round(record_bytes / 1e6, 1),
                    "documents_mb": round(side_bytes / 1e6, 1)}))


if __name__ == "__main__":
  main()
