"""Config JSON round trip, presets and validation."""

import json

import pytest

from model import configs


def test_model_config_json_round_trip():
  c = configs.tiny(vocab_size=77, memory_top_k=3, max_segment_distance=5)
  text = c.to_json()
  assert json.loads(text)["vocab_size"] == 77
  assert configs.ModelConfig.from_json(text) == c


def test_train_config_json_round_trip():
  t = configs.TrainConfig(learning_rate=1e-3, steps=7, optimizer="lamb", seed=3, clipnorm=None)
  assert configs.TrainConfig.from_json(t.to_json()) == t


def test_presets():
  b = configs.preset("base")
  assert (b.hidden_size, b.num_heads, b.intermediate_size, b.num_layers_first,
          b.num_layers_second, b.vocab_size) == (768, 12, 3072, 12, 2, 50265)
  t = configs.preset("tiny")
  assert (t.hidden_size, t.num_heads, t.num_layers_first, t.num_layers_second) == (64, 2, 1, 1)
  with pytest.raises(ValueError):
    configs.preset("huge")


def test_save_load(tmp_path):
  c, t = configs.tiny(), configs.TrainConfig(steps=3)
  configs.save_configs(str(tmp_path), c, t)
  assert configs.load_configs(str(tmp_path)) == (c, t)


def test_validation():
  with pytest.raises(ValueError):
    configs.ModelConfig(hidden_size=10, num_heads=3)
  with pytest.raises(ValueError):
    configs.ModelConfig(memory_source="nope")
  with pytest.raises(ValueError):
    configs.TrainConfig(optimizer="sgd")
  with pytest.raises(ValueError):
    configs.ModelConfig.from_dict({**configs.tiny().to_dict(), "bogus": 1})


def test_unimplemented_memory_source_is_clear():
  from model.layers import ExtractMemories
  with pytest.raises(NotImplementedError, match="memory_source='entity' is not implemented"):
    ExtractMemories(8, source="entity")


def test_relative_distance_clip_is_the_papers_b():
  assert configs.ModelConfig().max_segment_distance == 10
  assert configs.base().max_segment_distance == 10
  assert configs.preset("base").max_segment_distance == 10


@pytest.mark.parametrize("field,value", [
    ("steps", 0), ("learning_rate", 0.0), ("learning_rate", -1.0), ("warmup_steps", -1),
    ("warmup_steps", 1001), ("end_learning_rate_fraction", -0.1),
    ("end_learning_rate_fraction", 1.5), ("weight_decay", -0.01), ("clipnorm", 0.0),
    ("checkpoint_every", 0), ("max_checkpoints", 0), ("log_every", 0)])
def test_train_config_rejects_bad_values(field, value):
  with pytest.raises(ValueError, match=field):
    configs.TrainConfig(**{field: value})
  configs.TrainConfig(clipnorm=None, end_learning_rate_fraction=1.0, warmup_steps=1000,
                      weight_decay=0.0)  # the edges are fine
