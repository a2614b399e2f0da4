"""ReadTwice trainer: one pack = one global batch = one step.

CLI::

  python -m model.train --records_dir <pipeline output dir> --model_dir <dir> \
      --preset tiny --steps 30 --learning_rate 1e-3 [--optimizer adamw|lamb] [--jit_compile]

prints one JSON line per step (``{"step", "loss", ...}``) and a final JSON summary line
(``{"summary": true, "first_loss", "last_loss", ...}``).  Writes ``<model_dir>/config.json``,
checkpoints (``tf.train.CheckpointManager``, prefix ``ckpt``) and TensorBoard summaries under
``<model_dir>/tb``.  Python API: :func:`train`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable, Dict, Optional

import keras
import tensorflow as tf

from model import configs as configs_lib
from model import input as input_lib
from model import losses as losses_lib
from model import readtwice

TRAIN_KEYS = readtwice.MODEL_INPUT_KEYS + ("answer_type", "supporting", "answer_begin_labels",
                                           "answer_end_labels")


@keras.saving.register_keras_serializable(package="readtwice")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warm-up to ``peak`` over ``warmup_steps``, then linear decay to ``end_fraction*peak``."""

  def __init__(self, peak: float, total_steps: int, warmup_steps: int = 0,
               end_fraction: float = 0.0):
    self.peak = peak
    self.total_steps = max(int(total_steps), 1)
    self.warmup_steps = int(warmup_steps)
    self.end_fraction = end_fraction

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    warm = tf.cast(max(self.warmup_steps, 1), tf.float32)
    total = tf.cast(self.total_steps, tf.float32)
    up = self.peak * tf.minimum(1.0, (step + 1.0) / warm)
    frac = tf.clip_by_value((step - self.warmup_steps) / tf.maximum(total - self.warmup_steps,
                                                                   1.0), 0.0, 1.0)
    down = self.peak * (1.0 - (1.0 - self.end_fraction) * frac)
    return tf.where(step < self.warmup_steps, up, down)

  def get_config(self):
    return dict(peak=self.peak, total_steps=self.total_steps, warmup_steps=self.warmup_steps,
                end_fraction=self.end_fraction)


def make_optimizer(tc: configs_lib.TrainConfig) -> keras.optimizers.Optimizer:
  schedule = WarmupLinearDecay(tc.learning_rate, tc.steps, tc.warmup_steps, end_fraction=0.1)
  kw = dict(learning_rate=schedule, weight_decay=tc.weight_decay, clipnorm=tc.clipnorm)
  opt_cls = keras.optimizers.AdamW if tc.optimizer == "adamw" else keras.optimizers.Lamb
  opt = opt_cls(**kw)
  opt.exclude_from_weight_decay(var_names=["norm", "bias", "relative_bias"])
  return opt


def config_from_manifest(records_dir: str, preset: str = "tiny", **overrides
                        ) -> configs_lib.ModelConfig:
  """A preset whose vocab size / position table fit the records' manifest."""
  manifest = input_lib.read_manifest(records_dir)
  kw = dict(vocab_size=int(manifest["tokenizer"]["vocab_size"]))
  if preset == "tiny":
    kw["max_seq_length"] = int(manifest["config"]["seq_length"])
  kw.update(overrides)
  return configs_lib.preset(preset, **kw)


def _check_compatible(mc: configs_lib.ModelConfig, manifest: Dict) -> None:
  seq_length = int(manifest["config"]["seq_length"])
  vocab = int(manifest["tokenizer"]["vocab_size"])
  if mc.max_seq_length < seq_length:
    raise ValueError(f"model max_seq_length {mc.max_seq_length} < records seq_length "
                     f"{seq_length}.")
  if mc.vocab_size < vocab:
    raise ValueError(f"model vocab_size {mc.vocab_size} < tokenizer vocab_size {vocab}.")


def train(records_dir: str, model_dir: str,
          model_config: Optional[configs_lib.ModelConfig] = None,
          train_config: Optional[configs_lib.TrainConfig] = None,
          log_fn: Optional[Callable[[Dict], None]] = None) -> Dict:
  """Trains ReadTwice on a pipeline output dir; resumes from ``model_dir``'s latest checkpoint.

  Args:
    records_dir: pipeline output dir (``manifest.json`` + record shards).
    model_dir: where ``config.json``, checkpoints and ``tb/`` go.
    model_config: defaults to the ``tiny`` preset fitted to the manifest.
    train_config: defaults to ``TrainConfig()``.
    log_fn: called with each step's metrics dict (default: print one JSON line).

  Returns:
    summary dict: ``first_loss``, ``last_loss``, ``losses`` (per step), ``steps``,
    ``checkpoint`` (path), ``model_dir``, ``seconds``.
  """
  tc = train_config or configs_lib.TrainConfig()
  mc = model_config or config_from_manifest(records_dir, "tiny")
  log_fn = log_fn or (lambda d: print(json.dumps(d), flush=True))
  manifest = input_lib.read_manifest(records_dir)
  _check_compatible(mc, manifest)
  keras.utils.set_random_seed(tc.seed)
  os.makedirs(model_dir, exist_ok=True)
  configs_lib.save_configs(model_dir, mc, tc)
  seq_length = int(manifest["config"]["seq_length"])
  n = int(manifest["config"]["segments_per_pack"])

  model = readtwice.build_model(mc, seq_length, n)
  optimizer = make_optimizer(tc)
  optimizer.build(model.trainable_variables)
  step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
  ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
  manager = tf.train.CheckpointManager(ckpt, model_dir, max_to_keep=tc.max_checkpoints,
                                       checkpoint_name="ckpt")
  if manager.latest_checkpoint:
    ckpt.restore(manager.latest_checkpoint)

  ds = input_lib.dataset_from_output_dir(records_dir, shuffle=tc.shuffle, repeat=True,
                                         seed=tc.seed)
  ds = ds.map(lambda f: {k: f[k] for k in TRAIN_KEYS})
  writer = tf.summary.create_file_writer(os.path.join(model_dir, "tb"))

  @tf.function(jit_compile=tc.jit_compile, reduce_retracing=True)
  def train_step(features):
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      losses = losses_lib.readtwice_losses(outputs, features)
    grads = tape.gradient(losses["total"], model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return losses

  start = time.time()
  history = []
  it = iter(ds)
  while int(step_var.numpy()) < tc.steps:
    features = next(it)
    lr = float(optimizer.learning_rate.numpy()) if hasattr(optimizer.learning_rate, "numpy") \
        else float(tc.learning_rate)
    losses = train_step(features)
    step_var.assign_add(1)
    step = int(step_var.numpy())
    metrics = {"step": step, "loss": float(losses["total"]), "learning_rate": lr}
    metrics.update({k: float(v) for k, v in losses.items() if k != "total"})
    history.append(metrics["loss"])
    log_fn(metrics)
    if step % tc.log_every == 0:
      with writer.as_default(step=step):
        for k, v in metrics.items():
          if k != "step":
            tf.summary.scalar(k if k != "loss" else "loss/total", v, step=step)
    if step % tc.checkpoint_every == 0 and step < tc.steps:
      manager.save(checkpoint_number=step)
  path = manager.save(checkpoint_number=int(step_var.numpy()))
  writer.flush()
  return {"summary": True, "first_loss": history[0] if history else None,
          "last_loss": history[-1] if history else None, "losses": history,
          "steps": int(step_var.numpy()), "checkpoint": path, "model_dir": model_dir,
          "seconds": round(time.time() - start, 3)}


def load_model(model_dir: str, checkpoint: Optional[str] = None):
  """Rebuilds the model from ``config.json`` and restores the latest (or given) checkpoint.

  Returns ``(model, model_config)``.
  """
  mc, _ = configs_lib.load_configs(model_dir)
  model = readtwice.build_model(mc)
  path = checkpoint or tf.train.latest_checkpoint(model_dir)
  if path is None:
    raise FileNotFoundError(f"No checkpoint in {model_dir}.")
  tf.train.Checkpoint(model=model).restore(path).expect_partial()
  return model, mc


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--records_dir", required=True)
  p.add_argument("--model_dir", required=True)
  p.add_argument("--preset", default="tiny", choices=sorted(configs_lib.PRESETS))
  p.add_argument("--model_config", default=None,
                 help="JSON file with a ModelConfig (overrides --preset).")
  p.add_argument("--steps", type=int, default=30)
  p.add_argument("--learning_rate", type=float, default=1e-3)
  p.add_argument("--optimizer", default="adamw", choices=["adamw", "lamb"])
  p.add_argument("--warmup_steps", type=int, default=0)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--checkpoint_every", type=int, default=1000)
  p.add_argument("--no_shuffle", action="store_true")
  p.add_argument("--jit_compile", action="store_true")
  args = p.parse_args(argv)
  if args.model_config:
    with open(args.model_config) as f:
      mc = configs_lib.ModelConfig.from_json(f.read())
  else:
    mc = config_from_manifest(args.records_dir, args.preset)
  tc = configs_lib.TrainConfig(learning_rate=args.learning_rate, steps=args.steps,
                               optimizer=args.optimizer, warmup_steps=args.warmup_steps,
                               seed=args.seed, shuffle=not args.no_shuffle,
                               jit_compile=args.jit_compile,
                               checkpoint_every=args.checkpoint_every)
  summary = train(args.records_dir, args.model_dir, mc, tc)
  summary.pop("losses")
  print(json.dumps(summary), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
