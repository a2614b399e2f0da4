"""OR-loss, answer-type and supporting losses against hand-computed values."""

import pytest
import math

import numpy as np
import tensorflow as tf

from model.training import losses
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


# --- OR-loss against a NumPy reference over random packs ------------------------------------


def _np_or_loss(logits, labels, kinds, doc, mask, atype):
  """-log of the summed softmax probability of all gold positions, averaged over documents."""
  per_doc = []
  for d in sorted(set(doc[(mask == 1) & (doc >= 0)].tolist())):
    segs = np.where((doc == d) & (mask == 1))[0]
    if any(atype[s] in (records.ANSWER_TYPE_YES, records.ANSWER_TYPE_NO) for s in segs):
      continue
    context = kinds[segs] == C
    x = logits[segs].astype(np.float64)
    pos = context & (labels[segs] > 0)
    if not pos.any():
      continue
    per_doc.append(-np.log(np.exp(x[pos]).sum() / np.exp(x[context]).sum()))
  return (float(np.mean(per_doc)) if per_doc else 0.0), len(per_doc)


def _random_pack(seed, n=10, l=7):
  rng = np.random.RandomState(seed)
  kinds = rng.choice([S, records.TOKEN_KIND_QUESTION, C, C, C], size=[n, l]).astype(np.int32)
  doc = rng.randint(-1, 4, size=n).astype(np.int32)
  mask = (doc >= 0).astype(np.int32)
  mask[rng.rand(n) < 0.15] = 0  # masked but with a document index: still padding
  atype_of = {0: 0, 1: records.ANSWER_TYPE_YES, 2: 0, 3: records.ANSWER_TYPE_NO}
  atype = np.array([atype_of[d] if d >= 0 else -1 for d in doc], np.int32)
  atype[doc == 2] = 0
  logits = (rng.randn(n, l) * 3).astype(np.float32)
  logits[rng.rand(n, l) < 0.1] = 40.0  # large values: the logsumexp must stay stable
  labels = (rng.rand(n, l) < 0.2).astype(np.int32)
  features = {"token_kind": tf.constant(kinds), "document_index": tf.constant(doc),
              "segment_mask": tf.constant(mask), "answer_type": tf.constant(atype)}
  return logits, labels, kinds, doc, mask, atype, features


def test_or_loss_matches_numpy_reference_on_random_packs():
  seen = 0
  for seed in range(12):
    logits, labels, kinds, doc, mask, atype, features = _random_pack(seed)
    expected, docs = _np_or_loss(logits, labels, kinds, doc, mask, atype)
    out = losses.or_loss(tf.constant(logits), tf.constant(labels), features)
    np.testing.assert_allclose(float(out["loss"]), expected, rtol=1e-5, atol=1e-5)
    assert float(out["documents"]) == docs
    seen += docs
  assert seen > 10  # the packs do exercise several documents


# --- answer type, paper mode --------------------------------------------------------------------


def test_answer_type_paper_mode_hand_computed():
  ln = math.log
  # doc 0 (span): segments 0 and 2; doc 1 (yes): segment 1; doc 2 (unknown type): segment 3;
  # segment 4 is padding.
  features = {"document_index": tf.constant([0, 1, 0, 2, -1]),
              "segment_mask": tf.constant([1, 1, 1, 1, 0]),
              "answer_type": tf.constant([0, records.ANSWER_TYPE_YES, 0, -1, 0])}
  z = tf.constant([[0.0, ln(2), 0.0], [0.0, 0.0, ln(2)], [ln(3), 0.0, 0.0], [5.0, 0, 0],
                   [50.0, 50.0, 50.0]])
  out = losses.answer_type_loss(z, features, mode="paper")
  # doc 0: all pairs sum 1+2+1 + 3+1+1 = 9, span pairs 1 + 3 = 4.  doc 1: 1+1+2 = 4, yes: 1.
  np.testing.assert_allclose(float(out["loss"]), (ln(9 / 4) + ln(4)) / 2, rtol=1e-6)
  assert float(out["documents"]) == 2.0
  with tf.GradientTape() as tape:
    tape.watch(z)
    loss = losses.answer_type_loss(z, features, mode="paper")["loss"]
  g = tape.gradient(loss, z).numpy()
  # doc 0, weight 1/2: softmax over its 6 pairs minus the posterior over its 2 gold pairs.
  np.testing.assert_allclose(g[0], 0.5 * np.array([1 / 9 - 1 / 4, 2 / 9, 1 / 9]), atol=1e-6)
  np.testing.assert_allclose(g[2], 0.5 * np.array([3 / 9 - 3 / 4, 1 / 9, 1 / 9]), atol=1e-6)
  assert np.all(g[3:] == 0)


def test_answer_type_mode_validation():
  _, features = _toy()
  try:
    losses.answer_type_loss(tf.zeros([5, 3]), features, mode="max")
  except ValueError:
    return
  raise AssertionError("expected ValueError")


# --- coreference, MLM ------------------------------------------------------------------------


def test_coref_loss_hand_computed():
  ln = math.log
  memories = tf.constant([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [1.0, 1.0], [3.0, 3.0]])
  entity = tf.constant([5, 5, 7, 0, 5])  # memory 3: unknown entity
  mask = tf.constant([1, 1, 1, 1, 0])  # memory 4: padding
  out = losses.coref_loss(memories, entity, mask, -0.5)
  # (0,1): logit 0.5-0.5=0, same -> log 2; (0,2): -0.5, different -> log(1+e^-0.5);
  # (1,2): 0, different -> log 2.  Ordered pairs count each twice.
  expected = (2 * ln(2) + ln(1 + math.exp(-0.5))) / 3
  np.testing.assert_allclose(float(out["loss"]), expected, rtol=1e-6)
  assert float(out["pairs"]) == 6.0 and float(out["positive_pairs"]) == 2.0
  none = losses.coref_loss(memories, tf.constant([5, 0, 0, 0, 5]), mask, 0.0)
  assert float(none["loss"]) == 0.0 and float(none["pairs"]) == 0.0


def test_mlm_loss_hand_computed():
  ln = math.log
  logits = tf.constant([[[0.0, ln(2), 0.0], [ln(3), 0.0, 0.0], [99.0, 0.0, 0.0]]])
  ids = tf.constant([[1, 2, 1]])
  weights = tf.constant([[1.0, 2.0, 0.0]])
  out = losses.mlm_loss(logits, ids, weights)
  np.testing.assert_allclose(float(out["loss"]), (ln(2) + 2 * ln(5)) / 3, rtol=1e-6)
  np.testing.assert_allclose(float(out["accuracy"]), 1 / 3, rtol=1e-6)
  assert float(out["weight"]) == 3.0
  zero = losses.mlm_loss(logits, ids, tf.zeros([1, 3]))
  assert float(zero["loss"]) == 0.0 and float(zero["accuracy"]) == 0.0


def _full_outputs(seed=0):
  logits, labels, _, _, _, atype, features = _random_pack(seed)
  rng = np.random.RandomState(seed + 100)
  n, l = logits.shape
  features = dict(features, answer_begin_labels=tf.constant(labels),
                  answer_end_labels=tf.constant(np.roll(labels, 1, axis=1)),
                  supporting=tf.constant(rng.randint(-1, 2, size=n)),
                  masked_ids=tf.constant(rng.randint(0, 9, size=[n, 3])),
                  masked_weights=tf.constant((rng.rand(n, 3) < 0.7).astype(np.float32)))
  outputs = {"begin_logits": tf.constant(logits), "end_logits": tf.constant(logits[:, ::-1]),
             "answer_type_logits": tf.constant(rng.randn(n, 3).astype(np.float32)),
             "supporting_logits": tf.constant(rng.randn(n).astype(np.float32)),
             "mlm_logits": tf.constant(rng.randn(n, 3, 9).astype(np.float32)),
             "memory_table": tf.constant(rng.randn(n, 4).astype(np.float32)),
             "memory_entity_id": tf.constant(rng.randint(0, 4, size=n)),
             "memory_mask": tf.constant(rng.randint(0, 2, size=n)),
             "coref_bias": tf.constant(0.3)}
  return outputs, features


def test_readtwice_losses_with_mlm_and_coref():
  outputs, features = _full_outputs()
  out = losses.readtwice_losses(outputs, features, answer_type_mode="paper", mlm_weight=0.5,
                                coref_weight=2.0)
  for k in ("mlm", "mlm_accuracy", "mlm_weight", "coref", "coref_pairs",
            "coref_positive_pairs"):
    assert k in out, k
  expected = (0.5 * (float(out["span_begin"]) + float(out["span_end"])) +
              float(out["answer_type"]) + float(out["supporting"]) + 0.5 * float(out["mlm"]) +
              2.0 * float(out["coref"]))
  np.testing.assert_allclose(float(out["total"]), expected, rtol=1e-6)
  base = {k: v for k, v in outputs.items() if not k.startswith(("mlm", "memory", "coref"))}
  assert "mlm" not in losses.readtwice_losses(base, features)


@pytest.mark.slow
def test_losses_compile_with_xla():
  outputs, features = _full_outputs(7)
  for mode in ("mean", "paper"):
    def fn(o, f, mode=mode):
      return losses.readtwice_losses(o, f, answer_type_mode=mode)

    eager = fn(outputs, features)
    compiled = tf.function(fn, jit_compile=True)(outputs, features)
    assert set(eager) == set(compiled)
    for k in eager:
      np.testing.assert_allclose(float(compiled[k]), float(eager[k]), rtol=1e-5, atol=1e-6,
                                 err_msg=f"{mode}/{k}")

  float_keys = [k for k in sorted(outputs) if k != "memory_entity_id" and k != "memory_mask"]

  def grads(o, f):
    with tf.GradientTape() as tape:
      xs = [o[k] for k in float_keys]
      tape.watch(xs)
      total = losses.readtwice_losses(o, f, answer_type_mode="paper")["total"]
    return tape.gradient(total, xs)

  eager = grads(outputs, features)
  compiled = tf.function(grads, jit_compile=True)(outputs, features)
  for k, e, c in zip(float_keys, eager, compiled):
    assert np.abs(e.numpy()).max() > 0, k
    np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
