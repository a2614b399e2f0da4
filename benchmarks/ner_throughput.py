r"""The annotation stage's words/s inside the pipeline against bare ``nlp.pipe``, paired, on
realistic text and on dense generated text.

  python -m benchmarks.ner_throughput [--text both|realistic|dense] [--pages 600] [--pairs 5]
      [--mention_every 10] [--ruler_patterns 100000]

Set-up (once): a generated Wikipedia dump (``pipelines.datasets.wikipedia.fake_input``) goes through
``python -m pipelines wikipedia`` for its alias table and so for the EntityRuler's patterns.
Two folders of books (one document per file, plain text) are made from it:

* ``dense``: the clean text of other generated pages of the same generated world (links
  removed).  Its anchors are random pseudo-words of the page text, so the ruler finds a
  mention every ~2.6 words: far denser than any real text, the stage's worst case.
* ``realistic`` (the figure): generated prose with the statistics of real text, the same
  number of documents with the same word counts as ``dense``.  Words follow a Zipf law
  (exponent 1) over the ~140 most frequent English words followed by ~20k English-like
  pseudo-words that are no token of any alias (so the carrier text alone matches no pattern);
  sentences of 21 +- 9 words (the real samples: 18-22) with commas, in paragraphs of 2-7
  sentences; an alias of the ruler's patterns (drawn by a Zipf law over their link-count rank:
  well-known names recur, as in real text) takes the place of words so that there is one
  mention every ``--mention_every`` words (default 10).  Why 10: measured on the real samples
  of ``../shared/samples`` (proper-name runs: maximal runs of capitalised words, not counting a
  lone sentence-initial one), Wikipedia text has one every 8.0 words (HotpotQA's paragraphs)
  and 10.1 words (the enwiki sample, whose wikilinks alone are one every 40 words); books are
  sparser: one every 16, 33 and 48 words (the three PG-19 samples) and 38 (*The Time
  Machine*).  So 10 is the denser end of real text; the samples are not read here.

Each pair, one right after the other, on the same text and the same spaCy pipeline
(``blank:en`` + an EntityRuler of the ``--ruler_patterns`` most linked aliases):

* bare: ``nlp.pipe`` over the books' document texts (as ``pipelines.datasets.books.reader`` makes
  them), batches of 64, in this process, with a freshly built pipeline;
* pipeline: ``python -m pipelines books --ner spacy --linker alias`` in a fresh interpreter
  (in-memory runner); the stage's words are its ``annotate/words`` counter, its time
  ``annotate/cpu_ms`` (CPU time of the thread running it: NER, linking and the new Documents,
  outside the stages fused after it) and, beside it, ``annotate/busy_ms`` (wall time).

Ratio per pair = pipeline words per CPU-second ÷ bare words per CPU-second (the bare pass's
thread CPU time; alone in its process, its wall time is about the same); the figure is the
median (min and max beside it).  Why CPU time: in the job the stage's thread shares the GIL
with the tokenising thread of the stage fused after it, so its wall time also holds the time
that other stage runs (counted there too); the wall-time ratio is printed and in the JSON as
``wall_ratio``.  With ``--text both`` (the default) the pairs of the two texts alternate; the
last line is JSON: the realistic figure (``value``, ``min``, ``max``, ``words_per_mention``
the stage found) with the dense one under ``dense``; target >= 0.9.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Sequence, Tuple

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "ner_throughput", file=sys.stderr)
  sys.exit(2)

from benchmarks import common
from schemas import records_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_PAIRS = 5
TEXTS = ("realistic", "dense")
MENTION_EVERY = 10  # words per mention of the realistic text (see the module doc)

# The most frequent English words, most frequent first: the head of the realistic text's
# Zipf law (with exponent 1 over ~20k types they are about half of the running words).
ENGLISH_HEAD = (
    "the of and to a in is that was he for it with as his on be at by had not are but from or "
    "have an they which one you were her all she there would their we him been has when who "
    "will more no if out so said what up its about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even most "
    "made after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world still "
    "own see men work long get here between both life being under never day same another "
    "know while last might us great old year off come since against go came right used take "
    "three").split()
_ONSETS = ("b", "bl", "br", "c", "ch", "cl", "cr", "d", "dr", "f", "fl", "fr", "g", "gl", "gr",
           "h", "j", "l", "m", "n", "p", "pl", "pr", "r", "s", "sc", "sh", "sl", "sp", "st",
           "t", "th", "tr", "v", "w", "wh", "y")
_NUCLEI = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ea", "ee", "ou", "ai")
_CODAS = ("", "", "", "", "", "n", "r", "s", "t", "d", "l", "m", "nd", "ng", "nt", "ll", "st")
_SUFFIXES = ("", "", "", "", "", "", "", "", "s", "s", "ed", "ing", "er", "ly")


def _pseudo_words(rng: random.Random, count: int, banned) -> List[str]:
  """``count`` distinct English-like pseudo-words (1-3 syllables, maybe a suffix), none in
  ``banned`` nor among :data:`ENGLISH_HEAD`."""
  seen = set(banned) | set(ENGLISH_HEAD)
  words: List[str] = []
  while len(words) < count:
    n = rng.choices((1, 2, 3), weights=(8, 4, 1))[0]
    w = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS)
                for _ in range(n)) + rng.choice(_SUFFIXES)
    if w not in seen:
      seen.add(w)
      words.append(w)
  return words


def _zipf_cum(n: int, exponent: float = 1.0) -> List[float]:
  return list(itertools.accumulate(1.0 / (r + 1) ** exponent for r in range(n)))


def realistic_texts(word_counts: Sequence[int], patterns: Sequence[str], mention_every: int,
                    seed: int = 1) -> List[str]:
  """One document of generated prose per entry of ``word_counts`` (its whitespace words):
  the statistics of real text (module doc), with one alias of ``patterns`` (most linked
  first, as :func:`pipelines.beam.annotate.most_linked_aliases` orders them) every
  ``mention_every`` words on average; deterministic for a seed."""
  rng = random.Random(seed)
  # No word of the carrier text is a token of any alias: the generated world's anchors are
  # random words, and its aliases include "of the" or "the the", which real text would match
  # everywhere (and no real alias table's most linked aliases do).
  banned = {w for p in patterns for w in p.lower().split()}
  vocab = ([w for w in ENGLISH_HEAD if w not in banned]
           + _pseudo_words(rng, 20_000, banned))
  vocab_cum = _zipf_cum(len(vocab))
  names = list(patterns)
  names_cum = _zipf_cum(len(names)) if names else []
  if names:  # words per mention k: one mention per `mention_every` words, k of them its own
    mean_k = sum(len(n.split()) / (r + 1) for r, n in enumerate(names)) / names_cum[-1]
    p = min(1.0, 1.0 / max(1.0, mention_every - mean_k + 1))
  else:
    p = 0.0
  out = []
  for target in word_counts:
    paragraphs, sentence, sentences, words = [], [], [], 0
    length = max(4, round(rng.gauss(21, 9)))
    per_paragraph = rng.randint(2, 7)
    while words < target:
      if rng.random() < p:
        name = names[bisect.bisect_left(names_cum, rng.random() * names_cum[-1])]
        sentence.append(name)
        words += len(name.split())
      else:
        w = vocab[bisect.bisect_left(vocab_cum, rng.random() * vocab_cum[-1])]
        if rng.random() < 0.07:
          w += ","
        sentence.append(w)
        words += 1
      if len(sentence) >= length or words >= target:
        text = " ".join(sentence).rstrip(",")
        sentences.append(text[:1].upper() + text[1:] + rng.choices(".?!", (92, 4, 4))[0])
        sentence, length = [], max(4, round(rng.gauss(21, 9)))
        if len(sentences) >= per_paragraph or words >= target:
          paragraphs.append(" ".join(sentences))
          sentences, per_paragraph = [], rng.randint(2, 7)
    out.append("\n\n".join(paragraphs) + "\n")
  return out


def _write_books(book_dir: str, texts: Sequence[str]) -> List[str]:
  """Writes one book file per text; returns their document texts as the books reader makes
  them (texts it refuses are left out)."""
  from pipelines.datasets.books import reader as books  # pylint: disable=g-import-not-at-top
  os.makedirs(book_dir)
  docs = []
  for k, text in enumerate(texts):
    path = os.path.join(book_dir, f"book{k:05d}.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    try:
      docs.append(books.parse_book(text.encode("utf-8"), path).text)
    except ValueError:
      os.remove(path)
  return docs


def make_inputs(tmp: str, pages: int, which: Sequence[str], mention_every: int,
                ruler_patterns: int) -> Tuple[str, Dict[str, Tuple[str, List[str]]]]:
  """(entities dir, {text kind: (books dir, book texts)})."""
  from pipelines.datasets.wikipedia import fake_input as synth  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  from pipelines.beam.annotate import most_linked_aliases  # pylint: disable=g-import-not-at-top
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  from pipelines.text import wikitext  # pylint: disable=g-import-not-at-top

  dump = os.path.join(tmp, "gen-pages-articles.xml.bz2")
  synth.write_dump(synth.generate_pages(pages, seed=1, words_per_page=300), dump)
  wiki = os.path.join(tmp, "wiki")
  if runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", wiki, "--log_level",
                                       "WARNING"]):
    raise SystemExit("the Wikipedia job failed")
  # Pages of the same generated world (seed) as the dump, so the books mention its entities.
  dense = []
  for spec in synth.generate_pages(pages, seed=1, words_per_page=600):
    if spec.namespace != 0 or spec.redirect is not None:
      continue
    text = wikitext.clean(spec.text, spec.title).text
    if text.strip():
      dense.append(text)
  inputs = {}
  if "dense" in which:
    book_dir = os.path.join(tmp, "books-dense")
    inputs["dense"] = (book_dir, _write_books(book_dir, dense))
  if "realistic" in which:
    patterns = most_linked_aliases(tables.read_aliases(wiki), ruler_patterns)
    texts = realistic_texts([len(t.split()) for t in dense], patterns, mention_every)
    book_dir = os.path.join(tmp, "books-realistic")
    inputs["realistic"] = (book_dir, _write_books(book_dir, texts))
  return wiki, inputs


def bare(texts, entities_dir: str, ruler_patterns: int):
  """(seconds, CPU seconds, words) of nlp.pipe over the texts with a freshly built pipeline."""
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
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  code = runner.dataset_main("books", [
      "--input", os.path.join(book_dir, "*.txt"), "--output_dir", out_dir, "--ner", "spacy",
      "--linker", "alias", "--entities_dir", entities_dir, "--ruler_patterns", ruler_patterns,
      "--log_level", "WARNING"])
  seconds = time.perf_counter() - t0
  stage = records_dir.read_manifest(out_dir)["stages"]["annotate"]
  print(json.dumps({"code": code, "seconds": seconds, "busy_s": stage["busy_ms"] / 1000,
                    "cpu_s": stage["cpu_ms"] / 1000,
                    "words": stage["words"], "mentions": stage["mentions"],
                    "linked": stage["linked"]}))


def measure_pair(kind: str, k: int, tmp: str, wiki: str, book_dir: str, texts: List[str],
                 ruler_patterns: int) -> Dict[str, float]:
  """One pair (bare, then the pipeline) on one text; prints it."""
  bare_s, bare_cpu_s, words = bare(texts, wiki, ruler_patterns)
  out = os.path.join(tmp, f"out-{kind}{k}")
  r = common.child_run("benchmarks.ner_throughput",
                       [book_dir, out, wiki, str(ruler_patterns)], out, ROOT)
  if r["words"] != words:
    print(f"warning: the stage saw {r['words']:,} words, the bare pass {words:,}",
          file=sys.stderr)
  pair = {"bare_wps": words / bare_cpu_s, "pipeline_wps": r["words"] / r["cpu_s"],
          "bare_wall_wps": words / bare_s, "pipeline_wall_wps": r["words"] / r["busy_s"],
          "words": words, "mentions": r["mentions"]}
  pair["ratio"] = pair["pipeline_wps"] / pair["bare_wps"]
  pair["wall_ratio"] = pair["pipeline_wall_wps"] / pair["bare_wall_wps"]
  print(f"{kind} pair {k + 1}: bare {bare_cpu_s:.2f} s CPU ({bare_s:.2f} s wall)  stage "
        f"{r['cpu_s']:.2f} s CPU ({r['busy_s']:.2f} s wall; job {r['seconds']:.1f} s, "
        f"{r['mentions']:,} mentions, {r['linked']:,} linked)  ratio {pair['ratio']:.3f} "
        f"(wall {pair['wall_ratio']:.3f})", flush=True)
  return pair


def summary(pairs: List[Dict[str, float]]) -> Dict[str, object]:
  """The median ratio (``value``) with its min and max, the wall-time ratio's, and the words
  per mention the stage found."""
  def stat(key):
    values = [p[key] for p in pairs]
    return {"value": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}
  return {**stat("ratio"), "wall_ratio": stat("wall_ratio"), "words": pairs[0]["words"],
          "words_per_mention": round(pairs[0]["words"] / max(1, pairs[0]["mentions"]), 2)}


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.ner_throughput",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--text", choices=("both",) + TEXTS, default="both",
                  help="which text to measure (default: %(default)s; the figure is the "
                       "realistic one when it is measured)")
  ap.add_argument("--pages", type=int, default=600, help="generated pages (default: %(default)s)")
  ap.add_argument("--pairs", type=int, default=MIN_PAIRS)
  ap.add_argument("--mention_every", type=int, default=MENTION_EVERY,
                  help="words per mention of the realistic text (default: %(default)s)")
  ap.add_argument("--ruler_patterns", type=int, default=100_000)
  ap.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child:
    pipeline_child(*args.child)
    return
  common.check_pairs(ap, args.pairs, MIN_PAIRS)
  if args.mention_every < 1:
    ap.error("--mention_every must be >= 1")
  which = TEXTS if args.text == "both" else (args.text,)
  pairs: Dict[str, List[Dict[str, float]]] = {kind: [] for kind in which}
  with tempfile.TemporaryDirectory(prefix="ner_throughput_") as tmp:
    wiki, inputs = make_inputs(tmp, args.pages, which, args.mention_every, args.ruler_patterns)
    for k in range(args.pairs):
      for kind in which:
        book_dir, texts = inputs[kind]
        pairs[kind].append(measure_pair(kind, k, tmp, wiki, book_dir, texts,
                                        args.ruler_patterns))
  results = {kind: summary(pairs[kind]) for kind in which}
  for kind in which:
    print(f"{kind}: books={len(inputs[kind][1]):,} words={results[kind]['words']:,} "
          f"words/mention={results[kind]['words_per_mention']}")
    for name, key, fmt in (("bare words/CPU s", "bare_wps", ",.0f"),
                           ("stage words/CPU s", "pipeline_wps", ",.0f"),
                           ("paired ratio", "ratio", ".3f"),
                           ("wall-time ratio", "wall_ratio", ".3f")):
      print(f"  {name + ':':19s}{common.spread([p[key] for p in pairs[kind]], fmt)}")
  figure = results[which[0]]
  figure = {"metric": "annotate_stage_words_per_cpu_s_over_bare_nlp_pipe", **figure,
            "text": which[0], "pairs": args.pairs, "target": 0.9, "unit": "ratio"}
  for kind in which[1:]:
    figure[kind] = results[kind]
  print(json.dumps(figure))


if __name__ == "__main__":
  main()
