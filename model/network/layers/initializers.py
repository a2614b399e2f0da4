"""Weight initialisers: one fresh initializer instance per weight.

Keras 3 random initialisers are stateless (checked on Keras 3.15): ``TruncatedNormal(seed=None)``
draws an integer seed from Python's ``random`` once, when the instance is constructed
(``keras.random.make_default_seed``), and every call with a given shape returns the same values.
One instance shared by several weights therefore makes same-shaped weights identical, and
weights of other shapes share a prefix of their flattened values (e.g. the position embedding
equals the first rows of the token embedding).  An integer ``seed`` is no better: every instance
(and ``clone()``) with that seed returns the same values.

So every weight gets its own unseeded instance from :func:`truncated_normal`.  Their seeds come
from Python's ``random``, which ``keras.utils.set_random_seed`` (called by ``model.train`` with
``TrainConfig.seed``) seeds, so a whole model's initialisation is reproducible for a fixed seed.
"""

from __future__ import annotations

import keras


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
  """A NEW unseeded ``TruncatedNormal(stddev)``; call once per weight, never share the result."""
  return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="readtwice")
class MeanOfBlocks(keras.initializers.Initializer):
  """A ``[k * n, n]`` kernel of ``k`` stacked ``n x n`` identities, each divided by ``k``: a
  Dense layer on the concatenation of ``k`` width-``n`` vectors then starts as their mean
  (``k = 1``: the identity).  Deterministic (no seed)."""

  def __call__(self, shape, dtype=None):
    rows, cols = shape
    if rows % cols:
      raise ValueError(f"MeanOfBlocks needs a [k * n, n] kernel, got {tuple(shape)}")
    k = rows // cols
    eye = keras.ops.eye(cols, dtype=dtype or "float32") / float(k)
    return keras.ops.concatenate([eye] * k, axis=0)

  def get_config(self):
    return {}


def memory_kernel(init: str, stddev: float) -> keras.initializers.Initializer:
  """The kernel initializer of a memory-path projection: ``"random"`` (a new
  :func:`truncated_normal`) or ``"identity"`` (:class:`MeanOfBlocks`)."""
  if init == "identity":
    return MeanOfBlocks()
  if init != "random":
    raise ValueError(f"memory init must be 'random' or 'identity', got {init!r}")
  return truncated_normal(stddev)
