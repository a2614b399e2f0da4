"""MemoryAttention against a NumPy re-implementation of its forward pass (numbers, not shapes).

The reference (float64, plain loops) implements the class docstring: per head, memory scores
``q.k/sqrt(d) + R[clip(pos_j - pos_i, -B, B) + B]`` over the same-document real memories (only
the same segment with ``same_segment_only``), a no-op score ``q.k0/sqrt(d) + b0`` that is always
allowed, exactly the k best allowed candidates with ``top_k`` (ties to the lower index), a
softmax over the kept candidates, a read with a zero (or learned) no-op value, then
``LayerNorm(x + W_o read)``; tokens outside ``query_token_mask`` are returned unchanged.
"""

import numpy as np
import pytest
import tensorflow as tf

from model.network.layers import ExtractMemories, MemoryAttention, gather_memories

H, HEADS, B = 8, 2, 2
N, L = 6, 5

# Segments: document 0 (positions 0, 1), document 1 (0), document 2 (0, 6: beyond B) and a
# padding segment.
Q_DOC = np.array([0, 0, 1, 2, 2, -1], np.int32)
Q_POS = np.array([0, 1, 0, 0, 6, 0], np.int32)
# Memories (sts-like: several per segment): owner documents / positions / masks.
M_DOC = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, -1, 0], np.int32)
M_POS = np.array([0, 0, 1, 1, 0, 0, 0, 6, 6, 0, 4], np.int32)
M_MASK = np.array([1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1], np.int32)
M = len(M_DOC)


def _layer(top_k=None, same_segment_only=False, learned_noop_value=False, seed=0, scale=0.7):
  layer = MemoryAttention(H, HEADS, max_segment_distance=B, top_k=top_k, dropout=0.0,
                          same_segment_only=same_segment_only,
                          learned_noop_value=learned_noop_value)
  layer.build((None, None, H))
  # Larger-than-init random weights (init is 0.02: near-uniform attention would hide bugs),
  # every bias, the relative-bias table and the no-op bias non-zero.
  rng = np.random.RandomState(seed)
  layer.set_weights([scale * rng.randn(*w.shape).astype(np.float32)
                     for w in layer.get_weights()])
  layer.norm.gamma.assign(1.0 + 0.1 * rng.randn(H).astype(np.float32))
  return layer


def _inputs(seed=1):
  rng = np.random.RandomState(seed)
  return (rng.randn(N, L, H).astype(np.float32), rng.randn(M, H).astype(np.float32))


def _run(layer, hidden, memories, query_token_mask=None, q_pos=Q_POS, m_pos=M_POS,
         m_mask=M_MASK):
  kwargs = {} if query_token_mask is None else {"query_token_mask": tf.constant(query_token_mask)}
  return layer(tf.constant(hidden), tf.constant(memories), query_document=tf.constant(Q_DOC),
               memory_document=tf.constant(M_DOC), query_position=tf.constant(q_pos),
               memory_position=tf.constant(m_pos), memory_mask=tf.constant(m_mask),
               **kwargs).numpy()


def _layer_norm(x, gamma, beta, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def reference(layer, hidden, memories, query_token_mask=None, q_pos=Q_POS, m_pos=M_POS,
              m_mask=M_MASK, probabilities=False):
  """NumPy float64 forward pass of ``layer`` (eq. 1 with no-op, top-k, SS, sparse mask); with
  ``probabilities`` also the attention (mean over heads) ``[N, L, M + 1]``, no-op last."""
  f64 = lambda v: np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)
  dense = lambda d, x: x @ f64(d.kernel) + f64(d.bias)
  x, mem = f64(hidden), f64(memories)
  nh, hs = layer.num_heads, layer.head_size
  n, l, h = x.shape
  m = mem.shape[0]
  q = dense(layer.query, x).reshape(n, l, nh, hs)
  k = dense(layer.key, mem).reshape(m, nh, hs)
  v = dense(layer.value, mem).reshape(m, nh, hs)
  table = f64(layer.relative_bias_table)
  b = layer.max_segment_distance
  noop_key, noop_bias = f64(layer.noop_key), f64(layer.noop_bias)
  noop_value = (f64(layer.noop_value) if layer.learned_noop_value
                else np.zeros((nh, hs)))
  read = np.zeros((n, l, nh, hs))
  attention = np.zeros((n, l, m + 1))
  for i in range(n):
    allowed = np.array(
        [Q_DOC[i] >= 0 and M_DOC[j] == Q_DOC[i] and m_mask[j] == 1 and
         (not layer.same_segment_only or m_pos[j] == q_pos[i]) for j in range(m)] + [True])
    dist = np.clip(m_pos - q_pos[i], -b, b) + b
    for t in range(l):
      for hh in range(nh):
        scores = np.append(k[:, hh] @ q[i, t, hh] / np.sqrt(hs) + table[dist, hh],
                           noop_key[hh] @ q[i, t, hh] / np.sqrt(hs) + noop_bias[hh])
        keep = allowed.copy()
        if layer.top_k is not None:
          order = np.argsort(np.where(allowed, -scores, np.inf), kind="stable")
          keep = np.zeros(m + 1, bool)
          keep[order[:min(layer.top_k, m + 1)]] = True
          keep &= allowed
        w = np.where(keep, np.exp(scores - scores[keep].max()), 0.0)
        p = w / w.sum()
        attention[i, t] += p / nh
        read[i, t, hh] = p[:m] @ v[:, hh] + p[m] * noop_value[hh]
  out = dense(layer.output_dense, read.reshape(n, l, h))
  y = _layer_norm(x + out, f64(layer.norm.gamma), f64(layer.norm.beta), layer.layer_norm_epsilon)
  if query_token_mask is not None:
    y = np.where(np.asarray(query_token_mask)[..., None] > 0, y, x)
  return (y, attention) if probabilities else y


def _token_mask(seed=2):
  return np.random.RandomState(seed).randint(0, 2, size=(N, L)).astype(np.int32)


@pytest.mark.parametrize("top_k,ss,learned,sparse", [
    (None, False, False, False),
    (None, False, True, False),
    (1, False, False, False),
    (3, False, False, True),
    (50, False, False, False),  # k > M + 1
    (None, True, False, False),
    (2, True, True, True),
])
def test_matches_numpy_reference(top_k, ss, learned, sparse):
  layer = _layer(top_k=top_k, same_segment_only=ss, learned_noop_value=learned)
  hidden, memories = _inputs()
  mask = _token_mask() if sparse else None
  out = _run(layer, hidden, memories, mask)
  np.testing.assert_allclose(out, reference(layer, hidden, memories, mask), atol=2e-5,
                             rtol=1e-5)
  assert np.all(np.isfinite(out))


@pytest.mark.parametrize("top_k,ss,window", [(None, False, None), (2, True, None),
                                              (None, False, 8), (3, False, 2)])
def test_return_attention_matches_numpy_reference(top_k, ss, window):
  """The probabilities ``return_attention`` gives (mapped back to memories through
  ``memory_index``) are the reference's; the output is the same as without it."""
  layer = _layer(top_k=top_k, same_segment_only=ss)
  if window is not None:
    layer = MemoryAttention(H, HEADS, max_segment_distance=B, top_k=top_k, dropout=0.0,
                            same_segment_only=ss, memory_window=window)
    layer.build((None, None, H))
    layer.set_weights(_layer(top_k=top_k, same_segment_only=ss).get_weights())
  hidden, memories = _inputs()
  out, att = layer(tf.constant(hidden), tf.constant(memories), query_document=tf.constant(Q_DOC),
                   memory_document=tf.constant(M_DOC), query_position=tf.constant(Q_POS),
                   memory_position=tf.constant(M_POS), memory_mask=tf.constant(M_MASK),
                   return_attention=True)
  index, probs = att["memory_index"].numpy(), att["memories"].numpy()
  dense = np.zeros((N, L, M))
  for i in range(N):
    for c, j in enumerate(index[i]):
      dense[i, :, j] += probs[i, :, c]  # window padding repeats an index with probability 0
  np.testing.assert_allclose(dense.sum(-1) + att["noop"].numpy(), 1.0, atol=1e-5)
  largest = max(np.sum(M_DOC == d) for d in set(Q_DOC) if d >= 0)
  if window is None or window >= largest:  # a window holding every memory of its document
    y, expected = reference(layer, hidden, memories, probabilities=True)
    np.testing.assert_allclose(dense, expected[..., :M], atol=2e-5)
    np.testing.assert_allclose(att["noop"].numpy(), expected[..., M], atol=2e-5)
    np.testing.assert_allclose(out.numpy(), y, atol=2e-5, rtol=1e-5)
  else:  # the memories a segment can read are all in its window: nothing outside it
    for i in range(N):
      outside = np.setdiff1d(np.arange(M), index[i])
      assert np.all(dense[i][:, outside] == 0)
  np.testing.assert_allclose(out.numpy(), _run(layer, hidden, memories), atol=1e-6)


def test_reference_is_not_trivial():
  # The options the reference models really change the numbers (else the test above is weak).
  hidden, memories = _inputs()
  base = _run(_layer(), hidden, memories)
  for kwargs in ({"top_k": 1}, {"top_k": 3}, {"same_segment_only": True},
                 {"learned_noop_value": True}):
    assert np.abs(_run(_layer(**kwargs), hidden, memories) - base).max() > 1e-2, kwargs


def test_xla_matches_eager():
  layer = _layer(top_k=2, same_segment_only=False)
  hidden, memories = _inputs()
  mask = _token_mask()
  fn = tf.function(lambda *a: layer(a[0], a[1], query_document=a[2], memory_document=a[3],
                                    query_position=a[4], memory_position=a[5],
                                    memory_mask=a[6], query_token_mask=a[7]),
                   jit_compile=True, autograph=False)
  out = fn(*(tf.constant(a) for a in (hidden, memories, Q_DOC, M_DOC, Q_POS, M_POS, M_MASK,
                                      mask))).numpy()
  np.testing.assert_allclose(out, reference(layer, hidden, memories, mask), atol=2e-5,
                             rtol=1e-5)
  np.testing.assert_allclose(out, _run(layer, hidden, memories, mask), atol=1e-5)


@pytest.mark.parametrize("learned", [False, True])
def test_noop_takes_all_attention_without_memories(learned):
  layer = _layer(learned_noop_value=learned)
  hidden, memories = _inputs()
  m_mask = M_MASK.copy()
  m_mask[[4, 5]] = 0  # document 1 (segment 2) has no real memory left
  out = _run(layer, hidden, memories, m_mask=m_mask)
  # Read = the no-op's value (zero, or the learned one), so out = LN(x + W_o v0 + b_o).
  v0 = layer.noop_value.numpy().reshape(H) if learned else np.zeros(H)
  w_o, b_o = layer.output_dense.kernel.numpy(), layer.output_dense.bias.numpy()
  gamma, beta = layer.norm.gamma.numpy(), layer.norm.beta.numpy()
  for seg in (2, 5):  # the memory-less document and the padding segment
    expected = _layer_norm(hidden[seg].astype(np.float64) + v0 @ w_o + b_o, gamma, beta,
                           layer.layer_norm_epsilon)
    np.testing.assert_allclose(out[seg], expected, atol=2e-5, err_msg=seg)
  if not learned:
    # The zero value: what any memory-less token gets does not depend on noop_key / bias.
    layer.noop_key.assign(layer.noop_key.numpy() + 3.0)
    layer.noop_bias.assign(layer.noop_bias.numpy() - 2.0)
    np.testing.assert_allclose(_run(layer, hidden, memories, m_mask=m_mask)[[2, 5]],
                               out[[2, 5]], atol=1e-6)


def test_noop_weight_is_only_in_the_denominator():
  # One allowed memory j and the no-op: read = sigma(s_j - s_0) * v_j exactly (zero no-op value).
  layer = _layer(scale=0.3)
  rng = np.random.RandomState(3)
  hidden = rng.randn(1, 2, H).astype(np.float32)
  memories = rng.randn(1, H).astype(np.float32)
  args = dict(query_document=tf.constant([0]), memory_document=tf.constant([0]),
              query_position=tf.constant([0]), memory_position=tf.constant([0]),
              memory_mask=tf.constant([1]))
  out = layer(tf.constant(hidden), tf.constant(memories), **args).numpy()
  q = hidden[0] @ layer.query.kernel.numpy() + layer.query.bias.numpy()  # [2, H]
  k = memories[0] @ layer.key.kernel.numpy() + layer.key.bias.numpy()
  v = memories[0] @ layer.value.kernel.numpy() + layer.value.bias.numpy()
  hs = H // HEADS
  read = np.zeros((2, H))
  for hh in range(HEADS):
    sl = slice(hh * hs, (hh + 1) * hs)
    s_j = q[:, sl] @ k[sl] / np.sqrt(hs) + layer.relative_bias_table.numpy()[B, hh]
    s_0 = q[:, sl] @ layer.noop_key.numpy()[hh] / np.sqrt(hs) + layer.noop_bias.numpy()[hh]
    alpha = 1.0 / (1.0 + np.exp(s_0 - s_j))  # exp(s_j) / (exp(s_0) + exp(s_j))
    assert np.all((alpha > 0.01) & (alpha < 0.99))
    read[:, sl] = alpha[:, None] * v[sl]
  y = hidden[0] + read @ layer.output_dense.kernel.numpy() + layer.output_dense.bias.numpy()
  expected = _layer_norm(y, layer.norm.gamma.numpy(), layer.norm.beta.numpy(), 1e-12)
  np.testing.assert_allclose(out[0], expected, atol=2e-5)


@pytest.mark.parametrize("k", [1, 3])
def test_top_k_keeps_exactly_the_k_best(k):
  layer = _layer(top_k=k)
  hidden, memories = _inputs()
  out = _run(layer, hidden, memories)
  np.testing.assert_allclose(out, reference(layer, hidden, memories), atol=2e-5, rtol=1e-5)
  # Same weights without top-k: a different result.
  full = _layer(top_k=None)
  full.set_weights(layer.get_weights())
  assert np.abs(_run(full, hidden, memories) - out).max() > 1e-2


def test_top_k_larger_than_available_is_the_full_softmax():
  layer = _layer(top_k=3)
  full = _layer(top_k=None)
  full.set_weights(layer.get_weights())
  hidden, memories = _inputs()
  out = _run(layer, hidden, memories)
  ref = _run(full, hidden, memories)
  # Document 1 (segment 2) has 2 allowed memories + the no-op = 3 <= k; the padding segment
  # (5) only the no-op.  Masked memories (with their scores) never take a slot.
  np.testing.assert_allclose(out[[2, 5]], ref[[2, 5]], atol=1e-6)
  assert np.all(np.isfinite(out))
  big = _layer(top_k=M + 5)
  big.set_weights(layer.get_weights())
  np.testing.assert_allclose(_run(big, hidden, memories), ref, atol=1e-6)


def test_top_k_masked_memories_never_displace_allowed_ones():
  # Keys 0 -> every memory score is its relative bias.  For segment 0 (document 0, position 0)
  # the masked memory 3 scores highest, other documents' memories 4-6 next, and the allowed
  # memories 0, 1, 2, 10 lowest (tied: the lowest index, 0, is kept).
  layer = _layer(top_k=1)
  layer.key.kernel.assign(np.zeros((H, H), np.float32))
  layer.key.bias.assign(np.zeros(H, np.float32))
  layer.noop_bias.assign(np.full(HEADS, -50.0, np.float32))  # the no-op loses
  m_pos = np.array([3, 3, 4, 1, 0, 0, 0, 6, 6, 0, 4], np.int32)
  table = np.zeros((2 * B + 1, HEADS), np.float32)
  table[B + 1] = 30.0  # distance +1: masked memory 3
  table[B] = 20.0  # distance 0: memories 4-6 of other documents
  table[2 * B] = 10.0  # distances >= +B: the allowed memories
  layer.relative_bias_table.assign(table)
  hidden, memories = _inputs()
  out = _run(layer, hidden, memories, m_pos=m_pos)
  np.testing.assert_allclose(out, reference(layer, hidden, memories, m_pos=m_pos), atol=2e-5)
  # Segment 0 reads memory 0 only: out is LN(x + W_o v_0 + b_o) at every token.
  v0 = memories[0] @ layer.value.kernel.numpy() + layer.value.bias.numpy()
  y = hidden[0] + v0 @ layer.output_dense.kernel.numpy() + layer.output_dense.bias.numpy()
  np.testing.assert_allclose(out[0], _layer_norm(y, layer.norm.gamma.numpy(),
                                                 layer.norm.beta.numpy(), 1e-12), atol=2e-5)
  # Changing the masked / other-document memories changes nothing for document 0.
  perturbed = memories.copy()
  perturbed[[3, 4, 5, 6, 9]] += 10.0
  np.testing.assert_allclose(_run(layer, hidden, perturbed, m_pos=m_pos)[:2], out[:2],
                             atol=1e-6)


def test_top_k_ties_go_to_the_lower_index():
  # All keys equal and no relative bias: every allowed memory ties; k = 2 keeps exactly the two
  # lowest-index allowed memories of the document (the no-op is made to lose).
  layer = _layer(top_k=2)
  layer.key.kernel.assign(np.zeros((H, H), np.float32))
  layer.relative_bias_table.assign(np.zeros((2 * B + 1, HEADS), np.float32))
  layer.noop_bias.assign(np.full(HEADS, -50.0, np.float32))
  hidden, memories = _inputs()
  out = _run(layer, hidden, memories)
  np.testing.assert_allclose(out, reference(layer, hidden, memories), atol=2e-5)
  value = memories @ layer.value.kernel.numpy() + layer.value.bias.numpy()
  w_o, b_o = layer.output_dense.kernel.numpy(), layer.output_dense.bias.numpy()
  gamma, beta = layer.norm.gamma.numpy(), layer.norm.beta.numpy()
  # Document 0 allows memories 0, 1, 2, 10 -> keeps 0 and 1 (weight 1/2 each).
  y = hidden[0] + 0.5 * (value[0] + value[1]) @ w_o + b_o
  np.testing.assert_allclose(out[0], _layer_norm(y, gamma, beta, 1e-12), atol=2e-5)
  # Document 2 allows 6, 7, 8 -> keeps 6 and 7.
  y = hidden[3] + 0.5 * (value[6] + value[7]) @ w_o + b_o
  np.testing.assert_allclose(out[3], _layer_norm(y, gamma, beta, 1e-12), atol=2e-5)


def test_relative_bias_uses_the_clipped_entry():
  layer = _layer()
  table = np.arange((2 * B + 1) * HEADS, dtype=np.float32).reshape(2 * B + 1, HEADS) * 0.7 - 3
  layer.relative_bias_table.assign(table)
  hidden, memories = _inputs()
  out = _run(layer, hidden, memories)
  np.testing.assert_allclose(out, reference(layer, hidden, memories), atol=2e-5, rtol=1e-5)
  # Segment 3 (document 2, position 0) reads memories at positions 0 and 6 (distance 6 -> +B);
  # segment 4 (position 6) at distances -6 -> -B and 0.  Rows B +- 1 are never used by them.
  changed = table.copy()
  changed[[B - 1, B + 1]] += 5.0
  layer.relative_bias_table.assign(changed)
  np.testing.assert_allclose(_run(layer, hidden, memories)[3:5], out[3:5], atol=1e-6)
  changed = table.copy()
  changed[2 * B] += 5.0  # the +B entry: used by segment 3 for the memories at position 6
  layer.relative_bias_table.assign(changed)
  moved = _run(layer, hidden, memories)
  assert np.abs(moved[3] - out[3]).max() > 1e-3
  np.testing.assert_allclose(moved, reference(layer, hidden, memories), atol=2e-5, rtol=1e-5)
  changed = table.copy()
  changed[0] += 5.0  # the -B entry: used by segment 4 for the memory at position 0
  layer.relative_bias_table.assign(changed)
  assert np.abs(_run(layer, hidden, memories)[4] - out[4]).max() > 1e-3


def test_entity_only_application_leaves_other_tokens_bit_identical():
  layer = _layer(top_k=3)
  hidden, memories = _inputs()
  mask = _token_mask()
  out = _run(layer, hidden, memories, mask)
  off = mask == 0
  assert off.any() and (~off).any()
  np.testing.assert_array_equal(out[off], hidden[off])
  np.testing.assert_allclose(out[~off], _run(layer, hidden, memories)[~off], atol=1e-6)
  # Non-entity tokens do not depend on the memories at all.
  np.testing.assert_array_equal(_run(layer, hidden, memories * 3.0, mask)[off], hidden[off])


def test_same_segment_only_ignores_other_segments():
  layer = _layer(same_segment_only=True)
  hidden, memories = _inputs()
  out = _run(layer, hidden, memories)
  np.testing.assert_allclose(out, reference(layer, hidden, memories), atol=2e-5, rtol=1e-5)
  # Segment 0 (doc 0, position 0) owns memories 0, 1; segment 1 (doc 0, position 1) owns 2.
  perturbed = memories.copy()
  perturbed[[2, 10]] += 5.0  # same document, other positions
  np.testing.assert_allclose(_run(layer, hidden, perturbed)[0], out[0], atol=1e-6)
  assert np.abs(_run(layer, hidden, perturbed)[1] - out[1]).max() > 1e-3
  perturbed = memories.copy()
  perturbed[1] += 5.0  # segment 0's own memory
  assert np.abs(_run(layer, hidden, perturbed)[0] - out[0]).max() > 1e-3
  np.testing.assert_allclose(_run(layer, hidden, perturbed)[1], out[1], atol=1e-6)
  # Without the ablation, segment 0 does read segment 1's memory.
  full = _layer(same_segment_only=False)
  full.set_weights(layer.get_weights())
  perturbed = memories.copy()
  perturbed[2] += 5.0
  assert np.abs(_run(full, hidden, perturbed)[0] - _run(full, hidden, memories)[0]).max() > 1e-3


def test_config_round_trip():
  layer = MemoryAttention(H, HEADS, 3, top_k=2, same_segment_only=True, learned_noop_value=True)
  clone = MemoryAttention.from_config(layer.get_config())
  assert clone.get_config() == layer.get_config()
  layer.build((None, None, H))
  assert "noop_value" in {w.path.rsplit("/", 1)[-1] for w in layer.weights}
  plain = MemoryAttention(H, HEADS, 3)
  plain.build((None, None, H))
  assert "noop_value" not in {w.path.rsplit("/", 1)[-1] for w in plain.weights}


def test_gathered_memories_under_mirrored_strategy(monkeypatch):
  # Each of 2 replicas holds half of the pack's segments; sts memories are extracted locally,
  # all-gathered, and every token attends over the whole pack's memories: the same numbers as
  # one replica holding the whole pack.
  devices = tf.config.list_logical_devices("CPU")
  if len(devices) < 2:
    pytest.skip("needs 2 logical CPU devices (configured in conftest)")
  # Every MirroredStrategy numbers its collectives from the same keys, and the process-wide
  # collective executor then mixes up the all-gathers of two strategies (of two tests) that share
  # a key: "Shape mismatch in the collective instance".  TF's test hook gives this one its own.
  monkeypatch.setattr(tf.distribute.MirroredStrategy, "_collective_key_base", 7_000_000)
  strategy = tf.distribute.MirroredStrategy([d.name for d in devices[:2]])
  rng = np.random.RandomState(4)
  n, l = 4, 6
  hidden = rng.randn(n, l, H).astype(np.float32)
  input_mask = np.ones((n, l), np.int32)
  input_mask[1, 4:] = 0
  input_mask[3] = 0
  doc = np.array([0, 0, 0, -1], np.int32)
  pos = np.array([0, 1, 2, 0], np.int32)
  with strategy.scope():
    extract = ExtractMemories(H, source="sts", sts_length=4)
    attend = MemoryAttention(H, HEADS, max_segment_distance=1, top_k=3, dropout=0.0)
    extract.build((None, None, H))
    attend.build((None, None, H))

  def forward(x, mask, qd, qp):
    mem = extract(x, {"input_mask": mask})
    seg = mem["segment"]
    g = gather_memories({"memories": mem["memories"], "document": tf.gather(qd, seg),
                         "position": tf.gather(qp, seg), "mask": mem["mask"]})
    return attend(x, g["memories"], query_document=qd, memory_document=g["document"],
                  query_position=qp, memory_position=g["position"], memory_mask=g["mask"])

  expected = forward(*(tf.constant(a) for a in (hidden, input_mask, doc, pos))).numpy()

  def split(a):
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(a[2 * ctx.replica_id_in_sync_group:
                                  2 * ctx.replica_id_in_sync_group + 2]))

  args = [split(a) for a in (hidden, input_mask, doc, pos)]
  out = tf.function(lambda *a: strategy.run(forward, args=a), autograph=False)(*args)
  local = np.concatenate([t.numpy() for t in strategy.experimental_local_results(out)])
  np.testing.assert_allclose(local, expected, atol=1e-5)


@pytest.mark.slow
def test_gradients_are_finite_under_xla():
  # Top-k with fewer allowed memories than k, padding segments and the sparse mask: no NaN.
  layer = _layer(top_k=4, same_segment_only=True)
  hidden, memories = _inputs()
  mask = _token_mask()

  @tf.function(jit_compile=True, autograph=False)
  def grads(x, mem):
    with tf.GradientTape() as tape:
      tape.watch([x, mem])
      out = layer(x, mem, query_document=tf.constant(Q_DOC), memory_document=tf.constant(M_DOC),
                  query_position=tf.constant(Q_POS), memory_position=tf.constant(M_POS),
                  memory_mask=tf.constant(M_MASK), query_token_mask=tf.constant(mask))
      loss = tf.reduce_sum(out * tf.sin(out))
    return [tf.convert_to_tensor(t)
            for t in tape.gradient(loss, [x, mem] + layer.trainable_variables)]

  g = grads(tf.constant(hidden), tf.constant(memories))
  names = ["x", "mem"] + [v.path.rsplit("/", 1)[-1] for v in layer.trainable_variables]
  by_name = {name: t.numpy() for name, t in zip(names, g)}
  assert all(np.all(np.isfinite(t)) for t in by_name.values())
  assert np.abs(by_name["noop_key"]).max() > 0 and np.abs(by_name["noop_bias"]).max() > 0
  # Masked memories get no gradient.
  np.testing.assert_array_equal(by_name["mem"][[3, 9]], 0.0)
