"""Optimisation: the warm-up + linear-decay schedule, weight-decay exclusions, gradient
clipping after the cross-replica sum, and the AdamW / LAMB optimizers.

Under a ``tf.distribute`` strategy Keras' optimizers all-reduce gradients inside
``apply_gradients`` and clip (``clipnorm``) *before* that sum, i.e. each replica's partial
gradient.  The trainer instead sums the gradients itself (:func:`sum_and_clip`), clips the
sum, and hands the result to an optimizer built by :func:`make_optimizer`, which skips Keras'
own all-reduce -- so clipping sees the same gradient as on one device, and gradients cross the
interconnect once.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import keras
import tensorflow as tf

from model import configs as configs_lib
from model import losses as losses_lib


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


class _SummedGradients:
  """Mixin: gradients given to ``apply_gradients`` are already summed over replicas."""

  def _all_reduce_sum_gradients(self, grads_and_vars):  # Keras' TF-backend hook
    return list(grads_and_vars)


@keras.saving.register_keras_serializable(package="readtwice")
class AdamW(_SummedGradients, keras.optimizers.AdamW):
  """Keras AdamW taking gradients already summed over replicas (see the module docstring)."""


@keras.saving.register_keras_serializable(package="readtwice")
class Lamb(_SummedGradients, keras.optimizers.Lamb):
  """Keras Lamb taking gradients already summed over replicas (see the module docstring)."""


def make_optimizer(tc: configs_lib.TrainConfig, variables) -> keras.optimizers.Optimizer:
  """AdamW or Lamb on :func:`make_schedule`, with weight decay only where :func:`decays_weight`.

  Args:
    tc: trainer config (``optimizer``, ``weight_decay`` and the schedule fields; ``clipnorm`` is
      applied by :func:`sum_and_clip`, not by the optimizer).
    variables: the variables the optimizer will train (``model.trainable_variables``); those
      that :func:`decays_weight` rejects are excluded from weight decay.  Must be given before
      the optimizer is built.  Both optimizers apply Keras' decoupled decay
      ``w -= learning_rate * weight_decay * w`` (for Lamb outside the trust ratio).

  The optimizer expects gradients already summed over replicas (:func:`sum_and_clip`).
  """
  opt_cls = AdamW if tc.optimizer == "adamw" else Lamb
  opt = opt_cls(learning_rate=make_schedule(tc), weight_decay=tc.weight_decay)
  opt.exclude_from_weight_decay(var_list=[v for v in variables if not decays_weight(v)])
  return opt


def sum_and_clip(grads: Sequence[Optional[tf.Tensor]], clipnorm: Optional[float]
                 ) -> List[Optional[tf.Tensor]]:
  """Sums per-replica gradients over the replicas (identity on one) and clips each variable's
  sum to ``clipnorm`` (Keras ``clipnorm`` semantics: per variable, not a global norm).

  Call it in replica context (inside ``strategy.run``) with this replica's gradients of its
  share of the loss; ``None`` gradients stay ``None``; ``IndexedSlices`` become dense.
  """
  # Dense: an embedding's IndexedSlices gradient all-reduced across replicas keeps one row
  # per replica for a shared index, which Keras' Adam/Lamb second moments then square row by
  # row (sum of squares, not square of the sum): updates that differ from one device's.
  present = [tf.convert_to_tensor(g) for g in grads if g is not None]
  if present:
    present = losses_lib.cross_replica_sum(present)
  if clipnorm is not None:
    present = [tf.clip_by_norm(g, clipnorm) for g in present]
  it = iter(present)
  return [None if g is None else next(it) for g in grads]
