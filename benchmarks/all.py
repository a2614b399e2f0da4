r"""Every pipeline's throughput relative to bare tokenisation, side by side, in interleaved pairs.

  python -m benchmarks.all [--pairs 3] [--scale 1.0] [--only hotpotqa,books,...]

The jobs: HotpotQA, Wikipedia, books, TriviaQA and NarrativeQA (``pipelines.JOBS``).  Each
gets a generated input in its official layout (``synthetic.job_inputs``), its texts drawn from
a Zipf-distributed pseudo-word vocabulary (``synthetic.hotpotqa.ZipfWords``, as in
``hotpotqa_throughput``), so that BPE's word cache hits about as often as on real text:

* hotpotqa: ``synthetic.hotpotqa`` questions (two Zipf sentences per paragraph), one JSON
  list;
* wikipedia: a ``synthetic.wikipedia`` multistream dump with its index (links, redirects,
  templates, tables, refs, ...);
* books: Gutenberg-style plain-text books of 300-700 KB (header, credit, chapters, hard-wrapped
  paragraphs, licence footer), one per file;
* triviaqa: ``qa/wikipedia-dev.json`` (questions over 1-3 entity pages from a shared pool) and
  ``qa/web-dev.json`` (1-2 entity pages and 2-4 search results each: one document per page)
  with their ``evidence/`` files of 1,000-5,000 words; the answers are phrases of the
  evidence;
* narrativeqa: the official layout (``documents.csv``, ``qaps.csv``, ``tmp/<id>.content``) with
  Gutenberg-style stories of 30k-70k words and ``job_inputs.NQA_QUESTIONS_PER_STORY`` questions
  each whose answers are phrases of the story (real NarrativeQA has ~30 per story: every
  question repeats the story's segments in the records, while the story is tokenised once).

Each pair times, for every pipeline one right after the other (bare, then the pipeline, so
drift of a shared machine hits both sides alike; pair k runs every pipeline before pair k+1):

* bare: HF ``tokenizers`` ``encode_batch`` (no special tokens) on a freshly built tokenizer
  (word cache cold, like a new pipeline worker's), in a fresh interpreter like the pipeline
  (every tokenizer built in one process makes the next ones slower: 6.4 s -> 8.6 s over five
  HotpotQA passes, which flattered the later pairs' ratios), over exactly the texts the pipeline
  tokenises, got from the job's own reader functions (HotpotQA's ``parse_record``, the
  Wikipedia page's clean text from ``convert_page`` -- not the raw wikitext --, the parsed
  book, the TriviaQA document built from its evidence, the NarrativeQA story cut and
  joined), in the calls ``TokenizeAndSegmentFn`` makes: chunks of
  ``min(CHUNK, batch_size)`` documents or fewer of ``CHUNK_CHARS`` characters (a chunk is not
  cut between documents that read one text), each call the distinct texts of its documents and
  then of their questions.  Only the ``encode_batch`` calls are timed: reading, parsing,
  cleaning, labelling, segmenting, packing and writing are the pipeline's overhead.  A second
  bare pass, the same way, times ``encode_batch_fast`` (the same ids without character
  offsets: what the pipeline calls, computing the offsets from the ids itself);
* pipeline: the real job, ``runner.run_dataset(name, ...)`` with the default ``RecordsConfig``
  on the local FnApiRunner (in-memory, one process: what ``python -m pipelines <name>`` runs
  without Beam flags), end to end, in a fresh interpreter (``common.child_run``); the time is
  that of ``run()`` alone, the process' wall time (interpreter start and imports included) is
  reported apart.  The run must write every document and reject none (clean input), else this
  exits non-zero.

Ratio per pair = bare seconds / pipeline seconds (the same texts, so = pipeline tokens/s over
bare tokens/s); the ratio against ``encode_batch_fast`` is printed beside it (and in the JSON
as ``ratios_vs_encode_batch_fast``), the target's figure stays the one against
``encode_batch``.  Printed: a line per pair and pipeline, then a table of each pipeline's input,
tokens, median rates and paired ratios (min / median / max); the last line is one JSON object
whose value is the worst pipeline's median paired ratio (target >= 0.5, with >= 3 pairs).

``--scale`` multiplies every generated input (document counts; below one document of a kind,
the documents' lengths): at 1.0 each pipeline run takes roughly 10-30 s on a 2-core machine,
so throughput, not the fixed ~1-2 s of start-up (Beam graph, runner, tokenizer, manifest),
decides the figure; the whole run, 3 pairs, takes about 8-10 minutes (one pair: ~3).  ``--scale 0.01`` is a
smoke test (start-up dominates: its ratios mean nothing).
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
from typing import Dict, List, NamedTuple, Sequence, Tuple

if not __package__:  # run as a script (python benchmarks/all.py): the repo's packages
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common
from benchmarks.hotpotqa_throughput import docs_per_encode_call
import pipelines
from pipelines.beam.config import RecordsConfig
from pipelines.text.tokenizer import Tokenizer
from synthetic import job_inputs
from synthetic.job_inputs import MIN_WORDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_PAIRS = 3
BARE = "bare"  # --child's first argument for the bare pass
FAST = "fast"  # --child's last argument for a bare pass timing encode_batch_fast
# Input sizes at --scale 1.0 (each pipeline run ~10-30 s on 2 cores).
HOTPOTQA_QUESTIONS = 8000
WIKIPEDIA_PAGES, WIKIPEDIA_WORDS_PER_PAGE = 3000, 700
BOOKS = 32
TRIVIAQA_WIKI_QUESTIONS, TRIVIAQA_WEB_QUESTIONS = 240, 150
NQA_STORIES = 40
# Document lengths (BOOK_KB, ..., and MIN_WORDS, the shortest however small --scale) are
# synthetic.job_inputs'.


class Job(NamedTuple):
  """One pipeline's generated input: what its run needs and what the bare side encodes."""
  name: str
  input_pattern: str
  evidence_dir: str  # TriviaQA's evidence/ folder; "-" for the others
  input_bytes: int  # the files the job reads, as stored (the Wikipedia dump: bz2)
  documents: int  # documents the job must write
  calls: List[List[str]]  # the texts of the pipeline's encode_batch calls, in order

  @property
  def text_bytes(self) -> int:
    return sum(len(t.encode("utf-8")) for call in self.calls for t in call)


def scaled(n: int, scale: float) -> Tuple[int, float]:
  """(count, length factor): ``n * scale`` documents, at least one; when that floors the count,
  the documents are shortened by the factor instead, so the input stays ``scale`` times its
  size."""
  count = max(1, round(n * scale))
  return count, min(1.0, n * scale / count)


def encode_calls(docs, per_call: int) -> List[List[str]]:
  """The texts of ``TokenizeAndSegmentFn``'s ``encode_batch`` calls over ``docs`` (in order): a
  chunk goes when it holds ``per_call`` documents, or documents whose texts reach
  ``TokenizeAndSegmentFn.CHUNK_CHARS`` characters, and a document with another text comes; a
  call encodes the chunk's distinct texts, its documents' then their questions'."""
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
  calls, waiting, chars = [], [], 0

  def submit():
    texts = [d.text for d in waiting] + [d.question.text for d in waiting if d.question]
    calls.append(list(dict.fromkeys(texts)))

  for doc in docs:
    new_text = not waiting or doc.text is not waiting[-1].text
    if new_text and TokenizeAndSegmentFn.chunk_full(len(waiting), chars, per_call):
      submit()
      waiting, chars = [], 0
    waiting.append(doc)
    if new_text:
      chars += len(doc.text)
  if waiting:
    submit()
  return calls


def dir_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# ---------------------------------------------------------------------- inputs per job
# Each writes the job's generated input (synthetic.job_inputs) and returns a Job; the documents
# for the bare side come from the job's reader functions.


def make_hotpotqa(root: str, scale: float, per_call: int) -> Job:
  from pipelines.datasets.hotpotqa import reader  # pylint: disable=g-import-not-at-top
  n, _ = scaled(HOTPOTQA_QUESTIONS, scale)
  path, raw = job_inputs.write_hotpotqa(root, n)
  docs = [reader.parse_record(r, f"{path}#{i}")[0] for i, r in enumerate(raw)]
  return Job("hotpotqa", path, "-", os.path.getsize(path), len(docs),
             encode_calls(docs, per_call))


def make_wikipedia(root: str, scale: float, per_call: int) -> Job:
  from pipelines.datasets.wikipedia import reader as dump_reader  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia import pages as pages_lib  # pylint: disable=g-import-not-at-top
  n, factor = scaled(WIKIPEDIA_PAGES, scale)
  path = job_inputs.write_wikipedia(
      root, n, max(MIN_WORDS, int(WIKIPEDIA_WORDS_PER_PAGE * factor)))
  with open(path, "rb") as f:
    namespaces = pages_lib.namespaces_of(dump_reader.read_siteinfo(f, path))
  docs = []
  with open(path, "rb") as f:
    for page in dump_reader.iter_pages(f, path):
      kind, value = pages_lib.convert_page(page, namespaces, pages_lib.PageRules())
      if kind == pages_lib.DOCUMENT:
        docs.append(value[0])
  return Job("wikipedia", path, "-", os.path.getsize(path), len(docs),
             encode_calls(docs, per_call))


def make_books(root: str, scale: float, per_call: int) -> Job:
  from pipelines.datasets.books import reader  # pylint: disable=g-import-not-at-top
  n, factor = scaled(BOOKS, scale)
  docs = [reader.parse_book(data, path)
          for path, data in job_inputs.write_books(root, n, factor)]
  return Job("books", os.path.join(root, "*.txt"), "-", dir_bytes(root), len(docs),
             encode_calls(docs, per_call))


def make_triviaqa(root: str, scale: float, per_call: int) -> Job:
  from pipelines.datasets.triviaqa import reader  # pylint: disable=g-import-not-at-top
  n_wiki, factor = scaled(TRIVIAQA_WIKI_QUESTIONS, scale)
  n_web, _ = scaled(TRIVIAQA_WEB_QUESTIONS, scale)
  files, texts = job_inputs.write_triviaqa(root, n_wiki, n_web, factor)
  docs = []
  for path, data in files:
    for i, datum in enumerate(data):
      for source_id, unit in reader.split_question(f"{path}#{i}", datum):
        plan, _ = reader.parse_record(unit, source_id)
        docs.append(reader.build_document(plan, [
            reader.decode_evidence(texts[p.relative_path].encode("utf-8"))[0]
            for p in plan.pages]))
  return Job("triviaqa", os.path.join(root, "qa", "*-dev.json"), os.path.join(root, "evidence"),
             dir_bytes(root), len(docs), encode_calls(docs, per_call))


def make_narrativeqa(root: str, scale: float, per_call: int) -> Job:
  from pipelines.datasets.narrativeqa import reader  # pylint: disable=g-import-not-at-top
  n, factor = scaled(NQA_STORIES, scale)
  docs = []
  for row, data, rows in job_inputs.write_narrativeqa(root, n, factor):
    story_id = row["document_id"]
    text, paragraphs, _ = reader.story_text(data, "gutenberg", row["story_start"],
                                            row["story_end"])
    docs += reader.question_documents(
        story_id, text, paragraphs,
        [(f"qaps#{k}", reader.make_question(r, story_id, k)) for k, r in enumerate(rows)])
  return Job("narrativeqa", os.path.join(root, "qaps.csv"), "-", dir_bytes(root), len(docs),
             encode_calls(docs, per_call))


MAKERS = {"hotpotqa": make_hotpotqa, "wikipedia": make_wikipedia, "books": make_books,
          "triviaqa": make_triviaqa, "narrativeqa": make_narrativeqa}


# ---------------------------------------------------------------------- the two sides


def bare_encode(calls: Sequence[Sequence[str]], fast: bool = False) -> Tuple[float, int]:
  """One cold-tokenizer pass: (seconds in encode_batch, or with ``fast`` in
  ``encode_batch_fast``, tokens)."""
  backend = Tokenizer(RecordsConfig().tokenizer).backend
  encode = backend._tokenizer.encode_batch_fast if fast else backend.encode_batch  # pylint: disable=protected-access
  seconds, tokens = 0.0, 0
  for texts in calls:
    t0 = time.perf_counter()
    encoded = encode(list(texts), add_special_tokens=False)
    seconds += time.perf_counter() - t0
    tokens += sum(len(e.ids) for e in encoded)
  return seconds, tokens


def bare_child(calls_path: str, mode: str) -> None:
  """The measured bare pass (in a fresh interpreter, as the pipeline: a long-lived parent's
  tokenizer runs measurably slower pair after pair); ``mode`` :data:`FAST` times
  ``encode_batch_fast``; prints its figures as JSON."""
  with open(calls_path, "rb") as f:
    calls = pickle.load(f)
  seconds, tokens = bare_encode(calls, fast=mode == FAST)
  print(json.dumps({"seconds": seconds, "tokens": tokens}))


def bare_run(job: Job, calls_path: str, fast: bool = False) -> Tuple[float, int]:
  """Runs :func:`bare_child` on ``job``'s calls (pickled at ``calls_path``)."""
  r = common.child_run("benchmarks.all", [BARE, calls_path, "-", FAST if fast else "-"], None,
                       ROOT)
  return r["seconds"], r["tokens"]


def pipeline_child(name: str, input_pattern: str, out_dir: str, evidence_dir: str) -> None:
  """The measured pipeline run (in a fresh interpreter); prints its figures as JSON."""
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  options = None  # the dataset's default options
  if name == "triviaqa":
    from pipelines.datasets.triviaqa.dataset import (  # pylint: disable=g-import-not-at-top
        TriviaQAOptions)
    options = TriviaQAOptions(evidence_dir=evidence_dir)
  t0 = time.perf_counter()
  m = runner.run_dataset(name, input_pattern, out_dir, RecordsConfig(), options)
  seconds = time.perf_counter() - t0
  segment = (m.get("stages") or {}).get("segment") or {}
  print(json.dumps({"seconds": seconds, "counts": m["counts"], "examples": m["examples"],
                    "texts_tokenised": segment.get("texts_tokenised"),
                    "rejected_by_reason": m.get("rejected_by_reason")}))


def pipeline_run(job: Job, out_dir: str) -> Dict:
  """Runs :func:`pipeline_child` in a fresh interpreter; checks what it wrote."""
  r = common.child_run("benchmarks.all", [job.name, job.input_pattern, out_dir, job.evidence_dir],
                       out_dir, ROOT)
  counts = r["counts"]
  if counts["written"] != job.documents or counts["rejected"]:
    raise SystemExit(f"{job.name}: the pipeline wrote {counts['written']} of {job.documents} "
                     f"documents and rejected {counts['rejected']} "
                     f"({r.get('rejected_by_reason')}) on clean input: {counts}")
  # The chunks' edges depend on the order documents reach the stage, so a text read by
  # documents of two chunks (a question's pages in TriviaQA) may be encoded once more or less;
  # more than that means the two sides encode different work (e.g. a story once per question).
  texts = sum(len(c) for c in job.calls)
  if r.get("texts_tokenised") is not None and abs(r["texts_tokenised"] - texts) > 0.01 * texts:
    print(f"warning: {job.name}: the pipeline tokenised {r['texts_tokenised']:,} texts, the "
          f"bare pass {texts:,}", file=sys.stderr)
  return r


def parse_only(ap: argparse.ArgumentParser, only: str, jobs: Sequence[str]) -> List[str]:
  names = [n.strip() for n in only.split(",") if n.strip()]
  unknown = [n for n in names if n not in jobs]
  if unknown or not names:
    ap.error(f"--only: unknown pipeline(s) {', '.join(unknown) or repr(only)}; choose from "
             f"{', '.join(jobs)}")
  return [n for n in jobs if n in names]


def main() -> None:
  if sys.argv[1:2] == ["--child"] and len(sys.argv) == 6:
    # A measured side, before the parser: its ``--only`` default lists ``pipelines.JOBS``,
    # which imports every dataset and Beam (~1 s that the bare side's process does not need).
    child = sys.argv[2:]
    if child[0] == BARE:
      bare_child(child[1], child[3])
    else:
      pipeline_child(*child)
    return
  ap = argparse.ArgumentParser(prog="python -m benchmarks.all",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--pairs", type=int, default=MIN_PAIRS,
                  help=f"interleaved (bare, pipeline) pairs per pipeline; fewer than {MIN_PAIRS} "
                       "is only for smoke tests (default: %(default)s)")
  ap.add_argument("--scale", type=float, default=1.0,
                  help="multiplies every generated input's size (default: %(default)s)")
  jobs = pipelines.JOBS  # (imports every dataset's spec)
  ap.add_argument("--only", default=",".join(jobs),
                  help="comma-separated pipelines to run (default: all: %(default)s)")
  args = ap.parse_args()
  common.check_pairs(ap, args.pairs, MIN_PAIRS)
  if not args.scale > 0:
    ap.error("--scale must be > 0")
  names = parse_only(ap, args.only, jobs)
  per_call = docs_per_encode_call(RecordsConfig())
  start = time.perf_counter()
  with tempfile.TemporaryDirectory(prefix="all_throughput_") as tmp:
    jobs = []
    for name in names:
      t0 = time.perf_counter()
      job = MAKERS[name](os.path.join(tmp, name), args.scale, per_call)
      jobs.append(job)
      print(f"{name}: {job.input_bytes / 1e6:.1f} MB input, {job.documents:,} documents, "
            f"{job.text_bytes / 1e6:.1f} MB of text in {len(job.calls)} encode_batch calls "
            f"(generated in {time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"bare: encode_batch calls of up to {per_call} documents (their distinct texts, then "
          f"their questions'); {args.pairs} pair(s), interleaved", flush=True)
    pairs: Dict[str, List[Dict]] = {name: [] for name in names}
    tokens: Dict[str, int] = {}
    calls_paths = {}
    for job in jobs:
      calls_paths[job.name] = os.path.join(tmp, f"{job.name}.calls.pickle")
      with open(calls_paths[job.name], "wb") as f:
        pickle.dump(job.calls, f, protocol=pickle.HIGHEST_PROTOCOL)
    for k in range(args.pairs):
      for job in jobs:
        bare_s, tokens[job.name] = bare_run(job, calls_paths[job.name])
        fast_s, _ = bare_run(job, calls_paths[job.name], fast=True)
        r = pipeline_run(job, os.path.join(tmp, f"out_{job.name}_{k}"))
        n = tokens[job.name]
        pair = {"bare_s": bare_s, "fast_s": fast_s, "pipeline_s": r["seconds"],
                "wall_s": r["wall"], "bare_rate": n / bare_s, "pipeline_rate": n / r["seconds"],
                "ratio": bare_s / r["seconds"], "ratio_fast": fast_s / r["seconds"]}
        pairs[job.name].append(pair)
        print(f"pair {k + 1} {job.name:11s}: bare {bare_s:6.2f} s ({pair['bare_rate']:10,.0f} "
              f"tokens/s; fast {fast_s:6.2f} s)  pipeline {r['seconds']:6.2f} s "
              f"({pair['pipeline_rate']:10,.0f} tokens/s; process wall {r['wall']:6.2f} s)  "
              f"ratio {pair['ratio']:.3f} (vs fast {pair['ratio_fast']:.3f})", flush=True)
  header = (f"{'pipeline':11s} | {'input MB':>8s} | {'docs':>7s} | {'text MB':>7s} | "
            f"{'tokens':>11s} | {'bare tok/s':>10s} | {'pipe tok/s':>10s} | {'pipe s':>6s} | "
            f"paired ratio min / median / max | vs encode_batch_fast")
  print(header)
  print("-" * len(header))
  ratios, ratios_fast = {}, {}
  for job in jobs:
    ps = pairs[job.name]
    r = [p["ratio"] for p in ps]
    rf = [p["ratio_fast"] for p in ps]
    ratios[job.name] = {"min": round(min(r), 3), "median": round(statistics.median(r), 3),
                        "max": round(max(r), 3)}
    ratios_fast[job.name] = {"min": round(min(rf), 3),
                             "median": round(statistics.median(rf), 3), "max": round(max(rf), 3)}
    print(f"{job.name:11s} | {job.input_bytes / 1e6:8.1f} | {job.documents:7,d} | "
          f"{job.text_bytes / 1e6:7.1f} | {tokens[job.name]:11,d} | "
          f"{statistics.median(p['bare_rate'] for p in ps):10,.0f} | "
          f"{statistics.median(p['pipeline_rate'] for p in ps):10,.0f} | "
          f"{statistics.median(p['pipeline_s'] for p in ps):6.1f} | "
          f"{min(r):.3f} / {statistics.median(r):.3f} / {max(r):.3f} | "
          f"{min(rf):.3f} / {statistics.median(rf):.3f} / {max(rf):.3f}")
  worst = min(ratios, key=lambda n: ratios[n]["median"])
  print(f"worst: {worst} (median paired ratio {ratios[worst]['median']:.3f}, target >= 0.5); "
        f"process start and imports add ~"
        f"{statistics.median(p['wall_s'] - p['pipeline_s'] for ps in pairs.values() for p in ps):.1f}"
        f" s per run (not counted); total {time.perf_counter() - start:.0f} s")
  print(json.dumps({"metric": "worst_pipeline_tokens_per_s_over_bare_encode_batch",
                    "value": ratios[worst]["median"], "target": 0.5, "unit": "ratio",
                    "worst": worst, "pairs": args.pairs, "ratios": ratios,
                    "ratios_vs_encode_batch_fast": ratios_fast}))


if __name__ == "__main__":
  main()
