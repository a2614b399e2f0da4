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
from keras import ops

from model import configs as configs_lib
from model.training import losses as losses_lib


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
  """Mixin: gradients given to ``apply_gradients`` are already summed over replicas; Keras'
  per-variable work done with fewer graph ops, the same values.

  Keras evaluates the learning-rate schedule again for each decayed variable, and the step's
  bias-correction scalars again for each variable: of a tiny fine-tune's 7,698 graph ops,
  2,370 were the optimizer's.  Here they are computed once a step (the step counter moves only
  after the whole update, so every variable saw the same values), and each variable's own
  update keeps Keras' ops in Keras' order: the same values bit for bit
  (tests/model/training/test_optimizer_steps.py).  Grappler merged the repeated ops before they ran, so
  a step runs as fast as before; what is saved is tracing and optimizing the graph, ~1 s of
  every training's start.
  """

  def _all_reduce_sum_gradients(self, grads_and_vars):  # Keras' TF-backend hook
    return list(grads_and_vars)

  def _apply_weight_decay(self, variables):  # Keras' TF-backend hook
    """Keras' decoupled decay ``w -= w * weight_decay * learning_rate`` where
    :func:`decays_weight` allows it, with the learning rate computed once a step."""
    if self.weight_decay is None:
      return

    def decay(distribution, variables):
      lr = self.learning_rate

      def decay_one(variable):
        if self._use_weight_decay(variable):
          variable.assign_sub(variable * tf.cast(self.weight_decay, variable.dtype)
                              * tf.cast(lr, variable.dtype))

      for variable in variables:
        distribution.extended.update(getattr(variable, "value", variable), decay_one,
                                     group=False)

    tf.__internal__.distribute.interim.maybe_merge_call(decay, self._distribution_strategy,
                                                        variables)

  def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
    """Keras' TF-backend loop over the variables (once a step), each variable updated as
    Keras' ``update_step`` does -- the moments, then ``w -= _step(...)`` -- with
    :meth:`_step_scalars` computed for the first variable of each dtype and kept for the others
    (in a local: a dict attribute would be tracked, and checkpointed, by Keras).  ``amsgrad``
    keeps Keras' own loop."""
    if getattr(self, "amsgrad", False):
      super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
      return
    per_dtype: dict = {}

    def update(variable, gradient, learning_rate):
      dtype = variable.dtype
      if dtype not in per_dtype:
        local_step = ops.cast(self.iterations + 1, dtype)
        per_dtype[dtype] = self._step_scalars(
            ops.cast(learning_rate, dtype), ops.power(ops.cast(self.beta_1, dtype), local_step),
            ops.power(ops.cast(self.beta_2, dtype), local_step))
      gradient = ops.cast(gradient, dtype)
      m = self._momentums[self._get_variable_index(variable)]
      v = self._velocities[self._get_variable_index(variable)]
      self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
      self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
      self.assign_sub(variable, self._step(variable, m, v, per_dtype[dtype]))

    for gradient, variable in grads_and_vars:
      distribution.extended.update(variable, update, args=(gradient, learning_rate),
                                   group=False)

  def _step_scalars(self, lr, beta_1_power, beta_2_power):
    """What the step of every variable of a dtype shares, from the learning rate and
    ``beta^t`` (as Keras' ``update_step`` computes them)."""
    raise NotImplementedError

  def _step(self, variable, m, v, scalars):
    """What Keras' ``update_step`` subtracts from ``variable``, given the updated moments."""
    raise NotImplementedError


@keras.saving.register_keras_serializable(package="readtwice")
class AdamW(_SummedGradients, keras.optimizers.AdamW):
  """Keras AdamW taking gradients already summed over replicas (see the module docstring)."""

  def _step_scalars(self, lr, beta_1_power, beta_2_power):
    return lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)  # alpha, the corrected rate

  def _step(self, variable, m, v, scalars):
    return ops.divide(ops.multiply(m, scalars), ops.add(ops.sqrt(v), self.epsilon))


@keras.saving.register_keras_serializable(package="readtwice")
class Lamb(_SummedGradients, keras.optimizers.Lamb):
  """Keras Lamb taking gradients already summed over replicas (see the module docstring)."""

  def _step_scalars(self, lr, beta_1_power, beta_2_power):
    return lr, 1.0 - beta_1_power, 1.0 - beta_2_power

  def _step(self, variable, m, v, scalars):
    lr, one_minus_beta_1_power, one_minus_beta_2_power = scalars
    m_t_hat = ops.divide(m, one_minus_beta_1_power)
    v_sqrt = ops.add(ops.sqrt(ops.divide(v, one_minus_beta_2_power)), self.epsilon)
    update = ops.divide(m_t_hat, v_sqrt)
    w_norm = ops.sqrt(ops.sum(ops.power(variable, 2)))
    g_norm = ops.sqrt(ops.sum(ops.power(update, 2)))
    ratio = ops.where(ops.greater(w_norm, 0),
                      ops.where(ops.greater(g_norm, 0), (w_norm / g_norm), 1.0), 1.0)
    return ratio * lr * update


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
    present = [clip_by_norm(g, clipnorm) for g in present]
  it = iter(present)
  return [None if g is None else next(it) for g in grads]


def clip_by_norm(t: tf.Tensor, clip: float) -> tf.Tensor:
  """``tf.clip_by_norm(t, clip)`` for a dense ``t`` whose gradient is not taken, with the same
  values (``t * clip / max(||t||_2, clip)``, the same ops in the same order) in 8 graph ops
  instead of 17: TensorFlow's guards the square root of a zero norm for the gradient's sake.
  Called once per variable in every training step, it was 1,003 of a tiny fine-tune's 7,698
  graph ops."""
  clip = tf.cast(clip, t.dtype)
  norm = tf.sqrt(tf.reduce_sum(t * t, keepdims=True))
  return t * clip / tf.maximum(norm, clip)
