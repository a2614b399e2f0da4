"""ReadTwice(E) trains: the train step compiles with XLA (same numbers as without), and a tiny
model overfits a handful of QA documents (loss near 0, the gold spans predicted)."""

import numpy as np
import pytest
import tensorflow as tf

import keras

from model import configs
from model.network import readtwice
from model.training import losses

N, L, K = 8, 24, 32
DOCS = [0, 0, 1, 1, 2, 2, 3, 3]  # 4 documents of 2 segments
# Gold answer span (segment row, begin, end) per document; the other segment has none.
GOLD = {0: (1, 9, 11), 1: (2, 5, 5), 2: (5, 14, 17), 3: (6, 20, 21)}


def _pack(seed=0):
  rng = np.random.RandomState(seed)
  kinds = np.full([N, L], 3, np.int32)
  kinds[:, 0] = 1
  kinds[:, 1:4] = 2
  begin = np.zeros([N, L], np.int32)
  end = np.zeros([N, L], np.int32)
  for row, b, e in GOLD.values():
    begin[row, b] = end[row, e] = 1
  seg = np.repeat(np.arange(N), 3)
  mb = rng.randint(4, L - 2, size=len(seg))
  pad = K - len(seg)
  f = {
      "token_ids": rng.randint(4, 100, size=[N, L]).astype(np.int32),
      "input_mask": np.ones([N, L], np.int32), "token_kind": kinds,
      "segment_mask": np.ones([N], np.int32), "document_index": np.array(DOCS, np.int32),
      "segment_index": np.array([0, 1] * 4, np.int32),
      "answer_type": np.zeros([N], np.int32), "supporting": np.full([N], -1, np.int32),
      "answer_begin_labels": begin, "answer_end_labels": end,
      "mentions_segment": np.pad(seg, (0, pad)).astype(np.int32),
      "mentions_begin": np.pad(mb, (0, pad)).astype(np.int32),
      "mentions_end": np.pad(mb + 1, (0, pad)).astype(np.int32),
      "mentions_entity_id": np.pad(rng.randint(1, 6, size=len(seg)), (0, pad)).astype(np.int32),
      "mentions_mask": np.pad(np.ones(len(seg)), (0, pad)).astype(np.int32),
  }
  return {k: tf.constant(v) for k, v in f.items()}


def _config(**kw):
  return configs.preset("tiny_e", vocab_size=100, max_seq_length=L, max_memories=K, **kw)


def _trainer(config, jit, learning_rate=1e-3):
  keras.utils.set_random_seed(0)
  model = readtwice.build_model(config, L, N)
  optimizer = keras.optimizers.AdamW(learning_rate, weight_decay=0.0)
  optimizer.build(model.trainable_variables)

  @tf.function(jit_compile=jit)
  def step(f):
    with tf.GradientTape() as tape:
      out = model(f, training=True)
      loss = losses.readtwice_losses(out, f)["total"]
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  return model, step


@pytest.mark.slow
def test_train_step_compiles_with_xla_and_matches_graph_mode():
  f = _pack()
  results = {}
  for jit in (False, True):
    model, step = _trainer(_config(), jit)
    results[jit] = ([float(step(f)) for _ in range(3)], model.get_weights())
  np.testing.assert_allclose(results[True][0], results[False][0], rtol=1e-4)
  for a, b in zip(results[True][1], results[False][1]):
    np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("preset_kw", [{}, {"same_segment_only": True},
                                       {"memory_application": "entity"}])
@pytest.mark.slow
def test_tiny_model_overfits_a_few_documents(preset_kw):
  f = _pack()
  model, step = _trainer(_config(**preset_kw), jit=False, learning_rate=3e-3)
  first = losses.readtwice_losses(model(f, training=False), f)
  for _ in range(150):
    step(f)
  out = model(f, training=False)
  last = losses.readtwice_losses(out, f)
  # The QA losses go to ~0; the coreference loss (random entity ids on random tokens) only
  # falls: same-id mentions carry nothing in common here but what the model memorises.
  for key in ("span_begin", "span_end", "answer_type"):
    assert float(last[key]) < 0.01, (key, float(last[key]))
  assert float(last["coref"]) < float(first["coref"])
  for doc, (row, b, e) in GOLD.items():
    rows = [i for i, d in enumerate(DOCS) if d == doc]
    begin = out["begin_logits"].numpy()[rows]
    end = out["end_logits"].numpy()[rows]
    assert np.unravel_index(begin.argmax(), begin.shape) == (rows.index(row), b), doc
    assert np.unravel_index(end.argmax(), end.shape) == (rows.index(row), e), doc


@pytest.mark.slow
def test_train_cli_trains_readtwice_e_on_wikipedia_records(tmp_path, capsys):
  # Entity memories from the Wikipedia job's link mentions, through the trainer's input
  # pipeline (static mentions_* features) and the command line; mentions_dropped is logged.
  import json  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia import fake_input as synth  # pylint: disable=g-import-not-at-top
  from model import train  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  from tests.pipelines.datasets.wikipedia.test_dataset import PAGES, SMALL  # pylint: disable=g-import-not-at-top
  dump = str(tmp_path / "tiny-pages-articles.xml.bz2")
  synth.write_dump(PAGES, dump)
  out = str(tmp_path / "records")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out] + SMALL) == 0
  capsys.readouterr()
  assert train.main(["--records_dir", out, "--model_dir", str(tmp_path / "m"), "--preset",
                     "tiny_e", "--steps", "2"]) == 0
  lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
  steps = [x for x in lines if "step" in x]
  # Fine-tuning leaves the coreference loss (a pre-training task in the paper) out by default.
  assert len(steps) == 2 and all("coref" not in x and x["mentions_dropped"] == 0 for x in steps)
  assert all(0.0 <= x["memory_noop_rate"] <= 1.0 for x in steps)
