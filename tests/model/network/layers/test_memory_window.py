"""MemoryAttention with ``memory_window``: each segment scores only its own document's memories
(a window of the table ordered by document), the same numbers as the dense layer whenever no
document has more memories than the window."""

import numpy as np
import pytest
import tensorflow as tf

from model.network.layers.memory_attention import MemoryAttention

N, L, H, HEADS = 6, 5, 8, 2
# Segment documents (-1 padding) and positions; memories in a shuffled table order (as after an
# all-gather: each replica's memories, then its padding).
QDOC = [0, 0, 1, 1, 1, -1]
QPOS = [0, 1, 0, 1, 2, 0]
MDOC = [1, 0, 1, -1, 0, 1, 0, 2, 1, 0]
MPOS = [0, 1, 2, 0, 0, 1, 1, 0, 2, 0]
MMASK = [1, 1, 1, 0, 1, 1, 1, 1, 0, 1]  # doc 0: 4 real memories, doc 1: 3, doc 2: 1


def _run(layer_kw, window, weights=None):
  rng = np.random.RandomState(0)
  hidden = tf.constant(rng.randn(N, L, H).astype(np.float32))
  memories = tf.constant(rng.randn(len(MDOC), H).astype(np.float32))
  layer = MemoryAttention(H, HEADS, max_segment_distance=1, dropout=0.0, memory_window=window,
                          **layer_kw)
  args = (hidden, memories, tf.constant(QDOC), tf.constant(MDOC), tf.constant(QPOS),
          tf.constant(MPOS), tf.constant(MMASK))
  layer(*args)
  if weights is None:
    weights = [w + 0.1 * rng.randn(*w.shape).astype(np.float32) for w in layer.get_weights()]
  layer.set_weights(weights)  # a non-zero relative-bias table too
  return layer(*args).numpy(), weights


@pytest.mark.parametrize("layer_kw", [{}, {"top_k": 2}, {"same_segment_only": True},
                                      {"top_k": 1, "same_segment_only": True}])
@pytest.mark.parametrize("window", [4, 7, 10])
def test_window_equals_dense_when_it_holds_every_document(layer_kw, window):
  dense, weights = _run(layer_kw, None)
  windowed, _ = _run(layer_kw, window, weights)
  np.testing.assert_allclose(windowed, dense, atol=1e-5)


def test_a_small_window_reads_each_documents_first_memories():
  dense, weights = _run({}, None)
  windowed, _ = _run({}, 3, weights)
  # Doc 1 (3 memories) and padding are exact; doc 0 (4 memories) loses its last one.
  np.testing.assert_allclose(windowed[2:], dense[2:], atol=1e-5)
  assert np.abs(windowed[:2] - dense[:2]).max() > 1e-4


def test_window_compiles_with_xla_and_is_serialised():
  layer = MemoryAttention(H, HEADS, 1, memory_window=4)
  assert MemoryAttention.from_config(layer.get_config()).memory_window == 4
  dense, weights = _run({}, 4)
  rng = np.random.RandomState(0)
  hidden = tf.constant(rng.randn(N, L, H).astype(np.float32))
  memories = tf.constant(rng.randn(len(MDOC), H).astype(np.float32))
  layer = MemoryAttention(H, HEADS, max_segment_distance=1, dropout=0.0, memory_window=4)
  args = (hidden, memories, tf.constant(QDOC), tf.constant(MDOC), tf.constant(QPOS),
          tf.constant(MPOS), tf.constant(MMASK))
  layer(*args)
  layer.set_weights(weights)
  compiled = tf.function(lambda: layer(*args), jit_compile=True)
  np.testing.assert_allclose(compiled().numpy(), dense, atol=1e-5)
  with pytest.raises(ValueError, match="memory_window"):
    MemoryAttention(H, HEADS, 1, memory_window=0)


@pytest.mark.slow
def test_windowed_model_equals_the_dense_model():
  from model import configs  # pylint: disable=g-import-not-at-top
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  from tests.model.training.test_model_training import L as TL, N as TN, K, _pack  # pylint: disable=g-import-not-at-top
  f = _pack()
  outputs = []
  weights = None
  for window in (None, 8):  # documents of 2 segments x 3 mentions: 6 memories each
    config = configs.preset("tiny_e", vocab_size=100, max_seq_length=TL, max_memories=K,
                            memory_window=window)
    model = readtwice.build_model(config, TL, TN)
    if weights is None:
      weights = model.get_weights()
    model.set_weights(weights)
    outputs.append(model(f, training=False))
  for key in ("begin_logits", "end_logits", "answer_type_logits"):
    np.testing.assert_allclose(outputs[1][key].numpy(), outputs[0][key].numpy(), atol=1e-4)
