"""Initialisation: no two weights start equal, and a seed reproduces the whole model.

Keras 3 random initialisers are stateless: one unseeded instance shared by several weights gives
them identical values (and weights of other shapes a common prefix).  Weights whose initializer
is a constant (``Zeros``/``Ones``/``Constant``: Dense/attention biases, LayerNorm gamma/beta,
MemoryAttention's ``relative_bias`` table and ``noop_bias``) are legitimately equal at init and
are excluded; which variables those are is decided by the initializer each ``add_weight`` call
received, recorded while the model is built.
"""

import inspect

import keras
import numpy as np
import pytest

from model import configs
from model.network import readtwice

CONSTANT_INITIALIZERS = (keras.initializers.Zeros, keras.initializers.Ones,
                         keras.initializers.Constant)
# The variable names (last path component) whose initializer is expected to be constant.
CONSTANT_NAMES = {"bias", "gamma", "beta", "relative_bias", "noop_bias", "output_bias"}

CONFIGS = {
    "tiny": configs.tiny(),
    # Top-k memory attention, pre-LN (adds final_norm), 2 BERT_1 layers (cross-layer pairs) and
    # intermediate_size == hidden_size, so the feed-forward in/out kernels have the same shape.
    "tiny_topk_preln": configs.tiny(memory_top_k=2, pre_layer_norm=True, num_layers_first=2,
                                    intermediate_size=64),
}


def _build_recording_initializers(monkeypatch, config):
  """Builds the model; returns it and ``{id(variable): initializer}`` for every add_weight."""
  original = keras.layers.Layer.add_weight
  signature = inspect.signature(original)
  initializers = {}

  def add_weight(self, *args, **kwargs):
    variable = original(self, *args, **kwargs)
    bound = signature.bind(self, *args, **kwargs)
    bound.apply_defaults()
    # add_weight's default for float weights is glorot_uniform (random).
    initializers[id(variable)] = keras.initializers.get(
        bound.arguments["initializer"] or "glorot_uniform")
    return variable

  monkeypatch.setattr(keras.layers.Layer, "add_weight", add_weight)
  model = readtwice.build_model(config, 8, 2)
  monkeypatch.undo()
  return model, initializers


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_no_two_randomly_initialised_weights_are_equal(monkeypatch, name):
  model, initializers = _build_recording_initializers(monkeypatch, CONFIGS[name])
  assert set(initializers) == {id(v) for v in model.weights}  # every weight was recorded
  constant, random = [], []
  for v in model.weights:
    is_constant = isinstance(initializers[id(v)], CONSTANT_INITIALIZERS)
    (constant if is_constant else random).append(v)
  assert {v.path.rsplit("/", 1)[-1] for v in constant} == CONSTANT_NAMES
  assert not {v.path.rsplit("/", 1)[-1] for v in random} & CONSTANT_NAMES
  values = [(v.path, v.numpy()) for v in random]
  for path, a in values:
    assert np.unique(a).size > a.size // 2, path  # really random, not a constant
  _assert_pairwise_distinct(values)


def _assert_pairwise_distinct(values):
  """No two (path, array) pairs are equal, nor share their leading flattened values."""
  same_shape, shared_prefix = [], []
  for i, (p, a) in enumerate(values):
    for q, b in values[i + 1:]:
      if a.shape == b.shape and np.array_equal(a, b):
        same_shape.append((p, q))
      k = min(a.size, b.size)
      if np.array_equal(a.ravel()[:k], b.ravel()[:k]):
        shared_prefix.append((p, q))
  assert not same_shape, f"identical same-shaped weights: {same_shape}"
  assert not shared_prefix, f"weights sharing their leading values: {shared_prefix}"


def _weights(seed, config):
  keras.utils.set_random_seed(seed)
  model = readtwice.build_model(config, 8, 2)
  # Paths without the model's auto-numbered name (read_twice_model_<k>/...).
  return {v.path.split("/", 1)[1]: v.numpy() for v in model.weights}


@pytest.mark.slow
def test_initialisation_is_reproducible_for_a_seed():
  config = CONFIGS["tiny_topk_preln"]
  first, again, other = _weights(7, config), _weights(7, config), _weights(8, config)
  assert list(first) == list(again) == list(other)
  for path in first:
    np.testing.assert_array_equal(first[path], again[path], err_msg=path)
  differing = {p for p in first if not np.array_equal(first[p], other[p])}
  # Every randomly initialised weight depends on the seed; the constant ones do not.
  random = {p for p in first if p.rsplit("/", 1)[-1] not in CONSTANT_NAMES}
  assert differing == random
  # The seeded builds (what model.train does) still give every weight its own values, and the
  # two seeds share no weight's values either (no seed-independent per-weight streams).
  _assert_pairwise_distinct([(f"{p}@7", first[p]) for p in sorted(random)]
                            + [(f"{p}@8", other[p]) for p in sorted(random)])
