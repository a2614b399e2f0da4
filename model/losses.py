"""ReadTwice losses over one pack.

* **OR-loss** (span begin and end separately): for every document ``d`` (segments grouped by
  ``document_index``; padding segments excluded) with at least one positive position and an
  answer type other than yes/no::

    loss_d = logsumexp_{t in context(d)} logit_t - logsumexp_{t in positives(d)} logit_t
           = -log sum_{t in positives(d)} softmax_{context(d)}(logit)_t

  where the softmax normalises over ALL context tokens of ALL segments of ``d``.  Averaged over
  contributing documents.
* **Answer type**: softmax cross-entropy of the mean of a document's segment answer-type logits
  against the document's ``answer_type`` (documents with ``answer_type < 0`` skipped).
* **Supporting**: sigmoid cross-entropy per real segment with ``supporting >= 0``.

``total = (span_begin + span_end) / 2 + answer_type + supporting``.
"""

from __future__ import annotations

from typing import Dict, Mapping

import tensorflow as tf

from schemas import records


def _document_buckets(features: Mapping[str, tf.Tensor]):
  """Bucket id per segment ``[N]``: its document index, or N (a dummy bucket) for padding."""
  doc = tf.cast(features["document_index"], tf.int32)
  n = tf.shape(doc)[0]
  real = tf.logical_and(tf.cast(features["segment_mask"], tf.bool), doc >= 0)
  bucket = tf.where(real, tf.clip_by_value(doc, 0, n - 1), n)
  return bucket, real, n


def segment_logsumexp(values: tf.Tensor, ids: tf.Tensor, num_segments) -> tf.Tensor:
  """Numerically stable logsumexp of ``values`` grouped by ``ids``; 0 for empty groups."""
  m = tf.stop_gradient(tf.math.unsorted_segment_max(values, ids, num_segments))
  m = tf.where(tf.math.is_finite(m), m, tf.zeros_like(m))
  s = tf.math.unsorted_segment_sum(tf.exp(values - tf.gather(m, ids)), ids, num_segments)
  empty = tf.cast(tf.equal(s, 0.0), s.dtype)
  return tf.math.log(s + empty) + m * (1.0 - empty)


def or_loss(logits: tf.Tensor, labels: tf.Tensor, features: Mapping[str, tf.Tensor]
            ) -> Dict[str, tf.Tensor]:
  """Document-level OR-loss for one span side.

  Args:
    logits: float ``[N, L]``.
    labels: int ``[N, L]`` multi-hot positive positions.
    features: pack features (``document_index``, ``segment_mask``, ``token_kind``,
      ``answer_type``).

  Returns:
    ``{"loss": scalar, "documents": number of contributing documents}``.
  """
  bucket, real, n = _document_buckets(features)
  logits = tf.cast(logits, tf.float32)
  context = tf.logical_and(
      tf.equal(tf.cast(features["token_kind"], tf.int32), records.TOKEN_KIND_CONTEXT),
      real[:, None])
  positive = tf.logical_and(context, tf.cast(labels, tf.int32) > 0)
  token_bucket = tf.broadcast_to(bucket[:, None], tf.shape(logits))
  flat = tf.reshape(logits, [-1])
  all_ids = tf.reshape(tf.where(context, token_bucket, n), [-1])
  pos_ids = tf.reshape(tf.where(positive, token_bucket, n), [-1])
  lse_all = segment_logsumexp(flat, all_ids, n + 1)[:n]
  lse_pos = segment_logsumexp(flat, pos_ids, n + 1)[:n]
  has_pos = tf.math.unsorted_segment_max(tf.cast(tf.reshape(positive, [-1]), tf.int32),
                                         pos_ids, n + 1)[:n] > 0
  doc_type = tf.math.unsorted_segment_max(tf.cast(features["answer_type"], tf.int32), bucket,
                                          n + 1)[:n]
  valid = tf.logical_and(has_pos, tf.logical_and(tf.not_equal(doc_type, records.ANSWER_TYPE_YES),
                                                 tf.not_equal(doc_type, records.ANSWER_TYPE_NO)))
  count = tf.reduce_sum(tf.cast(valid, tf.float32))
  per_doc = tf.where(valid, lse_all - lse_pos, 0.0)
  return {"loss": tf.reduce_sum(per_doc) / tf.maximum(count, 1.0), "documents": count}


def answer_type_loss(answer_type_logits: tf.Tensor, features: Mapping[str, tf.Tensor]
                     ) -> Dict[str, tf.Tensor]:
  """Cross-entropy of per-document mean answer-type logits ``[N, 3]`` vs ``answer_type``."""
  bucket, real, n = _document_buckets(features)
  logits = tf.cast(answer_type_logits, tf.float32)
  doc_logits = tf.math.unsorted_segment_mean(logits, bucket, n + 1)[:n]
  answer_type = tf.where(real, tf.cast(features["answer_type"], tf.int32), -1)
  doc_label = tf.math.unsorted_segment_max(answer_type, bucket, n + 1)[:n]
  valid = doc_label >= 0
  ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(doc_label, 0),
                                                      logits=doc_logits)
  count = tf.reduce_sum(tf.cast(valid, tf.float32))
  return {"loss": tf.reduce_sum(tf.where(valid, ce, 0.0)) / tf.maximum(count, 1.0),
          "documents": count}


def supporting_loss(supporting_logits: tf.Tensor, features: Mapping[str, tf.Tensor]
                    ) -> Dict[str, tf.Tensor]:
  """Sigmoid cross-entropy per real segment with ``supporting >= 0``."""
  _, real, _ = _document_buckets(features)
  labels = tf.cast(features["supporting"], tf.int32)
  valid = tf.logical_and(real, labels >= 0)
  ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(tf.maximum(labels, 0), tf.float32),
                                               logits=tf.cast(supporting_logits, tf.float32))
  count = tf.reduce_sum(tf.cast(valid, tf.float32))
  return {"loss": tf.reduce_sum(tf.where(valid, ce, 0.0)) / tf.maximum(count, 1.0),
          "segments": count}


def readtwice_losses(outputs: Mapping[str, tf.Tensor], features: Mapping[str, tf.Tensor]
                     ) -> Dict[str, tf.Tensor]:
  """All losses of one pack.

  Args:
    outputs: model outputs (``begin_logits``, ``end_logits`` ``[N, L]``,
      ``answer_type_logits`` ``[N, 3]``, ``supporting_logits`` ``[N]``).
    features: pack features from :mod:`model.input`.

  Returns:
    dict with scalar ``span_begin``, ``span_end``, ``answer_type``, ``supporting``, ``total``
    and the contributing counts ``span_documents``, ``answer_type_documents``,
    ``supporting_segments``.
  """
  begin = or_loss(outputs["begin_logits"], features["answer_begin_labels"], features)
  end = or_loss(outputs["end_logits"], features["answer_end_labels"], features)
  atype = answer_type_loss(outputs["answer_type_logits"], features)
  sup = supporting_loss(outputs["supporting_logits"], features)
  total = 0.5 * (begin["loss"] + end["loss"]) + atype["loss"] + sup["loss"]
  return {"span_begin": begin["loss"], "span_end": end["loss"], "answer_type": atype["loss"],
          "supporting": sup["loss"], "total": total, "span_documents": begin["documents"],
          "answer_type_documents": atype["documents"], "supporting_segments": sup["segments"]}
