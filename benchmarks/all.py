r"""Every pipeline's throughput relative to bare tokenisation, side by side, in interleaved pairs.

  python -m benchmarks.all [--pairs 3] [--scale 1.0] [--only hotpotqa,books,...]

The jobs: every registered dataset (``pipelines.datasets.DATASETS``).  Each gets its fake
input, which its spec's ``fake_input`` writes in its official layout (its folder's
``fake_input.py``), texts drawn from a Zipf-distributed pseudo-word vocabulary
(``pipelines.fake_data.prose``), so that BPE's word cache hits about as often as on real text:
HotpotQA questions, a multistream Wikipedia dump with its index (links, redirects, templates,
tables, refs, ...), Gutenberg-style books of 300-700 KB, TriviaQA's ``qa/`` files with their
``evidence/`` (one document per question and page), NarrativeQA's layout with stories of
30k-70k words and 30 questions each as in the real set (every question is a document that
repeats the story's segments in the records, while the story is tokenised once: the bare side
encodes each story once), JSON lines of extractive QA.  The job's first run on it is pair 1's pipeline side: the documents it wrote
(its ``documents/`` side files: the texts it tokenised) are the bare side's texts, and how many
every later run must write.

Each pair times, for every pipeline one right after the other (bare, then the pipeline; in pair 1
the pipeline, then bare), so drift of a shared machine hits both sides alike; pair k runs every
pipeline before pair k+1:

* bare: HF ``tokenizers`` ``encode_batch`` (no special tokens) on a freshly built tokenizer
  (word cache cold, like a new pipeline worker's), in a fresh interpreter like the pipeline
  (every tokenizer built in one process makes the next ones slower: 6.4 s -> 8.6 s over five
  HotpotQA passes, which flattered the later pairs' ratios), over exactly the texts the pipeline
  tokenises (the first run's documents, in the order it read them: the Wikipedia page's clean
  text, not the raw wikitext; the NarrativeQA story cut and joined), in the calls ``TokenizeAndSegmentFn`` makes:
  chunks of ``min(CHUNK, batch_size)`` documents or fewer of ``CHUNK_CHARS`` characters (a chunk is
  not cut between documents that read one text), each call the distinct texts of its documents and
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
import shutil
import statistics
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple, Sequence, Tuple

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "all", file=sys.stderr)
  sys.exit(2)

from benchmarks import common
from benchmarks.hotpotqa_throughput import docs_per_encode_call
from pipelines import datasets
from pipelines.beam.config import RecordsConfig
from pipelines.text.tokenizer import Tokenizer
from schemas import documents as documents_schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_PAIRS = 3
BARE = "bare"  # --child's first argument for the bare pass
FAST = "fast"  # --child's last argument for a bare pass timing encode_batch_fast


class Job(NamedTuple):
  """One pipeline's generated input: what its run needs and what the bare side encodes."""
  name: str
  argv: List[str]  # the job's arguments that read its input (the spec's FakeInput)
  input_bytes: int  # the files the job reads, as stored (the Wikipedia dump: bz2)
  documents: int  # documents the job writes
  calls: List[List[str]]  # the texts of the pipeline's encode_batch calls, in order

  @property
  def text_bytes(self) -> int:
    return sum(len(t.encode("utf-8")) for call in self.calls for t in call)


def encode_calls(docs: Sequence[Tuple[str, str]], per_call: int) -> List[List[str]]:
  """The texts of ``TokenizeAndSegmentFn``'s ``encode_batch`` calls over ``docs`` ((text,
  question) pairs, in order): a chunk goes when it holds ``per_call`` documents, or documents
  whose texts reach ``TokenizeAndSegmentFn.CHUNK_CHARS`` characters, and a document with another
  text comes; a call encodes the chunk's distinct texts, its documents' then their questions'."""
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
  calls, waiting, chars = [], [], 0

  def submit():
    texts = [text for text, _ in waiting] + [q for _, q in waiting if q]
    calls.append(list(dict.fromkeys(texts)))

  for text, question in docs:
    new_text = not waiting or text != waiting[-1][0]
    if new_text and TokenizeAndSegmentFn.chunk_full(len(waiting), chars, per_call):
      submit()
      waiting, chars = [], 0
    waiting.append((text, question))
    if new_text:
      chars += len(text)
  if waiting:
    submit()
  return calls


def dir_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def read_order(docs: Sequence[Dict]) -> List[Dict]:
  """Side-file documents (sorted by id within a shard) in the order the job read them: by
  source record (``keys.split_source_id``: file, then index), the documents that read one
  source document's text (``source_document_id``: NarrativeQA's questions of a story) together,
  as the job hands them to the tokenizer."""
  from pipelines import keys  # pylint: disable=g-import-not-at-top
  groups: Dict[str, List[Dict]] = {}
  for d in sorted(docs, key=lambda d: keys.split_source_id(d.get("source_id") or "")):
    groups.setdefault(d.get("source_document_id") or f"\0{d['document_id']}", []).append(d)
  return [d for group in groups.values() for d in group]


def make_job(name: str, root: str, scale: float, per_call: int) -> Tuple[Job, Dict]:
  """The dataset's fake input (its spec's ``fake_input``) at ``scale`` under ``root/input``, and
  the first run of the job on it (:func:`pipeline_child`: pair 1's pipeline side), whose
  documents (the texts it wrote, in the order it read them: :func:`read_order`) are the bare
  side's texts; returns the job and that run's figures."""
  fake = datasets.get(name).fake_input(os.path.join(root, "input"), scale)
  out_dir = os.path.join(root, "first_run")
  r = common.child_run("benchmarks.all", [name, json.dumps(fake.argv), out_dir], None,
                       ROOT)  # (None: the output is kept, to be read here)
  try:
    docs = documents_schema.load(out_dir)
  finally:
    shutil.rmtree(out_dir, ignore_errors=True)
  if not docs or len(docs) != r["counts"]["written"]:
    raise SystemExit(f"{name}: the first run wrote {r['counts']['written']} documents but its "
                     f"side files hold {len(docs)}")
  job = Job(name, fake.argv, dir_bytes(os.path.join(root, "input")), len(docs),
            encode_calls([(d["text"], d.get("question") or "")
                          for d in read_order(list(docs.values()))], per_call))
  return job, check_run(job, r)


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
  r = common.child_run("benchmarks.all", [BARE, calls_path, FAST if fast else "-"], None,
                       ROOT)
  return r["seconds"], r["tokens"]


def pipeline_child(name: str, argv_json: str, out_dir: str) -> None:
  """The measured pipeline run (in a fresh interpreter): the job on the arguments ``argv_json``
  (a JSON list), its options as its command line would build them; prints its figures as JSON."""
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  argv = json.loads(argv_json)
  options = datasets.get(name).options_for(argv)
  t0 = time.perf_counter()
  m = runner.run_dataset(name, argv[argv.index("--input") + 1], out_dir, RecordsConfig(),
                         options)
  seconds = time.perf_counter() - t0
  segment = (m.get("stages") or {}).get("segment") or {}
  print(json.dumps({"seconds": seconds, "counts": m["counts"], "examples": m["examples"],
                    "texts_tokenised": segment.get("texts_tokenised"),
                    "rejected_by_reason": m.get("rejected_by_reason")}))


def pipeline_run(job: Job, out_dir: str) -> Dict:
  """Runs :func:`pipeline_child` in a fresh interpreter; checks what it wrote."""
  return check_run(job, common.child_run(
      "benchmarks.all", [job.name, json.dumps(job.argv), out_dir], out_dir, ROOT))


def check_run(job: Job, r: Dict) -> Dict:
  """``r``, a run's figures, unless it rejected a document or wrote another count than the
  job's (clean input) -- then this exits; warns when it tokenised other texts than the bare
  side."""
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
  if sys.argv[1:2] == ["--child"]:
    # A measured side, before the parser: ``--child bare CALLS MODE`` or ``--child NAME
    # ARGV_JSON OUT_DIR`` (the parser's ``--only`` default reads the registry, which the bare
    # side's process does not need).
    child = sys.argv[2:]
    if child[0] == BARE:
      bare_child(*child[1:])
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
  jobs = datasets.DATASETS
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
    jobs: List[Job] = []
    pairs: Dict[str, List[Dict]] = {name: [] for name in names}
    tokens: Dict[str, int] = {}
    calls_paths: Dict[str, str] = {}
    print(f"bare: encode_batch calls of up to {per_call} documents (their distinct texts, then "
          f"their questions'); {args.pairs} pair(s), interleaved; pair 1's pipeline run is the "
          f"job's first, whose documents are the bare side's texts", flush=True)
    for k in range(args.pairs):
      for i, name in enumerate(names):
        if k == 0:  # the input, and the first run: pair 1's pipeline side, then its bare side
          t0 = time.perf_counter()
          job, r = make_job(name, os.path.join(tmp, name), args.scale, per_call)
          jobs.append(job)
          calls_paths[name] = os.path.join(tmp, f"{name}.calls.pickle")
          with open(calls_paths[name], "wb") as f:
            pickle.dump(job.calls, f, protocol=pickle.HIGHEST_PROTOCOL)
          print(f"{name}: {job.input_bytes / 1e6:.1f} MB input, {job.documents:,} documents, "
                f"{job.text_bytes / 1e6:.1f} MB of text in {len(job.calls)} encode_batch "
                f"calls (generated and run in {time.perf_counter() - t0:.1f} s)", flush=True)
        job = jobs[i]
        bare_s, tokens[name] = bare_run(job, calls_paths[name])
        fast_s, _ = bare_run(job, calls_paths[name], fast=True)
        if k:
          r = pipeline_run(job, os.path.join(tmp, f"out_{name}_{k}"))
        n = tokens[name]
        pair = {"bare_s": bare_s, "fast_s": fast_s, "pipeline_s": r["seconds"],
                "wall_s": r["wall"], "bare_rate": n / bare_s, "pipeline_rate": n / r["seconds"],
                "ratio": bare_s / r["seconds"], "ratio_fast": fast_s / r["seconds"]}
        pairs[name].append(pair)
        print(f"pair {k + 1} {name:11s}: bare {bare_s:6.2f} s ({pair['bare_rate']:10,.0f} "
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
