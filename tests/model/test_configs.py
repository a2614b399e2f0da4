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


def test_paper_presets_round_trip_and_differ_as_the_paper_says():
  names = ["readtwice_cls", "readtwice_sts", "readtwice_e", "readtwice_e_ss",
           "readtwice_e_ss_10l", "roberta_base"]
  cs = {n: configs.preset(n) for n in names}
  for n, c in cs.items():
    assert configs.ModelConfig.from_json(c.to_json()) == c, n
    assert (c.hidden_size, c.num_heads, c.max_segment_distance) == (768, 12, 10)
  assert [cs[n].memory_source for n in names[:5]] == ["cls", "sts", "entity", "entity",
                                                      "entity"]
  assert cs["readtwice_sts"].sts_length == 32
  assert not cs["readtwice_e"].same_segment_only and cs["readtwice_e_ss"].same_segment_only
  assert cs["readtwice_e_ss_10l"].num_layers_first + cs["readtwice_e_ss_10l"].num_layers_second \
      == cs["roberta_base"].num_layers_first == 12
  assert not cs["roberta_base"].use_memory and all(cs[n].use_memory for n in names[:5])
  assert configs.preset("tiny_e").max_memories == 256 and configs.preset("tiny_e").hidden_size == 64
  # ReadTwice(E) and its ablations: sparse application (appendix) and the identity memory init;
  # the CLS / STS variants keep dense application and random init (not measured on the ladder).
  for n in ("readtwice_e", "readtwice_e_ss", "readtwice_e_ss_10l", "tiny_e", "tiny_e_ss"):
    c = configs.preset(n)
    assert (c.memory_application, c.memory_init) == ("entity", "identity"), n
  for n in ("readtwice_cls", "readtwice_sts", "tiny_cls"):
    c = configs.preset(n)
    assert (c.memory_application, c.memory_init) == ("all", "random"), n
  with pytest.raises(ValueError, match="memory_init"):
    configs.tiny(memory_init="zeros")
  # The appendix's heads: a span FFN as wide as the model, the (segment x type) answer type.
  assert all(cs[n].answer_type_mode == "paper" and cs[n].span_head_intermediate_size == 768
             for n in names)
  assert configs.preset("tiny_e", span_head_intermediate_size=None).span_head_intermediate_size \
      is None


def test_entity_memories_need_a_static_cap():
  with pytest.raises(ValueError, match="max_memories"):
    configs.tiny(memory_source="entity")
  with pytest.raises(ValueError, match="memory_application"):
    configs.tiny(memory_application="some")


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
