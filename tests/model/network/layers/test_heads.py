"""Output heads: span FFN, tied MLM head, answer-type head (both modes), coref bias."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from model.network.layers.heads import (AnswerTypeHead, CorefBias, MLMHead, SpanHead,
                                answer_type_document_scores)

H = 4


def _gelu(x):
  return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta, eps):
  mean = x.mean(-1, keepdims=True)
  var = x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _hidden(seed=0, n=2, l=5):
  return np.random.RandomState(seed).randn(n, l, H).astype(np.float32)


def test_span_head_without_intermediate_is_one_dense():
  head = SpanHead(H, intermediate_size=None, initializer_range=0.5)
  x = _hidden()
  out = head(tf.constant(x)).numpy()
  assert out.shape == (2, 5, 2)
  assert head.intermediate is None and len(head.trainable_weights) == 2
  dense = keras.layers.Dense(2)
  dense.build((None, H))
  dense.set_weights(head.output_dense.get_weights())
  np.testing.assert_allclose(out, dense(tf.constant(x)).numpy(), atol=1e-6)
  kernel, bias = head.output_dense.get_weights()
  np.testing.assert_allclose(out, x @ kernel + bias, atol=1e-5)


def test_span_head_ffn_matches_numpy():
  head = SpanHead(H, intermediate_size=6, initializer_range=0.5)
  x = _hidden(1)
  out = head(tf.constant(x)).numpy()
  assert out.shape == (2, 5, 2)
  k1, b1 = head.intermediate.get_weights()
  k2, b2 = head.output_dense.get_weights()
  assert k1.shape == (H, 6) and k2.shape == (6, 2)
  np.testing.assert_allclose(out, _gelu(x @ k1 + b1) @ k2 + b2, atol=1e-5)
  # One initializer per weight: the kernels share no values (a shared instance would make the
  # flattened tables share a prefix).
  assert not np.allclose(k1.ravel()[:12], k2.ravel()[:12])
  other = SpanHead(H, intermediate_size=6, initializer_range=0.5)
  other.build((None, None, H))
  assert not np.allclose(other.intermediate.get_weights()[0], k1)


def _mlm(v=7, seed=0):
  keras.utils.set_random_seed(seed)
  emb = keras.layers.Embedding(v, H, embeddings_initializer=keras.initializers.RandomNormal(
      stddev=1.0))
  emb.build()
  head = MLMHead(emb, H, layer_norm_epsilon=1e-6, initializer_range=0.5)
  return emb, head


def _mlm_numpy(head, emb, hidden, positions):
  k, b = head.transform.get_weights()
  gamma, beta = head.norm.get_weights()
  x = np.take_along_axis(hidden, positions[..., None], axis=1)
  x = _layer_norm(_gelu(x @ k + b), gamma, beta, 1e-6)
  return x @ emb.embeddings.numpy().T + head.output_bias.numpy()


def test_mlm_head_gathers_masked_positions_and_matches_numpy():
  emb, head = _mlm()
  hidden = _hidden(2)
  positions = np.array([[1, 3, 0], [4, 4, 2]], np.int32)
  logits = head(tf.constant(hidden), tf.constant(positions)).numpy()
  assert logits.shape == (2, 3, 7)
  head.output_bias.assign(np.arange(7, dtype=np.float32) * 0.1)
  logits = head(tf.constant(hidden), tf.constant(positions)).numpy()
  np.testing.assert_allclose(logits, _mlm_numpy(head, emb, hidden, positions), atol=1e-4)
  # Only the masked positions matter: changing the others leaves the logits unchanged.
  other = hidden.copy()
  other[0, [2, 4]] += 5.0
  other[1, [0, 1, 3]] -= 5.0
  np.testing.assert_allclose(head(tf.constant(other), tf.constant(positions)).numpy(), logits,
                             atol=1e-6)


def test_mlm_head_is_tied_to_the_embedding():
  emb, head = _mlm()
  hidden = tf.constant(_hidden(3))
  positions = tf.constant([[0, 1], [2, 3]])
  before = head(hidden, positions).numpy()
  table = emb.embeddings.numpy()
  table[5] += np.array([1.0, -0.5, 0.25, 2.0], np.float32)  # not constant: LayerNorm'd x sums to ~0
  emb.embeddings.assign(table)
  after = head(hidden, positions).numpy()
  changed = np.abs(after - before).max(axis=(0, 1))
  assert changed[5] > 1e-3 and np.all(changed[np.arange(7) != 5] == 0)
  np.testing.assert_allclose(after, _mlm_numpy(head, emb, hidden.numpy(), positions.numpy()),
                             atol=1e-4)
  # The head uses the embedding variable itself: gradients reach it, no copy is made.
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(head(hidden, positions)[..., 5])
  grad = tape.gradient(loss, emb.embeddings)
  assert grad is not None and np.abs(tf.convert_to_tensor(grad).numpy()[5]).max() > 0
  own = [v for v in head.trainable_weights if v is not emb.embeddings]
  assert {v.name for v in own} == {"kernel", "bias", "gamma", "beta", "output_bias"}


def test_mlm_head_sparse_rows_are_the_dense_logits_of_the_slots_that_count():
  """``rows``: the K (row, position) pairs of weight > 0 give the same logits as the dense
  ``[N, P, V]`` at those slots, and the loss and gradients over them equal the dense ones
  (the padding row and unused slots contribute nothing); no slot at all is a loss of 0."""
  from model.training import losses  # pylint: disable=g-import-not-at-top
  emb, head = _mlm()
  hidden = tf.constant(_hidden(4, n=3))
  positions = tf.constant([[1, 3, 0], [4, 2, 2], [0, 0, 0]], tf.int32)
  weights = tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
  ids = tf.constant([[2, 5, 0], [6, 0, 0], [0, 0, 0]], tf.int32)
  entity = tf.constant([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
  index = tf.cast(tf.where(weights > 0), tf.int32)
  assert index.numpy().tolist() == [[0, 0], [0, 1], [1, 0]]

  def run(sparse):
    with tf.GradientTape() as tape:
      if sparse:
        logits = head(hidden, tf.gather_nd(positions, index), rows=index[:, 0])
        out = losses.mlm_loss(logits, ids, weights, entity, index)
      else:
        logits = head(hidden, positions)
        out = losses.mlm_loss(logits, ids, weights, entity)
    return logits.numpy(), out, tape.gradient(out["loss"], head.trainable_weights)

  dense_logits, dense, dense_grads = run(False)
  sparse_logits, sparse, sparse_grads = run(True)
  assert sparse_logits.shape == (3, 7)
  np.testing.assert_allclose(sparse_logits, dense_logits[[0, 0, 1], [0, 1, 0]], atol=1e-6)
  for k in ("loss", "accuracy", "weight", "entity_accuracy", "entity_weight"):
    np.testing.assert_allclose(float(sparse[k]), float(dense[k]), rtol=1e-6, err_msg=k)
  assert float(dense["weight"]) == 3.0 and float(dense["entity_weight"]) == 2.0
  for a, b in zip(sparse_grads, dense_grads):
    np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(),
                               atol=1e-6)
  none = tf.zeros([0, 2], tf.int32)
  empty = losses.mlm_loss(head(hidden, tf.zeros([0], tf.int32), rows=tf.zeros([0], tf.int32)),
                          ids, tf.zeros_like(weights), entity, none)
  assert float(empty["loss"]) == 0.0 and float(empty["weight"]) == 0.0


def test_heads_serialise():
  emb, mlm = _mlm()
  mlm(tf.constant(_hidden()), tf.constant([[0], [1]]))
  clone = MLMHead.from_config(mlm.get_config())
  assert clone.vocab_size == 7 and clone.hidden_size == H
  out = clone(tf.constant(_hidden()), tf.constant([[0], [1]]))
  assert out.shape == (2, 1, 7)
  for layer in (SpanHead(H, 8, name="span"), SpanHead(H), AnswerTypeHead(H, mode="paper"),
                CorefBias()):
    again = type(layer).from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
  restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(
      AnswerTypeHead(H, mode="paper")))
  assert isinstance(restored, AnswerTypeHead) and restored.mode == "paper"


def test_answer_type_head_and_document_scores():
  head = AnswerTypeHead(H, mode="paper", initializer_range=0.5)
  hidden = _hidden(4, n=3)
  out = head(tf.constant(hidden)).numpy()
  assert out.shape == (3, 3)
  np.testing.assert_allclose(out, head(tf.constant(hidden[:, 0])).numpy(), atol=1e-6)
  with pytest.raises(ValueError):
    AnswerTypeHead(H, mode="max")
  # doc 0: segments 0, 2; doc 1: segment 1; segment 3 is padding.
  z = tf.constant([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0], [99.0, 99.0, 99.0]])
  doc, mask = tf.constant([0, 1, 0, -1]), tf.constant([1, 1, 1, 0])
  paper = head.document_scores(z, doc, mask, num_documents=3).numpy()
  np.testing.assert_allclose(paper, [[2, 0, 3], [0, 1, 0], [0, 0, 0]])
  mean = answer_type_document_scores(z, doc, mask, "mean", 3).numpy()
  np.testing.assert_allclose(mean, [[1, 0, 1.5], [0, 1, 0], [0, 0, 0]])
  # The arg-max (segment, type) pair of doc 0 is (2, no).
  assert int(np.argmax(paper[0])) == 2


def test_coref_bias():
  layer = CorefBias()
  b = layer(tf.zeros([3, H]))
  assert b.shape == () and float(b) == 0.0
  assert len(layer.trainable_weights) == 1
