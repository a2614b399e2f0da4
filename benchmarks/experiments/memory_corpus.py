r"""The data half of the memory-use check: generated biographies whose hyperlinked entities
recur across the segments of each document, written as MediaWiki dumps and turned into
pretraining records by the real ``python -m pipelines wikipedia`` job, train and held-out.

  python -m benchmarks memory_corpus --out_dir /tmp/memcorpus [--seed 0] [--train_docs 600]
      [--heldout_docs 100] [--seq_length 128] [--segments_per_pack 16] [--no_samples]

The corpus, its design and the build are :mod:`synthetic.memory_corpus`; this command builds it
(:func:`synthetic.memory_corpus.build.build`) and reports.  Outputs under ``--out_dir``:
``dumps/``, ``train/``, ``heldout/`` and, when the shared samples exist, ``real_wikipedia/``
and ``real_books/``; ``corpus.json`` holds what the build returns.  Printed: a line per split
(documents, segments, packs, mentions, cross-segment support), the real samples and the
timings; the last stdout line is one JSON object (build seconds as ``value``, target 60 s, the
main counts beside it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from synthetic.memory_corpus import build, corpus


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks memory_corpus",
                              description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--out_dir", required=True)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--train_docs", type=int, default=600)
  p.add_argument("--heldout_docs", type=int, default=100)
  p.add_argument("--seq_length", type=int, default=128)
  p.add_argument("--segments_per_pack", type=int, default=16)
  p.add_argument("--min_words", type=int, default=450)
  p.add_argument("--max_words", type=int, default=1100)
  p.add_argument("--samples_dir", default=build.DEFAULT_SAMPLES)
  p.add_argument("--no_samples", action="store_true",
                 help="do not run the shared real samples through the pipelines")
  p.add_argument("--overwrite", action="store_true")
  p.add_argument("--parallel", type=int, default=2, help="pipeline processes at once")
  a = p.parse_args(argv)
  try:
    r = build.build(a.out_dir, seed=a.seed, train_docs=a.train_docs,
                    heldout_docs=a.heldout_docs, seq_length=a.seq_length,
                    segments_per_pack=a.segments_per_pack, min_words=a.min_words,
                    max_words=a.max_words, include_samples=not a.no_samples,
                    samples_dir=a.samples_dir, overwrite=a.overwrite,
                    parallel=max(1, a.parallel))
  except (ValueError, RuntimeError, FileExistsError) as e:
    print(f"memory_corpus: error: {e}", file=sys.stderr)
    return 1
  for split in corpus.SPLITS:
    s = r["splits"][split]
    print(f"{split:8s} {s['documents']:5d} docs  {s['segments']:6d} segments  {s['packs']:4d} "
          f"packs  {s['mentions']:6d} mentions ({s['mentions_per_document']:.1f}/doc, "
          f"{100 * s['mention_token_fraction']:.1f}% of tokens)  entity in >=2 segments: "
          f"{100 * s['documents_with_entity_in_2plus_segments']:.0f}% of docs  cross-segment "
          f"support {100 * s['cross_segment_support']:.0f}%  same-segment repeat "
          f"{100 * s['same_segment_repeat']:.0f}%")
  for name, v in r["real"].items():
    print(f"real_{name}: " + (f"{v['counts']['written']} docs, {v['segments']} segments, "
                              f"{v['mentions_placed']} mentions" if v else "skipped (no samples)"))
  print("timings (s): " + ", ".join(f"{k} {v}" for k, v in r["timings_s"].items()))
  figure = {"metric": "memory_corpus_build_seconds", "value": r["timings_s"]["total"],
            "target": 60, "unit": "s",
            **{f"{k}_{f}": r["splits"][k][f] for k in corpus.SPLITS
               for f in ("documents", "segments", "packs", "mentions",
                         "mentions_per_document", "mention_token_fraction",
                         "documents_with_entity_in_2plus_segments", "cross_segment_support")},
            "out_dir": a.out_dir}
  print(json.dumps(figure, sort_keys=True))
  return 0


if __name__ == "__main__":
  sys.exit(main())
