"""Output heads of ReadTwice: span, masked LM (tied), answer type, coreference bias.

Every weight gets its own initializer instance (:mod:`model.network.layers.initializers`).  The
losses that go with these heads live in :mod:`model.training.losses`.
"""

from __future__ import annotations

from typing import Optional

import keras
import tensorflow as tf

from model.network.layers.initializers import truncated_normal
from model.training.losses import ANSWER_TYPE_MODES


@keras.saving.register_keras_serializable(package="readtwice")
class SpanHead(keras.layers.Layer):
  """Begin/end logits per token.

  ``intermediate_size=None``: one ``Dense(2)`` (the original head).  Otherwise the paper's
  appendix head: ``Dense(intermediate_size, gelu) -> Dense(2)``.

  Call args:
    hidden: float ``[N, L, H]``.

  Returns:
    float ``[N, L, 2]`` (``[..., 0]`` begin, ``[..., 1]`` end).
  """

  def __init__(self, hidden_size: int, intermediate_size: Optional[int] = None,
               initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.intermediate_size = intermediate_size
    self.initializer_range = initializer_range
    self.intermediate = None
    if intermediate_size is not None:
      self.intermediate = keras.layers.Dense(
          intermediate_size, activation="gelu",
          kernel_initializer=truncated_normal(initializer_range), name="intermediate")
    self.output_dense = keras.layers.Dense(2, kernel_initializer=truncated_normal(
        initializer_range), name="output")

  def build(self, input_shape=None):
    width = self.hidden_size
    if self.intermediate is not None:
      self.intermediate.build((None, width))
      width = self.intermediate_size
    self.output_dense.build((None, width))
    super().build(input_shape)

  def call(self, hidden):
    x = hidden
    if self.intermediate is not None:
      x = self.intermediate(x)
    return self.output_dense(x)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                  initializer_range=self.initializer_range)
    return config


@keras.saving.register_keras_serializable(package="readtwice")
class MLMHead(keras.layers.Layer):
  """Masked-LM logits at the masked positions only, output matrix tied to the token embedding.

  ``logits = LayerNorm(Dense_gelu(hidden[masked])) @ E^T + b`` with ``E`` the ``[V, H]``
  ``embeddings`` variable of ``embedding_layer`` (the same variable object: training the head
  trains the embedding) and ``b`` a ``[V]`` output bias owned by the head.

  Serialisation: ``get_config`` stores the embedding layer's config; ``from_config`` builds a
  NEW embedding layer, so a deserialised head alone is untied from any model's embedding.  A
  model that owns both should build the head from its own embedding in its ``__init__``.

  Call args:
    hidden: float ``[N, L, H]``.
    masked_positions: int ``[N, P]`` token positions (clipped to ``[0, L)``; padding positions
      give logits that the loss weights with 0); with ``rows``, int ``[K]``.
    rows: None, or int ``[K]``: the row of ``hidden`` of each of the K ``masked_positions``
      (the sparse form: only the positions that count).

  Returns:
    float ``[N, P, V]``; with ``rows``, ``[K, V]``.
  """

  def __init__(self, embedding_layer: keras.layers.Embedding, hidden_size: int,
               layer_norm_epsilon: float = 1e-12, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    if isinstance(embedding_layer, dict):
      embedding_layer = keras.saving.deserialize_keras_object(embedding_layer)
    self.embedding_layer = embedding_layer
    self.hidden_size = hidden_size
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range
    self.transform = keras.layers.Dense(
        hidden_size, activation="gelu", kernel_initializer=truncated_normal(initializer_range),
        name="transform")
    self.norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="norm")

  @property
  def vocab_size(self) -> int:
    return int(self.embedding_layer.input_dim)

  def build(self, input_shape=None):
    if not self.embedding_layer.built:
      self.embedding_layer.build()
    self.transform.build((None, self.hidden_size))
    self.norm.build((None, self.hidden_size))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                       initializer="zeros")
    super().build(input_shape)

  def call(self, hidden, masked_positions, rows=None):
    length = tf.shape(hidden)[1]
    positions = tf.clip_by_value(tf.cast(masked_positions, tf.int32), 0, length - 1)
    if rows is None:
      x = tf.gather(hidden, positions, batch_dims=1)  # [N, P, H]
    else:
      x = tf.gather_nd(hidden, tf.stack([tf.cast(rows, tf.int32), positions], -1))  # [K, H]
    x = self.norm(self.transform(x))
    table = tf.cast(self.embedding_layer.embeddings, x.dtype)  # [V, H]
    logits = (tf.einsum("nph,vh->npv", x, table) if rows is None
              else tf.einsum("kh,vh->kv", x, table))
    return logits + tf.cast(self.output_bias, x.dtype)

  def get_config(self):
    config = super().get_config()
    config.update(embedding_layer=keras.saving.serialize_keras_object(self.embedding_layer),
                  hidden_size=self.hidden_size, layer_norm_epsilon=self.layer_norm_epsilon,
                  initializer_range=self.initializer_range)
    return config


def answer_type_document_scores(logits, document_index, segment_mask, mode: str = "mean",
                                num_documents: Optional[int] = None) -> tf.Tensor:
  """Per-document answer-type scores ``[D, 3]``; arg-max over the last axis = prediction.

  ``"mean"``: the mean of the document's segment logits.  ``"paper"``: ``max_s z_{s,k}``, so
  the arg-max is the type of the arg-max (segment, type) pair.  Documents with no real segment
  get zeros.

  Args:
    logits: float ``[N, 3]``.
    document_index: int ``[N]`` (-1 = padding).
    segment_mask: int ``[N]``.
    mode: ``"mean"`` or ``"paper"``.
    num_documents: ``D`` (default ``N``).
  """
  if mode not in ANSWER_TYPE_MODES:
    raise ValueError(f"mode must be one of {ANSWER_TYPE_MODES}, got {mode!r}")
  logits = tf.cast(logits, tf.float32)
  doc = tf.cast(document_index, tf.int32)
  d = num_documents if num_documents is not None else tf.shape(doc)[0]
  real = tf.logical_and(tf.cast(segment_mask, tf.bool), tf.logical_and(doc >= 0, doc < d))
  bucket = tf.where(real, doc, d)
  count = tf.math.unsorted_segment_sum(tf.ones_like(bucket, tf.float32), bucket, d + 1)[:d]
  if mode == "mean":
    scores = tf.math.unsorted_segment_sum(logits, bucket, d + 1)[:d] / tf.maximum(
        count, 1.0)[:, None]
  else:
    scores = tf.math.unsorted_segment_max(logits, bucket, d + 1)[:d]
  return tf.where(count[:, None] > 0, scores, 0.0)


@keras.saving.register_keras_serializable(package="readtwice")
class AnswerTypeHead(keras.layers.Layer):
  """Answer-type logits (span / yes / no) per segment from its CLS state.

  ``mode`` only selects the loss (:func:`model.training.losses.answer_type_loss`) and the
  document-level inference (:meth:`document_scores`); the layer is ``Dense(3)`` in both.

  Call args:
    hidden: float ``[N, H]`` (CLS states) or ``[N, L, H]`` (token 0 is used).

  Returns:
    float ``[N, 3]``.
  """

  def __init__(self, hidden_size: int, mode: str = "mean", initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    if mode not in ANSWER_TYPE_MODES:
      raise ValueError(f"mode must be one of {ANSWER_TYPE_MODES}, got {mode!r}")
    self.hidden_size = hidden_size
    self.mode = mode
    self.initializer_range = initializer_range
    self.dense = keras.layers.Dense(3, kernel_initializer=truncated_normal(initializer_range),
                                    name="dense")

  def build(self, input_shape=None):
    self.dense.build((None, self.hidden_size))
    super().build(input_shape)

  def call(self, hidden):
    if len(hidden.shape) == 3:
      hidden = hidden[:, 0, :]
    return self.dense(hidden)

  def document_scores(self, logits, document_index, segment_mask,
                      num_documents: Optional[int] = None) -> tf.Tensor:
    """``[D, 3]`` document scores for this head's mode (:func:`answer_type_document_scores`)."""
    return answer_type_document_scores(logits, document_index, segment_mask, self.mode,
                                       num_documents)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, mode=self.mode,
                  initializer_range=self.initializer_range)
    return config


@keras.saving.register_keras_serializable(package="readtwice")
class CorefBias(keras.layers.Layer):
  """The learned scalar ``b`` of the coreference score ``m_i . m_j + b`` (initialised to 0).

  Call args:
    memories: float ``[M, H]`` (only its dtype is used).

  Returns:
    float scalar ``b``.
  """

  def build(self, input_shape=None):
    self.bias = self.add_weight(name="bias", shape=(), initializer="zeros")
    super().build(input_shape)

  def call(self, memories):
    return tf.cast(self.bias, memories.dtype)
