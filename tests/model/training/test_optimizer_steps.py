"""The optimizers' leaner graphs (``model.training.optimization``: the schedule and the
bias-correction scalars once a step, an 8-op clip) change no value: several steps of our AdamW and
Lamb leave every variable and slot bit for bit where Keras' own optimizers, built the same way,
leave them, in a ``tf.function`` as the trainer runs them; the clip equals ``tf.clip_by_norm`` bit
for bit, also at zero, huge and non-finite norms; and the traced step has fewer ops."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model import configs
from model.training import optimization

SHAPES = {"kernel": (6, 4), "embeddings": (5, 3), "bias": (4,), "gamma": (3,),
          "zero_kernel": (2, 2)}  # a zero kernel: Lamb's trust ratio's w_norm == 0 branch


def _variables():
  rng = np.random.default_rng(0)
  return [keras.Variable(np.zeros(s, np.float32) if name == "zero_kernel"
                         else rng.standard_normal(s).astype(np.float32), name=name)
          for name, s in SHAPES.items()]


def _keras_twin(ours, tc, variables):
  """Keras' own optimizer class with our optimizer's settings and exclusions."""
  cls = keras.optimizers.AdamW if tc.optimizer == "adamw" else keras.optimizers.Lamb
  twin = cls(learning_rate=optimization.make_schedule(tc), weight_decay=tc.weight_decay)
  twin.exclude_from_weight_decay(var_list=[v for v in variables
                                           if not optimization.decays_weight(v)])
  assert type(ours).__mro__[-len(cls.__mro__):] == cls.__mro__  # ours is that class, extended
  return twin


def _run(opt, variables, grads, steps):
  @tf.function
  def step(g):
    opt.apply_gradients(zip(g, variables))

  opt.build(variables)
  for i in range(steps):
    step([tf.constant(g * (i + 1)) for g in grads])
  return [v.numpy() for v in variables] + [v.numpy() for v in opt.variables]


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_steps_equal_keras_own_optimizer_bit_for_bit(optimizer):
  tc = configs.TrainConfig(optimizer=optimizer, learning_rate=3e-2, weight_decay=0.1, steps=4,
                           warmup_steps=2)
  rng = np.random.default_rng(1)
  grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES.values()]
  grads[-1][:] = 0.0  # a zero update too: Lamb's g_norm == 0 branch
  ours_vars, twin_vars = _variables(), _variables()
  ours = optimization.make_optimizer(tc, ours_vars)
  twin = _keras_twin(ours, tc, twin_vars)
  got, want = _run(ours, ours_vars, grads, 3), _run(twin, twin_vars, grads, 3)
  assert len(got) == len(want) == 3 * len(SHAPES) + 1  # variables, m, v per variable, step
  for i, (a, b) in enumerate(zip(got, want)):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (i, a, b)
  assert not np.array_equal(got[0], _variables()[0].numpy())  # the steps moved something


def _op_count(opt, variables, grads):
  fn = tf.function(lambda g: opt.apply_gradients(zip(g, variables)))
  return len(fn.get_concrete_function([tf.constant(g) for g in grads]).graph.get_operations())


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_a_step_traces_fewer_ops_than_keras_own(optimizer):
  tc = configs.TrainConfig(optimizer=optimizer, steps=4)
  grads = [np.ones(s, np.float32) for s in SHAPES.values()]
  ours_vars, twin_vars = _variables(), _variables()
  ours = optimization.make_optimizer(tc, ours_vars)
  twin = _keras_twin(ours, tc, twin_vars)
  ours.build(ours_vars)
  twin.build(twin_vars)
  mine, keras_own = _op_count(ours, ours_vars, grads), _op_count(twin, twin_vars, grads)
  assert mine < 0.8 * keras_own, (mine, keras_own)


def test_clip_by_norm_equals_tensorflow_bit_for_bit():
  rng = np.random.default_rng(2)
  cases = [rng.standard_normal(s).astype(np.float32) * scale
           for s in ((3,), (4, 5), (2, 3, 4)) for scale in (0.0, 1e-30, 1e-3, 0.7, 3.0, 1e20)]
  cases += [np.array([1.0, v, 2.0], np.float32) for v in (np.inf, -np.inf, np.nan)]
  for t in cases:
    for clip in (0.5, 1.0, 5.0):
      want = tf.clip_by_norm(tf.constant(t), clip).numpy()
      got = optimization.clip_by_norm(tf.constant(t), clip).numpy()
      assert got.tobytes() == want.tobytes(), (t, clip, got, want)
  graph = tf.function(lambda t: optimization.clip_by_norm(t, 1.0)).get_concrete_function(
      tf.TensorSpec((4, 5), tf.float32)).graph
  assert len(graph.get_operations()) < 12
