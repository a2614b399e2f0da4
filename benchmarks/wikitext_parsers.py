r"""Wikitext parsers side by side, and what a faster cleaner could give the Wikipedia job at most.

  python -m benchmarks.wikitext_parsers [--input dump.xml.bz2] [--pages 3000] [--rounds 3]
                                         [--ceiling_pairs 3] [--scale 1.0]

Part 1, parsers: every article (namespace 0, not a redirect) of a dump -- by default the
generated multistream dump of ``benchmarks.all`` (the Wikipedia dataset's fake input,
``pipelines.datasets.wikipedia.fake_input``: 3,000 pages of ~700 Zipf words with links, templates,
infoboxes, refs, tables, lists) -- is turned into text by each candidate, ``--rounds`` interleaved
rounds (every candidate once per round, so drift hits all alike), in this process:

* ``readtwice clean()``: :func:`pipelines.text.wikitext.clean` (text, links with spans,
  paragraphs, templates, categories: what the job uses);
* ``mwparserfromhell parse + strip_code``: TensorFlow Datasets' Wikipedia cleaner's core (text
  only);
* ``tree-sitter-wikitext parse`` and ``parse + cursor walk`` (every node visited, text leaves and
  link targets collected: a lower bound for any walker over that tree), when ``tree_sitter``
  and ``tree_sitter_wikitext`` are installed;
* ``wikiextractor clean_text`` (the regex extractor of BERT-era corpora; text only, no link
  spans), when ``wikiextractor`` is installed.

None of the optional ones is a dependency: ``pip install tree-sitter==0.26.1
tree-sitter-wikitext==0.1.3 wikiextractor==3.1.0`` to include them (wikiextractor is AGPL; it is
only measured here).  Printed per candidate: seconds (min / median / max over the rounds), MB of
wikitext per second and the median per-round ratio to ``clean()``'s seconds.

Part 2, ceiling (``--ceiling_pairs`` > 0, default input only): the Wikipedia job as
``benchmarks.all`` runs it, in fresh interpreters, in interleaved pairs: once as it is, once
with every page's conversion (``convert_page``: ``clean()`` and the page rules) replaced by a
lookup of its result precomputed by an earlier run (a cleaner that costs nothing); with the
bare ``encode_batch`` pass of ``benchmarks.all`` beside each pair, so the two runs' ratios are
``benchmarks.all``'s figure with today's cleaner and the best any cleaner could reach.

Last line: JSON, the median ``benchmarks.all`` ratio with a free cleaner (``value``; the
target of ``all.py`` is 0.4 for Wikipedia) when part 2 ran, else ``clean()``'s MB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Tuple

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "wikitext_parsers", file=sys.stderr)
  sys.exit(2)

from benchmarks import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD, REAL, FREE = "record", "real", "free"  # --child modes of the ceiling's pipeline runs
WIKIPEDIA_TARGET = 0.4  # benchmarks.all's target for Wikipedia


def articles(path: str) -> List[Tuple[str, str]]:
  """(title, wikitext) of the dump's articles: namespace 0, not a redirect."""
  from pipelines.datasets.wikipedia import pages as pages_lib  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia import reader  # pylint: disable=g-import-not-at-top
  from pipelines.text import wiki_titles  # pylint: disable=g-import-not-at-top
  with open(path, "rb") as f:
    namespaces = pages_lib.namespaces_of(reader.read_siteinfo(f, path))
  with open(path, "rb") as f:
    return [(p.title, p.text) for p in reader.iter_pages(f, path)
            if p.text and p.namespace == 0 and p.redirect is None
            and wiki_titles.redirect_target(p.text, namespaces) is None]


def candidates(pages: List[Tuple[str, str]]) -> Dict[str, Callable[[], None]]:
  """Name -> a function converting every page (installed candidates only)."""
  import mwparserfromhell  # pylint: disable=g-import-not-at-top
  from pipelines.text import wikitext  # pylint: disable=g-import-not-at-top

  def ours():
    for title, text in pages:
      wikitext.clean(text, title)

  def strip_code():
    for _, text in pages:
      mwparserfromhell.parse(text).strip_code()

  found = {"readtwice clean()": ours, "mwparserfromhell parse + strip_code": strip_code}
  try:
    import tree_sitter  # pylint: disable=g-import-not-at-top
    import tree_sitter_wikitext  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("tree-sitter-wikitext: not installed, left out")
  else:
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_wikitext.language()))

    def ts_parse():
      for _, text in pages:
        parser.parse(text.encode("utf-8"))

    def ts_walk():
      for _, text in pages:
        source = text.encode("utf-8")
        _walk(parser.parse(source).walk(), source)

    found["tree-sitter-wikitext parse"] = ts_parse
    found["tree-sitter-wikitext parse + cursor walk"] = ts_walk
  try:
    from wikiextractor.extract import Extractor  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("wikiextractor: not installed, left out")
  else:
    import logging  # pylint: disable=g-import-not-at-top
    logging.getLogger().setLevel(logging.ERROR)  # it warns about every unknown template

    def extractor():
      for i, (title, text) in enumerate(pages):
        Extractor(i, i, "", title, [text]).clean_text(text, expand_templates=False,
                                                      html_safe=False)

    found["wikiextractor clean_text"] = extractor
  return found


def _walk(cursor, source: bytes) -> int:
  """Visits every node (depth first); collects text leaves and link targets; returns the node
  count."""
  texts, targets, nodes = [], [], 0
  while True:
    nodes += 1
    node = cursor.node
    kind = node.type
    if kind == "text":
      texts.append(source[node.start_byte:node.end_byte])
    elif kind == "wikilink":
      target = node.child_by_field_name("target")
      if target is not None:
        targets.append(source[target.start_byte:target.end_byte])
    if cursor.goto_first_child():
      continue
    while not cursor.goto_next_sibling():
      if not cursor.goto_parent():
        return nodes


def time_parsers(pages: List[Tuple[str, str]], rounds: int) -> Dict[str, List[float]]:
  runs = candidates(pages)
  seconds: Dict[str, List[float]] = {name: [] for name in runs}
  for name, run in runs.items():  # a warm-up round (imports, caches)
    run()
  for _ in range(rounds):
    for name, run in runs.items():
      t0 = time.perf_counter()
      run()
      seconds[name].append(time.perf_counter() - t0)
  return seconds


# ---------------------------------------------------------------------- the ceiling


def pipeline_child(mode: str, path: str, out_dir: str, outcomes: str) -> None:
  """The Wikipedia job in this interpreter: ``mode`` REAL as it is, RECORD also pickling every
  page's ``convert_page`` result to ``outcomes``, FREE with ``convert_page`` a lookup of those;
  prints JSON with the seconds of ``run()``."""
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia import dump  # pylint: disable=g-import-not-at-top
  convert = dump.pages_lib.convert_page
  table = {}
  if mode == FREE:
    with open(outcomes, "rb") as f:
      table = pickle.load(f)
    dump.pages_lib.convert_page = lambda page, namespaces, rules: table[page.source_id]
  elif mode == RECORD:

    def recording(page, namespaces, rules):
      table[page.source_id] = outcome = convert(page, namespaces, rules)
      return outcome

    dump.pages_lib.convert_page = recording
  t0 = time.perf_counter()
  m = runner.run_dataset("wikipedia", path, out_dir, RecordsConfig())
  seconds = time.perf_counter() - t0
  if mode == RECORD:
    with open(outcomes, "wb") as f:
      pickle.dump(table, f)
  print(json.dumps({"seconds": seconds, "counts": m["counts"]}))


def ceiling(tmp: str, pairs: int, scale: float) -> Dict[str, List[float]]:
  """Per pair: bare encode_batch seconds, the job's seconds as it is and with a free cleaner."""
  from benchmarks import all as all_bench  # pylint: disable=g-import-not-at-top
  from benchmarks.hotpotqa_throughput import docs_per_encode_call  # pylint: disable=g-import-not-at-top
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  job, _ = all_bench.make_job("wikipedia", os.path.join(tmp, "in"), scale,
                           docs_per_encode_call(RecordsConfig()))
  input_pattern = job.argv[job.argv.index("--input") + 1]
  calls = os.path.join(tmp, "calls.pickle")
  with open(calls, "wb") as f:
    pickle.dump(job.calls, f)
  outcomes, out = os.path.join(tmp, "outcomes.pickle"), os.path.join(tmp, "out")

  def run(mode: str) -> float:
    r = common.child_run("benchmarks.wikitext_parsers", [mode, input_pattern, out, outcomes],
                         out, ROOT)
    if r["counts"]["written"] != job.documents:
      raise SystemExit(f"the {mode} run wrote {r['counts']['written']} of {job.documents}")
    return r["seconds"]

  run(RECORD)
  got: Dict[str, List[float]] = {"bare": [], REAL: [], FREE: []}
  for k in range(pairs):
    got["bare"].append(all_bench.bare_run(job, calls)[0])
    for mode in ((REAL, FREE) if k % 2 == 0 else (FREE, REAL)):
      got[mode].append(run(mode))
    print(f"pair {k + 1}: bare {got['bare'][-1]:.2f} s  job {got[REAL][-1]:.2f} s  with a "
          f"free cleaner {got[FREE][-1]:.2f} s", flush=True)
  return got


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.wikitext_parsers",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--input", default=None, help="a dump (.xml.bz2); default: generated")
  ap.add_argument("--pages", type=int, default=3000, help="generated pages (default: %(default)s)")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--ceiling_pairs", type=int, default=3,
                  help="pairs of the ceiling's job runs (0: skip; default input only)")
  ap.add_argument("--scale", type=float, default=1.0,
                  help="the ceiling's input, as benchmarks.all's --scale (default: %(default)s)")
  ap.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    pipeline_child(*args.child)
    return
  if args.rounds < 1 or args.ceiling_pairs < 0 or args.scale <= 0:
    ap.error("--rounds must be >= 1, --ceiling_pairs >= 0 and --scale > 0")
  with tempfile.TemporaryDirectory(prefix="wikitext_parsers_") as tmp:
    path = args.input
    if path is None:
      from pipelines.datasets.wikipedia import fake_input  # pylint: disable=g-import-not-at-top
      path = fake_input.write_multistream(os.path.join(tmp, "parsers"), args.pages,
                                          fake_input.WORDS_PER_PAGE)
    elif not os.path.isfile(path):
      ap.error(f"--input {path!r} does not exist")
    pages = articles(path)
    mb = sum(len(text.encode("utf-8")) for _, text in pages) / 1e6
    print(f"{len(pages):,} articles, {mb:.1f} MB of wikitext; {args.rounds} interleaved rounds")
    seconds = time_parsers(pages, args.rounds)
    ours = seconds["readtwice clean()"]
    print(f"{'candidate':42s} | seconds min / median / max | MB/s (median) | x clean()")
    for name, values in seconds.items():
      ratio = statistics.median(v / o for v, o in zip(values, ours))
      print(f"{name:42s} | {min(values):6.2f} / {statistics.median(values):6.2f} / "
            f"{max(values):6.2f} | {mb / statistics.median(values):13.2f} | {ratio:9.2f}")
    clean_mbps = mb / statistics.median(ours)
    result: Dict = {"metric": "wikitext_clean_mb_per_s", "value": round(clean_mbps, 2),
                    "target": None, "unit": "MB/s",
                    "seconds_median": {n: round(statistics.median(v), 3)
                                       for n, v in seconds.items()}}
    if args.ceiling_pairs and args.input is not None:
      print("the ceiling runs on the generated input only (--input given): skipped")
    elif args.ceiling_pairs:
      got = ceiling(tmp, args.ceiling_pairs, args.scale)
      real = [b / s for b, s in zip(got["bare"], got[REAL])]
      free = [b / s for b, s in zip(got["bare"], got[FREE])]
      print(f"job seconds as it is:        {common.spread(got[REAL], '.2f')}")
      print(f"job seconds, free cleaner:   {common.spread(got[FREE], '.2f')}")
      print(f"all.py ratio as it is:       {common.spread(real, '.3f')}")
      print(f"all.py ratio, free cleaner:  {common.spread(free, '.3f')}  (target "
            f"{WIKIPEDIA_TARGET})")
      result = {"metric": "wikipedia_ratio_with_a_free_cleaner",
                "value": round(statistics.median(free), 3), "min": round(min(free), 3),
                "max": round(max(free), 3), "target": WIKIPEDIA_TARGET, "unit": "ratio",
                "ratio_as_it_is": round(statistics.median(real), 3), "pairs": len(free),
                "clean_mb_per_s": round(clean_mbps, 2),
                "seconds_median": result["seconds_median"]}
  print(json.dumps(result))


if __name__ == "__main__":
  main()
