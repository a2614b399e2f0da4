"""Whole-book memory (``model.network.book_memory``): a document read whole equals the same document
split into sub-documents read with ``--memory_scope book`` -- in one pack (logits, losses and
gradients) and spread over several packs (logits, with the other packs' memories from a first
pass) -- for CLS, STS and entity memories, dense and top-k, on one device and on 2 logical CPUs
(MirroredStrategy).  The control: read with ``sub_document`` scope, the split document's logits
differ (its memories stop at the sub-document edge).

Logical devices must be configured before TensorFlow initialises, so the model checks run in a
fresh subprocess (``python -m tests.model.network.test_book_memory``) that prints one JSON line.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests import REPO_ROOT

N, L, K, S = 8, 12, 24, 2  # pack rows, tokens, entity memory cap, segments per sub-document
CONFIGS = {
    "cls": dict(memory_source="cls"),
    "cls_top2": dict(memory_source="cls", memory_top_k=2),
    "sts": dict(memory_source="sts", sts_length=4),
    "entity_top3": dict(memory_source="entity", max_memories=K, memory_top_k=3),
}
# Book A: rows 0-5 (3 sub-documents of S = 2 segments when split); book B: row 6; row 7: padding.
ROWS_A, ROW_B = range(6), 6
MENTIONS = [(0, 3, 4, 7), (1, 5, 6, 7), (2, 3, 3, 9), (3, 8, 9, 7), (4, 2, 2, 9), (5, 6, 7, 7),
            (6, 4, 5, 7), (0, 9, 10, 3)]


def whole_pack():
  rng = np.random.RandomState(3)
  kinds = np.full([N, L], 3, np.int32)
  kinds[:, 0] = 1
  kinds[:, 1:3] = 2
  begin, end = np.zeros([N, L], np.int32), np.zeros([N, L], np.int32)
  begin[4, 5] = end[4, 6] = 1  # book A's answer in its last sub-document
  begin[6, 4] = end[6, 5] = 1
  real = np.array([1] * 7 + [0], np.int32)
  f = {
      "token_ids": rng.randint(4, 60, size=[N, L]).astype(np.int32),
      "input_mask": np.ones([N, L], np.int32), "token_kind": kinds, "segment_mask": real,
      "document_index": np.array([0] * 6 + [1, -1], np.int32),
      "segment_index": np.array([0, 1, 2, 3, 4, 5, 0, 0], np.int32),
      "sub_document_index": np.zeros([N], np.int32),
      "num_sub_documents": real.copy(),
      "document_id": np.array([b"A"] * 6 + [b"B", b""], object),
      "question_id": np.array([b"qa"] * 6 + [b"qb", b""], object),
      "answer_type": np.array([0] * 7 + [-1], np.int32),
      "supporting": np.full([N], -1, np.int32),
      "answer_begin_labels": begin, "answer_end_labels": end,
  }
  f.update(_mentions(MENTIONS))
  return f


def _mentions(rows):
  pad = K - len(rows)
  col = list(zip(*rows)) if rows else [(), (), (), ()]
  return {"mentions_segment": np.array(col[0] + (0,) * pad, np.int32),
          "mentions_begin": np.array(col[1] + (0,) * pad, np.int32),
          "mentions_end": np.array(col[2] + (0,) * pad, np.int32),
          "mentions_entity_id": np.array(col[3] + (0,) * pad, np.int32),
          "mentions_mask": np.array([1] * len(rows) + [0] * pad, np.int32)}


def split_in_one_pack(whole):
  """Book A as 3 explicit sub-documents of S segments, all in the same pack."""
  f = {k: v.copy() for k, v in whole.items()}
  f["document_index"] = np.array([0, 0, 1, 1, 2, 2, 3, -1], np.int32)
  f["segment_index"] = np.array([0, 1, 0, 1, 0, 1, 0, 0], np.int32)
  f["sub_document_index"] = np.array([0, 0, 1, 1, 2, 2, 0, 0], np.int32)
  f["num_sub_documents"] = np.array([3] * 6 + [1, 0], np.int32)
  return f


PACK_ROWS = [(0, 1, 6, 7), (2, 3, 7, 7), (4, 5, 7, 7)]  # each pack: 4 rows of the split pack


def split_over_packs(whole):
  """Book A's 3 sub-documents in 3 packs of 4 rows (book B with the first); row 7 = padding."""
  split = split_in_one_pack(whole)
  packs = []
  for rows in PACK_ROWS:
    f = {k: v[list(rows)].copy() for k, v in split.items()
         if not k.startswith("mentions_")}
    f["segment_mask"][2:] *= int(rows[2] == ROW_B)
    f["segment_mask"][3:] = 0
    f["document_index"] = np.where(f["segment_mask"] > 0, f["document_index"] -
                                   f["document_index"][0], -1).astype(np.int32)
    where = {r: i for i, r in enumerate(rows) if i == 0 or f["segment_mask"][i]}
    f.update(_mentions([(where[r], b, e, ent) for r, b, e, ent in MENTIONS if r in where]))
    packs.append(f)
  return packs


def test_book_scope_numbers_books_and_global_positions():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.network import book_memory  # pylint: disable=g-import-not-at-top
  split = split_in_one_pack(whole_pack())
  out = book_memory.book_scope({k: tf.constant(v) for k, v in split.items()}, S)
  assert out["document_index"].numpy().tolist() == [0, 0, 0, 0, 0, 0, 1, -1]
  assert out["segment_index"].numpy().tolist() == [0, 1, 2, 3, 4, 5, 0, 0]
  # The whole document is unchanged by it.
  whole = whole_pack()
  again = book_memory.book_scope({k: tf.constant(v) for k, v in whole.items()}, S)
  assert again["document_index"].numpy().tolist() == whole["document_index"].tolist()
  # Pack 1 of the spread split holds only book A's second sub-document (positions 2, 3).
  p1 = split_over_packs(whole)[1]
  out = book_memory.book_scope({k: tf.constant(v) for k, v in p1.items()}, S)
  assert out["document_index"].numpy().tolist() == [0, 0, -1, -1]
  assert out["segment_index"].numpy().tolist()[:2] == [2, 3]


def test_store_gives_a_pack_the_other_packs_memories_of_its_books():
  from model.network import book_memory  # pylint: disable=g-import-not-at-top
  packs = split_over_packs(whole_pack())
  books = [book_memory.pack_books(p) for p in packs]
  assert books[0] == {(b"A", b"qa"): {"book": 0, "sub_documents": {0}, "num_sub_documents": 3},
                      (b"B", b"qb"): {"book": 1, "sub_documents": {0}, "num_sub_documents": 1}}
  index = book_memory.book_pack_index(books)
  assert index == {(b"A", b"qa"): {0, 1, 2}, (b"B", b"qb"): {0}}
  assert book_memory.spans_packs(index) == {(b"A", b"qa")}
  store = book_memory.BookMemoryStore(S)
  h = 3
  for i, b in enumerate(books):  # CLS-like tables: one memory per real row, value = 10 * pack
    m = int(sum(p["segment_mask"][:] > 0 for p in [packs[i]]).sum())
    store.put(b, {"memories": np.full([4, h], 10.0 * i), "document": np.array([0, 0, 1, 0]),
                  "position": np.array([2 * i, 2 * i + 1, 0, 0]),
                  "mask": np.array([1, 1, int(m == 3), 0]), "entity_id": np.arange(4)},
              keep=book_memory.spans_packs(index))
  assert len(store) == 3 and store.nbytes > 0  # book B is not kept: it fits in one pack
  ext = store.external(books[1], h)
  assert ext["external_memories"].shape == (64, h)
  real = ext["external_mask"] > 0
  assert real.sum() == 4
  assert ext["external_position"][real].tolist() == [0, 1, 4, 5]
  assert ext["external_memories"][real][:, 0].tolist() == [0.0, 0.0, 20.0, 20.0]
  assert set(ext["external_document"][real]) == {0}
  with pytest.raises(ValueError, match="capacity 2"):
    store.external(books[1], h, capacity=2)


def _main():
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  import keras  # pylint: disable=g-import-not-at-top
  from model import configs  # pylint: disable=g-import-not-at-top
  from model.network import book_memory, readtwice  # pylint: disable=g-import-not-at-top
  from model.training import losses, replicas  # pylint: disable=g-import-not-at-top

  def tensors(f):
    return {k: tf.constant(v) for k, v in f.items()}

  def step(model, f):
    with tf.GradientTape() as tape:
      out = model(readtwice.model_inputs(f), training=False)
      loss = losses.readtwice_losses(out, f)
    return out, loss, tape.gradient(loss["total"], model.trainable_variables)

  def dense(g):
    return tf.convert_to_tensor(g).numpy()

  result = {}
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  for name, kw in CONFIGS.items():
    config = configs.tiny(vocab_size=64, max_seq_length=L, span_head_intermediate_size=32,
                          memory_init="identity", **kw)  # memories that move the logits
    keras.utils.set_random_seed(0)
    model = readtwice.build_model(config, L, N)
    with strategy.scope():
      mirrored = readtwice.build_model(config, L, N // 2)
      mirrored.set_weights(model.get_weights())
    whole = tensors(whole_pack())
    out_w, loss_w, grads_w = step(model, whole)
    r = {}
    # 1. In one pack: book scope = the whole document; sub-document scope differs.
    split = tensors(split_in_one_pack(whole_pack()))
    out_b, loss_b, grads_b = step(model, book_memory.book_scope(split, S))
    out_s, _, _ = step(model, split)
    r["one_pack_logits"] = float(max(np.abs(out_b[k].numpy() - out_w[k].numpy()).max()
                                     for k in ("begin_logits", "end_logits")))
    r["one_pack_loss"] = float(abs(loss_b["total"].numpy() - loss_w["total"].numpy()))
    r["one_pack_gradients"] = float(max(np.abs(dense(a) - dense(b)).max()
                                        for a, b in zip(grads_b, grads_w) if a is not None))
    r["sub_document_scope_logits"] = float(np.abs(out_s["begin_logits"].numpy()[:6]
                                                  - out_w["begin_logits"].numpy()[:6]).max())
    # 2. Over three packs: pass 1 fills the store, pass 2 reads each pack with the rest.
    packs = split_over_packs(whole_pack())
    store = book_memory.BookMemoryStore(S)
    book_memory.fill_store(model, packs, store)
    worst, dropped, chunked = 0.0, 0.0, 0.0
    per_pack = []
    for p, rows in zip(packs, PACK_ROWS):
      f = dict(book_memory.book_scope(tensors(p), S))
      f.update(tensors(store.external(book_memory.pack_books(p), config.hidden_size)))
      out = model(readtwice.model_inputs(f), training=False)
      per_pack.append((f, out))
      # model.predict's pass 2 reads the table in chunks (3 memories here: several chunks).
      out_c = model(readtwice.model_inputs(f), training=False, memory_chunk=3)
      real = [i for i in range(4) if p["segment_mask"][i]]
      for key in ("begin_logits", "end_logits"):
        worst = max(worst, float(np.abs(out[key].numpy()[real]
                                        - out_w[key].numpy()[[rows[i] for i in real]]).max()))
        chunked = max(chunked, float(np.abs(out_c[key].numpy()[real]
                                            - out_w[key].numpy()[[rows[i] for i in real]]).max()))
      no_ext = model(readtwice.model_inputs(book_memory.book_scope(tensors(p), S)),
                     training=False)
      dropped = max(dropped, float(np.abs(no_ext["begin_logits"].numpy()[real]
                                          - out_w["begin_logits"].numpy()[
                                              [rows[i] for i in real]]).max()))
    r["packs_logits"] = worst
    r["packs_chunked_logits"] = chunked
    r["packs_without_external_logits"] = dropped
    # 3. The same on 2 replicas: pass 2 of pack 1 and the one-pack split (losses, gradients).

    def on_replicas(f, train=True):
      parts = replicas.split_pack(f, 2)
      dist = strategy.experimental_distribute_values_from_function(
          lambda ctx: parts[ctx.replica_id_in_sync_group])
      local = strategy.experimental_local_results
      if not train:  # pass 2 of a pack at prediction: the forward only
        run = tf.function(lambda d: strategy.run(
            lambda x: mirrored(readtwice.model_inputs(x), training=False)["begin_logits"],
            args=(d,)))
        return np.concatenate([t.numpy() for t in local(run(dist))], axis=0), None, None
      # The training step runs eagerly under the strategy (each replica in its own thread, the
      # same ops and collectives): tracing and optimising its gradient graph for one call per
      # config cost ~10 of this process' ~27 CPU s.  The trainer's step under MirroredStrategy
      # in a tf.function is tests/model/training/test_trainer.py's test_mirrored_matches_one_device.
      run = lambda d: strategy.run(lambda x: step(mirrored, x), args=(d,))
      out, loss, grads = run(dist)
      logits = np.concatenate([t.numpy() for t in local(out["begin_logits"])], axis=0)
      total = float(sum(t.numpy() for t in local(loss["total"])))
      summed = [sum(dense(t) for t in local(g)) if g is not None else None for g in grads]
      return logits, total, summed

    f1, out1 = per_pack[1]
    logits, _, _ = on_replicas(f1, train=False)
    r["replicas_packs_logits"] = float(np.abs(logits - out1["begin_logits"].numpy()).max())
    logits, total, summed = on_replicas(book_memory.book_scope(split, S))
    r["replicas_one_pack_logits"] = float(np.abs(logits - out_w["begin_logits"].numpy()).max())
    r["replicas_one_pack_loss"] = abs(total - float(loss_w["total"].numpy()))
    r["replicas_one_pack_gradients"] = float(max(np.abs(a - dense(b)).max()
                                                 for a, b in zip(summed, grads_w)
                                                 if a is not None and b is not None))
    r["store_bytes"] = store.nbytes
    result[name] = r
  print(json.dumps(result))


@pytest.fixture(scope="module")
def equivalence():
  proc = subprocess.run([sys.executable, "-m", "tests.model.network.test_book_memory"], cwd=REPO_ROOT,
                        capture_output=True, text=True, timeout=900,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_split_book_read_with_book_scope_equals_the_whole_document(equivalence, name):
  r = equivalence[name]
  tol = 1e-5
  assert r["one_pack_logits"] < tol and r["one_pack_loss"] < tol, r
  assert r["one_pack_gradients"] < tol, r
  assert r["packs_logits"] < tol and r["packs_chunked_logits"] < tol, r
  assert r["replicas_packs_logits"] < tol and r["replicas_one_pack_logits"] < tol, r
  assert r["replicas_one_pack_loss"] < tol and r["replicas_one_pack_gradients"] < tol, r
  # Controls: without the book, the split document reads less and its logits move.
  assert r["sub_document_scope_logits"] > 5e-4, r
  assert r["packs_without_external_logits"] > 5e-4, r


if __name__ == "__main__":
  _main()
