r"""Accelerator hours and cost of training ReadTwice, from FLOPs per step (docs/cost.md).

  python -m benchmarks.train_cost [--steps 1000000 --segments 128 --seq_length 512]
      [--utilization 0.4] [--price_v4_chip_hour 3.22] [--price_v3_8_hour P]
      [--measure_cpu [--cpu_step_s S --cpu_shape 8,512,128]]

Nothing here runs on a TPU: the step's FLOPs are counted analytically (``step_flops``, the
formula in docs/cost.md) and turned into time at an assumed share of the chips' peak
(``--utilization``).  ``--measure_cpu`` cross-checks the count on this machine: it times a
float32 matmul (the CPU's attainable FLOP rate) and, given a train step time measured with
``python -m benchmarks.model_step`` at the same shape (``--cpu_step_s``, ``--cpu_shape
segments,seq_length,memories``, paper-sized layers), prints the utilization that step time
implies -- a count that was off by a factor would show as an implausible utilization (above 1,
or far below what the matmul reaches).  Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Dict

# Peak bf16 FLOP/s per chip (Google's Cloud TPU system-architecture pages: v3 123 TFLOPS, two
# TensorCores per chip, so a v3-8 is 4 chips; v4 275 TFLOPS).
PEAK = {"v3": 123e12, "v4": 275e12}
# The paper's model: RoBERTa-base reader (12 layers, hidden 768, 12 heads, FFN 3072, vocabulary
# 50,265) + BERT_2 of 2 layers; readtwice_e caps the memories of a pack at 4,096.
PAPER = dict(hidden=768, intermediate=3072, layers=14, vocab=50265, memories=4096)


def forward_flops_per_token(hidden: int, intermediate: int, layers: int, seq_length: int,
                            memories: int, vocab: int, mlm_fraction: float) -> Dict[str, float]:
  """Forward FLOPs per token (2 per multiply-add), by part.

  * a transformer layer: Q, K, V and output projections ``4 * 2H^2``, the feed-forward
    ``2 * 2HF``, attention scores and the weighted sum over the segment's L tokens ``2 * 2LH``;
  * memory attention (dense over the pack's M memories, as the layer computes it): the query
    and output projections ``2 * 2H^2``, scores and read ``2 * 2MH`` (the memories' own key and
    value projections are per memory, M << tokens: left out);
  * MLM head at the masked positions (a static share ``mlm_fraction`` of the tokens, 0 when
    fine-tuning): transform ``2H^2`` + logits over the vocabulary ``2HV``.
  Embeddings, LayerNorms, softmaxes and the small QA heads are left out (a few per cent).
  """
  h, f = hidden, intermediate
  layer = 8 * h * h + 4 * h * f + 4 * seq_length * h
  return {"encoder": layers * layer, "memory": 4 * h * h + 4 * memories * h,
          "mlm": mlm_fraction * (2 * h * h + 2 * h * vocab)}


def step_flops(segments: int, seq_length: int, memories: int, mlm_fraction: float,
               hidden: int = PAPER["hidden"], intermediate: int = PAPER["intermediate"],
               layers: int = PAPER["layers"], vocab: int = PAPER["vocab"]) -> float:
  """Training FLOPs of one step on one pack: 3 x forward (the backward pass costs twice the
  forward) x the pack's tokens."""
  parts = forward_flops_per_token(hidden, intermediate, layers, seq_length, memories, vocab,
                                  mlm_fraction)
  return 3.0 * sum(parts.values()) * segments * seq_length


def measure_matmul_flops(n: int = 2048, seconds: float = 5.0) -> float:
  """float32 FLOP/s of a square matmul under TensorFlow on this machine (best of the runs)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  a = tf.random.normal([n, n])
  b = tf.random.normal([n, n])
  mm = tf.function(lambda x, y: tf.matmul(x, y))
  mm(a, b).numpy()
  best, t_end = 0.0, time.perf_counter() + seconds
  while time.perf_counter() < t_end:
    t0 = time.perf_counter()
    mm(a, b).numpy()
    best = max(best, 2 * n ** 3 / (time.perf_counter() - t0))
  return best


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.train_cost",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--steps", type=int, default=1_000_000, help="pre-training steps (packs)")
  ap.add_argument("--segments", type=int, default=128, help="segments per pack (global batch)")
  ap.add_argument("--seq_length", type=int, default=512)
  ap.add_argument("--memories", type=int, default=PAPER["memories"])
  ap.add_argument("--mlm_fraction", type=float, default=0.2,
                  help="masked positions per token (model.data.masking's static cap ceil(0.2 L))")
  ap.add_argument("--finetune_packs", type=str, default="",
                  help="name=packs_per_epoch,... : fine-tuning runs of 6 epochs to price too")
  ap.add_argument("--epochs", type=float, default=6.0)
  ap.add_argument("--utilization", type=float, default=0.4, help="assumed share of peak")
  ap.add_argument("--price_v4_chip_hour", type=float, default=3.22)
  ap.add_argument("--price_v3_8_hour", type=float, default=None)
  ap.add_argument("--measure_cpu", action="store_true")
  ap.add_argument("--cpu_step_s", type=float, default=None)
  ap.add_argument("--cpu_shape", type=str, default="8,512,128")
  args = ap.parse_args()
  if not 0 < args.utilization <= 1:
    ap.error("--utilization must be in (0, 1]")

  pre = step_flops(args.segments, args.seq_length, args.memories, args.mlm_fraction)
  fine = step_flops(args.segments, args.seq_length, args.memories, 0.0)
  runs = {"pretrain": pre * args.steps}
  for item in filter(None, args.finetune_packs.split(",")):
    name, packs = item.split("=")
    runs[f"finetune_{name}"] = fine * float(packs) * args.epochs
  table = {}
  for name, flops in runs.items():
    row = {"flops": flops}
    for chip, peak in PEAK.items():
      row[f"{chip}_chip_hours"] = flops / (peak * args.utilization) / 3600
    row["v3_8_hours"] = row["v3_chip_hours"] / 4
    row["v4_cost_usd"] = row["v4_chip_hours"] * args.price_v4_chip_hour
    if args.price_v3_8_hour is not None:
      row["v3_8_cost_usd"] = row["v3_8_hours"] * args.price_v3_8_hour
    table[name] = row
    print(f"{name}: {flops:.3g} FLOPs; v3-8 {row['v3_8_hours']:,.0f} h; v4 "
          f"{row['v4_chip_hours']:,.0f} chip-h = ${row['v4_cost_usd']:,.0f} at "
          f"{args.utilization:.0%} of peak")
  result = {"metric": "pretrain_v4_chip_hours", "value": round(table["pretrain"]["v4_chip_hours"]),
            "target": None, "unit": "chip-hours", "step_flops_pretrain": pre,
            "step_flops_finetune": fine, "utilization": args.utilization, "runs": table}
  if args.measure_cpu:
    rate = measure_matmul_flops()
    result["cpu_matmul_flops"] = rate
    print(f"this CPU: float32 matmul {rate / 1e9:.1f} GFLOP/s")
    if args.cpu_step_s:
      n, l, m = (int(x) for x in args.cpu_shape.split(","))
      flops = step_flops(n, l, m, 0.0)
      result.update(cpu_step_flops=flops, cpu_step_s=args.cpu_step_s,
                    cpu_utilization=flops / args.cpu_step_s / rate)
      print(f"model_step at {n}x{l}, {m} memories: {flops:.3g} FLOPs in {args.cpu_step_s} s = "
            f"{flops / args.cpu_step_s / 1e9:.1f} GFLOP/s, {result['cpu_utilization']:.0%} of "
            f"the matmul rate")
  print(json.dumps(result))


if __name__ == "__main__":
  main()
