r"""Segments/s of the pretraining input: read, parse, dynamic masking, batching (one pack = one
global batch).

  python -m benchmarks.input_pipeline [--pages 400] [--seq_length 512] [--segments_per_pack 32]
      [--max_mentions 1024] [--seconds 20] [--repeats 3]

Set-up: a generated Wikipedia dump (``pipelines.datasets.wikipedia.fake_input``, link mentions with
entity ids) goes through ``python -m pipelines wikipedia`` with the given record shape.  Then, in
this process, the trainer's input as it will run: ``model.data.pack_reader.dataset_from_output_dir``
(read and parse every shard, ``max_mentions`` static mention features), repeated, enumerated and
mapped through ``model.data.masking.mask_segments`` (25% of mentions, 15% whole-word spans,
80/10/10, a new mask per pass) with ``num_parallel_calls=AUTOTUNE``, prefetched.  After one warm-up
pack, the packs produced in ``--seconds`` are counted; the figure is segments/s (packs x segments
per pack / s), the median of ``--repeats`` runs (min and max beside it).  Last line: JSON, target
>= 5,000 segments/s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TARGET = 5000.0


def make_records(tmp: str, pages: int, seq_length: int, segments_per_pack: int) -> str:
  import subprocess  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia import fake_input as synth  # pylint: disable=g-import-not-at-top
  dump = os.path.join(tmp, "gen-pages-articles.xml.bz2")
  synth.write_dump(synth.generate_pages(pages, seed=1, words_per_page=400), dump)
  out = os.path.join(tmp, "records")
  # A separate process: the pipelines and TensorFlow are not imported together.
  subprocess.run([sys.executable, "-m", "pipelines", "wikipedia", "--input", dump, "--output_dir",
                  out, "--seq_length", str(seq_length), "--overlap", str(seq_length // 4),
                  "--segments_per_pack", str(segments_per_pack), "--max_segments_per_document",
                  str(segments_per_pack), "--log_level", "WARNING"], cwd=ROOT, check=True,
                 stdout=subprocess.DEVNULL)
  return out


def measure(records: str, max_mentions: int, seconds: float) -> dict:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.data import pack_reader as input_lib  # pylint: disable=g-import-not-at-top
  from model.data import masking  # pylint: disable=g-import-not-at-top
  manifest = input_lib.read_manifest(records)
  tok = manifest["tokenizer"]
  config = masking.MaskingConfig(mask_token_id=int(tok["special_ids"]["mask"]),
                                 vocab_size=int(tok["vocab_size"]))
  ds = input_lib.dataset_from_output_dir(records, shuffle=True, repeat=True,
                                         max_mentions=max_mentions)
  ds = ds.enumerate().map(
      lambda i, f: masking.mask_segments(f, config, seed=0, pack_index=i),
      num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
  it = iter(ds)
  first = next(it)
  n = int(first["token_ids"].shape[0])
  packs, masked = 0, 0
  start = time.perf_counter()
  while time.perf_counter() - start < seconds:
    f = next(it)
    packs += 1
    masked += int(tf.reduce_sum(f["masked_weights"]))
  elapsed = time.perf_counter() - start
  return {"segments_per_s": packs * n / elapsed, "packs": packs, "segments_per_pack": n,
          "masked_per_segment": masked / max(packs * n, 1)}


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.input_pipeline",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--pages", type=int, default=400)
  ap.add_argument("--seq_length", type=int, default=512)
  ap.add_argument("--segments_per_pack", type=int, default=32)
  ap.add_argument("--max_mentions", type=int, default=1024)
  ap.add_argument("--seconds", type=float, default=20.0)
  ap.add_argument("--repeats", type=int, default=3)
  args = ap.parse_args()
  with tempfile.TemporaryDirectory(prefix="input_pipeline_") as tmp:
    records = make_records(tmp, args.pages, args.seq_length, args.segments_per_pack)
    runs = []
    for k in range(args.repeats):
      r = measure(records, args.max_mentions, args.seconds)
      runs.append(r)
      print(f"run {k + 1}: {r['segments_per_s']:,.0f} segments/s ({r['packs']} packs of "
            f"{r['segments_per_pack']} x {args.seq_length}; {r['masked_per_segment']:.1f} masked "
            f"positions per segment)", flush=True)
  rates = [r["segments_per_s"] for r in runs]
  print(json.dumps({"metric": "pretraining_input_segments_per_s",
                    "value": round(statistics.median(rates), 1), "min": round(min(rates), 1),
                    "max": round(max(rates), 1), "target": TARGET, "unit": "segments/s",
                    "seq_length": args.seq_length, "segments_per_pack": args.segments_per_pack,
                    "max_mentions": args.max_mentions, "repeats": args.repeats}))


if __name__ == "__main__":
  main()
