r"""HotpotQA pipeline throughput relative to bare tokenisation, measured side by side.

  python benchmarks/hotpotqa_throughput.py [--num_questions 2000] [--input file.json]

Runs ``pipelines.hotpotqa`` (FnApiRunner, in-memory, one process: the local DirectRunner set-up)
on HotpotQA-format input and times it end to end (read, parse, dedup, tokenise, segment, pack,
serialise, write, manifest).  Then tokenises the very same texts (each document's text and its
question) with one bare HF ``tokenizers`` ``encode_batch`` call on a freshly built tokenizer
(its word cache cold, like a pipeline worker's).  A breakdown runs the pipeline's own stage code
outside Beam on the same documents, to show where the time goes.  Both rates count the same tokens.  The default input is synthetic
HotpotQA-format questions whose paragraphs also carry Zipf-distributed pseudo-words, so BPE's
word cache hits about as often as on real text (templated text alone would flatter the bare
tokenizer).  The last line is the JSON figure; target: pipeline tokens/s / bare encode_batch
tokens/s >= 0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import synthetic_hotpotqa  # noqa: E402
from pipelines import hotpotqa  # noqa: E402
from pipelines.beam.config import RecordsConfig  # noqa: E402
from pipelines.readers import hotpotqa as reader  # noqa: E402
from pipelines.text.tokenizer import Tokenizer  # noqa: E402


def breakdown(raw) -> dict:
  """Times the pipeline's stage code without Beam: parse, tokenise+segment (the DoFn itself),
  pack+serialise (the shard encoder)."""
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
  from pipelines.beam.packing import PackEncoder  # pylint: disable=g-import-not-at-top

  config = RecordsConfig()
  out = {}
  t0 = time.perf_counter()
  docs = [reader.parse_record(r, f"bench#{i}")[0] for i, r in enumerate(raw)]
  out["parse"] = time.perf_counter() - t0
  fn = TokenizeAndSegmentFn(config)
  fn.setup()
  fn.start_bundle()
  t0 = time.perf_counter()
  subs = []
  for i in range(0, len(docs), config.batch_size):
    subs += [x for x in fn.process(docs[i:i + config.batch_size]) if isinstance(x, tuple)]
  out["tokenize+segment"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  payloads, _ = PackEncoder(config.segments_per_pack, config.segmenter.seq_length,
                            fn._tokenizer.pad_id)(0, sorted(subs, key=lambda kv: kv[0]))
  sum(len(p) for p in payloads)
  out["pack+serialize"] = time.perf_counter() - t0
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--num_questions", type=int, default=1500)
  ap.add_argument("--input", default=None, help="HotpotQA JSON; default: synthetic questions")
  ap.add_argument("--repeats", type=int, default=2, help="best of N for both measurements")
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as tmp:
    path = args.input
    if path is None:
      path = os.path.join(tmp, "input.json")
      with open(path, "w") as f:
        json.dump(synthetic_hotpotqa.make_questions(args.num_questions, seed=1,
                                                    zipf_sentences=2), f)
    with open(path) as f:
      raw = json.load(f)
    texts = []
    for i, r in enumerate(raw):
      doc, _ = reader.parse_record(r, str(i))
      texts += [doc.text, doc.question.text]
    bare = []
    for _ in range(args.repeats):
      backend = Tokenizer().backend
      t0 = time.perf_counter()
      encoded = backend.encode_batch(texts, add_special_tokens=False)
      bare.append(time.perf_counter() - t0)
    tokens = sum(len(e.ids) for e in encoded)
    stages = breakdown(raw)
    pipe = []
    for k in range(args.repeats):
      t0 = time.perf_counter()
      m = hotpotqa.run(path, os.path.join(tmp, f"out{k}"), RecordsConfig())
      pipe.append(time.perf_counter() - t0)
    assert m["counts"]["written"] == len(raw), m["counts"]
    bare_rate, pipe_rate = tokens / min(bare), tokens / min(pipe)
    print(f"questions={len(raw)} tokens={tokens} segments={m['examples']['segments']} "
          f"packs={m['examples']['packs']}")
    print(f"bare encode_batch: {min(bare):.2f} s ({bare_rate:,.0f} tokens/s)")
    print(f"pipeline (FnApiRunner in-memory, end to end): {min(pipe):.2f} s "
          f"({pipe_rate:,.0f} tokens/s)")
    print("stage code outside Beam, same documents: " + ", ".join(
        f"{k} {v:.2f} s" for k, v in stages.items()))
    print(f"  -> Beam execution (coders, shuffles, bundles) and I/O: "
          f"~{min(pipe) - sum(stages.values()):.2f} s")
    print(json.dumps({"metric": "hotpotqa_pipeline_tokens_per_s_over_bare_encode_batch",
                      "value": round(pipe_rate / bare_rate, 3), "target": 0.5,
                      "unit": "ratio"}))


if __name__ == "__main__":
  main()
