r"""The annotation stage's words/s inside the pipeline against bare ``nlp.pipe``, paired.

  python -m benchmarks.ner_throughput [--pages 600] [--pairs 5] [--ruler_patterns 100000]

Set-up (once): a generated Wikipedia dump (``synthetic.wikipedia``) goes through
``python -m pipelines.wikipedia`` for its alias table; the clean text of other generated pages
of pages of the same generated world becomes a folder of books (one page per file, links
removed: plain text).

Each pair, one right after the other, on the same text and the same spaCy pipeline
(``blank:en`` + an EntityRuler of the ``--ruler_patterns`` most linked aliases):

* bare: ``nlp.pipe`` over the books' document texts (as ``pipelines.datasets.books.reader`` makes
  them), batches of 64, in this process, with a freshly built pipeline;
* pipeline: ``python -m pipelines.books --ner spacy --linker alias`` in a fresh interpreter
  (in-memory runner); the stage's words are its ``annotate/words`` counter, its time
  ``annotate/cpu_ms`` (CPU time of the thread running it: NER, linking and the new Documents,
  outside the stages fused after it) and, beside it, ``annotate/busy_ms`` (wall time).

Ratio per pair = pipeline words per CPU-second ÷ bare words per CPU-second (the bare pass's
thread CPU time; alone in its process, its wall time is about the same); the figure is the
median (min and max beside it).  Why CPU time: in the job the stage's thread shares the GIL
with the tokenising thread of the stage fused after it, so its wall time also holds the time
that other stage runs (counted there too); the wall-time ratio is printed and in the JSON as
``wall_ratio``.  Last line: JSON, target >= 0.9.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from benchmarks import common
from schemas import records_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_PAIRS = 5


def make_inputs(tmp: str, pages: int):
  """(entities dir, books dir, book texts)."""
  from synthetic import wikipedia as synth  # pylint: disable=g-import-not-at-top
  from pipelines import wikipedia  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.books import reader as books  # pylint: disable=g-import-not-at-top
  from pipelines.text import wikitext  # pylint: disable=g-import-not-at-top

  dump = os.path.join(tmp, "gen-pages-articles.xml.bz2")
  synth.write_dump(synth.generate_pages(pages, seed=1, words_per_page=300), dump)
  wiki = os.path.join(tmp, "wiki")
  if wikipedia.main(["--input", dump, "--output_dir", wiki, "--log_level", "WARNING"]):
    raise SystemExit("the Wikipedia job failed")
  book_dir = os.path.join(tmp, "books")
  os.makedirs(book_dir)
  texts = []
  # Pages of the same generated world (seed) as the dump, so the books mention its entities.
  for k, spec in enumerate(synth.generate_pages(pages, seed=1, words_per_page=600)):
    if spec.namespace != 0 or spec.redirect is not None:
      continue
    text = wikitext.clean(spec.text, spec.title).text
    if not text.strip():
      continue
    path = os.path.join(book_dir, f"book{k:05d}.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    try:
      texts.append(books.parse_book(text.encode("utf-8"), path).text)
    except ValueError:
      os.remove(path)
  return wiki, book_dir, texts


def bare(texts, entities_dir: str, ruler_patterns: int):
  """(seconds, words) of nlp.pipe over the texts with a freshly built pipeline."""
  from pipelines.beam.annotate import most_linked_aliases  # pylint: disable=g-import-not-at-top
  from pipelines.entities import ner  # pylint: disable=g-import-not-at-top
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  table = tables.read_aliases(entities_dir)
  nlp = ner.load_spacy("blank:en", most_linked_aliases(table, ruler_patterns))
  t0, c0 = time.perf_counter(), time.thread_time()
  for _ in nlp.pipe(texts, batch_size=64):
    pass
  return (time.perf_counter() - t0, time.thread_time() - c0,
          sum(len(t.split()) for t in texts))


def pipeline_child(book_dir: str, out_dir: str, entities_dir: str, ruler_patterns: str) -> None:
  from pipelines import books  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  code = books.main(["--input", os.path.join(book_dir, "*.txt"), "--output_dir", out_dir,
                     "--ner", "spacy", "--linker", "alias", "--entities_dir", entities_dir,
                     "--ruler_patterns", ruler_patterns, "--log_level", "WARNING"])
  seconds = time.perf_counter() - t0
  stage = records_dir.read_manifest(out_dir)["stages"]["annotate"]
  print(json.dumps({"code": code, "seconds": seconds, "busy_s": stage["busy_ms"] / 1000,
                    "cpu_s": stage["cpu_ms"] / 1000,
                    "words": stage["words"], "mentions": stage["mentions"],
                    "linked": stage["linked"]}))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--pages", type=int, default=600, help="generated pages (default: %(default)s)")
  ap.add_argument("--pairs", type=int, default=MIN_PAIRS)
  ap.add_argument("--ruler_patterns", type=int, default=100_000)
  ap.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    pipeline_child(*args.child)
    return
  common.check_pairs(ap, args.pairs, MIN_PAIRS)
  with tempfile.TemporaryDirectory(prefix="ner_throughput_") as tmp:
    wiki, book_dir, texts = make_inputs(tmp, args.pages)
    pairs = []
    for k in range(args.pairs):
      bare_s, bare_cpu_s, words = bare(texts, wiki, args.ruler_patterns)
      out = os.path.join(tmp, f"out{k}")
      r = common.child_run("benchmarks.ner_throughput",
                           [book_dir, out, wiki, str(args.ruler_patterns)], out, ROOT)
      if r["words"] != words:
        print(f"warning: the stage saw {r['words']:,} words, the bare pass {words:,}",
              file=sys.stderr)
      pair = {"bare_wps": words / bare_cpu_s, "pipeline_wps": r["words"] / r["cpu_s"],
              "bare_wall_wps": words / bare_s, "pipeline_wall_wps": r["words"] / r["busy_s"]}
      pair["ratio"] = pair["pipeline_wps"] / pair["bare_wps"]
      pair["wall_ratio"] = pair["pipeline_wall_wps"] / pair["bare_wall_wps"]
      pairs.append(pair)
      print(f"pair {k + 1}: bare {bare_cpu_s:.2f} s CPU ({bare_s:.2f} s wall)  stage "
            f"{r['cpu_s']:.2f} s CPU ({r['busy_s']:.2f} s wall; job {r['seconds']:.1f} s, "
            f"{r['mentions']:,} mentions, {r['linked']:,} linked)  ratio {pair['ratio']:.3f} "
            f"(wall {pair['wall_ratio']:.3f})", flush=True)
    print(f"books={len(texts):,} words={words:,}")
    for name, key, fmt in (("bare words/CPU s", "bare_wps", ",.0f"),
                           ("stage words/CPU s", "pipeline_wps", ",.0f"),
                           ("paired ratio", "ratio", ".3f"),
                           ("wall-time ratio", "wall_ratio", ".3f")):
      print(f"{name + ':':19s}{common.spread([p[key] for p in pairs], fmt)}")

  def stat(key):
    values = [p[key] for p in pairs]
    return {"value": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}

  print(json.dumps({"metric": "annotate_stage_words_per_cpu_s_over_bare_nlp_pipe",
                    **stat("ratio"), "wall_ratio": stat("wall_ratio"), "pairs": len(pairs),
                    "target": 0.9, "unit": "ratio", "words": words}))


if __name__ == "__main__":
  main()
