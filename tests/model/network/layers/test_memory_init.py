"""``memory_init="identity"``: the memory path starts as projection-free similarity attention.

Checked against a NumPy re-implementation: a mention's memory is the mean of its first and last
BERT_1 states; a token's scores over memories are ``x . m / sqrt(d)`` per head (+ the zero
relative bias), the no-op scores ``x . noop_key / sqrt(d)``; the read is the softmax-weighted
mean of the memories themselves, added to the token state before the LayerNorm.
"""

import numpy as np
import tensorflow as tf

from model.network.layers import ExtractMemories, MemoryAttention
from model.network.layers.initializers import MeanOfBlocks


def _layer_norm(x, eps):
  mu = x.mean(-1, keepdims=True)
  var = x.var(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + eps)


def test_mean_of_blocks_is_the_mean_of_the_concatenated_vectors():
  k = MeanOfBlocks()((6, 3)).numpy()
  a, b = np.arange(3.0), np.array([1.0, -2.0, 5.0])
  np.testing.assert_allclose(np.concatenate([a, b]) @ k, (a + b) / 2)
  np.testing.assert_allclose(MeanOfBlocks()((4, 4)).numpy(), np.eye(4))


def test_identity_memory_path_matches_numpy():
  rng = np.random.default_rng(0)
  n, l, h, heads = 2, 5, 8, 2
  d = h // heads
  hidden = rng.normal(size=(n, l, h)).astype("float32")
  features = {"mentions_segment": tf.constant([0, 1, 1, 0]),
              "mentions_begin": tf.constant([1, 0, 2, 0]),
              "mentions_end": tf.constant([2, 0, 4, 0]),
              "mentions_entity_id": tf.constant([5, 6, 5, 0]),
              "mentions_mask": tf.constant([1, 1, 1, 0])}
  extract = ExtractMemories(h, source="entity", max_memories=4, kernel_init="identity")
  out = extract(tf.constant(hidden), features)
  seg, beg, end = [0, 1, 1, 0], [1, 0, 2, 0], [2, 0, 4, 0]
  want = np.stack([(hidden[s, b] + hidden[s, e]) / 2 for s, b, e in zip(seg, beg, end)])
  want[3] = hidden[0, 0]  # the padding mention points at row 0, token 0 (masked)
  np.testing.assert_allclose(out["memories"].numpy(), want, atol=1e-6)

  attention = MemoryAttention(h, heads, max_segment_distance=2, dropout=0.0,
                              layer_norm_epsilon=1e-6, kernel_init="identity")
  memories = out["memories"]
  mask = np.array([1, 1, 1, 0])
  got = attention(tf.constant(hidden), memories, query_document=tf.constant([0, 0]),
                  memory_document=tf.constant([0, 0, 0, 0]),
                  query_position=tf.constant([0, 1]), memory_position=tf.constant([0, 1, 1, 0]),
                  memory_mask=tf.constant(mask)).numpy()
  noop_key = attention.noop_key.numpy()  # [heads, d]
  m = memories.numpy()
  expect = np.zeros_like(hidden)
  for i in range(n):
    for t in range(l):
      read = np.zeros(h)
      for j in range(heads):
        sl = slice(j * d, (j + 1) * d)
        scores = hidden[i, t, sl] @ m[:, sl].T / np.sqrt(d)
        scores = np.where(mask > 0, scores, -np.inf)
        noop = hidden[i, t, sl] @ noop_key[j] / np.sqrt(d)
        z = np.exp(np.append(scores, noop) - max(scores.max(), noop))
        p = z / z.sum()
        read[sl] = p[:-1] @ m[:, sl]  # the no-op's value is zero
      expect[i, t] = _layer_norm(hidden[i, t] + read, 1e-6)
  np.testing.assert_allclose(got, expect, atol=1e-4)
