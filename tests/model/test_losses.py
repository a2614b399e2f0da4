"""OR-loss, answer-type and supporting losses against hand-computed values."""

import math

import numpy as np
import tensorflow as tf

from model import losses
from schemas import records

S, C = records.TOKEN_KIND_SPECIAL, records.TOKEN_KIND_CONTEXT


def _toy():
  ln = math.log
  n, l = 5, 4
  # Segments: 0 -> doc 0, 1 -> doc 1, 2 -> doc 0 (documents are not contiguous), 3 -> doc 2
  # (a yes question), 4 -> padding.
  kinds = np.array([[S, C, C, S]] * n, np.int32)
  logits = np.full([n, l], 50.0, np.float32)  # special tokens: huge, must be ignored
  logits[0, 1:3] = [0.0, ln(2)]
  logits[2, 1:3] = [ln(3), ln(4)]
  logits[1, 1:3] = [0.0, ln(3)]
  logits[3, 1:3] = [0.0, 0.0]
  logits[4, 1:3] = [7.0, -3.0]
  labels = np.zeros([n, l], np.int32)
  labels[0, 2] = labels[2, 1] = 1  # doc 0: mass (2 + 3) / (1 + 2 + 3 + 4)
  labels[1, 2] = 1  # doc 1: mass 3 / (1 + 3)
  labels[3, 1] = 1  # doc 2: yes/no -> ignored
  labels[4, 1] = 1  # padding -> ignored
  labels[0, 0] = 1  # a positive on a special token -> ignored
  features = {
      "token_kind": tf.constant(kinds), "document_index": tf.constant([0, 1, 0, 2, -1]),
      "segment_mask": tf.constant([1, 1, 1, 1, 0]),
      "answer_type": tf.constant([0, 0, 0, records.ANSWER_TYPE_YES, -1]),
      "supporting": tf.constant([1, 0, -1, 1, 1]),
      "answer_begin_labels": tf.constant(labels),
      "answer_end_labels": tf.zeros([n, l], tf.int32),
  }
  return tf.constant(logits), features


def test_or_loss_hand_computed():
  logits, features = _toy()
  out = losses.or_loss(logits, features["answer_begin_labels"], features)
  expected = (math.log(10 / 5) + math.log(4 / 3)) / 2
  np.testing.assert_allclose(float(out["loss"]), expected, rtol=1e-6)
  assert float(out["documents"]) == 2.0


def test_or_loss_no_positive_is_zero_and_finite_gradient():
  logits, features = _toy()
  with tf.GradientTape() as tape:
    tape.watch(logits)
    out = losses.or_loss(logits, features["answer_end_labels"], features)
  assert float(out["loss"]) == 0.0 and float(out["documents"]) == 0.0
  g = tape.gradient(out["loss"], logits)
  assert np.all(np.isfinite(g.numpy()))


def test_or_loss_gradient_is_softmax_minus_posterior():
  logits, features = _toy()
  with tf.GradientTape() as tape:
    tape.watch(logits)
    out = losses.or_loss(logits, features["answer_begin_labels"], features)
  g = tape.gradient(out["loss"], logits).numpy()
  # doc 1 (weight 1/2): d/dx [lse_all - lse_pos] = softmax_all - softmax_pos.
  np.testing.assert_allclose(g[1, 1:3], 0.5 * np.array([1 / 4, 3 / 4 - 1.0]), atol=1e-6)
  assert np.all(g[:, 0] == 0) and np.all(g[3:] == 0)


def test_answer_type_and_supporting_hand_computed():
  ln = math.log
  _, features = _toy()
  at_logits = tf.constant([[1.0, 0, 0], [0, 0, 0], [3.0, 0, 0], [0, ln(2), 0], [9, 9, 9]])
  at = losses.answer_type_loss(at_logits, features)
  ce0 = -math.log(math.exp(2) / (math.exp(2) + 2))
  np.testing.assert_allclose(float(at["loss"]), (ce0 + ln(3) + ln(2)) / 3, rtol=1e-6)
  sup = losses.supporting_loss(tf.constant([0.0, ln(3), 0.0, 0.0, 99.0]), features)
  np.testing.assert_allclose(float(sup["loss"]), 4 * ln(2) / 3, rtol=1e-6)
  assert float(sup["segments"]) == 3.0


def test_total():
  logits, features = _toy()
  outputs = {"begin_logits": logits, "end_logits": logits,
             "answer_type_logits": tf.zeros([5, 3]), "supporting_logits": tf.zeros([5])}
  out = losses.readtwice_losses(outputs, features)
  expected = (0.5 * (float(out["span_begin"]) + float(out["span_end"])) +
              float(out["answer_type"]) + float(out["supporting"]))
  np.testing.assert_allclose(float(out["total"]), expected, rtol=1e-6)
  np.testing.assert_allclose(float(out["answer_type"]), math.log(3), rtol=1e-6)
