"""MemoryAttention: every token attends over the memories of its own document.

Token ``t`` of segment ``i`` attends over the memories ``j`` with
``document[j] == document[i]`` (padding segments, ``document == -1`` or ``memory_mask == 0``,
excluded) plus one learned *no-op* memory, with a learned per-head bias indexed by the clipped
relative segment distance ``clip(pos[j] - pos[i], -B, B)``.  Optionally only the top-k scores
per token are kept, only the memories of the token's own segment are read (the SS ablation),
and only some tokens (entity mentions) are updated.  The result is added residually and
LayerNorm-ed.  The exact formulas are in :class:`MemoryAttention`'s docstring.
"""

from __future__ import annotations

from typing import Any, Optional

import keras
import tensorflow as tf

from model.network.layers.initializers import memory_kernel, truncated_normal

# Score of a memory a token may not read, in the softmax (finite, so no inf arithmetic; its
# exp underflows to exactly 0 and it is also multiplied by a 0/1 mask).
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


def _dim(x: tf.Tensor, axis: int):
  """Static size of ``x``'s ``axis`` when known, else the dynamic one."""
  static = x.shape[axis]
  return static if static is not None else tf.shape(x)[axis]


def keep_top_k(scores: tf.Tensor, allowed: tf.Tensor, k: int) -> tf.Tensor:
  """bool mask of exactly ``min(k, C)`` candidates per row: the best allowed scores.

  Args:
    scores: float ``[..., C]`` candidate scores.
    allowed: bool, broadcastable to ``scores``: candidates that may be chosen at all.
    k: how many to keep (>= 1).

  Returns:
    bool ``[..., C]``, True for kept candidates, always a subset of ``allowed``.  Disallowed
    candidates rank below every allowed one (they are scored -inf for the selection), so with
    fewer than ``k`` allowed candidates all allowed ones are kept.  Ties at the k-th best score
    are broken towards the LOWER candidate index (``tf.math.top_k``'s order), so exactly
    ``min(k, C)`` candidates are selected before ``allowed`` is applied.
  """
  c = _dim(scores, -1)
  kk = min(k, c) if isinstance(c, int) else tf.minimum(k, c)
  ranked = tf.where(allowed, scores, tf.constant(float("-inf"), scores.dtype))
  kth = tf.math.top_k(ranked, k=kk, sorted=True).values[..., -1:]  # [..., 1]
  above = ranked > kth
  quota = kk - tf.reduce_sum(tf.cast(above, tf.int32), axis=-1, keepdims=True)
  tie = tf.equal(ranked, kth)
  tie_rank = tf.cumsum(tf.cast(tie, tf.int32), axis=-1)  # 1-based rank among the ties
  keep = tf.logical_or(above, tf.logical_and(tie, tie_rank <= quota))
  return tf.logical_and(keep, tf.broadcast_to(allowed, tf.shape(keep)))


@keras.saving.register_keras_serializable(package="readtwice")
class MemoryAttention(keras.layers.Layer):
  """Cross-attention from tokens to same-document memories (+ a no-op memory).

  For head ``h`` (size ``d``), token ``t`` of segment ``i`` with query ``q = W_q x_t`` and
  memories ``m_j`` with keys ``k_j = W_k m_j`` and values ``v_j = W_v m_j`` (``W_*``: Dense
  layers ``query``/``key``/``value``/``output``, with biases):

  * memory score ``s_j = q . k_j / sqrt(d) + R[clip(pos_j - pos_i, -B, B) + B, h]`` for the
    allowed memories ``j`` (same document as segment i, ``memory_mask`` 1, segment i not
    padding; with ``same_segment_only`` additionally ``pos_j == pos_i``);
  * no-op score ``s_0 = q . k_0 / sqrt(d) + b_0`` with a learned key ``k_0`` (``noop_key``,
    ``[heads, d]``) and bias ``b_0`` (``noop_bias``, ``[heads]``); the no-op is always allowed
    and gets no relative-distance bias;
  * ``alpha_j = exp(s_j) / (exp(s_0) + sum_{j' allowed} exp(s_j'))`` (the paper's eq. with the
    no-op term in the softmax denominator);
  * read ``o = sum_{j allowed} alpha_j v_j``: the no-op's VALUE IS ZERO by default, so
    ``alpha_0`` is attention paid to "nothing" and simply scales the memory read down.  With
    ``learned_noop_value=True`` (the behaviour before this option existed, kept for old
    checkpoints) ``o += alpha_0 v_0`` with a learned ``noop_value`` ``[heads, d]``;
  * output ``LayerNorm(x_t + W_o concat_h(o))`` (dropout on the probabilities and on
    ``W_o(...)`` when training).

  Why a zero value: the no-op exists so that a token can read nothing when no memory is
  relevant (or its document has no other memory).  Putting ``exp(s_0)`` only into the
  denominator does exactly that: with all attention on the no-op the memory read is 0 and the
  token leaves the layer as ``LayerNorm(x_t + bias of W_o)``.  A learned value would instead
  make it a learned default memory that is always available.

  ``top_k``: per token and head, exactly the ``min(top_k, A + 1)`` best of the token's A
  allowed memories and the no-op are kept (the softmax above then runs over the kept ones only;
  if the no-op is not among them it is not in the denominator).  Disallowed memories never
  displace allowed ones, so fewer allowed memories than ``top_k`` is fine.  Ties at the k-th
  score go to the lower index, memories in their order before the no-op (see
  :func:`keep_top_k`).

  ``kernel_init="identity"`` starts ``W_q``, ``W_k``, ``W_v`` and ``W_o`` as identities (biases
  0): the scores are then ``x_t . m_j / sqrt(d)`` per head and the read is the memories'
  weighted mean, so tokens read the memories most similar to themselves at full scale from
  the first step (see ``ModelConfig.memory_init``).

  ``query_token_mask`` (entity-only / sparse application): tokens with 0 are returned bit-
  identical (no residual, no LayerNorm); tokens with 1 get the output above.

  Call args:
    hidden: float ``[N, L, H]`` token states.
    memories: float ``[M, H]``.
    query_document: int ``[N]`` document index of each segment (-1 padding).
    memory_document: int ``[M]`` document index of each memory.
    query_position: int ``[N]`` segment position in its document.
    memory_position: int ``[M]`` position of each memory's segment.
    memory_mask: int ``[M]``, 1 for real memories.
    training: dropout switch.
    query_token_mask: optional int/bool ``[N, L]``; 1 = token reads memories, 0 = unchanged.
    return_noop_probability: also return the no-op's attention probability, averaged over
      heads (before dropout; no gradient).
    return_attention: also return (no gradient, before dropout, mean over heads) a dict:
      ``memories`` float ``[N, L, C]``, each token's attention probability on each candidate
      memory; ``memory_index`` int ``[N, C]``, which memory (row of ``memories``) candidate
      ``c`` of segment ``n`` is (all ``M`` in order without ``memory_window``; its window
      with it, padding repeated but with probability 0); ``noop`` float ``[N, L]``.  The
      probabilities over ``C`` plus the no-op sum to 1 per token.  For analysis (which
      memories a token reads), not for training.

    memory_chunk: optional int (inference only): read the memories in chunks of this many
      (without ``top_k`` one pass with an online softmax; with ``top_k`` two passes: the best
      k scores, then the weighted read, the scores computed twice), so the scores never
      exceed ``[N, heads, L, memory_chunk]`` whatever the table's length ``M``: the
      bounded-memory path of whole-book memory (:mod:`model.network.book_memory`).  Same result as
      the one-shot path up to float summation order (kept memories, ties and no-op
      included).  Not with ``training`` or ``return_attention``; ignored with
      ``memory_window`` (already bounded).
    sparse_queries: with ``query_token_mask``, compute the attention for the reading tokens
      only (gathered with ``tf.where``: dynamic shapes, so not inside XLA / on TPUs); the same
      result, at the cost of the reading tokens instead of all ``N x L``.  The no-op
      probability of the other tokens is then 0.

  Returns:
    float ``[N, L, H]``; with ``return_noop_probability`` ``(that, noop float [N, L])``; with
    ``return_attention`` ``(that, dict)`` (it takes precedence).

  Shapes may be static (XLA) or dynamic; nothing branches on tensor values, so memories all-
  gathered across replicas by :func:`gather_memories` work as they are.
  """

  def __init__(self, hidden_size: int, num_heads: int, max_segment_distance: int,
               top_k: Optional[int] = None, dropout: float = 0.1,
               layer_norm_epsilon: float = 1e-12, initializer_range: float = 0.02,
               same_segment_only: bool = False, learned_noop_value: bool = False,
               memory_window: Optional[int] = None, kernel_init: str = "random", **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_heads:
      raise ValueError("hidden_size must be divisible by num_heads.")
    if top_k is not None and top_k < 1:
      raise ValueError(f"top_k must be None or >= 1, got {top_k}.")
    if max_segment_distance < 0:
      raise ValueError("max_segment_distance must be >= 0.")
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.head_size = hidden_size // num_heads
    self.max_segment_distance = max_segment_distance
    self.top_k = top_k
    self.dropout_rate = dropout
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range
    self.same_segment_only = bool(same_segment_only)
    self.learned_noop_value = bool(learned_noop_value)
    if memory_window is not None and memory_window < 1:
      raise ValueError(f"memory_window must be None or >= 1, got {memory_window}")
    self.memory_window = memory_window
    self.kernel_init = kernel_init
    # One initializer instance per weight (a shared one would make them identical; see
    # model.network.layers.initializers).
    def dense(name):
      return keras.layers.Dense(hidden_size,
                                kernel_initializer=memory_kernel(kernel_init, initializer_range),
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
    if self.learned_noop_value:
      self.noop_value = self.add_weight(name="noop_value",
                                        shape=(self.num_heads, self.head_size),
                                        initializer=truncated_normal(self.initializer_range))
    else:
      self.noop_value = None
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

  def allowed_memories(self, query_document, memory_document, query_position, memory_position,
                       memory_mask) -> tf.Tensor:
    """bool ``[N, M]``: which memories each segment may read (the no-op is not included)."""
    qd = tf.cast(query_document, tf.int32)
    md = tf.cast(memory_document, tf.int32)
    allowed = tf.logical_and(tf.equal(qd[:, None], md[None, :]),
                             tf.cast(memory_mask, tf.bool)[None, :])
    allowed = tf.logical_and(allowed, (qd >= 0)[:, None])
    if self.same_segment_only:
      same = tf.equal(tf.cast(query_position, tf.int32)[:, None],
                      tf.cast(memory_position, tf.int32)[None, :])
      allowed = tf.logical_and(allowed, same)
    return allowed

  def windows(self, query_document, memory_document, memory_mask):
    """``(index [N, W], valid [N, W])``: per segment, the first ``memory_window`` memories of
    its document in the table ordered by document (stable, so table order within a document;
    padding memories last).  Exact when no document has more than ``memory_window`` real
    memories; a document with more reads its first ``memory_window`` only."""
    w = self.memory_window
    md = tf.cast(memory_document, tf.int32)
    real = tf.logical_and(tf.cast(memory_mask, tf.bool), md >= 0)
    key = tf.where(real, md, tf.int32.max)
    order = tf.argsort(key, stable=True)
    sorted_key = tf.gather(key, order)
    qd = tf.cast(query_document, tf.int32)
    start = tf.searchsorted(sorted_key[None, :], qd[None, :], side="left")[0]  # [N]
    slot = start[:, None] + tf.range(w, dtype=start.dtype)[None, :]  # [N, W]
    m = tf.shape(key, out_type=slot.dtype)[0]
    inside = slot < m
    slot = tf.minimum(slot, m - 1)
    valid = tf.logical_and(inside, tf.equal(tf.gather(sorted_key, slot), qd[:, None]))
    return tf.gather(order, slot), valid

  def call(self, hidden, memories, query_document, memory_document, query_position,
           memory_position, memory_mask, training=False, query_token_mask=None,
           return_noop_probability=False, return_attention=False, memory_chunk=None,
           sparse_queries=False):
    if sparse_queries and query_token_mask is not None and not return_attention:
      return self._sparse_call(hidden, memories, query_document, memory_document,
                               query_position, memory_position, memory_mask, training,
                               query_token_mask, return_noop_probability, memory_chunk)
    n, l = _dim(hidden, 0), _dim(hidden, 1)
    m = _dim(memories, 0)
    nh, hs = self.num_heads, self.head_size
    q = tf.reshape(self.query(hidden), [n, l, nh, hs])
    k = tf.reshape(self.key(memories), [m, nh, hs])
    v = tf.reshape(self.value(memories), [m, nh, hs])
    scale = 1.0 / float(hs) ** 0.5
    if memory_chunk is not None and self.memory_window is None:
      if training or return_attention:
        raise ValueError("memory_chunk is for inference: not with training=True or "
                         "return_attention")
      if int(memory_chunk) < 1:
        raise ValueError(f"memory_chunk must be >= 1, got {memory_chunk}")
      out, noop_probs = self._chunked_read(
          q, k, v, query_document, memory_document, query_position, memory_position,
          memory_mask, int(memory_chunk))
      return self._finish(hidden, out, noop_probs, training, query_token_mask,
                          return_noop_probability)
    if self.memory_window is None:  # every memory of the pack, other documents masked
      scores = tf.einsum("nlhd,mhd->nhlm", q, k) * scale
      scores += self.relative_bias(query_position, memory_position)[:, :, None, :]
      allowed = self.allowed_memories(query_document, memory_document, query_position,
                                      memory_position, memory_mask)  # [N, M]

      def mix(p):
        return tf.einsum("nhlm,mhd->nlhd", p, v)
      index = tf.broadcast_to(tf.range(m)[None], tf.stack([n, m]))
    else:  # each segment's window of its own document's memories
      index, valid = self.windows(query_document, memory_document, memory_mask)  # [N, W]
      kw, vw = tf.gather(k, index), tf.gather(v, index)  # [N, W, h, d]
      scores = tf.einsum("nlhd,nwhd->nhlw", q, kw) * scale
      position = tf.gather(tf.cast(memory_position, tf.int32), index)  # [N, W]
      b = self.max_segment_distance
      dist = tf.clip_by_value(position - tf.cast(query_position, tf.int32)[:, None], -b, b)
      scores += tf.transpose(tf.gather(self.relative_bias_table, dist + b), [0, 2, 1])[:, :, None]
      qd = tf.cast(query_document, tf.int32)
      allowed = tf.logical_and(valid, tf.cast(tf.gather(memory_mask, index), tf.bool))
      allowed = tf.logical_and(allowed, (qd >= 0)[:, None])
      if self.same_segment_only:
        allowed = tf.logical_and(allowed, tf.equal(
            position, tf.cast(query_position, tf.int32)[:, None]))

      def mix(p):
        return tf.einsum("nhlw,nwhd->nlhd", p, vw)
    noop = tf.einsum("nlhd,hd->nhl", q, self.noop_key) * scale
    noop += self.noop_bias[None, :, None]
    scores = tf.concat([scores, noop[..., None]], axis=-1)  # [N, h, L, M + 1] (or W + 1)

    allowed = tf.concat([allowed, tf.ones_like(allowed[:, :1])], axis=1)  # + no-op
    keep = tf.broadcast_to(allowed[:, None, None, :], tf.shape(scores))
    if self.top_k is not None:
      keep = keep_top_k(scores, keep, self.top_k)
    # Masked softmax: the kept no-op (or the best kept score) is finite, so the denominator is
    # >= 1 after subtracting the max, and excluded candidates get exactly 0.
    scores = tf.where(keep, scores, _NEG)
    scores -= tf.stop_gradient(tf.reduce_max(scores, axis=-1, keepdims=True))
    weights = tf.exp(scores) * tf.cast(keep, scores.dtype)
    probs = weights / tf.reduce_sum(weights, axis=-1, keepdims=True)
    noop_probs = probs[..., -1]  # [N, h, L]
    attention = probs
    probs = self.dropout(probs, training=training)

    out = mix(probs[..., :-1])
    if return_attention:  # before dropout's rescaling: the attention actually computed
      result = self._finish(hidden, out, probs[..., -1], training, query_token_mask, False)
      mean = tf.reduce_mean(tf.stop_gradient(attention), axis=1)  # [N, L, C + 1]
      return result, {"memories": mean[..., :-1], "noop": mean[..., -1],
                      "memory_index": tf.cast(index, tf.int32)}
    return self._finish(hidden, out, probs[..., -1], training, query_token_mask,
                        return_noop_probability, noop_probs)

  def _sparse_call(self, hidden, memories, query_document, memory_document, query_position,
                   memory_position, memory_mask, training, query_token_mask,
                   return_noop_probability, memory_chunk):
    """``sparse_queries``: the layer on the reading tokens only.  Each token with
    ``query_token_mask`` 1 becomes a one-token segment of its segment's document and position
    (``tf.where``: a dynamic count, so not under XLA), the layer runs on those ``[T, 1, H]``,
    and the results are scattered back; the other tokens are returned unchanged (the dense
    path's ``query_token_mask`` rule) with a no-op probability of 0 (they read nothing).  Same
    output as the dense path, with ``T / (N L)`` of its memory-attention work."""
    where = tf.where(tf.cast(query_token_mask, tf.bool))  # [T, 2]: (segment, token)
    segment = where[:, 0]
    tokens = tf.gather_nd(hidden, where)[:, None, :]  # [T, 1, H]
    out = self.call(tokens, memories, tf.gather(query_document, segment), memory_document,
                    tf.gather(query_position, segment), memory_position, memory_mask,
                    training=training, return_noop_probability=return_noop_probability,
                    memory_chunk=memory_chunk)
    read, noop = out if return_noop_probability else (out, None)
    result = tf.tensor_scatter_nd_update(hidden, where, read[:, 0])
    if not return_noop_probability:
      return result
    shape = tf.shape(query_token_mask)
    return result, tf.scatter_nd(where, noop[:, 0], tf.cast(shape, where.dtype))

  def _finish(self, hidden, read, noop_probs, training, query_token_mask,
              return_noop_probability, noop_probs_before_dropout=None):
    """Output projection, residual and LayerNorm of the memory read ``read`` ``[N, L, h, d]``
    (plus the learned no-op value, weighted by ``noop_probs`` ``[N, h, L]``, when there is
    one); the returned no-op probability is the one before dropout."""
    n, l = _dim(hidden, 0), _dim(hidden, 1)
    if self.noop_value is not None:
      read += tf.einsum("nhl,hd->nlhd", noop_probs, self.noop_value)
    out = self.output_dense(tf.reshape(read, [n, l, self.hidden_size]))
    result = self.norm(hidden + self.dropout(out, training=training))
    if query_token_mask is not None:
      update = tf.cast(query_token_mask, tf.bool)[..., None]
      result = tf.where(update, result, hidden)
    if return_noop_probability:
      before = noop_probs if noop_probs_before_dropout is None else noop_probs_before_dropout
      return result, tf.reduce_mean(tf.stop_gradient(before), axis=1)  # [N, L]
    return result

  def _chunked_read(self, q, k, v, query_document, memory_document, query_position,
                    memory_position, memory_mask, chunk):
    """The memory read of :meth:`call` with the table in chunks of ``chunk`` memories (see
    ``memory_chunk``): ``(read [N, L, h, d], no-op probability [N, h, L])``.

    Without ``top_k``: one pass, an online softmax (per token and head the running maximum,
    denominator and weighted read, rescaled when the maximum grows).  With ``top_k``: pass 1
    keeps the running best ``top_k`` allowed scores (each chunk merged with
    ``tf.math.top_k``; the no-op last), which gives the k-th score, how many tied at it are
    kept and the softmax denominator; pass 2 recomputes each chunk's scores and adds its
    kept values, ties at the k-th score kept in memory order as :func:`keep_top_k` does.  The
    loops run one chunk at a time (``parallel_iterations=1``: by default TensorFlow would
    compute up to ten chunks' scores at once, ten times the memory)."""
    n, l = _dim(q, 0), _dim(q, 1)
    nh, hs = self.num_heads, self.head_size
    q = q * (1.0 / float(hs) ** 0.5)
    m = tf.shape(k)[0]
    count = (m + chunk - 1) // chunk
    pad = count * chunk - m
    k = tf.pad(k, [[0, pad], [0, 0], [0, 0]])
    v = tf.pad(v, [[0, pad], [0, 0], [0, 0]])
    document = tf.pad(tf.cast(memory_document, tf.int32), [[0, pad]], constant_values=-1)
    position = tf.pad(tf.cast(memory_position, tf.int32), [[0, pad]])
    mask = tf.pad(tf.cast(memory_mask, tf.int32), [[0, pad]])
    dtype = q.dtype
    minus_inf = tf.constant(float("-inf"), dtype)
    loop = dict(parallel_iterations=1)

    def ranked(i):
      """Chunk ``i``: its scores with disallowed memories at -inf ``[N, h, L, c]``, values."""
      at = i * chunk
      pc = position[at:at + chunk]
      allowed = self.allowed_memories(query_document, document[at:at + chunk], query_position,
                                      pc, mask[at:at + chunk])  # [N, c]
      bias = (self.relative_bias(query_position, pc)
              + tf.where(allowed, tf.zeros((), dtype), minus_inf)[:, None, :])  # [N, h, c]
      scores = tf.einsum("nlhd,chd->nhlc", q, k[at:at + chunk]) + bias[:, :, None, :]
      return scores, v[at:at + chunk]

    def heads_last(x):  # [N, h, L, 1] -> [N, L, h, 1], to scale a read
      return tf.transpose(x, [0, 2, 1, 3])

    noop = tf.einsum("nlhd,hd->nhl", q, self.noop_key)
    noop = (noop + self.noop_bias[None, :, None])[..., None]  # [N, h, L, 1]
    read = tf.zeros(tf.stack([n, l, nh, hs]), dtype)
    if self.top_k is None:
      def online(i, top, denominator, read):
        scores, vc = ranked(i)
        new_top = tf.maximum(top, tf.reduce_max(scores, -1, keepdims=True))
        weights = tf.exp(scores - new_top)  # disallowed: exp(-inf) = 0
        rescale = tf.exp(top - new_top)
        denominator = denominator * rescale + tf.reduce_sum(weights, -1, keepdims=True)
        read = read * heads_last(rescale) + tf.einsum("nhlc,chd->nlhd", weights, vc)
        return i + 1, new_top, denominator, read

      _, top, denominator, read = tf.while_loop(
          lambda i, *_: i < count, online, [tf.constant(0), noop, tf.ones_like(noop), read],
          **loop)
      noop_weight = tf.exp(noop - top)
    else:
      def best_of(i, best):
        scores, _ = ranked(i)
        merged = tf.concat([best, scores], axis=-1)
        return i + 1, tf.math.top_k(merged, k=self.top_k, sorted=True).values

      best = tf.fill(tf.stack([n, nh, l, self.top_k]), minus_inf)
      _, best = tf.while_loop(lambda i, _: i < count, best_of, [tf.constant(0), best], **loop)
      best = tf.math.top_k(tf.concat([best, noop], -1), k=self.top_k, sorted=True).values
      kth = best[..., -1:]
      quota = self.top_k - tf.reduce_sum(tf.cast(best > kth, tf.int32), -1, keepdims=True)
      top = best[..., :1]  # the best kept score: finite (the no-op is always allowed)
      denominator = tf.reduce_sum(tf.exp(best - top), -1, keepdims=True)

      def keep_of(scores, ties_before):
        """Which of ``scores`` are kept, and the ties at the k-th score seen so far."""
        tie = tf.logical_and(tf.equal(scores, kth), scores > minus_inf)
        ties = tf.cumsum(tf.cast(tie, tf.int32), axis=-1) + ties_before
        keep = tf.logical_or(scores > kth, tf.logical_and(tie, ties <= quota))
        return keep, ties_before + tf.reduce_sum(tf.cast(tie, tf.int32), -1, keepdims=True)

      def read_chunk(i, read, ties):
        scores, vc = ranked(i)
        keep, ties = keep_of(scores, ties)
        weights = tf.where(keep, tf.exp(scores - top), tf.zeros_like(scores))
        return i + 1, read + tf.einsum("nhlc,chd->nlhd", weights, vc), ties

      ties = tf.zeros(tf.stack([n, nh, l, 1]), tf.int32)
      _, read, ties = tf.while_loop(lambda i, *_: i < count, read_chunk,
                                    [tf.constant(0), read, ties], **loop)
      keep_noop, _ = keep_of(noop, ties)
      noop_weight = tf.where(keep_noop, tf.exp(noop - top), tf.zeros_like(noop))
    return read / heads_last(denominator), (noop_weight / denominator)[..., 0]

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  max_segment_distance=self.max_segment_distance, top_k=self.top_k,
                  dropout=self.dropout_rate, layer_norm_epsilon=self.layer_norm_epsilon,
                  initializer_range=self.initializer_range,
                  same_segment_only=self.same_segment_only,
                  learned_noop_value=self.learned_noop_value, memory_window=self.memory_window,
                  kernel_init=self.kernel_init)
    return config
