r"""The CPU cost of entity annotation (``--ner spacy``, ``--linker alias``), measured for
``--estimate`` (:data:`pipelines.estimate.ANNOTATION`).

  python -m benchmarks.annotation_cost [--reps 3] [--aliases 100000] [--book_mb 5]

Three measurements, each the median of ``--reps``:

* **job** (``start_cpu_s``, ``cpu_s_per_word``): ``python -m pipelines books`` on a tiny and on a
  larger generated book folder (:func:`pipelines.datasets.books.fake_input.write_books`), each with
  and without ``--ner spacy`` (``blank:en``, no entities dir), in fresh interpreters, their user +
  system CPU read from ``os.wait4``.  The with-minus-without difference on the tiny input is
  annotation's start-up (importing spaCy, building the pipeline); the growth of that
  difference from the tiny to the larger input, over the words the stage counted
  (``stages.annotate.words`` of the manifest), is its CPU per word.
* **alias table** (``cpu_s_per_alias_row``, ``cpu_s_per_pattern``, ``cpu_s_per_word_per_
  1k_patterns``): in this process, a generated alias table of ``--aliases`` rows (pseudo-word
  names of 1-3 words, Zipf link counts) as a Wikipedia job writes it, read back
  (``schemas.entities.read_aliases``) and turned into an ``AliasLinker`` and the ruler's
  patterns (``most_linked_aliases``) -- CPU per alias row --, then ``load_spacy("blank:en",
  patterns)`` -- CPU per pattern --, and ``nlp.pipe`` over generated prose with and without the
  patterns -- extra CPU per word per 1,000 patterns.
* **words per MB** is not measured here: it is each job's text per MB of its work, taken from
  the runs on the real-format samples (see ``WORDS_PER_MB`` in :mod:`pipelines.estimate`).

The last line is JSON: the figures, to paste into ``pipelines/estimate/costs.py``'s ``ANNOTATION``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, Sequence

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "annotation_cost", file=sys.stderr)
  sys.exit(2)

from pipelines.datasets.books import fake_input as books_fake  # pylint: disable=g-import-not-at-top
from pipelines.fake_data.prose import Prose  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _job_cpu(book_dir: str, out_dir: str, ner: bool) -> Dict[str, float]:
  """CPU s, wall s and annotated words of one books job in a fresh interpreter."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  argv = [sys.executable, "-m", "pipelines", "books", "--input", os.path.join(book_dir, "*.txt"),
          "--output_dir", out_dir, "--log_level", "WARNING"] + (["--ner", "spacy"] if ner else [])
  t0 = time.perf_counter()
  proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
  err = proc.stderr.read()
  _, status, usage = os.wait4(proc.pid, 0)
  wall = time.perf_counter() - t0
  if os.waitstatus_to_exitcode(status):
    sys.stderr.write(err.decode("utf-8", "replace")[-3000:])
    raise SystemExit("the books job failed")
  with open(os.path.join(out_dir, "manifest.json"), encoding="utf-8") as f:
    words = json.load(f)["stages"].get("annotate", {}).get("words", 0)
  shutil.rmtree(out_dir, ignore_errors=True)
  return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "words": words}


def measure_job(tmp: str, reps: int, book_mb: float) -> Dict[str, float]:
  tiny, large = os.path.join(tmp, "books-tiny"), os.path.join(tmp, "books-large")
  books_fake.write_books(tiny, 1, 0.05)
  n = max(1, round(book_mb / 0.5))
  books_fake.write_books(large, n, book_mb / n / 0.5)
  starts, per_word = [], []
  out = os.path.join(tmp, "out")
  for rep in range(reps):  # interleaved pairs: a shared machine's drift hits both alike
    r = {(size, ner): _job_cpu(d, out, ner) for size, d in (("tiny", tiny), ("large", large))
         for ner in (False, True)}
    start = r[("tiny", True)]["cpu"] - r[("tiny", False)]["cpu"]
    grow = (r[("large", True)]["cpu"] - r[("large", False)]["cpu"]) - start
    words = r[("large", True)]["words"] - r[("tiny", True)]["words"]
    starts.append(start)
    per_word.append(grow / words)
    print(f"rep {rep + 1}: start-up {start:.2f} CPU s; {words:,} more words cost {grow:.2f} CPU s "
          f"({words / max(grow, 1e-9):,.0f} words per CPU s); load {os.getloadavg()[0]:.1f}",
          flush=True)
  return {"start_cpu_s": statistics.median(starts), "cpu_s_per_word": statistics.median(per_word),
          "start_cpu_s_spread": [min(starts), max(starts)],
          "cpu_s_per_word_spread": [min(per_word), max(per_word)]}


def _alias_table(rows: int, seed: int = 5):
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  from schemas import entities  # pylint: disable=g-import-not-at-top
  prose = Prose(seed=seed)
  rng = random.Random(seed)
  aliases, seen = [], set()
  while len(aliases) < rows:
    name = " ".join(prose.name() for _ in range(rng.randint(1, 3)))
    if name not in seen:
      seen.add(name)
      aliases.append(name)
  return pa.Table.from_pydict({
      "alias": aliases, "entity_id": [1 + i for i in range(rows)],
      "title": aliases, "count": [max(2, int(1000 / (1 + i) ** 0.7)) for i in range(rows)]},
      schema=entities.ALIAS_SCHEMA)


def measure_aliases(tmp: str, reps: int, rows: int) -> Dict[str, float]:
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  from pipelines.beam.annotate import most_linked_aliases  # pylint: disable=g-import-not-at-top
  from pipelines.entities import linker as linker_lib  # pylint: disable=g-import-not-at-top
  from pipelines.entities import ner  # pylint: disable=g-import-not-at-top
  from schemas import entities  # pylint: disable=g-import-not-at-top
  path = os.path.join(tmp, "aliases.parquet")
  pq.write_table(_alias_table(rows), path)
  prose = Prose(seed=7)
  texts = ["\n\n".join(prose.paragraphs(2000)) for _ in range(50)]
  words = sum(len(t.split()) for t in texts)
  ner.load_spacy("blank:en")  # spaCy imported before anything is timed
  per_row, per_pattern, per_word_1k = [], [], []
  for rep in range(reps):
    c0 = time.process_time()
    table = entities.read_aliases([path])
    linker_lib.AliasLinker(table)
    patterns = most_linked_aliases(table, rows)
    c1 = time.process_time()
    bare = ner.load_spacy("blank:en")
    c2 = time.process_time()
    nlp = ner.load_spacy("blank:en", patterns)
    c3 = time.process_time()
    for _ in bare.pipe(texts, batch_size=64):
      pass
    c4 = time.process_time()
    for _ in nlp.pipe(texts, batch_size=64):
      pass
    c5 = time.process_time()
    per_row.append((c1 - c0) / rows)
    per_pattern.append(((c3 - c2) - (c2 - c1)) / len(patterns))
    per_word_1k.append(max(0.0, (c5 - c4) - (c4 - c3)) / words / (len(patterns) / 1000))
    print(f"rep {rep + 1}: {rows:,} alias rows read, linker and patterns {c1 - c0:.2f} CPU s; "
          f"ruler of {len(patterns):,} patterns {c3 - c2:.2f} s; {words:,} words {c4 - c3:.2f} s "
          f"bare, {c5 - c4:.2f} s with the ruler", flush=True)
  return {"cpu_s_per_alias_row": statistics.median(per_row),
          "cpu_s_per_pattern": statistics.median(per_pattern),
          "cpu_s_per_word_per_1k_patterns": statistics.median(per_word_1k),
          "alias_rows": rows}


def main(argv: Sequence[str] = None) -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.annotation_cost",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--aliases", type=int, default=100_000,
                  help="rows of the generated alias table (default: %(default)s)")
  ap.add_argument("--book_mb", type=float, default=5.0,
                  help="size of the larger book folder (default: %(default)s)")
  args = ap.parse_args(argv)
  if args.reps < 1 or args.aliases < 1000 or args.book_mb <= 0:
    ap.error("--reps >= 1, --aliases >= 1000 and --book_mb > 0")
  tmp = tempfile.mkdtemp(prefix="annotation_cost_")
  try:
    figures: Dict[str, object] = {"date": time.strftime("%Y-%m-%d"),
                                  "load_average": os.getloadavg()[0]}
    figures.update(measure_aliases(tmp, args.reps, args.aliases))
    figures.update(measure_job(tmp, args.reps, args.book_mb))
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  print(json.dumps({"metric": "annotation_cost", **figures}))


if __name__ == "__main__":
  main()
