"""Memory extraction: the first read's outputs -> one memory vector per segment.

Only the ``"cls"`` source (the paper's CLS-token memories) is implemented.  Other sources
(``"sts"``: summaries of spans; ``"entity"``: one memory per entity mention) plug in by adding
an ``_extract_<source>`` method that returns ``(memories [M, H], owner_segment [M])``, where
``owner_segment`` maps each memory to its pack segment (so document/position metadata can be
looked up with a gather).
"""

from __future__ import annotations

from typing import Tuple

import keras
import tensorflow as tf

from model.configs import IMPLEMENTED_MEMORY_SOURCES, MEMORY_SOURCES
from model.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="readtwice")
class ExtractMemories(keras.layers.Layer):
  """Extracts memories from BERT_1 outputs.

  Call args:
    hidden: float ``[N, L, H]`` BERT_1 output for the N segments of a pack.
    features: the pack feature dict (unused by ``"cls"``; entity sources need mentions).

  Returns:
    ``(memories, owner_segment)``: float ``[M, H]`` and int32 ``[M]`` (segment of each memory).
    For ``"cls"``, M = N and ``owner_segment = range(N)``.
  """

  def __init__(self, hidden_size: int, source: str = "cls", initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    if source not in MEMORY_SOURCES:
      raise ValueError(f"Unknown memory source {source!r}; expected one of {MEMORY_SOURCES}.")
    if source not in IMPLEMENTED_MEMORY_SOURCES:
      raise NotImplementedError(
          f"memory_source={source!r} is not implemented yet (implemented: "
          f"{IMPLEMENTED_MEMORY_SOURCES}). Add ExtractMemories._extract_{source} returning "
          "(memories [M, H], owner_segment [M]).")
    self.hidden_size = hidden_size
    self.source = source
    self.initializer_range = initializer_range
    self.projection = keras.layers.Dense(
        hidden_size, activation="tanh", name="projection",
        kernel_initializer=truncated_normal(initializer_range))

  def build(self, input_shape):
    self.projection.build((None, input_shape[-1]))
    super().build(input_shape)

  def _extract_cls(self, hidden: tf.Tensor, features) -> Tuple[tf.Tensor, tf.Tensor]:
    cls = hidden[:, 0, :]  # [N, H]
    return self.projection(cls), tf.range(tf.shape(hidden)[0], dtype=tf.int32)

  def call(self, hidden, features=None):
    return getattr(self, f"_extract_{self.source}")(hidden, features)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, source=self.source,
                  initializer_range=self.initializer_range)
    return config
