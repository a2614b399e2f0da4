"""MemoryAttention with ``memory_chunk`` (inference): the table read in chunks, two passes, gives
the one-shot layer's output and no-op probability -- dense and top-k (ties at the k-th score
included), every chunk size, masks, the learned no-op value and mention-only readers -- and its
scores never hold more than one chunk of memories."""

import numpy as np
import pytest
import tensorflow as tf

from model.network.layers.memory_attention import MemoryAttention

N, L, H, HEADS = 5, 4, 8, 2
QDOC = [0, 0, 1, 1, -1]
QPOS = [0, 1, 0, 3, 0]
MDOC = [1, 0, 1, -1, 0, 1, 0, 2, 1, 0, 1, 0, 1]
MPOS = [0, 1, 2, 0, 0, 1, 1, 0, 2, 0, 3, 1, 0]
MMASK = [1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1]


def _layer_and_args(layer_kw, seed=0, ties=False):
  rng = np.random.RandomState(seed)
  hidden = rng.randn(N, L, H).astype(np.float32)
  memories = rng.randn(len(MDOC), H).astype(np.float32)
  if ties:  # identical memories at the same position: identical scores, ties at the k-th
    memories[[4, 6, 9, 11]] = memories[4]
    position = list(MPOS)
    for j in (4, 6, 9, 11):
      position[j] = 1
  else:
    position = MPOS
  layer = MemoryAttention(H, HEADS, max_segment_distance=2, dropout=0.0, **layer_kw)
  args = (tf.constant(hidden), tf.constant(memories), tf.constant(QDOC), tf.constant(MDOC),
          tf.constant(QPOS), tf.constant(position), tf.constant(MMASK))
  layer(*args)
  layer.set_weights([w + 0.2 * rng.randn(*w.shape).astype(np.float32)
                     for w in layer.get_weights()])
  return layer, args


CASES = [{}, {"top_k": 1}, {"top_k": 3}, {"top_k": 20}, {"same_segment_only": True},
         {"top_k": 2, "learned_noop_value": True}]


@pytest.mark.parametrize("layer_kw", CASES)
@pytest.mark.parametrize("chunk", [1, 3, 5, 13, 64])
def test_chunked_read_equals_the_one_shot_read(layer_kw, chunk):
  layer, args = _layer_and_args(layer_kw)
  want, want_noop = layer(*args, return_noop_probability=True)
  got, got_noop = layer(*args, return_noop_probability=True, memory_chunk=chunk)
  np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
  np.testing.assert_allclose(got_noop.numpy(), want_noop.numpy(), atol=1e-6)


@pytest.mark.parametrize("top_k", [1, 2, 3, 4])
@pytest.mark.parametrize("chunk", [1, 2, 5, 7])
def test_ties_at_the_kth_score_keep_the_same_memories(top_k, chunk):
  # Four identical memories of document 0 tie; top-k keeps the lowest indices among them, also
  # when the ties fall in different chunks.
  layer, args = _layer_and_args({"top_k": top_k}, seed=1, ties=True)
  want, want_noop = layer(*args, return_noop_probability=True)
  got, got_noop = layer(*args, return_noop_probability=True, memory_chunk=chunk)
  np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
  np.testing.assert_allclose(got_noop.numpy(), want_noop.numpy(), atol=1e-6)


def test_a_kept_set_that_differs_is_detected():
  # The comparison above can fail: a different k changes the output.
  layer, args = _layer_and_args({"top_k": 2})
  other, _ = _layer_and_args({"top_k": 3})
  other.set_weights(layer.get_weights())
  assert np.abs(layer(*args, memory_chunk=4).numpy()
                - other(*args, memory_chunk=4).numpy()).max() > 1e-4


def test_mention_only_readers_and_a_traced_call_with_dynamic_shapes():
  layer, args = _layer_and_args({"top_k": 3})
  token_mask = tf.constant(np.random.RandomState(2).randint(0, 2, (N, L)).astype(np.int32))
  want = layer(*args, query_token_mask=token_mask).numpy()
  spec = [tf.TensorSpec([None, None, H]), tf.TensorSpec([None, H])] + [
      tf.TensorSpec([None], tf.int32)] * 5

  @tf.function(input_signature=spec + [tf.TensorSpec([None, None], tf.int32)])
  def chunked(*a):
    return layer(*a[:7], query_token_mask=a[7], memory_chunk=4)

  np.testing.assert_allclose(chunked(*args, token_mask).numpy(), want, atol=1e-5)
  # Tokens that do not read memories are returned bit-identical.
  unchanged = token_mask.numpy() == 0
  np.testing.assert_array_equal(chunked(*args, token_mask).numpy()[unchanged],
                                args[0].numpy()[unchanged])


def test_empty_table_reads_nothing():
  layer, args = _layer_and_args({"top_k": 2})
  empty = list(args)
  empty[1] = tf.zeros([0, H])
  for i in (3, 5, 6):
    empty[i] = tf.zeros([0], tf.int32)
  masked = list(args)
  masked[6] = tf.zeros_like(args[6])  # every memory masked: the one-shot layer's "nothing"
  np.testing.assert_allclose(layer(*empty, memory_chunk=3).numpy(), layer(*masked).numpy(),
                             atol=1e-6)


def test_the_scores_hold_one_chunk():
  # The largest float tensor of the chunked graph is [N, heads, L, chunk (+ top_k)], not
  # [N, heads, L, M]: count elements of every op output in the traced graph.
  layer, args = _layer_and_args({"top_k": 2})
  m = 4000
  rng = np.random.RandomState(3)
  big = list(args)
  big[1] = tf.constant(rng.randn(m, H).astype(np.float32))
  big[3] = tf.constant(rng.randint(-1, 2, m).astype(np.int32))
  big[5] = tf.constant(rng.randint(0, 4, m).astype(np.int32))
  big[6] = tf.constant(np.ones(m, np.int32))

  def largest(chunk):
    graph = tf.function(lambda: layer(*big, memory_chunk=chunk)).get_concrete_function().graph
    sizes = [int(np.prod(t.shape)) for op in graph.get_operations() for t in op.outputs
             if t.shape.is_fully_defined() and t.dtype == tf.float32 and op.type != "Const"]
    return max(sizes)

  one_shot = max(int(np.prod(t.shape)) for op in tf.function(lambda: layer(*big))
                 .get_concrete_function().graph.get_operations() for t in op.outputs
                 if t.shape.is_fully_defined() and t.dtype == tf.float32)
  assert one_shot >= N * HEADS * L * m
  assert largest(16) <= max(m * H, N * HEADS * L * (16 + 2))  # the table itself, or one chunk


def test_training_and_attention_maps_are_refused():
  layer, args = _layer_and_args({})
  with pytest.raises(ValueError, match="inference"):
    layer(*args, training=True, memory_chunk=4)
  with pytest.raises(ValueError, match="inference"):
    layer(*args, return_attention=True, memory_chunk=4)
  with pytest.raises(ValueError, match=">= 1"):
    layer(*args, memory_chunk=0)
