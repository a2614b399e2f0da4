"""MemoryAttention with ``sparse_queries``: the layer computed for the reading tokens only (ReadTwice(E)'s
mention tokens) gives the dense layer's output, gradients and the readers' no-op probability."""

import numpy as np
import pytest
import tensorflow as tf

from tests.model.network.layers.test_memory_chunk import _layer_and_args

N, L = 5, 4


def _mask(seed):
  mask = np.random.RandomState(seed).randint(0, 2, (N, L)).astype(np.int32)
  mask[0, 0] = 1
  return tf.constant(mask)


@pytest.mark.parametrize("layer_kw", [{}, {"top_k": 3}, {"top_k": 1, "same_segment_only": True},
                                      {"top_k": 2, "learned_noop_value": True}])
@pytest.mark.parametrize("chunk", [None, 4])
def test_sparse_queries_equal_the_dense_layer(layer_kw, chunk):
  layer, args = _layer_and_args(layer_kw)
  mask = _mask(1)
  want, want_noop = layer(*args, query_token_mask=mask, return_noop_probability=True)
  got, got_noop = layer(*args, query_token_mask=mask, return_noop_probability=True,
                        sparse_queries=True, memory_chunk=chunk)
  np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
  readers = mask.numpy() == 1
  np.testing.assert_allclose(got_noop.numpy()[readers], want_noop.numpy()[readers], atol=1e-6)
  assert (got_noop.numpy()[~readers] == 0).all()
  np.testing.assert_array_equal(got.numpy()[~readers], args[0].numpy()[~readers])


def test_sparse_gradients_equal_the_dense_ones_and_a_traced_call_works():
  layer, args = _layer_and_args({"top_k": 3})
  mask = _mask(2)

  def grads(sparse):
    hidden, memories = tf.Variable(args[0]), tf.Variable(args[1])
    with tf.GradientTape() as tape:
      out = layer(hidden, memories, *args[2:], query_token_mask=mask, sparse_queries=sparse,
                  training=False)
      loss = tf.reduce_sum(out * tf.sin(out))
    return tape.gradient(loss, [hidden, memories] + layer.trainable_variables)

  for a, b in zip(grads(True), grads(False)):
    np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(),
                               atol=1e-5)
  traced = tf.function(lambda *a: layer(*a, query_token_mask=mask, sparse_queries=True))
  np.testing.assert_allclose(traced(*args).numpy(), layer(*args, query_token_mask=mask).numpy(),
                             atol=1e-5)


def test_no_reader_returns_the_input():
  layer, args = _layer_and_args({"top_k": 2})
  none = tf.zeros([N, L], tf.int32)
  out, noop = layer(*args, query_token_mask=none, sparse_queries=True,
                    return_noop_probability=True)
  np.testing.assert_array_equal(out.numpy(), args[0].numpy())
  assert not noop.numpy().any()


def test_model_with_entity_application_gives_the_same_logits_losses_and_gradients():
  # ReadTwice(E)'s whole step: the mention tokens read memories, sparse or dense.
  import keras  # pylint: disable=g-import-not-at-top
  from model import configs  # pylint: disable=g-import-not-at-top
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  from model.training import losses  # pylint: disable=g-import-not-at-top
  from tests.model.network import test_book_memory as book  # pylint: disable=g-import-not-at-top
  config = configs.tiny(vocab_size=64, max_seq_length=book.L, span_head_intermediate_size=32,
                        memory_source="entity", max_memories=book.K, memory_top_k=3,
                        memory_application="entity", memory_init="identity")
  keras.utils.set_random_seed(0)
  model = readtwice.build_model(config, book.L, book.N)
  f = {k: tf.constant(v) for k, v in book.whole_pack().items()}

  def step(sparse):
    with tf.GradientTape() as tape:
      out = model(readtwice.model_inputs(f), training=False, sparse_queries=sparse)
      loss = losses.readtwice_losses(out, f)["total"]
    return out, loss, tape.gradient(loss, model.trainable_variables)

  (out_s, loss_s, g_s), (out_d, loss_d, g_d) = step(True), step(False)
  for key in ("begin_logits", "end_logits", "answer_type_logits"):
    np.testing.assert_allclose(out_s[key].numpy(), out_d[key].numpy(), atol=1e-5)
  assert abs(float(loss_s) - float(loss_d)) < 1e-5
  for a, b in zip(g_s, g_d):
    if a is not None:
      np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(),
                                 tf.convert_to_tensor(b).numpy(), atol=1e-5)
  # The comparison can fail: memories matter to these logits.
  blocked = model(readtwice.model_inputs(dict(f, mentions_mask=tf.zeros_like(
      f["mentions_mask"]))), training=False, sparse_queries=True)
  assert np.abs(blocked["begin_logits"].numpy() - out_d["begin_logits"].numpy()).max() > 1e-4
