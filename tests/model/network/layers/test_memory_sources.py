"""Static-shape entity mentions in the reader and ExtractMemories' sources (cls / sts / entity).

The memory checks use hand-made BERT_1 states whose first half encodes (segment, token) and a
projection set to "copy": the first half of the first state to the first half of the memory and
the first half of the last state to the second half, so a memory shows exactly which states it
was made of.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model.data import pack_reader as input_lib
from model.network.layers.memory import ExtractMemories, mention_token_mask
from tests.model import packs

N, L, H = 3, 12, 8
HALF = H // 2
MENTION_KEYS = ("mentions_segment", "mentions_begin", "mentions_end", "mentions_entity_id",
                "mentions_mask")
# (segment, begin, end, entity id) in record order.
MENTIONS = [(2, 4, 5, 42), (0, 6, 6, 7), (0, 1, 2, 2**31 + 5), (2, 7, 9, 0), (0, 8, 9, 2**40)]


def _pack(mentions=MENTIONS, pack_id="00000-0"):
  p = packs.empty_pack(N, L, pack_id=pack_id)
  packs.fill_segment(p, 0, 0, "docA", "qA", [5], [11, 12, 13, 14, 15, 16, 17],
                     [[i, i + 1] for i in range(7)], segment_index=0, num_segments=2)
  packs.fill_segment(p, 2, 0, "docA", "qA", [5], [21, 22, 23, 24, 25, 26, 27, 28],
                     [[i, i + 1] for i in range(8)], segment_index=1, num_segments=2)
  for m in mentions:
    packs.add_mention(p, *m)
  return p


def _read(tmp_path, max_mentions, pack=None, **kwargs):
  path = packs.write_records(str(tmp_path / "r.tfrecord"), [pack or _pack()])
  ds = input_lib.make_dataset(path, L, N, max_mentions=max_mentions, **kwargs)
  (x,) = list(ds)
  return ds, x


def test_first_max_mentions_in_record_order_and_dropped_count(tmp_path):
  ds, x = _read(tmp_path, 3)
  for k in MENTION_KEYS:
    assert ds.element_spec[k].shape == (3,) and x[k].dtype == tf.int32, k
  assert ds.element_spec["mentions_dropped"].shape == () and x["mentions_dropped"].dtype == tf.int32
  assert x["mentions_segment"].numpy().tolist() == [2, 0, 0]
  assert x["mentions_begin"].numpy().tolist() == [4, 6, 1]
  assert x["mentions_end"].numpy().tolist() == [5, 6, 2]
  # int64 ids are cast to int32: in-range ids unchanged, others keep their low 32 bits.
  assert x["mentions_entity_id"].numpy().tolist() == [42, 7, -(2**31) + 5]
  assert x["mentions_mask"].numpy().tolist() == [1, 1, 1]
  assert int(x["mentions_dropped"]) == 2
  # The ragged keys are still there, complete and int64 ids intact.
  assert x["mention_segment"].numpy().tolist() == [m[0] for m in MENTIONS]
  assert x["mention_entity_id"].numpy().tolist() == [m[3] for m in MENTIONS]


def test_padding_when_mentions_fit(tmp_path):
  _, x = _read(tmp_path, 7)
  assert x["mentions_segment"].numpy().tolist() == [2, 0, 0, 2, 0, 0, 0]
  assert x["mentions_begin"].numpy().tolist() == [4, 6, 1, 7, 8, 0, 0]
  assert x["mentions_end"].numpy().tolist() == [5, 6, 2, 9, 9, 0, 0]
  assert x["mentions_entity_id"].numpy().tolist() == [42, 7, -(2**31) + 5, 0, 0, 0, 0]
  assert x["mentions_mask"].numpy().tolist() == [1, 1, 1, 1, 1, 0, 0]
  assert int(x["mentions_dropped"]) == 0


def test_numpy_integer_max_mentions(tmp_path):
  ds, x = _read(tmp_path, np.int64(2))
  assert ds.element_spec["mentions_mask"].shape == (2,)
  assert int(x["mentions_dropped"]) == 3


def test_pack_without_mentions(tmp_path):
  _, x = _read(tmp_path, 2, pack=_pack(mentions=[]))
  for k in MENTION_KEYS:
    assert x[k].numpy().tolist() == [0, 0], k
  assert int(x["mentions_dropped"]) == 0


def test_default_adds_nothing(tmp_path):
  _, x = _read(tmp_path, None)
  assert not [k for k in x if k.startswith("mentions_")]
  assert "mention_segment" in x


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_max_mentions(tmp_path, bad):
  path = packs.write_records(str(tmp_path / "r.tfrecord"), [_pack()])
  with pytest.raises(ValueError, match="max_mentions"):
    input_lib.make_dataset(path, L, N, max_mentions=bad)


def test_output_dir_threads_max_mentions(tmp_path):
  d = packs.write_output_dir(str(tmp_path / "out"), [_pack()], [], seq_length=L,
                             segments_per_pack=N)
  (x,) = list(input_lib.dataset_from_output_dir(d, max_mentions=4))
  assert x["mentions_begin"].numpy().tolist() == [4, 6, 1, 7]
  assert int(x["mentions_dropped"]) == 1
  (y,) = list(input_lib.dataset_from_output_dir(d))
  assert "mentions_begin" not in y


# --- ExtractMemories --------------------------------------------------------------------------


def _hidden(n=N, l=L, seed=0):
  """float [n, l, H]: first half (seg + 1, tok + 1, 100 (seg + 1) + tok, 1), second half noise."""
  rng = np.random.RandomState(seed)
  h = rng.randn(n, l, H).astype(np.float32)
  for s in range(n):
    for t in range(l):
      h[s, t, :HALF] = [s + 1, t + 1, 100 * (s + 1) + t, 1]
  return h


def _copy_layer(source, **kwargs):
  layer = ExtractMemories(H, source=source, **kwargs)
  layer.build((None, None, H))
  kernel = np.zeros((2 * H, H), np.float32)
  kernel[np.arange(HALF), np.arange(HALF)] = 1.0  # first state's first half -> out[:HALF]
  kernel[H + np.arange(HALF), HALF + np.arange(HALF)] = 1.0  # last state's -> out[HALF:]
  layer.projection.set_weights([kernel, np.zeros(H, np.float32)])
  return layer


def _expected(hidden, segment, begin, end):
  return np.stack([np.concatenate([hidden[s, b, :HALF], hidden[s, e, :HALF]])
                   for s, b, e in zip(segment, begin, end)])


def _xla(layer, hidden, features):
  fn = tf.function(lambda h, f: layer(h, f), jit_compile=True, autograph=False)
  return {k: v.numpy() for k, v in fn(tf.constant(hidden), features).items()}


def test_cls_memories_are_unchanged():
  layer = ExtractMemories(H, source="cls")
  hidden = _hidden()
  input_mask = np.ones((N, L), np.int32)
  input_mask[1] = 0
  out = layer(tf.constant(hidden), {"input_mask": tf.constant(input_mask)})
  # Same weights as before the other sources existed: projection/kernel [H, H] + bias, tanh.
  assert [(w.path.split("/", 1)[1], tuple(w.shape)) for w in layer.weights] == [
      ("projection/kernel", (H, H)), ("projection/bias", (H,))]
  kernel, bias = layer.projection.get_weights()
  np.testing.assert_allclose(out["memories"].numpy(), np.tanh(hidden[:, 0] @ kernel + bias),
                             atol=1e-6)
  assert out["segment"].numpy().tolist() == [0, 1, 2]
  assert out["mask"].numpy().tolist() == [1, 0, 1]
  for k in ("entity_id", "begin", "end"):
    assert out[k].numpy().tolist() == [0, 0, 0], k
  assert all(v.dtype == tf.int32 for k, v in out.items() if k != "memories")
  xla = _xla(layer, hidden, {"input_mask": tf.constant(input_mask)})
  np.testing.assert_allclose(xla["memories"], out["memories"].numpy(), atol=1e-6)
  # Without an input_mask every memory is real.
  assert layer(tf.constant(hidden))["mask"].numpy().tolist() == [1, 1, 1]


def test_sts_spans():
  layer = _copy_layer("sts", sts_length=5)
  hidden = _hidden()
  input_mask = np.zeros((N, L), np.int32)
  input_mask[0, :7] = 1  # spans [0-4] real, [5-9] real up to token 6, [10-11] padding
  input_mask[2, :] = 1  # all three spans real, the last one [10-11] is short
  features = {"input_mask": tf.constant(input_mask)}
  out = {k: v.numpy() for k, v in layer(tf.constant(hidden), features).items()}
  assert layer.num_memories(N, L) == N * 3 == out["memories"].shape[0]
  assert out["segment"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
  assert out["mask"].tolist() == [1, 1, 0, 0, 0, 0, 1, 1, 1]
  assert out["begin"].tolist() == [0, 5, 10, 0, 5, 10, 0, 5, 10]
  # Real spans end at their last real token; padding spans at their last position.
  assert out["end"].tolist() == [4, 6, 11, 4, 9, 11, 4, 9, 11]
  assert out["entity_id"].tolist() == [0] * 9
  np.testing.assert_allclose(out["memories"],
                             _expected(hidden, out["segment"], out["begin"], out["end"]),
                             atol=1e-5)
  np.testing.assert_allclose(out["memories"][0, :HALF], [1, 1, 100, 1])  # segment 0, token 0
  np.testing.assert_allclose(out["memories"][1, HALF:], [1, 7, 106, 1])  # segment 0, token 6
  xla = _xla(layer, hidden, features)
  for k, v in out.items():
    np.testing.assert_allclose(xla[k], v, atol=1e-5, err_msg=k)


def test_sts_span_of_whole_segment():
  layer = _copy_layer("sts", sts_length=L)
  hidden = _hidden()
  input_mask = np.ones((N, L), np.int32)
  input_mask[1, 3:] = 0
  out = layer(tf.constant(hidden), {"input_mask": tf.constant(input_mask)})
  assert out["begin"].numpy().tolist() == [0, 0, 0]
  assert out["end"].numpy().tolist() == [L - 1, 2, L - 1]
  np.testing.assert_allclose(out["memories"].numpy()[1], np.concatenate(
      [hidden[1, 0, :HALF], hidden[1, 2, :HALF]]), atol=1e-5)


def test_entity_memories_sit_at_the_mention_spans(tmp_path):
  _, x = _read(tmp_path, 6)
  features = {k: x[k] for k in MENTION_KEYS}
  layer = _copy_layer("entity", max_memories=6)
  hidden = _hidden()
  out = {k: v.numpy() for k, v in layer(tf.constant(hidden), features).items()}
  assert layer.num_memories(N, L) == 6 == out["memories"].shape[0]
  assert out["mask"].tolist() == [1, 1, 1, 1, 1, 0]
  assert out["segment"].tolist()[:5] == [m[0] for m in MENTIONS]
  assert out["begin"].tolist()[:5] == [m[1] for m in MENTIONS]
  assert out["end"].tolist()[:5] == [m[2] for m in MENTIONS]
  assert out["entity_id"].tolist() == [42, 7, -(2**31) + 5, 0, 0, 0]  # 2**40 -> low bits 0
  for i, (s, b, e, _) in enumerate(MENTIONS):
    np.testing.assert_allclose(out["memories"][i], np.concatenate(
        [[s + 1, b + 1, 100 * (s + 1) + b, 1], [s + 1, e + 1, 100 * (s + 1) + e, 1]]),
        atol=1e-4, err_msg=i)
  # The padding entry points at a valid row and is masked.
  assert out["segment"][5] == 0 and out["begin"][5] == 0 and out["end"][5] == 0
  xla = _xla(layer, hidden, features)
  for k, v in out.items():
    np.testing.assert_allclose(xla[k], v, atol=1e-4, err_msg=k)


def test_entity_projection_is_linear_on_the_concatenation():
  layer = ExtractMemories(H, source="entity", max_memories=2)
  hidden = _hidden()
  features = {"mentions_segment": tf.constant([2, 0]), "mentions_begin": tf.constant([3, 0]),
              "mentions_end": tf.constant([5, 0]), "mentions_entity_id": tf.constant([9, 0]),
              "mentions_mask": tf.constant([1, 0])}
  out = layer(tf.constant(hidden), features)["memories"].numpy()
  kernel, bias = layer.projection.get_weights()
  assert kernel.shape == (2 * H, H)
  np.testing.assert_allclose(
      out[0], np.concatenate([hidden[2, 3], hidden[2, 5]]) @ kernel + bias, atol=1e-5)


def test_mention_token_mask(tmp_path):
  _, x = _read(tmp_path, 4)  # mentions 0-3 of MENTIONS
  mask = mention_token_mask(x, N, L).numpy()
  expected = np.zeros((N, L), np.int32)
  for s, b, e, _ in MENTIONS[:4]:
    expected[s, b:e + 1] = 1
  np.testing.assert_array_equal(mask, expected)
  fn = tf.function(lambda f: mention_token_mask(f, N, L), jit_compile=True, autograph=False)
  np.testing.assert_array_equal(fn({k: x[k] for k in MENTION_KEYS}).numpy(), expected)


def test_errors():
  with pytest.raises(ValueError, match="max_memories"):
    ExtractMemories(H, source="entity")
  with pytest.raises(ValueError, match="Unknown memory source"):
    ExtractMemories(H, source="mentions")
  with pytest.raises(ValueError, match="sts_length"):
    ExtractMemories(H, source="sts", sts_length=0)
  hidden = tf.constant(_hidden())
  with pytest.raises(ValueError, match="input_mask"):
    ExtractMemories(H, source="sts")(hidden, {})
  with pytest.raises(ValueError, match="max_mentions"):
    ExtractMemories(H, source="entity", max_memories=4)(hidden, {"input_mask": tf.ones([N, L])})
  long = {k: tf.zeros([5], tf.int32) for k in MENTION_KEYS}
  with pytest.raises(ValueError, match="max_memories is 4"):
    ExtractMemories(H, source="entity", max_memories=4)(hidden, long)
  ragged = {**long, "mentions_mask": tf.zeros([3], tf.int32)}
  with pytest.raises(ValueError, match="differ in length"):
    ExtractMemories(H, source="entity", max_memories=8)(hidden, ragged)


def test_entity_fewer_mentions_than_max_memories_and_out_of_range():
  # A replica's share of a pack (model.training.replicas.split_pack) has K < max_memories mentions.
  layer = _copy_layer("entity", max_memories=6)
  hidden = _hidden()
  features = {"mentions_segment": tf.constant([1, 0, 3, 0]),
              "mentions_begin": tf.constant([2, 0, 1, 5]),
              "mentions_end": tf.constant([3, 0, 1, L]),
              "mentions_entity_id": tf.constant([5, 0, 6, 7]),
              "mentions_mask": tf.constant([1, 0, 1, 1])}
  out = _xla(layer, hidden, features)
  # Entries 2 (row 3 of 3) and 3 (token L) are out of range: masked, never clipped.
  assert out["memories"].shape == (4, H) and out["mask"].tolist() == [1, 0, 0, 0]
  assert out["entity_id"].tolist() == [5, 0, 0, 0]
  np.testing.assert_allclose(out["memories"][0], [2, 3, 202, 1, 2, 4, 203, 1], atol=1e-4)


@pytest.mark.parametrize("kwargs", [{"source": "cls"}, {"source": "sts", "sts_length": 7},
                                    {"source": "entity", "max_memories": 5}])
def test_serialisation(kwargs):
  layer = ExtractMemories(H, initializer_range=0.05, name="em", **kwargs)
  config = layer.get_config()
  assert {k: config[k] for k in kwargs} == kwargs
  clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
  assert isinstance(clone, ExtractMemories) and clone.get_config() == config
