"""Which variables weight decay touches: one optimizer step with zero gradients.

With zero gradients AdamW's and Lamb's moment updates are exactly 0, so the only change a step
makes is Keras' decoupled decay ``w -= learning_rate * weight_decay * w``.  Every variable is
first set to a non-zero value (zero biases would hide a wrong decay).  The rule (BERT/RoBERTa):
decay kernels, embeddings and the no-op key/value; never LayerNorm gamma/beta or any bias
(including MemoryAttention's relative-segment-bias table and no-op bias).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model import configs
from model.network import readtwice
from model.training import optimization

LR, WD, VALUE = 0.1, 2.0, 0.5

# Every variable of the tiny model (1 + 1 layers) that weight decay must change.
DECAYED = {
    "token_embedding/embeddings", "position_embedding/embeddings",
    *(f"{stack}/layer_0/attention/{p}/kernel" for stack in ("bert_1", "bert_2")
      for p in ("query", "key", "value", "attention_output")),
    *(f"{stack}/layer_0/{d}/kernel" for stack in ("bert_1", "bert_2")
      for d in ("intermediate", "output")),
    "extract_memories/projection/kernel",
    *(f"memory_attention/{d}/kernel" for d in ("query", "key", "value", "output")),
    "memory_attention/noop_key",
    "span_head/output/kernel", "answer_type_head/dense/kernel", "supporting_head/kernel",
    "mlm_head/transform/kernel",
}


def _layer_norm_and_bias_paths(model):
  """Independent of names: the variables of LayerNormalization layers, and every bias."""
  paths = set()
  for layer in model._flatten_layers(include_self=False, recursive=True):
    if isinstance(layer, keras.layers.LayerNormalization):
      paths.update(v.path for v in layer.weights)
  paths.update(v.path for v in model.weights if v.path.endswith("bias"))
  return paths


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_decay_only_kernels_and_embeddings(optimizer):
  keras.utils.set_random_seed(0)
  model = readtwice.build_model(configs.tiny(vocab_size=32, max_seq_length=8), 8, 2)
  variables = model.trainable_variables
  assert len(variables) == len(model.weights)
  for v in variables:
    v.assign(np.full(v.shape, VALUE, np.float32))
  tc = configs.TrainConfig(optimizer=optimizer, learning_rate=LR, weight_decay=WD, steps=10)
  opt = optimization.make_optimizer(tc, variables)
  opt.build(variables)
  opt.apply_gradients([(tf.zeros_like(v), v) for v in variables])

  prefix = model.name + "/"
  decayed, kept = set(), set()
  for v in variables:
    value = v.numpy()
    if np.array_equal(value, np.full(v.shape, VALUE, np.float32)):
      kept.add(v.path)
    else:
      # Exactly the decoupled decay of a step at the (warm-up free) peak learning rate.
      np.testing.assert_allclose(value, VALUE * (1 - LR * WD), rtol=1e-6, err_msg=v.path)
      decayed.add(v.path)
  assert {p[len(prefix):] for p in decayed} == DECAYED
  assert kept == _layer_norm_and_bias_paths(model)
  assert all(optimization.decays_weight(v) == (v.path in decayed) for v in variables)
  kept_names = {p.rsplit("/", 1)[-1] for p in kept}
  assert kept_names == {"gamma", "beta", "bias", "relative_bias", "noop_bias", "output_bias"}
