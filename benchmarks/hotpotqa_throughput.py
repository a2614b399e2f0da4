r"""HotpotQA pipeline throughput relative to bare tokenisation, in interleaved pairs.

  python -m benchmarks.hotpotqa_throughput [--num_questions 9000] [--input file.json]
                                           [--pairs 5] [--nobreakdown]

Each pair times, one right after the other on the same input:

* bare: the same texts the pipeline tokenises (each document's text and its question), with
  HF ``tokenizers`` ``encode_batch`` calls of as many documents as one of the pipeline's
  ``encode_batch`` calls (``min(TokenizeAndSegmentFn.CHUNK, --batch_size)`` documents: their
  texts, then their questions), on a freshly built tokenizer (word cache cold, like a new
  pipeline worker's), in a fresh interpreter like the pipeline (each tokenizer built in one
  process makes the next ones slower: the bare pass drifted up pair after pair when it ran in
  this process, which flattered the later ratios);
* pipeline: the real job, ``runner.run_dataset("hotpotqa", ...)`` with the default
  ``RecordsConfig`` on the local FnApiRunner (in-memory, one process: what ``python -m pipelines
  hotpotqa`` runs without Beam flags), end to end: read, parse, dedup, tokenise, segment, pack,
  serialise, write, manifest.  Each run is in a fresh interpreter, so no state (the
  process-wide tokenizer and its word cache, imports, allocator) carries over from the run
  before; the time is that of ``run()`` alone.  Interpreter start-up and imports (a constant
  the user also waits for, not a per-token cost) are reported apart, as the subprocess' wall
  time and ``value_incl_startup``.

Ratio per pair = pipeline tokens/s / bare tokens/s (both count the same tokens, those of the
bare encoding).  Interleaving makes drift of a shared machine hit both sides of a pair alike;
the figure is the median of the paired ratios, with min and max.  A breakdown then runs the
pipeline's own stage code outside Beam on the same documents (parse, tokenise+segment with
``TokenizeAndSegmentFn``, pack+serialise with ``PackEncoder``), to show where the time goes; it
is skipped, saying why, if those APIs changed.  The default input is synthetic HotpotQA-format
questions whose paragraphs also carry Zipf-distributed pseudo-words, so BPE's word cache hits
about as often as on real text (templated text alone would flatter the bare tokenizer).

The default size, 9,000 questions (a tenth of HotpotQA train, ~13M tokens, ~2 minutes for 5
pairs), measures throughput: a run also pays a fixed ~1 s (building the Beam graph, the
runner's start, the tokenizer, the manifest) that is most of the time on a few hundred
questions and nothing on a dataset; ``--num_questions 1500`` is a quick look that the fixed
cost pulls well below the 9,000-question figure.

The last line is the JSON figure; target: median paired ratio >= 0.5 (with >= 5 pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "hotpotqa_throughput", file=sys.stderr)
  sys.exit(2)

from benchmarks import common
from pipelines.beam.config import RecordsConfig
from pipelines.datasets.hotpotqa import reader
from pipelines.text.tokenizer import Tokenizer
from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_PAIRS = 5
BARE = "bare"  # --child's first argument for the bare pass


def docs_per_encode_call(config: RecordsConfig) -> int:
  """Documents per ``encode_batch`` call in the pipeline's segment stage."""
  try:
    from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
    chunk = int(getattr(TokenizeAndSegmentFn, "CHUNK", config.batch_size))
  except Exception:  # pylint: disable=broad-except
    chunk = config.batch_size
  return max(1, min(chunk, config.batch_size))


def bare_encode(docs, per_call: int):
  """One cold-tokenizer pass over the documents; (seconds, tokens, context tokens)."""
  backend = Tokenizer(RecordsConfig().tokenizer).backend
  calls = []
  for i in range(0, len(docs), per_call):
    chunk = docs[i:i + per_call]
    calls.append([d.text for d in chunk] + [d.question.text for d in chunk if d.question])
  tokens = context_tokens = 0
  seconds = 0.0
  for i, texts in enumerate(calls):
    t0 = time.perf_counter()
    encoded = backend.encode_batch(texts, add_special_tokens=False)
    seconds += time.perf_counter() - t0
    n_ctx = len(docs[i * per_call:(i + 1) * per_call])
    lengths = [len(e.ids) for e in encoded]
    tokens += sum(lengths)
    context_tokens += sum(lengths[:n_ctx])
  return seconds, tokens, context_tokens


def pipeline_child(path: str, out_dir: str) -> None:
  """The measured pipeline run (in a fresh interpreter); prints its figures as JSON."""
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  m = runner.run_dataset("hotpotqa", path, out_dir, RecordsConfig())
  seconds = time.perf_counter() - t0
  tokens = (m.get("distributions") or {}).get("tokens_per_document") or {}
  print(json.dumps({"seconds": seconds, "counts": m["counts"], "examples": m["examples"],
                    "context_tokens": tokens.get("sum")}))


def bare_child(path: str) -> None:
  """The measured bare pass over the questions at ``path`` (in a fresh interpreter, as the
  pipeline: each tokenizer built in one process makes the next ones slower, which flattered the
  later pairs when this ran in the benchmark's process); prints its figures as JSON."""
  with open(path, encoding="utf-8") as f:
    docs = [reader.parse_record(r, str(i))[0] for i, r in enumerate(json.load(f))]
  seconds, tokens, context_tokens = bare_encode(docs, docs_per_encode_call(RecordsConfig()))
  print(json.dumps({"seconds": seconds, "tokens": tokens, "context_tokens": context_tokens}))


def bare_run(path: str):
  """Runs :func:`bare_child` in a fresh interpreter: (seconds, tokens, context tokens)."""
  r = common.child_run("benchmarks.hotpotqa_throughput", [BARE, path], None, ROOT)
  return r["seconds"], r["tokens"], r["context_tokens"]


def pipeline_run(path: str, out_dir: str) -> dict:
  """Runs :func:`pipeline_child` in a fresh interpreter; its figures plus the wall time."""
  return common.child_run("benchmarks.hotpotqa_throughput", [path, out_dir], out_dir, ROOT)


def breakdown(raw, config: RecordsConfig) -> dict:
  """Times the pipeline's stage code without Beam: parse, answer search, tokenise+segment (the
  DoFns themselves), pack+serialise (the shard encoder)."""
  from apache_beam import pvalue  # pylint: disable=g-import-not-at-top
  from pipelines.beam.packing import PackEncoder  # pylint: disable=g-import-not-at-top
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top

  from pipelines.beam.label_answers import _AnswerSearchFn  # pylint: disable=g-import-not-at-top

  out = {}
  t0 = time.perf_counter()
  docs = [reader.parse_record(r, f"bench#{i}")[0] for i, r in enumerate(raw)]
  out["parse"] = time.perf_counter() - t0
  label = _AnswerSearchFn()
  label.setup()
  label.start_bundle()
  t0 = time.perf_counter()
  docs = [d for doc in docs for d in label.process(doc) if not isinstance(d, pvalue.TaggedOutput)]
  out["answer search"] = time.perf_counter() - t0
  fn = TokenizeAndSegmentFn(config)
  fn.setup()
  fn.start_bundle()
  t0 = time.perf_counter()
  results = [x for doc in docs for x in fn.process(doc)] + list(fn.finish_bundle())
  results = [getattr(x, "value", x) for x in results  # finish_bundle's are globally windowed
             if not isinstance(x, pvalue.TaggedOutput)]
  out["tokenize+segment"] = time.perf_counter() - t0
  subs = []
  for x in results:
    if hasattr(x, "sub_documents"):  # one Segmented document
      subs += [(s.key, s) for s in x.sub_documents]
    elif isinstance(x, tuple) and len(x) == 2 and hasattr(x[1], "num_segments"):
      subs.append(x)  # (key, SubDocument)
    else:
      raise TypeError(f"unexpected TokenizeAndSegmentFn output {type(x).__name__}")
  t0 = time.perf_counter()
  payloads, _ = PackEncoder(config.segments_per_pack, config.segmenter.seq_length,
                            fn._tokenizer.pad_id)(0, sorted(subs, key=lambda kv: kv[0]))
  sum(len(p) for p in payloads)
  out["pack+serialize"] = time.perf_counter() - t0
  return out


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.hotpotqa_throughput",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--num_questions", type=int, default=9000,
                  help="synthetic questions (default: %(default)s)")
  ap.add_argument("--input", default=None, help="HotpotQA JSON; default: synthetic questions")
  ap.add_argument("--pairs", type=int, default=MIN_PAIRS,
                  help=f"interleaved (bare, pipeline) pairs; fewer than {MIN_PAIRS} is only for "
                       "smoke tests (default: %(default)s)")
  ap.add_argument("--breakdown", dest="breakdown", action="store_true", default=True,
                  help="time the stage code outside Beam too (default)")
  ap.add_argument("--nobreakdown", dest="breakdown", action="store_false")
  ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    if args.child[0] == BARE:
      bare_child(args.child[1])
    else:
      pipeline_child(*args.child)
    return
  common.check_pairs(ap, args.pairs, MIN_PAIRS)
  config = RecordsConfig()
  with tempfile.TemporaryDirectory(prefix="hotpotqa_throughput_") as tmp:
    path = args.input
    if path is None:
      path = os.path.join(tmp, "input.json")
      with open(path, "w", encoding="utf-8") as f:
        json.dump(synthetic_hotpotqa.make_questions(args.num_questions, seed=1,
                                                    zipf_sentences=2), f)
    with open(path, encoding="utf-8") as f:
      raw = json.load(f)
    per_call = docs_per_encode_call(config)
    print(f"questions={len(raw)} ({os.path.getsize(path) / 1e6:.1f} MB JSON); bare "
          f"encode_batch calls of {per_call} documents (their texts, then their questions)",
          flush=True)
    pairs = []
    for k in range(args.pairs):
      bare_s, tokens, context_tokens = bare_run(path)
      r = pipeline_run(path, os.path.join(tmp, f"out{k}"))
      if r["counts"]["written"] != len(raw):
        raise SystemExit(f"the pipeline wrote {r['counts']} of {len(raw)} questions")
      if r["context_tokens"] is not None and r["context_tokens"] != context_tokens:
        print(f"warning: the pipeline tokenised {r['context_tokens']:,} context tokens, the "
              f"bare pass {context_tokens:,}", file=sys.stderr)
      pair = {"bare_s": bare_s, "pipeline_s": r["seconds"], "wall_s": r["wall"],
              "bare_rate": tokens / bare_s, "pipeline_rate": tokens / r["seconds"],
              "ratio": bare_s / r["seconds"], "ratio_incl_startup": bare_s / r["wall"]}
      pairs.append(pair)
      print(f"pair {k + 1}: bare {bare_s:6.2f} s ({pair['bare_rate']:10,.0f} tokens/s)  "
            f"pipeline {r['seconds']:6.2f} s ({pair['pipeline_rate']:10,.0f} tokens/s; "
            f"process wall {r['wall']:6.2f} s)  ratio {pair['ratio']:.3f}", flush=True)
    print(f"tokens={tokens:,} (context {context_tokens:,}) segments="
          f"{r['examples'].get('segments')} packs={r['examples'].get('packs')}")
    print(f"bare encode_batch tokens/s: {common.spread([p['bare_rate'] for p in pairs], ',.0f')}")
    print(f"pipeline tokens/s:          {common.spread([p['pipeline_rate'] for p in pairs], ',.0f')}")
    print(f"paired ratio:               {common.spread([p['ratio'] for p in pairs], '.3f')}")
    print(f"  incl. interpreter start and imports "
          f"({statistics.median(p['wall_s'] - p['pipeline_s'] for p in pairs):.1f} s): "
          f"{common.spread([p['ratio_incl_startup'] for p in pairs], '.3f')}")
    breakdown_status = "off"
    if args.breakdown:
      try:
        stages = breakdown(raw, config)
        median_pipe = statistics.median(p["pipeline_s"] for p in pairs)
        print("stage code outside Beam, same documents: " + ", ".join(
            f"{k} {v:.2f} s" for k, v in stages.items()))
        print(f"  -> Beam execution (coders, shuffles, bundles) and I/O: "
              f"~{median_pipe - sum(stages.values()):.2f} s of the median "
              f"{median_pipe:.2f} s")
        breakdown_status = "ok"
      except Exception as e:  # pylint: disable=broad-except
        breakdown_status = f"skipped: {type(e).__name__}: {e}"
        print(f"stage breakdown {breakdown_status}")
  ratios = [p["ratio"] for p in pairs]
  print(json.dumps({"metric": "hotpotqa_pipeline_tokens_per_s_over_bare_encode_batch",
                    "value": round(statistics.median(ratios), 3),
                    "min": round(min(ratios), 3), "max": round(max(ratios), 3),
                    "pairs": len(pairs), "target": 0.5, "unit": "ratio",
                    "value_incl_startup": round(statistics.median(
                        p["ratio_incl_startup"] for p in pairs), 3),
                    "questions": len(raw), "tokens": tokens,
                    "bare_tokens_per_s": round(statistics.median(p["bare_rate"] for p in pairs)),
                    "pipeline_tokens_per_s": round(statistics.median(
                        p["pipeline_rate"] for p in pairs)),
                    "breakdown": breakdown_status}))


if __name__ == "__main__":
  main()
