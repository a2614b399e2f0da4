"""The losses under MirroredStrategy (2 logical CPUs) equal the single-device losses.

Convention (model.training.losses): each replica returns ``loss_global / R``; the replica losses SUM
to the single-device loss and the gradients w.r.t. each replica's local logits equal the
single-device gradients of those rows.  Logical devices must be configured before TensorFlow
initialises, so the body runs in a fresh subprocess (``_main``) that prints one JSON line.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from tests import REPO_ROOT

pytestmark = pytest.mark.slow  # whole-job or multi-replica fixtures

REPO = str(REPO_ROOT)
R = 2
N, L, P, V, H = 8, 6, 3, 11, 4
# Segment -> document: doc 0 on rows 0, 2 | 4 (straddles the halves), doc 1 (yes) on row 1,
# doc 2 on rows 3 | 5 (straddles; its positives are all on replica 1), doc 3 (unknown answer
# type) on row 6, row 7 padding.
DOC = [0, 1, 0, 2, 0, 2, 3, -1]
MASK = [1, 1, 1, 1, 1, 1, 1, 0]
ATYPE = [0, 1, 0, 0, 0, 0, -1, -1]
LOSS_KEYS = ("span_begin", "span_end", "answer_type", "supporting", "mlm", "coref", "total")
GRAD_KEYS = ("begin_logits", "end_logits", "answer_type_logits", "supporting_logits",
             "mlm_logits", "memories")


def _pack():
  """Numpy pack (all N rows)."""
  rng = np.random.RandomState(0)
  kinds = np.full([N, L], 3, np.int32)  # TOKEN_KIND_CONTEXT
  kinds[:, 0] = 1  # TOKEN_KIND_SPECIAL
  kinds[:, 1] = 2  # TOKEN_KIND_QUESTION
  begin = np.zeros([N, L], np.int32)
  end = np.zeros([N, L], np.int32)
  begin[2, 3] = begin[4, 2] = begin[4, 5] = 1  # doc 0: positives on both replicas
  end[0, 4] = end[4, 3] = 1
  begin[5, 2] = end[5, 4] = 1  # doc 2: positives only on replica 1
  begin[1, 2] = 1  # doc 1 is a yes question: ignored
  features = {
      "token_kind": kinds, "document_index": np.array(DOC, np.int32),
      "segment_mask": np.array(MASK, np.int32), "answer_type": np.array(ATYPE, np.int32),
      "supporting": np.array([1, 0, -1, 1, 0, 1, 0, 1], np.int32),
      "answer_begin_labels": begin, "answer_end_labels": end,
      "masked_ids": rng.randint(0, V, size=[N, P]).astype(np.int32),
      "masked_weights": (rng.rand(N, P) < 0.6).astype(np.float32),
  }
  logits = (rng.randn(N, L) * 2).astype(np.float32)
  logits[4, 4] = 30.0  # a large logit: the cross-replica logsumexp must be stable
  outputs = {
      "begin_logits": logits, "end_logits": (rng.randn(N, L) * 2).astype(np.float32),
      "answer_type_logits": rng.randn(N, 3).astype(np.float32),
      "supporting_logits": rng.randn(N).astype(np.float32),
      "mlm_logits": rng.randn(N, P, V).astype(np.float32),
      "memories": (rng.randn(N, H) * 0.5).astype(np.float32),
      "memory_entity_id": np.array([3, 0, 3, 5, 5, 3, 2, 7], np.int32),
      "memory_mask": np.array(MASK, np.int32),
  }
  return outputs, features


def _main():
  """Subprocess body: prints ``{case: {"single": ..., "replicas": [...]}}`` as JSON."""
  import tensorflow as tf

  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * R)
  from model.training import losses

  outputs_np, features_np = _pack()

  def compute(outputs, features, mode, gather_outside):
    """Losses + gradients w.r.t. this replica's (or the single device's) float outputs."""
    with tf.GradientTape() as tape:
      xs = {k: tf.identity(outputs[k]) for k in GRAD_KEYS}
      tape.watch(list(xs.values()))
      ctx = tf.distribute.get_replica_context()
      memories, ids, mask = xs["memories"], outputs["memory_entity_id"], outputs["memory_mask"]
      if gather_outside and ctx.num_replicas_in_sync > 1:  # the model's gathered table
        memories, ids, mask = (ctx.all_gather(t, axis=0) for t in (memories, ids, mask))
      model_out = dict(xs, memory_table=memories, memory_entity_id=ids, memory_mask=mask,
                       coref_bias=tf.constant(0.25))
      out = losses.readtwice_losses(model_out, features, answer_type_mode=mode,
                                    coref_all_gather=not gather_outside)
    grads = tape.gradient(out["total"], [xs[k] for k in GRAD_KEYS])
    return out, dict(zip(GRAD_KEYS, grads))

  def to_json(out, grads):
    return {"losses": {k: float(v) for k, v in out.items()},
            "grads": {k: np.asarray(v).tolist() for k, v in grads.items()}}

  strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices(
      "CPU")[:R]])
  rows = N // R

  def split(tree):
    return strategy.experimental_distribute_values_from_function(
        lambda c: {k: tf.constant(v[c.replica_id_in_sync_group * rows:
                                    (c.replica_id_in_sync_group + 1) * rows])
                   for k, v in tree.items()})

  dist_out, dist_feat = split(outputs_np), split(features_np)
  result = {}
  cases = [("mean", False, True), ("paper", True, True), ("paper", False, False)]
  for mode, gather_outside, graph in cases:
    name = f"{mode}-gather_outside={gather_outside}-graph={graph}"
    tf_out = {k: tf.constant(v) for k, v in outputs_np.items()}
    tf_feat = {k: tf.constant(v) for k, v in features_np.items()}
    single = to_json(*compute(tf_out, tf_feat, mode, gather_outside))

    def step(o, f, mode=mode, gather_outside=gather_outside):
      return compute(o, f, mode, gather_outside)

    fn = tf.function(lambda o, f, step=step: strategy.run(step, args=(o, f))) if graph else (
        lambda o, f, step=step: strategy.run(step, args=(o, f)))
    per_replica = fn(dist_out, dist_feat)
    replicas = [to_json(*r) for r in zip(
        *(strategy.experimental_local_results(t) for t in per_replica))]
    reduced = losses.reduce_replica_losses(strategy, per_replica[0])
    result[name] = {"single": single, "replicas": replicas,
                    "reduced": {k: float(v) for k, v in reduced.items()}}
  print(json.dumps(result))


@pytest.fixture(scope="module")
def replica_results():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  code = ("import sys; sys.path.insert(0, %r); "
          "from tests.model.training import test_losses_replicas as t; t._main()" % REPO)
  proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pack_straddles_replicas():
  rows = N // R
  halves = [set(DOC[:rows]), set(DOC[rows:])]
  assert {0, 2} <= halves[0] & halves[1]


@pytest.mark.slow
def test_replica_losses_sum_to_single_device(replica_results):
  assert len(replica_results) == 3
  for name, r in replica_results.items():
    single = r["single"]["losses"]
    assert len(r["replicas"]) == R
    for k, v in single.items():
      values = [rep["losses"][k] for rep in r["replicas"]]
      if k in LOSS_KEYS:
        np.testing.assert_allclose(sum(values), v, rtol=1e-5, atol=1e-6, err_msg=f"{name}/{k}")
        # Each replica carries exactly 1/R of the global loss (not its own local loss).
        np.testing.assert_allclose(values, [v / R] * R, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}/{k}")
      else:  # global statistics: the same on every replica
        np.testing.assert_allclose(values, [v] * R, rtol=1e-6, err_msg=f"{name}/{k}")
      np.testing.assert_allclose(r["reduced"][k], v, rtol=1e-5, atol=1e-6,
                                 err_msg=f"{name}/{k} reduced")
    assert single["span_documents"] == 2.0  # docs 0 and 2 (doc 1 is yes, doc 3 has no span)
    assert single["span_begin"] > 0 and single["coref_pairs"] > 0 and single["mlm_weight"] > 0


def test_replica_gradients_equal_single_device(replica_results):
  for name, r in replica_results.items():
    for k in GRAD_KEYS:
      single = np.asarray(r["single"]["grads"][k])
      assert np.abs(single).max() > 0, f"{name}/{k}"
      gathered = np.concatenate([np.asarray(rep["grads"][k]) for rep in r["replicas"]], 0)
      np.testing.assert_allclose(gathered, single, rtol=1e-5, atol=1e-5, err_msg=f"{name}/{k}")
