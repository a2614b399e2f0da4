"""ReadTwice trainer: one pack = one global batch = one step.

CLI::

  python -m model.train --records_dir <pipeline output dir> --model_dir <dir> \
      [--preset tiny|base | --model_config model.json] [--steps 1000] [--learning_rate 5e-5] \
      [--warmup_steps 0] [--end_learning_rate_fraction 0] [--optimizer adamw|lamb] \
      [--weight_decay 0.01] [--clipnorm 1.0|none] [--seed 0] [--no_shuffle] [--jit_compile] \
      [--checkpoint_every 1000] [--max_checkpoints 3] [--log_every 1]

e.g. ``--preset tiny --steps 120 --learning_rate 2e-3 --warmup_steps 10`` (the demo).  Every
trainer flag defaults to the matching :class:`model.configs.TrainConfig` field (the values shown);
invalid values (e.g. ``--steps 0``) print the usage and one ``error: ...`` line on stderr and
exit with status 2.  It
prints one JSON line per step (``{"step", "loss", ...}``) and a final JSON summary line
(``{"summary": true, "first_loss", "last_loss", ...}``).  Writes ``<model_dir>/config.json``,
checkpoints (``tf.train.CheckpointManager``, prefix ``ckpt``) and TensorBoard summaries under
``<model_dir>/tb``.  Python API: :func:`train`.
"""

from __future__ import annotations

import argparse
import dataclasses
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
  """Linear warm-up to ``peak``, then linear decay to ``end_fraction * peak`` at ``total_steps``.

  With ``w = warmup_steps``, ``T = total_steps``, ``e = end_fraction`` and the 0-based optimizer
  step ``s`` (the update that ends step ``s + 1``)::

    s < w:   peak * (s + 1) / w
    s >= w:  peak * (1 - (1 - e) * min(1, (s - w) / max(T - w, 1)))

  so the rate reaches ``peak`` at the last warm-up step and at ``s = w``, and (for ``w < T``)
  ``e * peak`` at ``s = T`` (the last update, ``s = T - 1``, still uses
  ``peak * (e + (1 - e) / (T - w))``).
  """

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


def make_schedule(tc: configs_lib.TrainConfig) -> WarmupLinearDecay:
  """The learning-rate schedule of ``tc``: warm-up, then decay to ``end_learning_rate_fraction``."""
  return WarmupLinearDecay(tc.learning_rate, tc.steps, tc.warmup_steps,
                           end_fraction=tc.end_learning_rate_fraction)


def decays_weight(variable) -> bool:
  """Whether weight decay applies to ``variable`` (the BERT/RoBERTa rule).

  Decayed: every matrix a layer multiplies by, i.e. Dense / attention ``kernel``s, the token and
  position ``embeddings`` tables, and MemoryAttention's ``noop_key``.
  Not decayed: LayerNorm ``gamma`` / ``beta`` and every bias: Dense / attention ``bias``,
  MemoryAttention's ``relative_bias`` table (per-head bias per relative segment distance) and
  ``noop_bias``.

  Decided by the variable's own name, the last component of ``variable.path`` (Keras 3 ``name``
  is that component too): ``gamma``, ``beta``, ``bias`` or ``*_bias`` are not decayed.  Only
  LayerNormalization creates ``gamma`` / ``beta`` in this model.  (Keras'
  ``exclude_from_weight_decay(var_names=...)`` regex-searches ``variable.name``, which never
  holds the owning layer's name, so patterns like ``"norm"`` match nothing.)
  """
  name = variable.path.rsplit("/", 1)[-1]
  return not (name in ("gamma", "beta", "bias") or name.endswith("_bias"))


def make_optimizer(tc: configs_lib.TrainConfig, variables) -> keras.optimizers.Optimizer:
  """AdamW or Lamb on :func:`make_schedule`, with weight decay only where :func:`decays_weight`.

  Args:
    tc: trainer config (``optimizer``, ``weight_decay``, ``clipnorm`` and the schedule fields).
    variables: the variables the optimizer will train (``model.trainable_variables``); those
      that :func:`decays_weight` rejects are excluded from weight decay.  Must be given before
      the optimizer is built.  Both optimizers apply Keras' decoupled decay
      ``w -= learning_rate * weight_decay * w`` (for Lamb outside the trust ratio).
  """
  kw = dict(learning_rate=make_schedule(tc), weight_decay=tc.weight_decay, clipnorm=tc.clipnorm)
  opt_cls = keras.optimizers.AdamW if tc.optimizer == "adamw" else keras.optimizers.Lamb
  opt = opt_cls(**kw)
  opt.exclude_from_weight_decay(var_list=[v for v in variables if not decays_weight(v)])
  return opt


def config_from_manifest(records_dir: str, preset: str = "tiny", **overrides
                        ) -> configs_lib.ModelConfig:
  """A preset whose vocab size / position table fit the records' manifest."""
  manifest = input_lib.read_manifest(records_dir)
  kw = dict(vocab_size=int(manifest["tokenizer"]["vocab_size"]))
  if preset.startswith("tiny"):
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
  optimizer = make_optimizer(tc, model.trainable_variables)
  optimizer.build(model.trainable_variables)
  step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
  ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
  manager = tf.train.CheckpointManager(ckpt, model_dir, max_to_keep=tc.max_checkpoints,
                                       checkpoint_name="ckpt")
  if manager.latest_checkpoint:
    ckpt.restore(manager.latest_checkpoint)

  ds = input_lib.dataset_from_output_dir(records_dir, shuffle=tc.shuffle, repeat=True,
                                         seed=tc.seed, max_mentions=readtwice.max_mentions(mc))
  keys = TRAIN_KEYS + (readtwice.MENTION_INPUT_KEYS if readtwice.max_mentions(mc) else ())
  ds = ds.map(lambda f: {k: f[k] for k in keys})
  writer = tf.summary.create_file_writer(os.path.join(model_dir, "tb"))

  @tf.function(jit_compile=tc.jit_compile, reduce_retracing=True)
  def train_step(features):
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      losses = losses_lib.readtwice_losses(outputs, features,
                                           answer_type_mode=mc.answer_type_mode)
    grads = tape.gradient(losses["total"], model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    if "mentions_dropped" in features:  # entity mentions beyond max_memories: logged, not lost
      losses = dict(losses, mentions_dropped=tf.cast(features["mentions_dropped"], tf.float32))
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


def _clipnorm(text: str) -> Optional[float]:
  """``--clipnorm`` value: a number, or ``none`` for no clipping."""
  if text.strip().lower() == "none":
    return None
  try:
    return float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
  """The CLI; every trainer flag's default is the matching ``TrainConfig`` field's default."""
  d = configs_lib.TrainConfig()
  p = argparse.ArgumentParser(prog="python -m model.train",
                              description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  p.add_argument("--records_dir", required=True, help="pipeline output dir")
  p.add_argument("--model_dir", required=True,
                 help="config.json, checkpoints and tb/ go here; resumes from its checkpoint")
  p.add_argument("--preset", default="tiny", choices=sorted(configs_lib.PRESETS),
                 help="model preset, fitted to the records' vocab (and, tiny, seq length)")
  p.add_argument("--model_config", default=None,
                 help="JSON file with a ModelConfig (overrides --preset).")
  p.add_argument("--steps", type=int, default=d.steps, help="training steps (packs)")
  p.add_argument("--learning_rate", type=float, default=d.learning_rate,
                 help="peak learning rate")
  p.add_argument("--warmup_steps", type=int, default=d.warmup_steps,
                 help="linear warm-up steps")
  p.add_argument("--end_learning_rate_fraction", type=float,
                 default=d.end_learning_rate_fraction,
                 help="learning rate reached at --steps, as a fraction of the peak")
  p.add_argument("--optimizer", default=d.optimizer, choices=["adamw", "lamb"], help="optimizer")
  p.add_argument("--weight_decay", type=float, default=d.weight_decay,
                 help="decoupled weight decay (kernels and embeddings only)")
  p.add_argument("--clipnorm", type=_clipnorm, default=d.clipnorm,
                 help="per-variable gradient-norm clip; 'none' disables clipping")
  p.add_argument("--seed", type=int, default=d.seed,
                 help="seed for initialisation, dropout and shuffling")
  p.add_argument("--no_shuffle", dest="shuffle", action="store_false", default=d.shuffle,
                 help="do not shuffle packs (default: shuffle=%(default)s)")
  p.add_argument("--jit_compile", action="store_true", default=d.jit_compile,
                 help="XLA-compile the train step")
  p.add_argument("--checkpoint_every", type=int, default=d.checkpoint_every,
                 help="checkpoint interval (steps)")
  p.add_argument("--max_checkpoints", type=int, default=d.max_checkpoints,
                 help="checkpoints kept")
  p.add_argument("--log_every", type=int, default=d.log_every,
                 help="TensorBoard summary interval (steps)")
  return p


# Every TrainConfig field is set from the CLI flag of the same name (``build_parser``).
CLI_TRAIN_FIELDS = tuple(f.name for f in dataclasses.fields(configs_lib.TrainConfig))


def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  try:  # Validate before touching the records or TF state: bad numbers are usage errors.
    tc = configs_lib.TrainConfig(**{f: getattr(args, f) for f in CLI_TRAIN_FIELDS})
    if args.model_config:
      with open(args.model_config) as f:
        mc = configs_lib.ModelConfig.from_json(f.read())
    else:
      mc = None
  except (OSError, ValueError) as e:
    p.error(str(e))
  try:  # Unusable records are a user error: one line, exit 1.
    input_lib.read_manifest(args.records_dir)
    if mc is None:
      mc = config_from_manifest(args.records_dir, args.preset)
  except (FileNotFoundError, ValueError) as e:  # ManifestError, SchemaVersionError
    print(f"{p.prog}: error: --records_dir: {e}", file=sys.stderr, flush=True)
    return 1
  summary = train(args.records_dir, args.model_dir, mc, tc)
  summary.pop("losses")
  print(json.dumps(summary), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
