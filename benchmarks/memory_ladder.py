"""The memory ladder: controlled tasks that only cross-segment memory can solve, trained with
the project's own model, losses, optimiser and trainer loop, each model against its ablations.

Rungs (documents made by ``synthetic/ladder_tasks.py``, fresh ones for every training step,
4 candidates, chance 0.25): R0 lookup, R1 lookup-then-read, R2 the bridge book -> author ->
city inside one segment (the control every model must pass), R3 the same bridge across two
segments.  Models: ``E`` (ReadTwice with entity memories), ``E(SS)`` (each segment reads only
its own memories), ``plain`` (no memory, as many transformer layers as E's two reads) and
``E-blocked`` (E's trained weights, other segments' memories blocked at prediction).

For each rung, model and seed it reports dev accuracy (exact span, argmax over the document),
the attention of the token that does the reading (R0/R1: the name token of B's mention of the
marked entity; R2/R3: the asked author's token in its city fact) on the memory of the other
mention of its entity, as a multiple of the uniform share over its document's memories, and
the gradient norm of the memory layers (extraction + attention) against BERT_2's, at
initialisation and after training.  The last line is one JSON object: ``value`` = R3 E accuracy
minus max(E(SS), E-blocked), the minimum over seeds.

  python -m benchmarks.memory_ladder [--rungs R0,R1,R2,R3] [--seeds 3] [--steps 600]
      [--size small] [--parallel 2] [--out results.json]

Defaults run the whole ladder in about 12 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

from synthetic import ladder_tasks

MODELS = ("E", "E(SS)", "plain")
REPORTED = ("E", "E-blocked", "E(SS)", "plain")
CHANCE = 1.0 / ladder_tasks.Geometry().candidates
# Model sizes (the tiny reader: hidden 64; E reads with BERT_1 then BERT_2, plain has both
# reads' layers in one stack).
SIZES = {
    "tiny": dict(hidden_size=64, num_heads=2, intermediate_size=128, num_layers_first=2,
                 num_layers_second=1),
    "small": dict(hidden_size=128, num_heads=4, intermediate_size=256, num_layers_first=2,
                  num_layers_second=2),
    "base4": dict(hidden_size=256, num_heads=4, intermediate_size=1024, num_layers_first=4,
                  num_layers_second=2),
}
# The done-when targets (min over seeds).
TARGETS = {"R0": {"E": 0.9}, "R1": {"E": 0.8}, "R2": {m: 0.8 for m in MODELS},
           "R3": {"E": 0.6}}
AT_CHANCE = {"R0": ("E-blocked",), "R1": ("E-blocked",), "R3": ("E(SS)", "plain", "E-blocked")}
TOLERANCE = 0.05


def model_config(model: str, size: str, geometry, **overrides):
  """The ladder's ModelConfig for ``model`` (E / E(SS) / plain) at ``size``."""
  from model import configs  # pylint: disable=g-import-not-at-top
  kw = dict(SIZES[size])
  kw.update(vocab_size=ladder_tasks.VOCAB_SIZE, max_seq_length=geometry.seq_length,
            dropout=0.0, max_segment_distance=2, layer_norm_epsilon=1e-6)
  if model == "plain":
    kw.update(num_layers_first=kw["num_layers_first"] + kw["num_layers_second"])
    kw.update(overrides)
    return configs.preset("tiny_roberta", **kw)
  kw.update(max_memories=geometry.max_mentions)
  kw.update(overrides)
  return configs.preset("tiny_e_ss" if model == "E(SS)" else "tiny_e", **kw)


# ---------------------------------------------------------------------------------------------
# One run (in a worker process: TensorFlow is imported there)


def _grad_ratio(model, task, pack) -> Optional[float]:
  """||grad of the memory layers|| / ||grad of BERT_2|| on one pack (None without memory)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not model.config.use_memory:
    return None
  groups = {"memory": model.extract_memories.trainable_variables
                      + model.memory_attention.trainable_variables,
            "bert_2": model.second_read.trainable_variables}
  variables = groups["memory"] + groups["bert_2"]
  with tf.GradientTape() as tape:
    outputs = model(pack, training=True)
    losses, _ = task.step_metrics(outputs, pack)
  grads = tape.gradient(losses["total"], variables)
  k = len(groups["memory"])
  norm = [tf.linalg.global_norm([g for g in gs if g is not None]).numpy()
          for gs in (grads[:k], grads[k:])]
  return float(norm[0] / max(norm[1], 1e-30))


def _evaluate(model, packs, meta, probe: bool) -> Dict[str, float]:
  """Exact-span accuracy over the dev documents, and the reader's attention on the matching
  memory as a multiple of the uniform share (``probe``)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model import readtwice  # pylint: disable=g-import-not-at-top
  forward = tf.function(lambda f: model(f, training=False))
  attention = tf.function(model.memory_attention_probe) if probe else None
  correct, ratios = [], []
  num_packs = packs["token_ids"].shape[0]
  for p in range(num_packs):
    pack = {k: tf.constant(v[p]) for k, v in packs.items()}
    out = forward(readtwice.model_inputs(pack))
    begin, end = out["begin_logits"].numpy(), out["end_logits"].numpy()
    docs = packs["document_index"][p]
    for d in range(meta["answer_segment"].shape[1]):
      rows = np.flatnonzero(docs == d)
      b = begin[rows].reshape(-1).argmax()
      e = end[rows].reshape(-1).argmax()
      l = begin.shape[1]
      gold_row = int(np.flatnonzero(rows == meta["answer_segment"][p, d])[0])
      correct.append(b == gold_row * l + meta["answer_begin"][p, d]
                     and e == gold_row * l + meta["answer_end"][p, d])
    if attention is not None:
      ratios += _reader_ratios(attention(readtwice.model_inputs(pack)), pack, meta, p)
  result = {"accuracy": float(np.mean(correct))}
  if ratios:
    result["reader_attention"] = float(np.median(ratios))
  return result


def _reader_ratios(probe, pack, meta, p) -> List[float]:
  """Per document: the reader token's attention on the memory of the other mention of its
  entity, divided by the uniform share (1 / its document's memories), over the memories only
  (the no-op's weight left out)."""
  att = probe["memories"].numpy()  # [N, L, C]
  index = probe["memory_index"].numpy()  # [N, C]
  entity = probe["entity_id"].numpy()
  document = probe["document"].numpy()
  mask = probe["mask"].numpy()
  seg, begin, end = (pack[f"mentions_{k}"].numpy() for k in ("segment", "begin", "end"))
  out = []
  for d in range(meta["reader_segment"].shape[1]):
    row, pos = int(meta["reader_segment"][p, d]), int(meta["reader_position"][p, d])
    target = int(meta["reader_entity"][p, d])
    weights = att[row, pos]
    mems = index[row]
    allowed = (document[mems] == d) & (mask[mems] > 0)
    own = (seg[mems] == row) & (begin[mems] <= pos) & (end[mems] >= pos)
    match = allowed & (entity[mems] == target) & ~own
    total = weights[allowed].sum()
    if total <= 0 or not match.any():
      continue
    out.append(float(weights[match].sum() / total * allowed.sum()))
  return out


def run_one(job: Dict) -> Dict:
  """Trains one (rung, model, seed) with ``model.trainer.Trainer`` and scores it (and, for
  E, the same weights with other segments' memories blocked)."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model import configs, objectives, readtwice, trainer, training_data  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  g = ladder_tasks.Geometry()
  rung, name, seed, steps = job["rung"], job["model"], job["seed"], job["steps"]
  mc = model_config(name, job["size"], g, **job.get("overrides", {}))
  tc = configs.TrainConfig(learning_rate=job["learning_rate"], steps=steps, optimizer="adamw",
                           warmup_steps=steps // 10, seed=seed, checkpoint_every=steps,
                           end_learning_rate_fraction=job.get("end_lr_fraction", 0.0),
                           log_every=job["log_every"], steps_per_loop=job["log_every"],
                           max_checkpoints=1, shuffle=False)
  # Fresh documents every step: as many training packs as steps (seeded apart from dev).
  train, _ = ladder_tasks.make_packs(rung, steps, seed=1000 + seed, g=g)
  dev, dev_meta = ladder_tasks.make_packs(rung, job["dev_packs"], seed=10_000 + seed, g=g)
  source = training_data.GeneratedPacks(train, g.seq_length, g.segments_per_pack,
                                  ladder_tasks.VOCAB_SIZE)
  task = objectives.FinetuneTask(mc, coref_weight=job.get("coref_weight", 0.0))
  first = {k: tf.constant(v[0]) for k, v in train.items()}
  keras.utils.set_random_seed(seed)  # what the trainer does before it builds the model
  initial = readtwice.build_model(mc, g.seq_length, g.segments_per_pack)
  grad_init = _grad_ratio(initial, task, first)
  del initial
  losses = []
  with tempfile.TemporaryDirectory() as model_dir:
    run = trainer.Trainer(task, source, model_dir, mc, tc,
                          log_fn=lambda m: losses.append(round(m["loss"], 4)) if "loss" in m
                          else None)
    summary = run.run()
    model = run.model
  result = {"rung": rung, "model": name, "seed": seed, "steps": steps,
            "first_loss": summary["first_loss"], "last_loss": summary["last_loss"],
            "losses": losses, "train_seconds": summary["seconds"]}
  result.update(_evaluate(model, dev, dev_meta, probe=mc.use_memory))
  result["grad_ratio_init"] = grad_init
  result["grad_ratio_end"] = _grad_ratio(model, task, first)
  results = [result]
  if name == "E":  # the same weights, other segments' memories blocked
    blocked_cfg = dataclasses.replace(mc, same_segment_only=True)
    blocked = readtwice.build_model(blocked_cfg, g.seq_length, g.segments_per_pack)
    blocked.set_weights(model.get_weights())
    b = {"rung": rung, "model": "E-blocked", "seed": seed, "steps": steps}
    b.update(_evaluate(blocked, dev, dev_meta, probe=False))
    results.append(b)
  for r in results:
    r["seconds"] = round(time.perf_counter() - t0, 1)
  return {"results": results}


def _init_worker(threads: int):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(values: Sequence[float], fmt: str = ".3f") -> str:
  if not values:
    return "-"
  return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def summarise(results: List[Dict], rungs: Sequence[str]) -> Dict:
  """Per rung and model: accuracies and probes (min/median/max over seeds) and the checks."""
  table, checks = {}, []
  for rung in rungs:
    table[rung] = {}
    for model in REPORTED:
      rows = [r for r in results if r["rung"] == rung and r["model"] == model]
      if not rows:
        continue
      entry = {"accuracy": [r["accuracy"] for r in rows]}
      for key in ("reader_attention", "grad_ratio_init", "grad_ratio_end"):
        vals = [r[key] for r in rows if r.get(key) is not None]
        if vals:
          entry[key] = vals
      table[rung][model] = entry
    for model, target in TARGETS.get(rung, {}).items():
      if model in table[rung]:
        low = min(table[rung][model]["accuracy"])
        checks.append({"rung": rung, "model": model, "check": f">= {target}", "min": low,
                       "pass": low >= target})
    for model in AT_CHANCE.get(rung, ()):
      if model in table[rung]:
        accs = table[rung][model]["accuracy"]
        ok = all(abs(a - CHANCE) <= TOLERANCE for a in accs)
        checks.append({"rung": rung, "model": model, "check": f"chance +- {TOLERANCE}",
                       "min": min(accs), "max": max(accs), "pass": ok})
  return {"table": table, "checks": checks}


def print_report(summary: Dict) -> None:
  print(f"\ndev accuracy (exact span), min/median/max over seeds; chance {CHANCE:.2f}")
  print("reader attn: the reading token's attention on the matching memory / uniform share")
  print("grad ratio: ||grad memory layers|| / ||grad BERT_2||, at init -> after training\n")
  print(f"{'rung':<4} {'model':<10} {'accuracy':<20} {'reader attn':<20} grad ratio")
  for rung, models in summary["table"].items():
    for model, e in models.items():
      grads = ""
      if "grad_ratio_init" in e:
        grads = f"{_fmt(e['grad_ratio_init'], '.2g')} -> {_fmt(e['grad_ratio_end'], '.2g')}"
      print(f"{rung:<4} {model:<10} {_fmt(e['accuracy']):<20} "
            f"{_fmt(e.get('reader_attention', []), '.2f'):<20} {grads}")
  print()
  for c in summary["checks"]:
    span = f"min {c['min']:.3f}" + (f" max {c['max']:.3f}" if "max" in c else "")
    print(f"{'PASS' if c['pass'] else 'FAIL'}  {c['rung']} {c['model']:<10} {c['check']:<14} "
          f"{span}")


def headline(summary: Dict) -> Dict:
  """R3: min over seeds of E - max(E(SS), E-blocked), paired by seed."""
  t = summary["table"].get("R3", {})
  if not all(m in t for m in ("E", "E(SS)", "E-blocked")):
    return {"metric": "memory_ladder_r3_gap", "value": None, "target": 0.35,
            "unit": "accuracy", "note": "R3 not run"}
  gaps = [e - max(s, b) for e, s, b in zip(t["E"]["accuracy"], t["E(SS)"]["accuracy"],
                                           t["E-blocked"]["accuracy"])]
  checks = summary["checks"]
  return {"metric": "memory_ladder_r3_gap", "value": round(min(gaps), 4),
          "spread": [round(min(gaps), 4), round(statistics.median(gaps), 4),
                     round(max(gaps), 4)],
          "target": 0.35, "unit": "accuracy (R3 E - max(E(SS), E-blocked), min over seeds)",
          "checks_passed": sum(c["pass"] for c in checks), "checks": len(checks)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--rungs", default=",".join(ladder_tasks.RUNGS))
  ap.add_argument("--models", default=",".join(MODELS))
  ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per rung and model")
  ap.add_argument("--steps", type=int, default=None,
                  help="training steps (packs of 8 documents) per run (default: per rung)")
  ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
  ap.add_argument("--learning_rate", type=float, default=1e-3)
  ap.add_argument("--end_lr_fraction", type=float, default=0.0,
                  help="learning rate at the last step as a fraction of the peak (linear decay "
                       "after a 10%% warm-up)")
  ap.add_argument("--dev_packs", type=int, default=50, help="dev packs (8 documents each)")
  ap.add_argument("--log_every", type=int, default=50)
  ap.add_argument("--coref_weight", type=float, default=0.0)
  ap.add_argument("--override", action="append", default=[],
                  help="ModelConfig field=JSON value for E and E(SS), e.g. "
                       "memory_application='\"all\"' (repeatable)")
  ap.add_argument("--parallel", type=int, default=2, help="runs at once (one process each)")
  ap.add_argument("--threads", type=int, default=None,
                  help="TensorFlow threads per run (default: cores / parallel)")
  ap.add_argument("--out", default=None, help="write every run's results here (JSON)")
  args = ap.parse_args(argv)
  rungs = [r.strip() for r in args.rungs.split(",") if r.strip()]
  bad = [r for r in rungs if r not in ladder_tasks.RUNGS]
  if bad:
    ap.error(f"unknown rung(s) {bad}; choose from {list(ladder_tasks.RUNGS)}")
  models = [m.strip() for m in args.models.split(",") if m.strip()]
  bad = [m for m in models if m not in MODELS]
  if bad:
    ap.error(f"unknown model(s) {bad}; choose from {list(MODELS)}")
  if args.seeds < 1 or (args.steps is not None and args.steps < 1) or args.parallel < 1:
    ap.error("--seeds, --steps and --parallel must be >= 1")
  overrides = {}
  for item in args.override:
    key, _, value = item.partition("=")
    try:
      overrides[key] = json.loads(value)
    except json.JSONDecodeError:
      ap.error(f"--override {item!r}: the value must be JSON")
  try:  # a typo in a field is a usage error now, not a failure in every worker
    for m in models:
      model_config(m, args.size, ladder_tasks.Geometry(),
                   **(overrides if m != "plain" else {}))
  except (TypeError, ValueError) as e:
    ap.error(str(e))
  steps = {"R0": 400, "R1": 400, "R2": 600, "R3": 600}
  jobs = [dict(rung=r, model=m, seed=s, steps=args.steps or steps[r], size=args.size,
               learning_rate=args.learning_rate, dev_packs=args.dev_packs,
               log_every=args.log_every, coref_weight=args.coref_weight,
               end_lr_fraction=args.end_lr_fraction,
               overrides=overrides if m != "plain" else {})
          for r in rungs for s in range(args.seeds) for m in models]
  threads = args.threads or max(1, (os.cpu_count() or 2) // args.parallel)
  print(f"{len(jobs)} runs ({', '.join(rungs)} x {', '.join(models)} x {args.seeds} seeds), "
        f"{args.parallel} at once, {threads} thread(s) each", flush=True)
  t0 = time.perf_counter()
  results = []
  ctx = multiprocessing.get_context("spawn")
  with ctx.Pool(args.parallel, initializer=_init_worker, initargs=(threads,),
                maxtasksperchild=None) as pool:
    for out in pool.imap_unordered(run_one, jobs):
      for r in out["results"]:
        results.append(r)
        probe = (f"  reader attn {r['reader_attention']:.2f}x"
                 if r.get("reader_attention") is not None else "")
        print(f"[{time.perf_counter() - t0:6.0f}s] {r['rung']} {r['model']:<9} seed {r['seed']}"
              f"  acc {r['accuracy']:.3f}{probe}"
              + (f"  loss {r['first_loss']:.3f} -> {r['last_loss']:.3f}"
                 if "first_loss" in r else ""), flush=True)
  summary = summarise(results, rungs)
  print_report(summary)
  print(f"\nwall {time.perf_counter() - t0:.0f} s")
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"args": vars(args), "results": results, "summary": summary}, f, indent=1)
  print(json.dumps(headline(summary)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
