"""ReadTwice losses over one pack, normalised over the whole pack across replicas.

Losses
------
* **OR-loss** (span begin and end separately): for every document ``d`` (segments grouped by
  ``document_index``; padding segments excluded) with at least one positive position and an
  answer type other than yes/no::

    loss_d = logsumexp_{t in context(d)} logit_t - logsumexp_{t in positives(d)} logit_t
           = -log sum_{t in positives(d)} softmax_{context(d)}(logit)_t

  where the softmax normalises over ALL context tokens of ALL segments of ``d``.  Averaged over
  contributing documents.
* **Answer type**, two modes (``ANSWER_TYPE_MODES``), documents with ``answer_type < 0``
  skipped, averaged over documents:

  - ``"mean"``: softmax cross-entropy of the mean of a document's segment logits ``[3]``
    against the document's ``answer_type``.
  - ``"paper"`` (the paper's appendix, HotpotQA): one softmax over all (segment, type) pairs of
    the document; the gold event is "some segment with the gold type" (an OR-loss)::

      loss_d = logsumexp_{s in d, k} z_{s,k} - logsumexp_{s in d} z_{s,gold(d)}

    Inference takes the type of the arg-max (segment, type) pair
    (:func:`model.network.layers.heads.answer_type_document_scores`).
* **Supporting**: sigmoid cross-entropy per real segment with ``supporting >= 0``, averaged over
  those segments.
* **MLM** (:func:`mlm_loss`): weighted mean token cross-entropy at the masked positions.
* **Coreference** (:func:`coref_loss`): sigmoid cross-entropy of ``m_i . m_j + b`` against
  "same entity" over pairs of memories with known entity ids.

``total = (span_begin + span_end) / 2 + w_at * answer_type + w_sup * supporting
[+ w_mlm * mlm] [+ w_coref * coref]`` (all weights 1 by default).

Replicas and the gradient convention
------------------------------------
One pack is one global batch of ``N_global`` segments.  Under a multi-replica ``tf.distribute``
strategy (``MirroredStrategy`` ...) each replica holds ``N = N_global / R`` consecutive rows,
and one document may have segments on several replicas (``document_index`` is global within the
pack).  Every loss here is computed as the *single-device loss of the whole pack*: per-document
(or per-token) partial statistics are computed locally in ``N_global`` static buckets keyed by
the global document index, combined across replicas (``ReplicaContext.all_gather`` of the
stop-gradient maxima and counts, ``ReplicaContext.all_reduce(SUM)`` of the differentiable
exp-sums / weighted sums) and normalised by global counts.

**Convention**: every *loss* value (``LOSS_KEYS``) returned on a replica is
``loss_global / R``, so

* the SUM over replicas of a loss (``strategy.reduce(SUM, ...)``) is the single-device loss;
* the gradient of a replica's loss w.r.t. its LOCAL logits equals the single-device gradient
  w.r.t. those same logits (the backward pass of ``all_reduce(SUM)`` / ``all_gather`` sums the
  ``1/R``-scaled upstream gradients of all replicas);
* hence the per-replica parameter gradients SUM to the single-device parameter gradient, which
  is what Keras 3's TF optimizer applies under ``MirroredStrategy``
  (``TFOptimizer._all_reduce_sum_gradients``: an all-reduce SUM of the replica gradients).

Counts and accuracies (every key not in ``LOSS_KEYS``) are global: identical on every replica
(reduce with MEAN, or take any replica; :func:`reduce_replica_losses` does both).  With no
strategy (or one replica) ``R = 1`` and nothing is exchanged.  All functions use static shapes
and no Python branching on tensor values, so they compile with ``tf.function(jit_compile=True)``
when there is a single replica.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from schemas import records

ANSWER_TYPE_MODES = ("mean", "paper")
# Keys of `readtwice_losses` that are losses (scaled by 1/R on each replica, SUM to combine).
LOSS_KEYS = ("span_begin", "span_end", "answer_type", "supporting", "mlm", "coref", "total")
_LOW = -1e30  # "no value" for bucket maxima (finite, so XLA and gradients stay NaN-free)


class _Replicas:
  """Cross-replica helpers; identities when there is one replica (or no strategy)."""

  def __init__(self, replica_context: Optional[Any] = None, local: bool = False):
    ctx = None if local else (replica_context if replica_context is not None
                              else tf.distribute.get_replica_context())
    self.num_replicas = int(ctx.num_replicas_in_sync) if ctx is not None else 1
    self.ctx = ctx if self.num_replicas > 1 else None

  def sum(self, tensors):
    """All-reduce SUM of a nest (differentiable: the backward pass is an all-reduce SUM)."""
    if self.ctx is None:
      return tensors
    return self.ctx.all_reduce(tf.distribute.ReduceOp.SUM, tensors)

  def stack(self, tensor: tf.Tensor) -> tf.Tensor:
    """``[R, ...]``: every replica's (stop-gradient) ``tensor``, in replica order."""
    tensor = tf.stop_gradient(tensor)
    if self.ctx is None:
      return tensor[None]
    return self.ctx.all_gather(tensor[None], axis=0)

  def gather(self, tensor: tf.Tensor) -> tf.Tensor:
    """All-gather along axis 0 (differentiable), replica order."""
    if self.ctx is None:
      return tensor
    return self.ctx.all_gather(tensor, axis=0)


def _num_rows(t: tf.Tensor):
  """Static first dimension when known, else the dynamic one."""
  return t.shape[0] if t.shape[0] is not None else tf.shape(t)[0]


def _document_buckets(features: Mapping[str, tf.Tensor], num_replicas: int = 1):
  """Global bucket id per local segment ``[N]``.

  Returns ``(bucket, real, nb)``: ``bucket`` is the segment's (global) document index clipped to
  ``[0, nb)``, or ``nb`` (a dummy bucket) for padding; ``real`` the bool ``[N]`` real-segment
  mask; ``nb = N * num_replicas`` the global segment count (a static int when ``N`` is static),
  an upper bound on the documents of a pack.
  """
  doc = tf.cast(features["document_index"], tf.int32)
  nb = _num_rows(doc) * num_replicas
  real = tf.logical_and(tf.cast(features["segment_mask"], tf.bool), doc >= 0)
  bucket = tf.where(real, tf.clip_by_value(doc, 0, nb - 1), nb)
  return bucket, real, nb


def segment_logsumexp(values: tf.Tensor, ids: tf.Tensor, num_segments) -> tf.Tensor:
  """Numerically stable logsumexp of ``values`` grouped by ``ids``; 0 for empty groups (local)."""
  return _global_segment_logsumexp(_Replicas(local=True), [values], [ids], num_segments)[0][0]


def _global_segment_logsumexp(rep: _Replicas, values: Sequence[tf.Tensor],
                              ids: Sequence[tf.Tensor], num_segments,
                              sum_stats: Optional[tf.Tensor] = None) -> tuple:
  """Logsumexp of each ``values[k]`` (flat) grouped by ``ids[k]``, over all replicas.

  Args:
    rep: the replica helper.
    values: K float tensors ``[T_k]``.
    ids: K int tensors ``[T_k]`` in ``[0, num_segments)``.
    num_segments: number of groups ``S`` (the same on every replica).
    sum_stats: optional float ``[J, S]`` non-differentiable statistics to SUM over replicas in
      the same exchange (counts).

  Returns:
    ``([K] list of float [S] logsumexp (0 for groups empty on all replicas), [J, S] summed
    stats or None)``.
  """
  k = len(values)
  local_max, counts = [], []
  for v, i in zip(values, ids):
    counts.append(tf.math.unsorted_segment_sum(tf.ones_like(v), i, num_segments))
    local_max.append(tf.math.unsorted_segment_max(tf.stop_gradient(v), i, num_segments))
  local_max = tf.where(tf.stack(counts) > 0, tf.stack(local_max), _LOW)  # [K, S]
  rows = local_max if sum_stats is None else tf.concat([local_max, sum_stats], 0)
  gathered = rep.stack(rows)  # [R, K (+J), S]
  gmax = tf.reduce_max(gathered[:, :k], axis=0)
  stats = None if sum_stats is None else tf.reduce_sum(gathered[:, k:], axis=0)
  shift = tf.stop_gradient(tf.where(gmax > 0.5 * _LOW, gmax, 0.0))  # [K, S]
  sums = [tf.math.unsorted_segment_sum(tf.exp(v - tf.gather(shift[j], i)), i, num_segments)
          for j, (v, i) in enumerate(zip(values, ids))]
  sums = rep.sum(sums)
  out = []
  for j, s in enumerate(sums):
    empty = tf.cast(tf.equal(s, 0.0), s.dtype)
    out.append(tf.math.log(s + empty) + shift[j] * (1.0 - empty))
  return out, stats


def or_loss(logits: tf.Tensor, labels: tf.Tensor, features: Mapping[str, tf.Tensor]
            ) -> Dict[str, tf.Tensor]:
  """Document-level OR-loss for one span side (cross-replica; see the module docstring).

  Args:
    logits: float ``[N, L]`` (this replica's rows).
    labels: int ``[N, L]`` multi-hot positive positions.
    features: pack features (``document_index``, ``segment_mask``, ``token_kind``,
      ``answer_type``), this replica's rows.

  Returns:
    ``{"loss": scalar loss_global / R, "documents": global number of contributing documents}``.
  """
  rep = _Replicas()
  bucket, real, nb = _document_buckets(features, rep.num_replicas)
  logits = tf.cast(logits, tf.float32)
  context = tf.logical_and(
      tf.equal(tf.cast(features["token_kind"], tf.int32), records.TOKEN_KIND_CONTEXT),
      real[:, None])
  positive = tf.logical_and(context, tf.cast(labels, tf.int32) > 0)
  token_bucket = tf.broadcast_to(bucket[:, None], tf.shape(logits))
  flat = tf.reshape(logits, [-1])
  all_ids = tf.reshape(tf.where(context, token_bucket, nb), [-1])
  pos_ids = tf.reshape(tf.where(positive, token_bucket, nb), [-1])
  atype = tf.cast(features["answer_type"], tf.int32)
  yes_no = tf.logical_and(real, tf.logical_or(tf.equal(atype, records.ANSWER_TYPE_YES),
                                              tf.equal(atype, records.ANSWER_TYPE_NO)))
  stats = tf.stack([
      tf.math.unsorted_segment_sum(tf.cast(tf.reshape(positive, [-1]), tf.float32), pos_ids,
                                   nb + 1),
      tf.math.unsorted_segment_sum(tf.cast(yes_no, tf.float32), bucket, nb + 1)])
  (lse_all, lse_pos), stats = _global_segment_logsumexp(rep, [flat, flat], [all_ids, pos_ids],
                                                        nb + 1, sum_stats=stats)
  # A document is yes/no iff one of its segments says so (== the max over its segments' types).
  valid = tf.logical_and(stats[0, :nb] > 0, tf.equal(stats[1, :nb], 0.0))
  count = tf.reduce_sum(tf.cast(valid, tf.float32))
  per_doc = tf.where(valid, lse_all[:nb] - lse_pos[:nb], 0.0)
  loss = tf.reduce_sum(per_doc) / tf.maximum(count, 1.0)
  return {"loss": loss / rep.num_replicas, "documents": count}


def _document_answer_type(features, bucket, real, nb):
  """Local ``[nb + 1, 3]`` float counts of real segments per (bucket, answer type)."""
  atype = tf.cast(features["answer_type"], tf.int32)
  known = tf.logical_and(real, atype >= 0)
  onehot = tf.one_hot(tf.where(known, atype, 0), 3) * tf.cast(known, tf.float32)[:, None]
  return tf.math.unsorted_segment_sum(onehot, bucket, nb + 1)


def _label_from_counts(type_counts: tf.Tensor) -> tf.Tensor:
  """Document label ``[S]``: the largest type with a segment (== max over segments), or -1."""
  types = tf.range(3, dtype=tf.int32)[None, :]
  return tf.reduce_max(tf.where(type_counts > 0, types, -1), axis=1)


def answer_type_loss(answer_type_logits: tf.Tensor, features: Mapping[str, tf.Tensor],
                     mode: str = "mean") -> Dict[str, tf.Tensor]:
  """Document answer-type loss (cross-replica; see the module docstring).

  Args:
    answer_type_logits: float ``[N, 3]`` per-segment logits (span / yes / no).
    features: pack features (``document_index``, ``segment_mask``, ``answer_type``).
    mode: ``"mean"`` (cross-entropy of the mean of the document's segment logits) or
      ``"paper"`` (softmax over all (segment, type) pairs of the document; gold = any segment
      with the gold type).

  Returns:
    ``{"loss": scalar loss_global / R, "documents": global number of contributing documents}``.
  """
  if mode not in ANSWER_TYPE_MODES:
    raise ValueError(f"mode must be one of {ANSWER_TYPE_MODES}, got {mode!r}")
  rep = _Replicas()
  bucket, real, nb = _document_buckets(features, rep.num_replicas)
  logits = tf.cast(answer_type_logits, tf.float32)
  type_counts = _document_answer_type(features, bucket, real, nb)  # [nb + 1, 3]
  if mode == "mean":
    seg_counts = tf.math.unsorted_segment_sum(tf.ones_like(bucket, tf.float32), bucket, nb + 1)
    stats = tf.reduce_sum(
        rep.stack(tf.concat([type_counts, seg_counts[:, None]], 1)), axis=0)[:nb]
    logit_sums = rep.sum(tf.math.unsorted_segment_sum(logits, bucket, nb + 1))[:nb]
    doc_logits = logit_sums / tf.maximum(stats[:, 3:], 1.0)
    doc_label = _label_from_counts(stats[:, :3])
    valid = doc_label >= 0
    per_doc = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(doc_label, 0),
                                                             logits=doc_logits)
  else:
    seg_ids = [bucket] * 3
    type_lse, stats = _global_segment_logsumexp(
        rep, [logits[:, k] for k in range(3)], seg_ids, nb + 1,
        sum_stats=tf.transpose(type_counts))
    table = tf.stack(type_lse, axis=1)[:nb]  # [nb, 3]: logsumexp_{s in d} z_{s,k}
    doc_label = _label_from_counts(tf.transpose(stats)[:nb])
    valid = doc_label >= 0
    gold = tf.gather(table, tf.maximum(doc_label, 0), batch_dims=1)
    per_doc = tf.reduce_logsumexp(table, axis=1) - gold
  count = tf.reduce_sum(tf.cast(valid, tf.float32))
  loss = tf.reduce_sum(tf.where(valid, per_doc, 0.0)) / tf.maximum(count, 1.0)
  return {"loss": loss / rep.num_replicas, "documents": count}


def supporting_loss(supporting_logits: tf.Tensor, features: Mapping[str, tf.Tensor]
                    ) -> Dict[str, tf.Tensor]:
  """Sigmoid cross-entropy per real segment with ``supporting >= 0``, mean over the pack.

  Returns ``{"loss": loss_global / R, "segments": global count}``.
  """
  rep = _Replicas()
  _, real, _ = _document_buckets(features, rep.num_replicas)
  labels = tf.cast(features["supporting"], tf.int32)
  valid = tf.logical_and(real, labels >= 0)
  ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(tf.maximum(labels, 0), tf.float32),
                                               logits=tf.cast(supporting_logits, tf.float32))
  total = rep.sum(tf.reduce_sum(tf.where(valid, ce, 0.0)))
  count = tf.reduce_sum(rep.stack(tf.reduce_sum(tf.cast(valid, tf.float32))))
  return {"loss": total / tf.maximum(count, 1.0) / rep.num_replicas, "segments": count}


def mlm_token_sums(logits: tf.Tensor, masked_ids: tf.Tensor, masked_weights: tf.Tensor,
                   masked_is_entity: Optional[tf.Tensor] = None,
                   index: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
  """This replica's weighted sums over the masked positions (one softmax over the vocabulary).

  Args:
    logits: float ``[N, P, V]``; masked_ids: int ``[N, P]``; masked_weights: float ``[N, P]``.
    masked_is_entity: optional float ``[N, P]``, 1 at positions of masked entity mentions.
    index: None, or the model's ``mlm_index`` int ``[K, 2]`` when ``logits`` are its sparse
      ``[K, V]`` (the slots of weight > 0): the other three are read at those ``(row, slot)``.

  Returns:
    scalars ``weight`` (sum w), ``correct`` (sum w * [arg-max == id]), ``ce`` (sum w *
    cross-entropy, differentiable) and, with ``masked_is_entity``, the same three over entity
    positions: ``entity_weight``, ``entity_correct``, ``entity_ce``.
  """
  if index is not None:
    masked_ids, masked_weights = tf.gather_nd(masked_ids, index), tf.gather_nd(masked_weights,
                                                                               index)
    if masked_is_entity is not None:
      masked_is_entity = tf.gather_nd(masked_is_entity, index)
  logits = tf.cast(logits, tf.float32)
  ids = tf.cast(masked_ids, tf.int32)
  w = tf.cast(masked_weights, tf.float32)
  ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.clip_by_value(ids, 0, tf.shape(logits)[-1] - 1), logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), ids), tf.float32)
  out = {"weight": tf.reduce_sum(w), "correct": tf.reduce_sum(w * correct),
         "ce": tf.reduce_sum(w * ce)}
  if masked_is_entity is not None:
    ent = w * tf.cast(masked_is_entity, tf.float32)
    out.update(entity_weight=tf.reduce_sum(ent), entity_correct=tf.reduce_sum(ent * correct),
               entity_ce=tf.reduce_sum(ent * ce))
  return out


def mlm_loss(logits: tf.Tensor, masked_ids: tf.Tensor, masked_weights: tf.Tensor,
             masked_is_entity: Optional[tf.Tensor] = None,
             index: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
  """Masked-LM loss: weighted mean token cross-entropy over the whole pack.

  Args:
    logits: float ``[N, P, V]`` at the masked positions (``model.network.layers.heads.MLMHead``).
    masked_ids: int ``[N, P]`` original token ids.
    masked_weights: float ``[N, P]`` (0 for padding positions).
    masked_is_entity: optional float ``[N, P]``, 1 at positions of masked entity mentions.
    index: the model's ``mlm_index`` with sparse ``[K, V]`` logits (:func:`mlm_token_sums`).

  Returns:
    ``{"loss": (sum w * ce / sum w) / R (0 when sum w == 0), "accuracy": global weighted
    accuracy of the arg-max, "weight": global sum of weights}``; with ``masked_is_entity`` also
    ``entity_accuracy`` and ``entity_weight`` (the same over entity positions).
  """
  rep = _Replicas()
  sums = mlm_token_sums(logits, masked_ids, masked_weights, masked_is_entity, index)
  total = rep.sum(sums["ce"])
  keys = ["weight", "correct"] + (["entity_weight", "entity_correct"]
                                  if masked_is_entity is not None else [])
  stats = tf.reduce_sum(rep.stack(tf.stack([sums[k] for k in keys])), 0)
  denom = tf.maximum(stats[0], 1e-12)
  loss = tf.where(stats[0] > 0, total / denom, 0.0)
  out = {"loss": loss / rep.num_replicas,
         "accuracy": tf.where(stats[0] > 0, stats[1] / denom, 0.0), "weight": stats[0]}
  if masked_is_entity is not None:
    out.update(entity_accuracy=stats[3] / tf.maximum(stats[2], 1.0), entity_weight=stats[2])
  return out


def cross_replica_sum(tensors):
  """All-reduce SUM of a nest over the replicas (identity on one, or outside a strategy)."""
  return _Replicas().sum(tensors)


def coref_loss(memories: tf.Tensor, entity_id: tf.Tensor, mask: tf.Tensor, bias,
               all_gather: bool = False) -> Dict[str, tf.Tensor]:
  """Coreference loss over entity memories.

  For all ordered pairs ``i != j`` of memories with ``mask == 1`` and known entity ids (``> 0``)
  on both sides: sigmoid cross-entropy of ``m_i . m_j + bias`` against ``entity_id_i ==
  entity_id_j``; the mean over those pairs (0 when there is none).

  Args:
    memories: float ``[M, H]``.  Normally the memory table already all-gathered across
      replicas (identical on every replica, as :func:`model.network.layers.gather_memories` returns
      it): then every replica computes the whole pack's loss and returns it divided by ``R``; the
      backward pass of that all-gather sums the replicas' gradients, so the convention of the
      module docstring holds.
    entity_id: int ``[M]`` (0 = unknown).
    mask: int ``[M]`` (1 = real memory).
    bias: float scalar (e.g. ``model.network.layers.heads.CorefBias``).
    all_gather: set when ``memories``/``entity_id``/``mask`` are this replica's LOCAL rows:
      they are all-gathered here first (no-op with one replica).

  Returns:
    ``{"loss": loss_global / R, "pairs": number of valid ordered pairs, "positive_pairs":
    number of same-entity ordered pairs}``.
  """
  rep = _Replicas()
  memories = tf.cast(memories, tf.float32)
  entity_id = tf.cast(entity_id, tf.int32)
  mask = tf.cast(mask, tf.int32)
  if all_gather:
    memories = rep.gather(memories)
    entity_id = tf.stop_gradient(rep.gather(entity_id))
    mask = tf.stop_gradient(rep.gather(mask))
  known = tf.logical_and(mask > 0, entity_id > 0)  # [M]
  m = _num_rows(memories)
  valid = tf.logical_and(tf.logical_and(known[:, None], known[None, :]),
                         tf.logical_not(tf.eye(m, dtype=tf.bool)))
  same = tf.cast(tf.equal(entity_id[:, None], entity_id[None, :]), tf.float32)
  logits = tf.matmul(memories, memories, transpose_b=True) + tf.cast(bias, tf.float32)
  ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=same, logits=logits)
  validf = tf.cast(valid, tf.float32)
  count = tf.reduce_sum(validf)
  loss = tf.reduce_sum(ce * validf) / tf.maximum(count, 1.0)
  return {"loss": loss / rep.num_replicas, "pairs": count,
          "positive_pairs": tf.reduce_sum(validf * same)}


def readtwice_losses(outputs: Mapping[str, tf.Tensor], features: Mapping[str, tf.Tensor], *,
                     answer_type_mode: str = "mean", answer_type_weight: float = 1.0,
                     supporting_weight: float = 1.0, mlm_weight: float = 1.0,
                     coref_weight: float = 1.0, coref_all_gather: bool = False
                     ) -> Dict[str, tf.Tensor]:
  """All losses of one pack (cross-replica; see the module docstring for the convention).

  Args:
    outputs: model outputs: ``begin_logits``, ``end_logits`` ``[N, L]``,
      ``answer_type_logits`` ``[N, 3]``, ``supporting_logits`` ``[N]``; optionally
      ``mlm_logits`` ``[N, P, V]`` (MLM, with ``masked_ids``/``masked_weights`` features) and
      ``memory_table`` ``[M, H]``, ``memory_entity_id`` ``[M]``, ``memory_mask`` ``[M]``,
      ``coref_bias`` scalar (coreference; the table all-gathered across replicas unless
      ``coref_all_gather``).
    features: pack features from :mod:`model.data.pack_reader` (this replica's rows); ``masked_ids``
      int ``[N, P]`` and ``masked_weights`` float ``[N, P]`` for the MLM loss.
    answer_type_mode: ``"mean"`` or ``"paper"`` (:func:`answer_type_loss`).
    answer_type_weight, supporting_weight, mlm_weight, coref_weight: weights in ``total``.
    coref_all_gather: the ``memory_*`` outputs are local rows; all-gather them here.

  Returns:
    dict of scalars: losses ``span_begin``, ``span_end``, ``answer_type``, ``supporting``,
    ``total`` (+ ``mlm``, ``coref`` when present) -- each ``loss_global / R`` --; global
    statistics ``span_documents``, ``answer_type_documents``, ``supporting_segments``
    (+ ``mlm_accuracy``, ``mlm_weight``; ``coref_pairs``, ``coref_positive_pairs``).
  """
  begin = or_loss(outputs["begin_logits"], features["answer_begin_labels"], features)
  end = or_loss(outputs["end_logits"], features["answer_end_labels"], features)
  atype = answer_type_loss(outputs["answer_type_logits"], features, mode=answer_type_mode)
  sup = supporting_loss(outputs["supporting_logits"], features)
  total = (0.5 * (begin["loss"] + end["loss"]) + answer_type_weight * atype["loss"] +
           supporting_weight * sup["loss"])
  out = {"span_begin": begin["loss"], "span_end": end["loss"], "answer_type": atype["loss"],
         "supporting": sup["loss"], "span_documents": begin["documents"],
         "answer_type_documents": atype["documents"], "supporting_segments": sup["segments"]}
  if "mlm_logits" in outputs and "masked_ids" in features and "masked_weights" in features:
    mlm = mlm_loss(outputs["mlm_logits"], features["masked_ids"], features["masked_weights"],
                   index=outputs.get("mlm_index"))
    total += mlm_weight * mlm["loss"]
    out.update(mlm=mlm["loss"], mlm_accuracy=mlm["accuracy"], mlm_weight=mlm["weight"])
  if "memory_table" in outputs and "memory_entity_id" in outputs:
    mask = outputs.get("memory_mask")
    if mask is None:
      mask = tf.ones_like(outputs["memory_entity_id"], tf.int32)
    coref = coref_loss(outputs["memory_table"], outputs["memory_entity_id"], mask,
                       outputs.get("coref_bias", 0.0), all_gather=coref_all_gather)
    total += coref_weight * coref["loss"]
    out.update(coref=coref["loss"], coref_pairs=coref["pairs"],
               coref_positive_pairs=coref["positive_pairs"])
  out["total"] = total
  return out


def reduce_replica_losses(strategy: tf.distribute.Strategy, per_replica: Mapping[str, Any]
                          ) -> Dict[str, tf.Tensor]:
  """Combines the per-replica dict of :func:`readtwice_losses` into the single-device values.

  Losses (``LOSS_KEYS``) are SUMmed over replicas; global statistics (identical on every
  replica) are MEANed.
  """
  out = {}
  for k, v in per_replica.items():
    op = tf.distribute.ReduceOp.SUM if k in LOSS_KEYS else tf.distribute.ReduceOp.MEAN
    out[k] = strategy.reduce(op, v, axis=None)
  return out


__all__: List[str] = ["ANSWER_TYPE_MODES", "LOSS_KEYS", "or_loss", "answer_type_loss",
                      "supporting_loss", "mlm_token_sums", "mlm_loss", "cross_replica_sum",
                      "coref_loss", "readtwice_losses", "reduce_replica_losses",
                      "segment_logsumexp"]
