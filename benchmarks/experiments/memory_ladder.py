"""The memory ladder: controlled tasks that only cross-segment memory can solve, trained with
the project's own model, losses, optimiser and trainer loop, each model against its ablations,
from scratch and -- the paper's recipe -- from pre-trained readers.

Rungs (documents made by ``synthetic/ladder_tasks.py``, fresh ones for every training step,
4 candidates, chance 0.25): R0 lookup, R1 lookup-then-read, R2 the bridge book -> author ->
city inside one segment (the control every model must pass), R3 the same bridge across two
segments.  Models: ``E`` (ReadTwice with entity memories), ``E(SS)`` (each segment reads only
its own memories), ``plain`` (no memory, as many transformer layers as E's two reads) and
``E-blocked`` (E's trained weights, other segments' memories blocked at prediction).

Inits: ``scratch`` (random weights) and ``pretrained``: each model first pre-trains on the
ladder world's corpus (``ladder_tasks.make_pretrain_packs``: facts stated twice, in one
segment or across two, none of them in the seed's dev documents) with the paper's objective
-- masked LM, 15% whole-word spans + 25% of the entity mentions, plus the coreference loss on
entity memories for E and E(SS) -- then fine-tunes every rung from that checkpoint.  Every
model gets the same pre-training data and steps; E-blocked uses E's weights.  Pre-trained
checkpoints are cached under ``--cache_dir`` by (model config, seed, steps, corpus), so rungs
and later runs reuse them.

For each rung, init, model and seed it reports dev accuracy (exact span, argmax over the
document), the attention of the token that does the reading (R0/R1: the name token of B's
mention of the marked entity; R2/R3: the asked author's token in its city fact) on the memory
of the other mention of its entity, as a multiple of the uniform share over its document's
memories, and the gradient norm of the memory layers (extraction + attention) against
BERT_2's, at initialisation and after training.  The last line is one JSON object: ``value``
= R3 E accuracy minus max(E(SS), E-blocked), the minimum over seeds (pre-trained readers when
they are run).

  python -m benchmarks memory_ladder [--rungs R0,R1,R2,R3] [--seeds 3] [--r0_seeds 8]
      [--inits scratch,pretrained] [--pretrain_steps N] [--quick] [--out results.json]

Defaults (24 pre-trainings of 2,000 steps, then 102 fine-tunings) take ~29 minutes on 2 quiet
cores (pre-training ~11 of them; cached checkpoints skip it); ``--quick`` ~2 minutes.

Why this module is over 500 lines: one experiment; its pre-training, fine-tuning, evaluation
and report share the world geometry, the seeds and the cache keys of a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence

from schemas import cli
from synthetic import ladder_tasks

MODELS = ("E", "E(SS)", "plain")
REPORTED = ("E", "E-blocked", "E(SS)", "plain")
INITS = ("scratch", "pretrained")
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
# The done-when targets (min over seeds; R0's over at least LEARN_SHARE of its seeds).
TARGETS = {"R0": {"E": 0.9}, "R1": {"E": 0.8}, "R2": {m: 0.8 for m in MODELS},
           "R3": {"E": 0.6}}
LEARN_SHARE = {"R0": 7 / 8}
# Models that must not answer through other segments' memories: a check fails when one is
# ABOVE chance + TOLERANCE (below chance is reported, not a leak).
AT_CHANCE = {"R0": ("E-blocked",), "R1": ("E-blocked",), "R3": ("E(SS)", "plain", "E-blocked")}
TOLERANCE = 0.05
STEPS = {"R0": 400, "R1": 400, "R2": 600, "R3": 600}
PRETRAIN_STEPS = 2000
DEV_SEED, TRAIN_SEED, PRETRAIN_SEED, PRETRAIN_HELDOUT_SEED = 10_000, 1000, 20_000, 30_000
# What the pre-training corpus is; a change of generator bumps it (and so the cache key).
CORPUS_VERSION = 1
# --quick: the lookup rung for ReadTwice(E) (and E-blocked) on 2 seeds, from scratch and
# pre-trained (~2 minutes on 2 cores; the slow test suite runs it).
# Its pre-trained readers are the full ladder's (same cache keys).
QUICK = dict(rungs="R0", models="E", r0_seeds=2)


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


def masking_config():
  """The paper's masked LM in the ladder's vocabulary: 25% of the entity mentions, 15% of the
  other context tokens in whole-word spans (every ladder token is a word)."""
  from model.data import masking  # pylint: disable=g-import-not-at-top
  return masking.MaskingConfig(mask_token_id=ladder_tasks.MASK,
                               vocab_size=ladder_tasks.VOCAB_SIZE, mention_rate=0.25,
                               token_rate=0.15)


def excluded_facts(seed: int, dev_packs: int) -> frozenset:
  """The facts of every rung's dev documents for ``seed`` (kept out of pre-training)."""
  g = ladder_tasks.Geometry()
  facts = set()
  for rung in ladder_tasks.RUNGS:
    facts |= ladder_tasks.facts_in(ladder_tasks.make_packs(rung, dev_packs, DEV_SEED + seed,
                                                           g)[0])
  return frozenset(facts)


def pretrain_key(mc, seed: int, steps: int, learning_rate: float, dev_packs: int) -> str:
  """The cache key of a pre-trained checkpoint: what it was trained from."""
  what = {"config": mc.to_dict(), "seed": seed, "steps": steps,
          "learning_rate": learning_rate, "dev_packs": dev_packs, "corpus": CORPUS_VERSION,
          "geometry": dataclasses.asdict(ladder_tasks.Geometry()),
          "masking": dataclasses.asdict(masking_config())}
  digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
  return f"{'plain' if not mc.use_memory else 'e_ss' if mc.same_segment_only else 'e'}" \
         f"-seed{seed}-{steps}steps-{digest}"


def _train_config(seed: int, steps: int, learning_rate: float, log_every: int,
                  end_lr_fraction: float = 0.0):
  from model import configs  # pylint: disable=g-import-not-at-top
  return configs.TrainConfig(learning_rate=learning_rate, steps=steps, optimizer="adamw",
                             warmup_steps=steps // 10, seed=seed, checkpoint_every=steps,
                             end_learning_rate_fraction=end_lr_fraction,
                             log_every=min(log_every, steps), steps_per_loop=min(log_every, steps),
                             max_checkpoints=1, shuffle=False)


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
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  forward = tf.function(lambda f: model(f, training=False), autograph=False)
  attention = tf.function(model.memory_attention_probe, autograph=False) if probe else None
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


def _mlm_accuracy(model, task, packs, seed: int) -> Dict[str, float]:
  """Masked-LM accuracy (all masked tokens, and those of masked entity mentions) on held-out
  pre-training packs, masked with ``seed``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.training import losses as losses_lib  # pylint: disable=g-import-not-at-top
  ds = task.prepare(tf.data.Dataset.from_tensor_slices(dict(packs)), seed)
  forward = tf.function(lambda f: model(f, training=False), autograph=False)
  sums = {}
  for features in ds:
    out = forward(features)
    part = losses_lib.mlm_token_sums(out["mlm_logits"], features["masked_ids"],
                                     features["masked_weights"], features["masked_is_entity"],
                                     out.get("mlm_index"))
    for k in ("weight", "correct", "entity_weight", "entity_correct"):
      sums[k] = sums.get(k, 0.0) + float(part[k])
  return {"mlm_accuracy": sums["correct"] / max(sums["weight"], 1.0),
          "mlm_entity_accuracy": sums["entity_correct"] / max(sums["entity_weight"], 1.0)}


def pretrain_one(job: Dict) -> Dict:
  """Pre-trains ``job["model"]`` for ``job["seed"]`` into ``job["cache_dir"]`` (or finds it
  there): masked LM (+ coreference for entity memories) on the ladder world's corpus.
  Returns the checkpoint and its held-out masked-LM accuracy."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.data import training_data  # pylint: disable=g-import-not-at-top
  from model.training import objectives, trainer  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  g = ladder_tasks.Geometry()
  name, seed, steps = job["model"], job["seed"], job["steps"]
  mc = model_config(name, job["size"], g, **job.get("overrides", {}))
  key = pretrain_key(mc, seed, steps, job["learning_rate"], job["dev_packs"])
  model_dir = os.path.join(job["cache_dir"], key)
  done = os.path.join(model_dir, "pretrain.json")
  if os.path.exists(done):
    with open(done) as f:
      return dict(json.load(f), cached=True, seconds=round(time.perf_counter() - t0, 1))
  if os.path.exists(model_dir):  # an interrupted run: start again
    shutil.rmtree(model_dir)
  exclude = excluded_facts(seed, job["dev_packs"])
  train = ladder_tasks.make_pretrain_packs(steps, PRETRAIN_SEED + seed, g, exclude)
  heldout = ladder_tasks.make_pretrain_packs(job.get("heldout_packs", 20),
                                             PRETRAIN_HELDOUT_SEED + seed, g, exclude)
  source = training_data.GeneratedPacks(train, g.seq_length, g.segments_per_pack,
                                        ladder_tasks.VOCAB_SIZE)
  task = objectives.PretrainObjective(mc, masking_config())  # coreference: entity memories only
  tc = _train_config(seed, steps, job["learning_rate"], job["log_every"])
  losses = []
  # The dense MLM head: the ladder's figures (docs/benchmarks.md) were measured with it, the
  # sparse one sums in another order (the same losses to ~1e-7, but 2,000 steps can carry
  # that), and with a 64-word vocabulary it saves nothing.
  run = trainer.Trainer(task, source, model_dir, mc, tc,
                        log_fn=lambda m: losses.append(round(m["loss"], 4)) if "loss" in m
                        else None, sparse_mlm=False)
  summary = run.run()
  result = {"model": name, "seed": seed, "steps": steps, "key": key,
            "checkpoint": tf.train.latest_checkpoint(model_dir),
            "first_loss": summary["first_loss"], "last_loss": summary["last_loss"],
            "losses": losses, "train_seconds": summary["seconds"]}
  result.update(_mlm_accuracy(run.model, task, heldout, seed=PRETRAIN_HELDOUT_SEED + seed))
  result["checkpoint"] = os.path.relpath(result["checkpoint"], model_dir)
  with open(done + ".tmp", "w") as f:
    json.dump(result, f, indent=1)
  os.replace(done + ".tmp", done)
  return dict(result, cached=False, seconds=round(time.perf_counter() - t0, 1))


def _restore_fn(checkpoint: str):
  """``init_fn`` for the trainer: the model's weights from a pre-training checkpoint (its
  optimizer state and step are left behind)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def restore(model):
    status = tf.train.Checkpoint(model=model).read(checkpoint)
    status.assert_existing_objects_matched().expect_partial()
  return restore


def run_one(job: Dict) -> Dict:
  """Trains one (rung, model, seed, init) with ``model.training.trainer.Trainer`` and scores it
  (and, for E, the same weights with other segments' memories blocked).  ``job["init_from"]``: a
  pre-trained checkpoint to start from (init ``pretrained``)."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.data import training_data  # pylint: disable=g-import-not-at-top
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  from model.training import objectives, trainer  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  g = ladder_tasks.Geometry()
  rung, name, seed, steps = job["rung"], job["model"], job["seed"], job["steps"]
  init = job.get("init", "scratch")
  mc = model_config(name, job["size"], g, **job.get("overrides", {}))
  tc = _train_config(seed, steps, job["learning_rate"], job["log_every"],
                     job.get("end_lr_fraction", 0.0))
  # Fresh documents every step: as many training packs as steps (seeded apart from dev).
  train, _ = ladder_tasks.make_packs(rung, steps, seed=TRAIN_SEED + seed, g=g)
  dev, dev_meta = ladder_tasks.make_packs(rung, job["dev_packs"], seed=DEV_SEED + seed, g=g)
  source = training_data.GeneratedPacks(train, g.seq_length, g.segments_per_pack,
                                        ladder_tasks.VOCAB_SIZE)
  task = objectives.FinetuneObjective(mc, coref_weight=job.get("coref_weight", 0.0))
  first = {k: tf.constant(v[0]) for k, v in train.items()}
  init_fn = _restore_fn(job["init_from"]) if job.get("init_from") else None
  keras.utils.set_random_seed(seed)  # what the trainer does before it builds the model
  initial = readtwice.build_model(mc, g.seq_length, g.segments_per_pack)
  if init_fn is not None:
    init_fn(initial)
  grad_init = _grad_ratio(initial, task, first)
  del initial
  losses = []
  with tempfile.TemporaryDirectory() as model_dir:
    run = trainer.Trainer(task, source, os.path.join(model_dir, "m"), mc, tc, init_fn=init_fn,
                          log_fn=lambda m: losses.append(round(m["loss"], 4)) if "loss" in m
                          else None)
    summary = run.run()
    model = run.model
  result = {"rung": rung, "model": name, "seed": seed, "steps": steps, "init": init,
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
    b = {"rung": rung, "model": "E-blocked", "seed": seed, "steps": steps, "init": init}
    b.update(_evaluate(blocked, dev, dev_meta, probe=False))
    results.append(b)
  for r in results:
    r["seconds"] = round(time.perf_counter() - t0, 1)
  return {"results": results}


def _init_worker(threads: int):
  cli.quiet_tensorflow_banners()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(values: Sequence[float], fmt: str = ".3f") -> str:
  if not values:
    return "-"
  return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def summarise(results: List[Dict], rungs: Sequence[str],
              inits: Sequence[str] = ("scratch",)) -> Dict:
  """Per rung, init and model (``table[rung][init][model]``): accuracies and probes
  (min/median/max over seeds), the share of seeds at the rung's target, and the checks."""
  table, checks = {}, []
  for rung in rungs:
    table[rung] = {}
    for init in inits:
      models = table[rung][init] = {}
      for model in REPORTED:
        rows = [r for r in results if r["rung"] == rung and r["model"] == model
                and r.get("init", "scratch") == init]
        if not rows:
          continue
        entry = {"accuracy": [r["accuracy"] for r in rows]}
        target = TARGETS.get(rung, {}).get(model)
        if target is not None:
          entry["learned"] = [sum(a >= target for a in entry["accuracy"]), len(rows)]
        for key in ("reader_attention", "grad_ratio_init", "grad_ratio_end"):
          vals = [r[key] for r in rows if r.get(key) is not None]
          if vals:
            entry[key] = vals
        models[model] = entry
      for model, target in TARGETS.get(rung, {}).items():
        if model not in models:
          continue
        accs = models[model]["accuracy"]
        share = LEARN_SHARE.get(rung)
        if share is not None:  # at least `share` of the seeds reach the target
          need = math.ceil(share * len(accs))
          ok = models[model]["learned"][0] >= need
          check = f">= {target} on {need}/{len(accs)}"
        else:
          ok, check = min(accs) >= target, f">= {target}"
        checks.append({"rung": rung, "init": init, "model": model, "check": check,
                       "min": min(accs), "pass": bool(ok)})
      for model in AT_CHANCE.get(rung, ()):
        if model not in models:
          continue
        accs = models[model]["accuracy"]
        checks.append({"rung": rung, "init": init, "model": model,
                       "check": f"<= chance + {TOLERANCE}", "min": min(accs), "max": max(accs),
                       "below_chance": sum(a < CHANCE - TOLERANCE for a in accs),
                       "pass": max(accs) <= CHANCE + TOLERANCE})
  return {"table": table, "checks": checks}


def print_report(summary: Dict, pretrained: Sequence[Dict] = ()) -> None:
  if pretrained:
    print("\npre-training (held-out masked LM accuracy, all tokens / entity tokens), "
          "min/median/max over seeds")
    for model in MODELS:
      rows = [r for r in pretrained if r["model"] == model]
      if rows:
        print(f"  {model:<6} {_fmt([r['mlm_accuracy'] for r in rows]):<20} "
              f"{_fmt([r['mlm_entity_accuracy'] for r in rows])}")
    by = {(r["model"], r["seed"]): r["mlm_entity_accuracy"] for r in pretrained}
    gaps = [by[("E", s)] - by[("E(SS)", s)] for (m, s) in sorted(by) if m == "E"
            and ("E(SS)", s) in by]
    if gaps:  # the paper's memory-use analysis, in the ladder's world
      print(f"  E - E(SS), entity tokens: {_fmt(gaps, '+.3f')} "
            f"({sum(g > 0 for g in gaps)}/{len(gaps)} seeds > 0)")
  print(f"\ndev accuracy (exact span), min/median/max over seeds; chance {CHANCE:.2f}; "
        "learned: seeds at the rung's target")
  print("reader attn: the reading token's attention on the matching memory / uniform share")
  print("grad ratio: ||grad memory layers|| / ||grad BERT_2||, at init -> after training\n")
  print(f"{'rung':<4} {'init':<10} {'model':<10} {'accuracy':<20} {'learned':<8} "
        f"{'reader attn':<17} grad ratio")
  for rung, by_init in summary["table"].items():
    for init, models in by_init.items():
      for model, e in models.items():
        grads = ""
        if "grad_ratio_init" in e:
          grads = f"{_fmt(e['grad_ratio_init'], '.2g')} -> {_fmt(e['grad_ratio_end'], '.2g')}"
        learned = f"{e['learned'][0]}/{e['learned'][1]}" if "learned" in e else "-"
        print(f"{rung:<4} {init:<10} {model:<10} {_fmt(e['accuracy']):<20} {learned:<8} "
              f"{_fmt(e.get('reader_attention', []), '.2f'):<17} {grads}")
  print()
  for c in summary["checks"]:
    span = f"min {c['min']:.3f}" + (f" max {c['max']:.3f}" if "max" in c else "")
    if c.get("below_chance"):
      span += f" ({c['below_chance']} seed(s) below chance - {TOLERANCE}: no memory used)"
    print(f"{'PASS' if c['pass'] else 'FAIL'}  {c['rung']} {c['init']:<10} {c['model']:<10} "
          f"{c['check']:<18} {span}")


def headline(summary: Dict, init: str = "scratch") -> Dict:
  """R3 (``init``): min over seeds of E - max(E(SS), E-blocked), paired by seed."""
  t = summary["table"].get("R3", {}).get(init, {})
  if not all(m in t for m in ("E", "E(SS)", "E-blocked")):
    return {"metric": "memory_ladder_r3_gap", "value": None, "target": 0.35,
            "unit": "accuracy", "note": "R3 not run"}
  gaps = [e - max(s, b) for e, s, b in zip(t["E"]["accuracy"], t["E(SS)"]["accuracy"],
                                           t["E-blocked"]["accuracy"])]
  checks = summary["checks"]
  return {"metric": "memory_ladder_r3_gap", "value": round(min(gaps), 4),
          "spread": [round(min(gaps), 4), round(statistics.median(gaps), 4),
                     round(max(gaps), 4)],
          "target": 0.35, "init": init,
          "unit": "accuracy (R3 E - max(E(SS), E-blocked), min over seeds)",
          "checks_passed": sum(c["pass"] for c in checks), "checks": len(checks)}


def default_cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "readtwice", "memory_ladder")


def _parse(argv):
  ap = argparse.ArgumentParser(prog="python -m benchmarks memory_ladder",
                               description=__doc__.split("\n\n")[0], allow_abbrev=False)
  ap.add_argument("--rungs", default=",".join(ladder_tasks.RUNGS))
  ap.add_argument("--models", default=",".join(MODELS))
  ap.add_argument("--inits", default=",".join(INITS),
                  help="scratch (random weights), pretrained (the ladder's pre-training first)")
  ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per rung and model")
  ap.add_argument("--r0_seeds", type=int, default=8, help="seeds for R0 (the cheapest rung)")
  ap.add_argument("--steps", type=int, default=None,
                  help="fine-tuning steps (packs of 8 documents) per run (default: per rung: "
                       + ", ".join(f"{k} {v}" for k, v in STEPS.items()) + ")")
  ap.add_argument("--pretrain_steps", type=int, default=PRETRAIN_STEPS)
  ap.add_argument("--pretrain_learning_rate", type=float, default=1e-3)
  ap.add_argument("--cache_dir", default=None,
                  help="pre-trained checkpoints (default: $XDG_CACHE_HOME or ~/.cache, "
                       "readtwice/memory_ladder)")
  ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
  ap.add_argument("--learning_rate", type=float, default=1e-3)
  ap.add_argument("--end_lr_fraction", type=float, default=0.0,
                  help="learning rate at the last step as a fraction of the peak (linear decay "
                       "after a 10%% warm-up)")
  ap.add_argument("--dev_packs", type=int, default=50, help="dev packs (8 documents each)")
  ap.add_argument("--log_every", type=int, default=50)
  ap.add_argument("--coref_weight", type=float, default=0.0,
                  help="coreference loss weight in fine-tuning (pre-training always uses it)")
  ap.add_argument("--override", action="append", default=[],
                  help="ModelConfig field=JSON value for every model, e.g. "
                       "initializer_range=0.05 (repeatable)")
  ap.add_argument("--quick", action="store_true",
                  help="a ~2-minute smoke run: " + ", ".join(f"--{k} {v}"
                                                             for k, v in QUICK.items())
                       + " (flags given explicitly win)")
  ap.add_argument("--parallel", type=int, default=2, help="runs at once (one process each)")
  ap.add_argument("--threads", type=int, default=None,
                  help="TensorFlow threads per run (default: cores / parallel)")
  ap.add_argument("--out", default=None, help="write every run's results here (JSON)")
  if ap.parse_known_args(argv)[0].quick:
    ap.set_defaults(**QUICK)  # what --quick changes; flags given explicitly still win
  args = ap.parse_args(argv)

  def listed(value, allowed, what):
    items = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
      ap.error(f"--{what}: unknown {bad or 'empty list'}; choose from {list(allowed)}")
    return items

  args.rungs = listed(args.rungs, ladder_tasks.RUNGS, "rungs")
  args.models = listed(args.models, MODELS, "models")
  args.inits = listed(args.inits, INITS, "inits")
  for name in ("seeds", "r0_seeds", "pretrain_steps", "parallel", "dev_packs", "log_every"):
    if getattr(args, name) < 1:
      ap.error(f"--{name} must be >= 1")
  if args.steps is not None and args.steps < 1:
    ap.error("--steps must be >= 1")
  overrides = {}
  for item in args.override:
    key, sep, value = item.partition("=")
    if not sep:
      ap.error(f"--override {item!r}: expected field=JSON value")
    try:
      overrides[key] = json.loads(value)
    except json.JSONDecodeError:
      ap.error(f"--override {item!r}: the value must be JSON")
  try:  # a typo in a field is a usage error now, not a failure in every worker
    for m in args.models:
      model_config(m, args.size, ladder_tasks.Geometry(), **overrides)
  except (TypeError, ValueError) as e:
    ap.error(f"--override: {e}")
  args.overrides = overrides
  args.cache_dir = os.path.abspath(args.cache_dir or default_cache_dir())
  if "pretrained" in args.inits:
    if os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
      ap.exit(1, f"{ap.prog}: error: --cache_dir {args.cache_dir} is not a directory\n")
    try:
      os.makedirs(args.cache_dir, exist_ok=True)
      tempfile.TemporaryFile(dir=args.cache_dir).close()
    except OSError as e:
      ap.exit(1, f"{ap.prog}: error: --cache_dir {args.cache_dir}: cannot write there "
                 f"({e.strerror or e})\n")
  return args


def _progress(t0, text):
  print(f"[{time.perf_counter() - t0:6.0f}s] {text}", flush=True)


def _exit_on_sigterm(signum, frame):  # pylint: disable=unused-argument
  raise SystemExit(128 + signum)  # unwinds through the pool, which terminates its workers


def _seeds(args) -> Dict[str, int]:
  return {r: args.r0_seeds if r == "R0" else args.seeds for r in args.rungs}


def _common(args) -> Dict:
  return dict(size=args.size, dev_packs=args.dev_packs, log_every=args.log_every,
              overrides=args.overrides)


def pretrain_jobs(args) -> List[Dict]:
  """The :func:`pretrain_one` jobs of a run (none without ``pretrained`` in ``--inits``)."""
  if "pretrained" not in args.inits:
    return []
  # E-blocked uses E's weights: an E pre-training is needed whenever E is run.
  return [dict(_common(args), model=m, seed=s, steps=args.pretrain_steps,
               learning_rate=args.pretrain_learning_rate, cache_dir=args.cache_dir)
          for m in args.models for s in range(max(_seeds(args).values()))]


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = _parse(argv)
  if threading.current_thread() is threading.main_thread():
    # A killed ladder takes its workers with it (they would train on as orphans).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
  seeds = _seeds(args)
  common = _common(args)
  pre_jobs = pretrain_jobs(args)
  jobs = [dict(common, rung=r, model=m, seed=s, init=i, steps=args.steps or STEPS[r],
               learning_rate=args.learning_rate, coref_weight=args.coref_weight,
               end_lr_fraction=args.end_lr_fraction)
          for r in args.rungs for i in args.inits for s in range(seeds[r]) for m in args.models]
  threads = args.threads or max(1, (os.cpu_count() or 2) // args.parallel)
  print(f"{len(pre_jobs)} pre-trainings ({args.pretrain_steps} steps, cached in "
        f"{args.cache_dir}), then {len(jobs)} fine-tunings ({', '.join(args.rungs)} x "
        f"{', '.join(args.models)} x {', '.join(args.inits)}; seeds: "
        + ", ".join(f"{r} {n}" for r, n in seeds.items())
        + f"), {args.parallel} at once, {threads} thread(s) each", flush=True)
  t0 = time.perf_counter()
  results, pretrained = [], []
  ctx = multiprocessing.get_context("spawn")
  with ctx.Pool(args.parallel, initializer=_init_worker, initargs=(threads,)) as pool:
    checkpoints = {}
    for out in pool.imap_unordered(pretrain_one, pre_jobs):
      pretrained.append(out)
      checkpoints[(out["model"], out["seed"])] = os.path.join(args.cache_dir, out["key"],
                                                              out["checkpoint"])
      _progress(t0, f"pre-trained {out['model']:<6} seed {out['seed']}  masked LM accuracy "
                f"{out['mlm_accuracy']:.3f}, entity tokens {out['mlm_entity_accuracy']:.3f}"
                + ("  (cached)" if out["cached"] else
                   f"  loss {out['first_loss']:.3f} -> {out['last_loss']:.3f}"))
    for job in jobs:
      if job["init"] == "pretrained":
        job["init_from"] = checkpoints[(job["model"], job["seed"])]
    for out in pool.imap_unordered(run_one, jobs):
      for r in out["results"]:
        results.append(r)
        probe = (f"  reader attn {r['reader_attention']:.2f}x"
                 if r.get("reader_attention") is not None else "")
        _progress(t0, f"{r['rung']} {r['init']:<10} {r['model']:<9} seed {r['seed']}"
                  f"  acc {r['accuracy']:.3f}{probe}"
                  + (f"  loss {r['first_loss']:.3f} -> {r['last_loss']:.3f}"
                     if "first_loss" in r else ""))
  summary = summarise(results, args.rungs, args.inits)
  print_report(summary, pretrained)
  print(f"\nwall {time.perf_counter() - t0:.0f} s")
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"args": vars(args), "pretrained": pretrained,
                 "results": results, "summary": summary}, f, indent=1)
  print(json.dumps(headline(summary, "pretrained" if "pretrained" in args.inits
                            else "scratch")))
  return 0


if __name__ == "__main__":
  sys.exit(main())
