"""MemoryAttention: every token attends over the memories of its own document.

Token ``t`` of segment ``i`` attends over the memories ``j`` with
``document[j] == document[i]`` (padding segments, ``document == -1`` or ``memory_mask == 0``,
excluded) plus one learned *no-op* memory, with a learned per-head bias indexed by the clipped
relative segment distance ``clip(pos[j] - pos[i], -B, B)``.  Optionally only the top-k memory
scores per token are kept.  The result is added residually and LayerNorm-ed.
"""

from __future__ import annotations

from typing import Any, Optional

import keras
import tensorflow as tf

from model.layers.initializers import truncated_normal

_NEG = -1e9


def gather_memories(tensors: Any, replica_context: Optional[Any] = None) -> Any:
  """All-gathers memory tensors (a nest of ``[M_local, ...]`` tensors) along axis 0 across replicas.

  One pack is one global batch: with a single replica the whole pack is local and this is the
  identity.  Under a multi-replica ``tf.distribute`` strategy every replica holds a slice of the
  pack's segments, and memories (plus their document ids / positions / masks) are gathered so
  each token can attend to every memory of its document.

  Args:
    tensors: a tensor or nest of tensors with the memory axis first.
    replica_context: defaults to ``tf.distribute.get_replica_context()``.
  """
  ctx = replica_context if replica_context is not None else tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync <= 1:
    return tensors
  return tf.nest.map_structure(lambda t: ctx.all_gather(t, axis=0), tensors)


@keras.saving.register_keras_serializable(package="readtwice")
class MemoryAttention(keras.layers.Layer):
  """Cross-attention from tokens to same-document memories (+ no-op memory).

  Call args:
    hidden: float ``[N, L, H]`` token states.
    memories: float ``[M, H]``.
    query_document: int ``[N]`` document index of each segment (-1 padding).
    memory_document: int ``[M]`` document index of each memory.
    query_position: int ``[N]`` segment position in its document.
    memory_position: int ``[M]`` position of each memory's segment.
    memory_mask: int ``[M]``, 1 for real memories.
    training: dropout switch.

  Returns:
    float ``[N, L, H]``: ``LayerNorm(hidden + Dense(attention output))``.
  """

  def __init__(self, hidden_size: int, num_heads: int, max_segment_distance: int,
               top_k: Optional[int] = None, dropout: float = 0.1,
               layer_norm_epsilon: float = 1e-12, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_heads:
      raise ValueError("hidden_size must be divisible by num_heads.")
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.head_size = hidden_size // num_heads
    self.max_segment_distance = max_segment_distance
    self.top_k = top_k
    self.dropout_rate = dropout
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range
    # One initializer instance per weight (a shared one would make them identical; see
    # model.layers.initializers).
    def dense(name):
      return keras.layers.Dense(hidden_size, kernel_initializer=truncated_normal(initializer_range),
                                name=name)

    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.output_dense = dense("output")
    self.norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="norm")
    self.dropout = keras.layers.Dropout(dropout)

  def build(self, input_shape):
    h = self.hidden_size
    for d in (self.query, self.key, self.value, self.output_dense):
      d.build((None, h))
    self.norm.build((None, h))
    self.relative_bias_table = self.add_weight(
        name="relative_bias", shape=(2 * self.max_segment_distance + 1, self.num_heads),
        initializer="zeros")
    self.noop_key = self.add_weight(name="noop_key", shape=(self.num_heads, self.head_size),
                                    initializer=truncated_normal(self.initializer_range))
    self.noop_value = self.add_weight(name="noop_value",
                                      shape=(self.num_heads, self.head_size),
                                      initializer=truncated_normal(self.initializer_range))
    self.noop_bias = self.add_weight(name="noop_bias", shape=(self.num_heads,),
                                     initializer="zeros")
    super().build(input_shape)

  def relative_bias(self, query_position, memory_position):
    """Per-head bias ``[N, heads, M]`` for distance ``clip(mem_pos - query_pos, -B, B)``."""
    b = self.max_segment_distance
    dist = (tf.cast(memory_position, tf.int32)[None, :] -
            tf.cast(query_position, tf.int32)[:, None])  # [N, M]
    index = tf.clip_by_value(dist, -b, b) + b
    bias = tf.gather(self.relative_bias_table, index)  # [N, M, heads]
    return tf.transpose(bias, [0, 2, 1])

  def call(self, hidden, memories, query_document, memory_document, query_position,
           memory_position, memory_mask, training=False):
    n = tf.shape(hidden)[0]
    l = tf.shape(hidden)[1]
    m = tf.shape(memories)[0]
    nh, hs = self.num_heads, self.head_size
    q = tf.reshape(self.query(hidden), [n, l, nh, hs])
    k = tf.reshape(self.key(memories), [m, nh, hs])
    v = tf.reshape(self.value(memories), [m, nh, hs])
    scale = 1.0 / float(hs) ** 0.5
    scores = tf.einsum("nlhd,mhd->nhlm", q, k) * scale
    scores += self.relative_bias(query_position, memory_position)[:, :, None, :]
    qd = tf.cast(query_document, tf.int32)
    md = tf.cast(memory_document, tf.int32)
    allowed = tf.logical_and(tf.equal(qd[:, None], md[None, :]),
                             tf.cast(memory_mask, tf.bool)[None, :])
    allowed = tf.logical_and(allowed, (qd >= 0)[:, None])  # [N, M]
    scores = tf.where(allowed[:, None, None, :], scores, _NEG)
    noop = tf.einsum("nlhd,hd->nhl", q, self.noop_key) * scale
    noop += self.noop_bias[None, :, None]
    scores = tf.concat([scores, noop[..., None]], axis=-1)  # [N, h, L, M + 1]
    if self.top_k is not None:
      kk = tf.minimum(self.top_k, m + 1)
      kth = tf.math.top_k(scores, k=kk).values[..., -1:]
      scores = tf.where(scores >= kth, scores, _NEG)
    probs = self.dropout(tf.nn.softmax(scores, axis=-1), training=training)
    values = tf.concat([v, self.noop_value[None]], axis=0)  # [M + 1, h, d]
    out = tf.einsum("nhlm,mhd->nlhd", probs, values)
    out = self.output_dense(tf.reshape(out, [n, l, self.hidden_size]))
    return self.norm(hidden + self.dropout(out, training=training))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  max_segment_distance=self.max_segment_distance, top_k=self.top_k,
                  dropout=self.dropout_rate, layer_norm_epsilon=self.layer_norm_epsilon,
                  initializer_range=self.initializer_range)
    return config
