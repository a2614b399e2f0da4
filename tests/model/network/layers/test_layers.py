"""Memory attention masking, relative-bias clipping, top-k and whole-model isolation."""

import numpy as np
import pytest
import tensorflow as tf

from model import configs
from model.network import readtwice
from model.network.layers import MemoryAttention, TransformerBlock, gather_memories
from schemas import records

H, HEADS = 8, 2


def _layer(b=2, top_k=None):
  layer = MemoryAttention(H, HEADS, max_segment_distance=b, top_k=top_k, dropout=0.0)
  layer.build((None, None, H))
  return layer


def _inputs(seed=0, n=4, l=3):
  rng = np.random.RandomState(seed)
  hidden = tf.constant(rng.randn(n, l, H), tf.float32)
  memories = tf.constant(rng.randn(n, H), tf.float32)
  return hidden, memories


def _call(layer, hidden, memories, docs, mask, pos=None):
  n = len(docs)
  pos = pos if pos is not None else list(range(n))
  return layer(hidden, memories, query_document=tf.constant(docs),
               memory_document=tf.constant(docs), query_position=tf.constant(pos),
               memory_position=tf.constant(pos), memory_mask=tf.constant(mask)).numpy()


def test_relative_bias_clipping():
  layer = _layer(b=2)
  table = np.arange(5 * HEADS, dtype=np.float32).reshape(5, HEADS)  # row r <-> distance r - 2
  layer.relative_bias_table.assign(table)
  bias = layer.relative_bias(tf.constant([0, 3]), tf.constant([0, 1, 2, 3, 4, 5, 9])).numpy()
  assert bias.shape == (2, HEADS, 7)
  # query 0: distances 0,1,2,3,4,5,9 -> clipped 0,1,2,2,2,2,2 -> rows 2,3,4,4,4,4,4
  np.testing.assert_array_equal(bias[0, 0], table[[2, 3, 4, 4, 4, 4, 4], 0])
  # query 3: distances -3,-2,-1,0,1,2,6 -> rows 0,0,1,2,3,4,4
  np.testing.assert_array_equal(bias[1, 1], table[[0, 0, 1, 2, 3, 4, 4], 1])


def test_other_document_cannot_be_attended():
  layer = _layer()
  hidden, memories = _inputs()
  docs, mask = [0, 0, 1, 1], [1, 1, 1, 1]
  base = _call(layer, hidden, memories, docs, mask)
  perturbed = memories.numpy().copy()
  perturbed[2:] += 5.0  # memories of document 1
  out = _call(layer, hidden, tf.constant(perturbed), docs, mask)
  np.testing.assert_allclose(out[:2], base[:2], atol=1e-6)
  assert np.abs(out[2:] - base[2:]).max() > 1e-3
  # Changing document 0's memories changes document 0's outputs.
  perturbed = memories.numpy().copy()
  perturbed[1] += 5.0
  out = _call(layer, hidden, tf.constant(perturbed), docs, mask)
  assert np.abs(out[:2] - base[:2]).max() > 1e-3


def test_padding_segments_are_ignored():
  layer = _layer()
  hidden, memories = _inputs()
  docs, mask = [0, 0, 0, -1], [1, 1, 1, 0]
  base = _call(layer, hidden, memories, docs, mask)
  perturbed = memories.numpy().copy()
  perturbed[3] += 100.0
  out = _call(layer, hidden, tf.constant(perturbed), docs, mask)
  np.testing.assert_allclose(out[:3], base[:3], atol=1e-6)
  # A masked memory with a real document index is also ignored.
  out2 = _call(layer, hidden, tf.constant(perturbed), [0, 0, 0, 0], mask)
  np.testing.assert_allclose(out2[:3], base[:3], atol=1e-6)
  assert np.all(np.isfinite(out))


def test_noop_only_reads_nothing():
  # A segment alone in its document with its own memory masked attends only to the no-op memory,
  # whose value is zero: out = LayerNorm(hidden + W_o 0 + b_o).
  layer = _layer()
  hidden, memories = _inputs(n=1)
  out = _call(layer, hidden, memories, [0], [0])
  expected = layer.norm(hidden + layer.output_dense(tf.zeros_like(hidden))).numpy()
  np.testing.assert_allclose(out, expected, atol=1e-5)


def test_top_k_one_differs_from_full_on_the_same_weights():
  # (Exact top-k numbers: tests/model/network/layers/test_memory_attention_numeric.py.)
  layer = _layer(top_k=1)
  hidden, memories = _inputs()
  out = _call(layer, hidden, memories, [0, 0, 0, 0], [1, 1, 1, 1])
  assert out.shape == (4, 3, H) and np.all(np.isfinite(out))
  full_layer = _layer(top_k=None)
  full_layer.set_weights(layer.get_weights())
  all_candidates = _layer(top_k=5)  # 4 memories + the no-op: keeps everything
  all_candidates.set_weights(layer.get_weights())
  full = _call(full_layer, hidden, memories, [0, 0, 0, 0], [1, 1, 1, 1])
  np.testing.assert_allclose(
      _call(all_candidates, hidden, memories, [0, 0, 0, 0], [1, 1, 1, 1]), full, atol=1e-6)
  assert np.abs(out - full).max() > 1e-4


def test_gather_memories_single_replica_is_identity():
  x = {"memories": tf.ones([3, 2]), "document": tf.constant([0, 0, 1])}
  out = gather_memories(x)
  assert out is x


def test_gather_memories_multi_replica():
  devices = tf.config.list_logical_devices("CPU")
  if len(devices) < 2:
    pytest.skip("needs 2 logical CPU devices (configured in conftest)")
  strategy = tf.distribute.MirroredStrategy([d.name for d in devices[:2]])

  def fn():
    ctx = tf.distribute.get_replica_context()
    rid = ctx.replica_id_in_sync_group
    return gather_memories(tf.fill([2, 1], tf.cast(rid, tf.float32)))

  out = strategy.run(fn)
  local = strategy.experimental_local_results(out)
  np.testing.assert_array_equal(local[0].numpy().ravel(), [0, 0, 1, 1])


def test_transformer_padding_tokens_do_not_leak():
  block = TransformerBlock(H, HEADS, 16, dropout=0.0)
  rng = np.random.RandomState(1)
  x = rng.randn(1, 5, H).astype(np.float32)
  mask = tf.constant([[1, 1, 1, 0, 0]])
  base = block(tf.constant(x), attention_mask=mask).numpy()
  x2 = x.copy()
  x2[0, 3:] += 10.0
  out = block(tf.constant(x2), attention_mask=mask).numpy()
  np.testing.assert_allclose(out[0, :3], base[0, :3], atol=1e-5)


def _model_pack(rng, n=4, l=6):
  kinds = np.full([n, l], records.TOKEN_KIND_CONTEXT, np.int32)
  kinds[:, 0] = records.TOKEN_KIND_SPECIAL
  return {
      "token_ids": tf.constant(rng.randint(4, 50, size=[n, l]), tf.int32),
      "input_mask": tf.ones([n, l], tf.int32), "token_kind": tf.constant(kinds),
      "segment_mask": tf.constant([1, 1, 1, 0]), "document_index": tf.constant([0, 1, 0, -1]),
      "segment_index": tf.constant([0, 0, 1, 0]),
  }


def test_model_documents_are_isolated():
  model = readtwice.build_model(configs.tiny(vocab_size=50, max_seq_length=6), 6, 4)
  rng = np.random.RandomState(0)
  x = _model_pack(rng)
  base = model(x)
  # Perturb document 1 (segment 1) and the padding segment 3.
  ids = x["token_ids"].numpy()
  ids[1] = rng.randint(4, 50, size=6)
  ids[3] = rng.randint(4, 50, size=6)
  out = model({**x, "token_ids": tf.constant(ids)})
  for k in ("begin_logits", "end_logits", "answer_type_logits", "supporting_logits"):
    np.testing.assert_allclose(out[k].numpy()[[0, 2]], base[k].numpy()[[0, 2]], atol=1e-5,
                               err_msg=k)
  assert np.abs(out["begin_logits"].numpy()[1] - base["begin_logits"].numpy()[1]).max() > 1e-4
  # Perturbing segment 2 (document 0) changes segment 0's outputs through memory attention.
  ids = x["token_ids"].numpy()
  ids[2] = rng.randint(4, 50, size=6)
  out = model({**x, "token_ids": tf.constant(ids)})
  assert np.abs(out["begin_logits"].numpy()[0] - base["begin_logits"].numpy()[0]).max() > 1e-6
  # Non-context tokens are masked.
  assert np.all(base["begin_logits"].numpy()[:, 0] == readtwice.NEG_LOGIT)


def test_model_sparse_mlm_outputs_the_dense_logits_of_the_slots_that_count():
  """With ``sparse_mlm`` the model's MLM head runs on the masked slots of weight > 0 only: its
  ``[K, V]`` logits are the dense ``[N, P, V]`` ones at ``mlm_index``, and the pre-training
  objective's losses and statistics are the dense ones."""
  from model.training import objectives  # pylint: disable=g-import-not-at-top
  mc = configs.tiny(vocab_size=50, max_seq_length=6)
  model = readtwice.build_model(mc, 6, 4)
  x = _model_pack(np.random.RandomState(1))
  x.update(masked_positions=tf.constant([[1, 2, 0], [3, 0, 0], [4, 5, 1], [0, 0, 0]]),
           masked_weights=tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0],
                                       [0.0, 0.0, 0.0]]),
           masked_ids=tf.constant([[7, 9, 0], [11, 0, 0], [5, 6, 8], [0, 0, 0]]),
           masked_is_entity=tf.constant([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0],
                                         [0.0, 0.0, 0.0]]))
  dense = model(x)
  assert "mlm_index" not in dense and dense["mlm_logits"].shape == (4, 3, 50)
  model.sparse_mlm = True
  sparse = model(x)
  index = sparse["mlm_index"].numpy()
  assert index.tolist() == [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]]
  np.testing.assert_allclose(sparse["mlm_logits"].numpy(),
                             dense["mlm_logits"].numpy()[index[:, 0], index[:, 1]], atol=1e-5)
  objective = objectives.PretrainObjective(mc, configs.MaskingConfig(mask_token_id=3,
                                                                     vocab_size=50))
  (dl, ds), (sl, ss) = (objective.step_metrics(o, x) for o in (dense, sparse))
  for k in ("mlm", "total"):
    np.testing.assert_allclose(float(sl[k]), float(dl[k]), rtol=1e-5, err_msg=k)
  for k in ("mlm_accuracy", "mlm_entity_accuracy", "masked_tokens"):
    np.testing.assert_allclose(float(ss[k]), float(ds[k]), rtol=1e-6, err_msg=k)
  assert float(ss["masked_tokens"]) == 6.0


def test_model_config_serialisation():
  model = readtwice.ReadTwiceModel(configs.tiny())
  clone = readtwice.ReadTwiceModel.from_config(model.get_config())
  assert clone.config == model.config


@pytest.mark.slow
@pytest.mark.parametrize("same_segment_only", [False, True])
def test_memory_attention_probe_shows_which_memories_each_token_reads(same_segment_only):
  """The probe's attention is the model's own (its no-op share is the forward pass'
  ``memory_noop_probability``), sums to 1 with the no-op, and puts nothing on other documents'
  or padding memories (nor, with same_segment_only, on other segments')."""
  config = configs.tiny(vocab_size=50, max_seq_length=6, same_segment_only=same_segment_only)
  model = readtwice.build_model(config, 6, 4)
  x = _model_pack(np.random.RandomState(0))
  probe = {k: v.numpy() for k, v in model.memory_attention_probe(x).items()}
  out = model(x)
  np.testing.assert_allclose(probe["noop"], out["memory_noop_probability"].numpy(), atol=1e-6)
  att, index = probe["memories"], probe["memory_index"]
  real = x["segment_mask"].numpy() == 1
  np.testing.assert_allclose((att.sum(-1) + probe["noop"])[real], 1.0, atol=1e-5)
  docs, positions = x["document_index"].numpy(), x["segment_index"].numpy()
  for s in np.flatnonzero(real):
    for c, j in enumerate(index[s]):
      readable = (probe["document"][j] == docs[s] and probe["mask"][j] == 1
                  and (not same_segment_only or probe["position"][j] == positions[s]))
      assert (att[s, :, c] > 0).all() if readable else (att[s, :, c] == 0).all(), (s, j)
  with pytest.raises(ValueError, match="use_memory"):
    readtwice.build_model(configs.tiny(vocab_size=50, max_seq_length=6, use_memory=False), 6,
                          4).memory_attention_probe(x)
