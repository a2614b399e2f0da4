"""Memory extraction: the first read's outputs -> a static-size table of memory vectors.

Three sources (the paper's memory types):

* ``"cls"``: one memory per segment, ``tanh(Dense(state of token 0))`` (M = N).
* ``"sts"``: one memory per span of ``sts_length`` consecutive tokens of every segment,
  ``Dense(concat(state of first token, state of last token))`` (M = N * ceil(L / sts_length)).
* ``"entity"``: one memory per entity mention, ``Dense(concat(state at begin, state at end))``,
  read from the static-shape ``mentions_*`` features that :func:`model.data.pack_reader.parse_pack`
  adds with ``max_mentions`` (M = their length: ``max_memories`` = that ``max_mentions`` for a whole
  pack).

Every source returns the same dict of ``[M]``-leading tensors with a STATIC M (XLA), so
document / position metadata is looked up by gathering with ``"segment"``.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import keras
import tensorflow as tf

from model.network.layers.initializers import memory_kernel

SOURCES = ("cls", "sts", "entity")
MENTION_FEATURES = ("mentions_segment", "mentions_begin", "mentions_end", "mentions_entity_id",
                    "mentions_mask")


def _dim(x: tf.Tensor, axis: int):
  static = x.shape[axis]
  return static if static is not None else tf.shape(x)[axis]


def span_coverage(row, begin, end, flags, num_rows, length) -> tf.Tensor:
  """bool ``[num_rows, length]``: the tokens inside any span ``(row, begin, end)`` (inclusive,
  any equal shapes) whose ``flags`` is true.

  A difference array per row (+1 at a span's begin, -1 after its end, running sum > 0): work
  in ``spans + rows * length``.  Spans with a row outside ``[0, num_rows)`` or ``end < begin``
  cover nothing; begin and end are clipped to the row.
  """
  row = tf.reshape(tf.cast(row, tf.int32), [-1])
  begin = tf.reshape(tf.cast(begin, tf.int32), [-1])
  end = tf.reshape(tf.cast(end, tf.int32), [-1])
  ok = (tf.reshape(tf.cast(flags, tf.bool), [-1]) & (row >= 0) & (row < num_rows)
        & (begin <= end))
  weight = tf.cast(ok, tf.int32)
  row = tf.where(ok, row, 0)
  width = length + 1
  first = row * width + tf.clip_by_value(begin, 0, length)
  after = row * width + tf.clip_by_value(end + 1, 0, length)
  size = num_rows * width
  delta = (tf.math.unsorted_segment_sum(weight, first, size)
           - tf.math.unsorted_segment_sum(weight, after, size))
  return tf.cumsum(tf.reshape(delta, [num_rows, width]), axis=1)[:, :length] > 0


def mention_token_mask(features, num_segments: int, seq_length: int) -> tf.Tensor:
  """int32 ``[N, L]``: 1 at every token inside a real mention, 0 elsewhere.

  Reads ``mentions_segment``, ``mentions_begin``, ``mentions_end`` (inclusive) and
  ``mentions_mask`` (int ``[K]``, from :func:`model.data.pack_reader.parse_pack` with
  ``max_mentions``), so the shape is static; e.g. MemoryAttention's ``query_token_mask`` for the
  paper's sparse (entity-only) application.  A mention whose segment is outside ``[0, N)`` covers
  nothing.
  """
  return tf.cast(span_coverage(features["mentions_segment"], features["mentions_begin"],
                               features["mentions_end"],
                               tf.cast(features["mentions_mask"], tf.int32) > 0,
                               num_segments, seq_length), tf.int32)


@keras.saving.register_keras_serializable(package="readtwice")
class ExtractMemories(keras.layers.Layer):
  """Extracts memories from BERT_1 outputs.

  Args:
    hidden_size: H, the width of the memories (and of the BERT_1 states).
    source: ``"cls"``, ``"sts"`` or ``"entity"`` (see the module docstring).
    sts_length: span length of the ``"sts"`` source (>= 1).
    max_memories: M of the ``"entity"`` source for a whole pack, required there: the reader's
      ``max_mentions``, the length of the ``mentions_*`` features (longer ones are refused);
      ignored by the other sources.
    initializer_range: stddev of the projection's truncated-normal kernel initializer.
    kernel_init: ``"random"`` (truncated normal) or ``"identity"``: the projection starts as
      the mean of the span's first and last states (``"cls"``: the CLS state, then ``tanh``).

  The one sublayer, ``projection`` (kept under that name for every source, so ``"cls"``
  checkpoints from before the other sources existed still load), is ``Dense(H, tanh)`` on
  ``[*, H]`` for ``"cls"`` and a linear ``Dense(H)`` on ``[*, 2H]`` for the span sources.

  Call args:
    hidden: float ``[N, L, H]`` BERT_1 output for the N segments of a pack.
    features: the pack feature dict.  ``"cls"``: optional ``input_mask`` int ``[N, L]`` (a
      segment without real tokens gives a masked memory; without it every memory is real).
      ``"sts"``: ``input_mask`` int ``[N, L]`` (required).  ``"entity"``: ``mentions_segment``,
      ``mentions_begin``, ``mentions_end`` (inclusive), ``mentions_entity_id``,
      ``mentions_mask``, each int ``[K]`` with ``K <= max_memories`` (required): K =
      ``max_memories`` for a whole pack, less for a replica's share of one
      (``model.training.replicas.split_pack``); ``mentions_segment`` indexes the rows of ``hidden``
      (a mention outside ``hidden``'s rows or tokens gets mask 0).

  Returns:
    dict of
      ``"memories"``: float ``[M, H]``;
      ``"segment"``: int32 ``[M]``, the pack row each memory comes from (a valid row, 0..N-1,
      also for padding memories);
      ``"mask"``: int32 ``[M]``, 1 for real memories;
      ``"entity_id"``: int32 ``[M]``, 0 = none / unknown (always 0 for ``"cls"``/``"sts"``);
      ``"begin"``, ``"end"``: int32 ``[M]``, inclusive token positions of the memory's span in
      its segment (``"cls"``: 0, 0).
    M is static whenever N, L and K are: N (cls), N * ceil(L / sts_length) (sts), K (entity;
    :meth:`num_memories` gives max_memories, the whole pack's K).
  """

  def __init__(self, hidden_size: int, source: str = "cls", sts_length: int = 32,
               max_memories: Optional[int] = None, initializer_range: float = 0.02,
               kernel_init: str = "random", **kwargs):
    super().__init__(**kwargs)
    if source not in SOURCES:
      raise ValueError(f"Unknown memory source {source!r}; expected one of {SOURCES}.")
    if sts_length < 1:
      raise ValueError(f"sts_length must be >= 1, got {sts_length}.")
    if source == "entity" and (max_memories is None or max_memories < 1):
      raise ValueError("memory source 'entity' needs max_memories >= 1 (the reader's "
                       f"max_mentions: the length of the mentions_* features); got "
                       f"{max_memories!r}.")
    self.hidden_size = hidden_size
    self.source = source
    self.sts_length = sts_length
    self.max_memories = max_memories
    self.initializer_range = initializer_range
    self.kernel_init = kernel_init
    self.projection = keras.layers.Dense(
        hidden_size, activation="tanh" if source == "cls" else None, name="projection",
        kernel_initializer=memory_kernel(kernel_init, initializer_range))

  def num_memories(self, num_segments: int, seq_length: int) -> int:
    """Static M for a whole pack of ``num_segments`` x ``seq_length`` tokens."""
    if self.source == "cls":
      return num_segments
    if self.source == "sts":
      return num_segments * math.ceil(seq_length / self.sts_length)
    return self.max_memories

  def build(self, input_shape):
    width = input_shape[-1] if self.source == "cls" else 2 * input_shape[-1]
    self.projection.build((None, width))
    super().build(input_shape)

  def call(self, hidden, features=None) -> Dict[str, tf.Tensor]:
    return getattr(self, f"_extract_{self.source}")(hidden, features or {})

  def _extract_cls(self, hidden, features) -> Dict[str, tf.Tensor]:
    n = _dim(hidden, 0)
    segment = tf.range(n, dtype=tf.int32)
    if "input_mask" in features:
      mask = tf.reduce_max(tf.cast(tf.cast(features["input_mask"], tf.bool), tf.int32), axis=1)
    else:
      mask = tf.ones([n], tf.int32)
    zeros = tf.zeros([n], tf.int32)
    return {"memories": self.projection(hidden[:, 0, :]), "segment": segment, "mask": mask,
            "entity_id": zeros, "begin": zeros, "end": zeros}

  def _span_memories(self, hidden, segment, begin, end) -> tf.Tensor:
    """``Dense(concat(hidden[segment, begin], hidden[segment, end]))``: float ``[M, H]``."""
    first = tf.gather_nd(hidden, tf.stack([segment, begin], axis=1))  # [M, H]
    last = tf.gather_nd(hidden, tf.stack([segment, end], axis=1))
    return self.projection(tf.concat([first, last], axis=-1))

  def _extract_sts(self, hidden, features) -> Dict[str, tf.Tensor]:
    """Spans ``[c * s, min((c + 1) * s, L) - 1]`` of every segment, c = 0..ceil(L / s) - 1.

    A span is real (mask 1) when it holds at least one token with ``input_mask`` 1; its
    ``begin``/``end`` are then its first and last REAL tokens (the states the memory is made
    of), otherwise the span's own first and last positions.
    """
    if "input_mask" not in features:
      raise ValueError("memory source 'sts' needs features['input_mask'] [N, L].")
    n, l = _dim(hidden, 0), _dim(hidden, 1)
    s = self.sts_length
    if isinstance(l, int):
      c = -(-l // s)
    else:
      c = (l + s - 1) // s
    real = tf.cast(tf.cast(features["input_mask"], tf.bool), tf.int32)  # [N, L]
    real = tf.pad(real, [[0, 0], [0, c * s - l]])
    real = tf.reshape(real, [n, c, s])
    span_start = tf.range(c, dtype=tf.int32) * s  # [C]
    span_last = tf.minimum(span_start + s, l) - 1  # [C]
    has_real = tf.reduce_max(real, axis=-1)  # [N, C]
    first_real = tf.argmax(real, axis=-1, output_type=tf.int32)
    last_real = s - 1 - tf.argmax(tf.reverse(real, axis=[-1]), axis=-1, output_type=tf.int32)
    begin = tf.where(has_real > 0, span_start + first_real, span_start)  # [N, C]
    end = tf.where(has_real > 0, span_start + last_real, span_last)
    segment = tf.broadcast_to(tf.range(n, dtype=tf.int32)[:, None], [n, c])
    segment, begin, end, mask = (tf.reshape(t, [n * c]) for t in (segment, begin, end,
                                                                     has_real))
    return {"memories": self._span_memories(hidden, segment, begin, end), "segment": segment,
            "mask": mask, "entity_id": tf.zeros_like(mask), "begin": begin, "end": end}

  def _extract_entity(self, hidden, features) -> Dict[str, tf.Tensor]:
    missing = [k for k in MENTION_FEATURES if k not in features]
    if missing:
      raise ValueError(f"memory source 'entity' needs the features {missing}: read the packs "
                       "with max_mentions set (model.data.pack_reader.make_dataset(..., "
                       "max_mentions=K)).")
    got = {k: tf.cast(features[k], tf.int32) for k in MENTION_FEATURES}
    for k, t in got.items():
      if t.shape.rank is not None and t.shape.rank != 1:
        raise ValueError(f"features[{k!r}] must be [K] (K <= max_memories); got shape "
                         f"{t.shape}.")
      if t.shape[0] is not None and t.shape[0] > self.max_memories:
        raise ValueError(f"features[{k!r}] has {t.shape[0]} entries but max_memories is "
                         f"{self.max_memories}: read the packs with "
                         "max_mentions=max_memories.")
    sizes = {t.shape[0] for t in got.values()}
    if len(sizes - {None}) > 1:
      raise ValueError(f"the mentions_* features differ in length: {sorted(sizes - {None})}.")
    n, l = _dim(hidden, 0), _dim(hidden, 1)
    segment, begin, end = (got[f"mentions_{k}"] for k in ("segment", "begin", "end"))
    # A mention outside hidden's rows / tokens (malformed) is masked like padding; masked
    # entries point at row 0, token 0 so that the gather stays in range.
    valid = ((got["mentions_mask"] > 0) & (segment >= 0) & (segment < n) & (begin >= 0) &
             (begin <= end) & (end < l))
    mask = tf.cast(valid, tf.int32)
    segment, begin, end = segment * mask, begin * mask, end * mask
    return {"memories": self._span_memories(hidden, segment, begin, end), "segment": segment,
            "mask": mask, "entity_id": got["mentions_entity_id"] * mask, "begin": begin,
            "end": end}

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, source=self.source, sts_length=self.sts_length,
                  max_memories=self.max_memories, initializer_range=self.initializer_range,
                  kernel_init=self.kernel_init)
    return config
