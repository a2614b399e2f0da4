r"""Wikipedia pipeline throughput (MB of wikitext per second) against the work it cannot avoid.

  python -m benchmarks.wikipedia_throughput [--input dump.xml.bz2] [--pages 3000]
                                            [--pairs 5] [--words_per_page 700]

Each pair times, one right after the other, on the same dump:

* bare: what any Wikipedia-to-records job must do, in one process: stream the bz2 XML
  (``pipelines.datasets.wikipedia.reader.iter_pages``), one ``mwparserfromhell.parse`` +
  ``strip_code()`` per article (namespace 0, not a redirect), and ``encode_batch`` of the
  stripped text in calls of 64 pages (the pipeline's chunk) on a freshly built tokenizer, in a
  fresh interpreter like the pipeline (each tokenizer built in one process makes the next
  ones slower, which flattered the later pairs when this ran in the benchmark's process);
* pipeline: the real job, ``runner.run_dataset("wikipedia", ...)`` with default settings on the
  local FnApiRunner (in-memory), end to end (read, parse, clean, links, redirects, entity tables,
  tokenise, segment, pack, write, report), in a fresh interpreter; its ``run()`` time.

Both rates are in MB of article wikitext (UTF-8) per second.  Ratio per pair = pipeline
MB/s / bare MB/s; the figure is the median of the paired ratios (min and max beside it).  Also
printed: the tokenizer-only ratio (pipeline MB/s / ``encode_batch``-only MB/s, the same pairs'
tokenizer times) and a cost estimate for English Wikipedia from the pipeline's rate.

The default input is a generated multistream dump (``pipelines.datasets.wikipedia.fake_input``:
sections, links, redirects, templates, tables, refs, files, lists; Zipf words); ``--input`` takes a
real dump or excerpt (its multistream index is used when it lies beside it).
Last line: JSON, target: median paired ratio >= 0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import statistics
import tempfile
import time

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "wikipedia_throughput", file=sys.stderr)
  sys.exit(2)

from benchmarks import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_PAIRS = 5
BARE = "bare"  # --child's first argument for the bare pass
# English Wikipedia, pages-articles: about this much article wikitext (ns 0, no redirects),
# an estimate from the 2024 dumps (~22 GB bz2, ~100 GB XML, most of it article text).
ENWIKI_ARTICLE_WIKITEXT_GB = 90.0


def bare(path: str):
  """(seconds total, seconds tokenising, wikitext bytes, pages) of the unavoidable work."""
  import mwparserfromhell  # pylint: disable=g-import-not-at-top
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia import reader  # pylint: disable=g-import-not-at-top
  from pipelines.text.tokenizer import Tokenizer  # pylint: disable=g-import-not-at-top

  backend = Tokenizer(RecordsConfig().tokenizer).backend
  t0 = time.perf_counter()
  tokenize = 0.0
  size = pages = 0
  batch = []

  def flush():
    nonlocal tokenize
    t = time.perf_counter()
    backend.encode_batch(batch, add_special_tokens=False)
    tokenize += time.perf_counter() - t
    batch.clear()

  with open(path, "rb") as f:
    for page in reader.iter_pages(f, path):
      if page.namespace != 0 or page.redirect is not None or not page.text:
        continue
      if page.text.lstrip()[:9].lower() == "#redirect":
        continue
      size += len(page.text.encode("utf-8"))
      pages += 1
      batch.append(mwparserfromhell.parse(page.text).strip_code())
      if len(batch) == 64:
        flush()
  if batch:
    flush()
  return time.perf_counter() - t0, tokenize, size, pages


def bare_child(path: str) -> None:
  """The measured bare pass (in a fresh interpreter); prints its figures as JSON."""
  seconds, tokenize, size, pages = bare(path)
  print(json.dumps({"seconds": seconds, "tokenize": tokenize, "size": size, "pages": pages}))


def bare_run(path: str):
  """Runs :func:`bare_child` in a fresh interpreter: :func:`bare`'s figures."""
  r = common.child_run("benchmarks.wikipedia_throughput", [BARE, path], None, ROOT)
  return r["seconds"], r["tokenize"], r["size"], r["pages"]


def pipeline_child(path: str, out_dir: str) -> None:
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  m = runner.run_dataset("wikipedia", path, out_dir, RecordsConfig())
  print(json.dumps({"seconds": time.perf_counter() - t0, "counts": m["counts"]}))


def pipeline_run(path: str, out_dir: str) -> dict:
  """Runs :func:`pipeline_child` in a fresh interpreter; its figures plus the wall time."""
  return common.child_run("benchmarks.wikipedia_throughput", [path, out_dir], out_dir, ROOT)


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.wikipedia_throughput",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--input", default=None, help="a dump (.xml.bz2); default: generated")
  ap.add_argument("--pages", type=int, default=3000, help="generated pages (default: %(default)s)")
  ap.add_argument("--words_per_page", type=int, default=700)
  ap.add_argument("--pairs", type=int, default=MIN_PAIRS)
  ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    if args.child[0] == BARE:
      bare_child(args.child[1])
    else:
      pipeline_child(*args.child)
    return
  common.check_pairs(ap, args.pairs, MIN_PAIRS)
  with tempfile.TemporaryDirectory(prefix="wikipedia_throughput_") as tmp:
    path = args.input
    if path is None:
      from pipelines.datasets.wikipedia import fake_input as synthetic_wikipedia  # pylint: disable=g-import-not-at-top
      path = os.path.join(tmp, "synwiki-pages-articles-multistream.xml.bz2")
      synthetic_wikipedia.write_dump(
          synthetic_wikipedia.generate_pages(args.pages, seed=1,
                                             words_per_page=args.words_per_page),
          path, multistream=True)
    pairs = []
    for k in range(args.pairs):
      bare_s, tok_s, size, pages = bare_run(path)
      r = pipeline_run(path, os.path.join(tmp, f"out{k}"))
      mb = size / 1e6
      pair = {"bare_mbps": mb / bare_s, "tokenizer_mbps": mb / tok_s,
              "pipeline_mbps": mb / r["seconds"], "ratio": bare_s / r["seconds"],
              "tokenizer_ratio": tok_s / r["seconds"], "pipeline_s": r["seconds"],
              "wall_s": r["wall"]}
      pairs.append(pair)
      print(f"pair {k + 1}: bare {bare_s:6.2f} s ({pair['bare_mbps']:.2f} MB/s; tokenizer "
            f"{tok_s:.2f} s)  pipeline {r['seconds']:6.2f} s ({pair['pipeline_mbps']:.2f} MB/s)"
            f"  ratio {pair['ratio']:.3f}", flush=True)
    print(f"articles={pages:,} wikitext={mb:.1f} MB; pipeline wrote {r['counts']}")
    for name, key, fmt in (("bare MB/s", "bare_mbps", ".2f"),
                           ("pipeline MB/s", "pipeline_mbps", ".2f"),
                           ("paired ratio", "ratio", ".3f"),
                           ("tokenizer-only ratio", "tokenizer_ratio", ".3f")):
      print(f"{name + ':':22s}{common.spread([p[key] for p in pairs], fmt)}")
    rate = statistics.median(p["pipeline_mbps"] for p in pairs)
    hours = ENWIKI_ARTICLE_WIKITEXT_GB * 1e3 / rate / 3600
    print(f"English Wikipedia (~{ENWIKI_ARTICLE_WIKITEXT_GB:.0f} GB of article wikitext) at "
          f"{rate:.2f} MB/s per 2-core run: ~{hours:,.0f} hours here, ~{2 * hours:,.0f} "
          "core-hours")
  ratios = [p["ratio"] for p in pairs]
  print(json.dumps({"metric": "wikipedia_pipeline_mb_per_s_over_bare", "value":
                    round(statistics.median(ratios), 3), "min": round(min(ratios), 3),
                    "max": round(max(ratios), 3), "pairs": len(pairs), "target": 0.5,
                    "unit": "ratio", "tokenizer_only_ratio": round(statistics.median(
                        p["tokenizer_ratio"] for p in pairs), 3),
                    "pipeline_mb_per_s": round(rate, 3),
                    "enwiki_core_hours_estimate": round(2 * hours)}))


if __name__ == "__main__":
  main()
