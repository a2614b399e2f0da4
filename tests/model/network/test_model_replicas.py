"""The whole model under MirroredStrategy (2 logical CPUs) equals the same pack on one device:
memories, the outputs after memory attention, the losses and the gradients, with a document
whose segments sit on different replicas and entity memories gathered across them; also with
the model's two halves XLA-compiled per replica (``readtwice.compiled_halves``).

Logical devices must be configured before TensorFlow initialises, so the body runs in a fresh
subprocess (``python -m tests.model.network.test_model_replicas``) that prints one JSON line.
"""

import json
import os
import subprocess
import sys

import pytest
from tests import REPO_ROOT

REPO = str(REPO_ROOT)
N, L, R, K = 4, 12, 2, 16


def _pack():
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(1)
  kinds = np.full([N, L], 3, np.int32)  # context
  kinds[:, 0] = 1
  kinds[:, 1:3] = 2  # question
  begin = np.zeros([N, L], np.int32)
  end = np.zeros([N, L], np.int32)
  begin[0, 4] = end[0, 6] = 1  # doc 0 (rows 0, 1 | 2): answers on both replicas
  begin[2, 5] = end[2, 5] = 1
  begin[3, 7] = end[3, 9] = 1  # doc 1 (row 3)
  # Mentions: (segment, begin, end, entity); entity 7 in doc 0 on both replicas.
  mentions = [(0, 3, 4, 7), (0, 8, 8, 2), (1, 5, 6, 7), (1, 9, 10, 0), (2, 3, 3, 7),
              (2, 6, 8, 9), (3, 4, 5, 2), (3, 10, 11, 9)]
  pad = K - len(mentions)
  col = list(zip(*mentions))
  return {
      "token_ids": rng.randint(4, 60, size=[N, L]).astype(np.int32),
      "input_mask": np.ones([N, L], np.int32), "token_kind": kinds,
      "segment_mask": np.ones([N], np.int32),
      "document_index": np.array([0, 0, 0, 1], np.int32),
      "segment_index": np.array([0, 1, 2, 0], np.int32),
      "answer_type": np.zeros([N], np.int32), "supporting": np.full([N], -1, np.int32),
      "answer_begin_labels": begin, "answer_end_labels": end,
      "mentions_segment": np.array(col[0] + (0,) * pad, np.int32),
      "mentions_begin": np.array(col[1] + (0,) * pad, np.int32),
      "mentions_end": np.array(col[2] + (0,) * pad, np.int32),
      "mentions_entity_id": np.array(col[3] + (0,) * pad, np.int32),
      "mentions_mask": np.array([1] * len(mentions) + [0] * pad, np.int32),
  }


def _main():
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * R)
  import keras  # pylint: disable=g-import-not-at-top
  from model import configs  # pylint: disable=g-import-not-at-top
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  from model.training import losses, replicas  # pylint: disable=g-import-not-at-top

  config = configs.preset("tiny_e", vocab_size=64, max_seq_length=L, max_memories=K,
                          memory_top_k=None, span_head_intermediate_size=32)
  features = {k: tf.constant(v) for k, v in _pack().items()}
  keras.utils.set_random_seed(0)
  single = readtwice.build_model(config, L, N)

  def step(model, f):
    with tf.GradientTape() as tape:
      out = model(f, training=False)
      loss = losses.readtwice_losses(out, f)
    grads = tape.gradient(loss["total"], model.trainable_variables)
    return out, loss, grads

  out1, loss1, grads1 = step(single, features)
  strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(R)])
  with strategy.scope():
    mirrored = readtwice.build_model(config, L, N // R)
    mirrored.set_weights(single.get_weights())
  parts = replicas.split_pack(features, R)
  dist = strategy.experimental_distribute_values_from_function(
      lambda ctx: parts[ctx.replica_id_in_sync_group])

  @tf.function
  def run(f):
    return strategy.run(lambda x: step(mirrored, x), args=(f,))

  if os.environ.get("READTWICE_TEST_XLA_HALVES"):
    # The same step with both halves of the model XLA-compiled per replica.
    forward = readtwice.compiled_halves(mirrored)

    def step(model, f):  # noqa: F811  (the compiled variant of the step above)
      with tf.GradientTape() as tape:
        out = forward(f, training=False)
        loss = losses.readtwice_losses(out, f)
      grads = tape.gradient(loss["total"], model.trainable_variables)
      return out, loss, grads

  out2, loss2, grads2 = run(dist)
  local = strategy.experimental_local_results

  def cat(x):
    return np.concatenate([t.numpy() for t in local(x)], axis=0)

  def real_memories(table, mask):
    return np.array(sorted(map(tuple, np.round(table[mask > 0], 5).tolist())))

  result = {}
  for key in ("begin_logits", "end_logits", "answer_type_logits"):
    result[key] = float(np.abs(cat(out2[key]) - out1[key].numpy()).max())
  # The gathered memory table: the same real memories (replica order and padding differ).
  table2 = local(out2["memory_table"])[0].numpy()
  mask2 = local(out2["memory_mask"])[0].numpy()
  result["memories"] = float(np.abs(
      real_memories(table2, mask2) - real_memories(out1["memory_table"].numpy(),
                                                   out1["memory_mask"].numpy())).max())
  result["same_table_on_both_replicas"] = bool(np.array_equal(
      local(out2["memory_table"])[1].numpy(), table2))
  for key in ("span_begin", "span_end", "answer_type", "coref", "total"):
    result[f"loss_{key}"] = [float(loss1[key].numpy()),
                             float(sum(t.numpy() for t in local(loss2[key])))]
  def dense(g):  # embedding gradients come as IndexedSlices
    return tf.convert_to_tensor(g).numpy()

  worst = 0.0
  for g1, g2 in zip(grads1, grads2):
    summed = sum(dense(t) for t in local(g2)) if g2 is not None else 0.0
    if g1 is not None:
      worst = max(worst, float(np.abs(summed - dense(g1)).max()))
  result["gradients"] = worst
  result["gradient_norm"] = float(sum(float((dense(g) ** 2).sum()) for g in grads1
                                      if g is not None) ** 0.5)
  print(json.dumps(result))


@pytest.mark.slow
@pytest.mark.parametrize("xla_halves", [False, True])
def test_model_on_two_replicas_equals_one_device(xla_halves):
  env = dict(os.environ, READTWICE_TEST_XLA_HALVES="1" if xla_halves else "")
  proc = subprocess.run([sys.executable, "-m", "tests.model.network.test_model_replicas"], cwd=REPO,
                        capture_output=True, text=True, timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  r = json.loads(proc.stdout.strip().splitlines()[-1])
  for key in ("begin_logits", "end_logits", "answer_type_logits", "memories"):
    assert r[key] < 1e-4, (key, r)
  assert r["same_table_on_both_replicas"]
  for key in ("span_begin", "span_end", "answer_type", "coref", "total"):
    one, two = r[f"loss_{key}"]
    assert abs(one - two) < 1e-4 * max(1.0, abs(one)), (key, r)
  assert r["loss_coref"][0] > 0  # entity 7 and 9 repeat: there are positive pairs
  assert r["gradient_norm"] > 0 and r["gradients"] < 1e-4, r


if __name__ == "__main__":
  _main()
