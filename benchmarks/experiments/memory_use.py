"""The paper's memory-use check, scaled down: does reading other segments' memories help
predict masked entity mentions?

Pretrains a tiny ReadTwice(E) and its E(SS) ablation (each segment reads only its own
memories; the same variables, so one seed gives both the same initial weights, batches and
masks) with ``python -m model.pretrain`` (in this process) on the same records -- the generated biographies of
``synthetic.memory_corpus`` plus the real Wikipedia and books samples when present -- and
measures masked-LM accuracy on held-out documents about entities never seen in training, on
masked entity tokens and on all masked tokens (fixed masks, ``--whole_entity`` masking so a
second mention of the same entity in the segment cannot give the name away).  Paired by seed;
prints a table and, last, one JSON line with the E - E(SS) entity-token accuracy gap.

  python -m benchmarks memory_use [--out_dir /tmp/memory_use] [--seeds 3] [--steps 1200]

(~3 minutes per run on 2 cores at the default size; the corpus build is reused when
``--out_dir`` already holds one.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Dict, List, Sequence

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "memory_use", file=sys.stderr)
  sys.exit(2)

from benchmarks.common import CommandFailed, run_main, spread
from model import configs
from schemas import records_dir
from synthetic.memory_corpus import build as memory_corpus

VARIANTS = {"E": "tiny_e", "E(SS)": "tiny_e_ss"}
METRICS = ("mlm_entity_accuracy", "mlm_accuracy", "mlm_other_accuracy", "mlm_entity_loss",
           "memory_noop_rate")


def corpus(out_dir: str, args) -> Dict:
  """The memory corpus under ``out_dir/corpus`` (built once, then reused)."""
  path = os.path.join(out_dir, "corpus")
  summary = os.path.join(path, "corpus.json")
  if os.path.exists(summary):
    with open(summary) as f:
      return json.load(f)
  return memory_corpus.build(path, seed=0, train_docs=args.train_docs,
                             heldout_docs=args.heldout_docs, seq_length=args.seq_length,
                             segments_per_pack=args.segments_per_pack,
                             include_samples=not args.no_samples)


def train_dirs(built: Dict) -> List[str]:
  dirs = [built["splits"]["train"]["output_dir"]]
  for real in (built.get("real") or {}).values():
    if real:
      dirs.append(real["output_dir"])
  return dirs


def model_config_file(out_dir: str, variant: str, manifest: Dict, max_memories: int) -> str:
  """``variant`` fitted to the records of ``manifest`` (vocabulary, seq length)."""
  path = os.path.join(out_dir, f"{variant}.json")
  config = configs.config_from_manifest(manifest, variant, max_memories=max_memories)
  with open(path, "w") as f:
    f.write(config.to_json())
  return path


def pretrain(config_path: str, dirs: Sequence[str], heldout: str, model_dir: str, seed: int,
             args) -> Dict:
  """One ``python -m model.pretrain`` run (its ``main(argv)`` in this process: TensorFlow loads
  once for all runs; the commands and their output go to ``commands.log`` under ``--out_dir``);
  its metrics.json plus the logged curve."""
  cmd = ["-m", "model.pretrain", "--model_dir", model_dir,
         "--model_config", config_path, "--steps", str(args.steps), "--seed", str(seed),
         "--learning_rate", str(args.learning_rate), "--optimizer", args.optimizer,
         "--whole_entity", "--dev_records_dir", heldout,
         "--log_every", str(max(1, args.steps // 6)), "--steps_per_loop", "50",
         "--checkpoint_every", str(args.steps)]
  for d in dirs:
    cmd += ["--records_dir", d]
  t0 = time.perf_counter()
  try:
    out = run_main(cmd, os.path.join(args.out_dir, "commands.log"))
  except CommandFailed as e:
    sys.stderr.write(f"{e}\n")
    raise SystemExit("memory_use: pretraining failed (above)") from None
  lines = [json.loads(x) for x in out if x.startswith("{")]
  summary = lines[-1]
  curve = [(x["step"], round(x["mlm"], 3), round(x["mlm_accuracy"], 4),
            round(x["mlm_entity_accuracy"], 4)) for x in lines if "mlm" in x and "step" in x]
  return {"eval": summary["final_eval"], "curve": curve, "wall": time.perf_counter() - t0,
          "train_segments_per_second": summary["segments_per_second"]}


def _mean_sd(values: Sequence[float]) -> str:
  sd = statistics.stdev(values) if len(values) > 1 else 0.0
  return f"{statistics.mean(values):.4f} ± {sd:.4f}"


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks memory_use",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--out_dir", default="/tmp/readtwice_memory_use")
  p.add_argument("--seeds", type=int, default=3)
  p.add_argument("--steps", type=int, default=1200)
  p.add_argument("--learning_rate", type=float, default=1e-3)
  p.add_argument("--optimizer", default="adamw", choices=["adamw", "lamb"])
  p.add_argument("--max_memories", type=int, default=128,
                 help="entity memories per pack (the corpus has up to ~90 mentions per pack)")
  p.add_argument("--train_docs", type=int, default=600)
  p.add_argument("--heldout_docs", type=int, default=100)
  p.add_argument("--seq_length", type=int, default=128)
  p.add_argument("--segments_per_pack", type=int, default=16)
  p.add_argument("--no_samples", action="store_true", help="generated corpus only")
  args = p.parse_args(argv)
  if args.seeds < 1 or args.steps < 1:
    p.error("--seeds and --steps must be >= 1")
  os.makedirs(args.out_dir, exist_ok=True)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # (TensorFlow loads in the first run)
  built = corpus(args.out_dir, args)
  dirs = train_dirs(built)
  heldout = built["splits"]["heldout"]["output_dir"]
  manifest = records_dir.read_manifest(dirs[0])
  print(f"[memory_use] train records: {dirs}; held-out: {heldout}", flush=True)
  results: Dict[str, List[Dict]] = {name: [] for name in VARIANTS}
  for seed in range(args.seeds):  # interleaved: E then E(SS) for each seed
    for name, preset in VARIANTS.items():
      config = model_config_file(args.out_dir, preset, manifest, args.max_memories)
      run = pretrain(config, dirs, heldout, os.path.join(args.out_dir, f"{preset}-seed{seed}"),
                     seed, args)
      results[name].append(run)
      ev = run["eval"]
      print(f"[memory_use] seed {seed} {name:6s} entity acc {ev['mlm_entity_accuracy']:.4f}  "
            f"all acc {ev['mlm_accuracy']:.4f}  entity loss {ev['mlm_entity_loss']:.3f}  "
            f"no-op {ev['memory_noop_rate']:.3f}  ({run['wall']:.0f} s)", flush=True)

  print(f"\nHeld-out masked-LM, {args.seeds} seeds x {args.steps} steps "
        f"({int(results['E'][0]['eval']['masked_entity_tokens'])} masked entity tokens, "
        f"{int(results['E'][0]['eval']['masked_tokens'])} masked tokens per evaluation)")
  print(f"{'model':8s}" + "".join(f"{m:>24s}" for m in METRICS))
  for name, runs in results.items():
    print(f"{name:8s}" + "".join(f"{_mean_sd([r['eval'][m] for r in runs]):>24s}"
                                 for m in METRICS))
  gaps = [e["eval"]["mlm_entity_accuracy"] - s["eval"]["mlm_entity_accuracy"]
          for e, s in zip(results["E"], results["E(SS)"])]
  all_gaps = [e["eval"]["mlm_accuracy"] - s["eval"]["mlm_accuracy"]
              for e, s in zip(results["E"], results["E(SS)"])]
  print(f"E - E(SS), entity tokens: {spread(gaps, '+.4f')}  (per seed {[round(g, 4) for g in gaps]})")
  print(f"E - E(SS), all tokens:    {spread(all_gaps, '+.4f')}")
  for name, runs in results.items():
    print(f"curve {name} seed 0 (step, mlm loss, acc, entity acc): {runs[0]['curve']}")
  print(json.dumps({
      "metric": "heldout_entity_mlm_accuracy_gap_e_minus_ss", "value": statistics.median(gaps),
      "target": "> 0 (the paper: memories help on entity tokens)", "unit": "accuracy",
      "gaps": gaps, "min": min(gaps), "max": max(gaps),
      "all_token_gaps": all_gaps, "seeds": args.seeds, "steps": args.steps,
      "E": {m: [r["eval"][m] for r in results["E"]] for m in METRICS},
      "E(SS)": {m: [r["eval"][m] for r in results["E(SS)"]] for m in METRICS}}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
