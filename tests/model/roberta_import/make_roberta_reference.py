"""The committed reference of the RoBERTa parity test (tests/model/roberta_import/test_roberta.py).

Tiny random Hugging Face RoBERTa checkpoints (every parameter random: LayerNorm gains around
1, biases and the rest around 0) and what the reference implementation -- ``transformers``'
``RobertaModel`` / ``RobertaForMaskedLM`` on torch -- computes on fixed inputs.  The test reads
them without torch or transformers; only regenerating them needs both:

    pip install torch==2.13.0 transformers==5.23.0   # setup.py's roberta-test extra (CPU wheel:
                                                     # PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)
    python -m tests.model.roberta_import.make_roberta_reference

It rewrites ``tests/model/roberta_import/data/roberta/``:

* ``encoder_safetensors/``, ``encoder_bin/``: a ``RobertaModel`` (with its pooler) saved by
  ``save_pretrained`` (``model.safetensors``), and the same weights as a ``torch.save``d state
  dict (``pytorch_model.bin``); each with ``config.json`` and a ``vocab.json`` (``HF_TOKENS``).
* ``masked_lm_safetensors/``, ``masked_lm_bin/``: the same for a ``RobertaForMaskedLM`` (its
  ``.bin`` also holds the decoder's tied copies).
* ``pretrain/``: a ``RobertaModel`` with 66 positions whose ``vocab.json`` is RoBERTa's specials
  plus the first 95 tokens of our default (GPT-2) vocabulary, for ``model.pretrain
  --init_roberta``.
* ``dtypes_safetensors/``, ``dtypes_bin/``: F32/F16/BF16/I64 tensors, and in the ``.bin``
  strided views sharing one storage, for the torch-free readers.
* ``reference.npz``: the inputs (ids in both vocabularies, masks), the hidden states, the MLM
  logits, the few weights the test compares directly, the dtype tensors' values.
* ``versions.json``: the torch and transformers versions that wrote them.

Importing this module needs only numpy: the test takes its constants and ``inputs`` from here.
"""

import json
import os
import pathlib
import shutil

import numpy as np

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data" / "roberta"
REFERENCE = DATA_DIR / "reference.npz"

L = 8  # tokens per segment = the checkpoint's positions (max_position_embeddings - 2)
HF_TOKENS = (["<s>", "<pad>", "</s>", "<unk>"] + [f"w{i}" for i in range(4, 99)] + ["<mask>"])
# Our vocabulary: the checkpoint's tokens in another order, without <unk>, plus one it lacks.
OUR_TOKENS = ([HF_TOKENS[i] for i in np.random.RandomState(0).permutation(len(HF_TOKENS))
               if HF_TOKENS[i] != "<unk>"] + ["ours_only"])
HF_ID = {t: i for i, t in enumerate(HF_TOKENS)}
HF_CONFIG = dict(vocab_size=len(HF_TOKENS), hidden_size=32, num_attention_heads=2,
                 num_hidden_layers=2, intermediate_size=64, max_position_embeddings=L + 2,
                 type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                 eos_token_id=2, hidden_act="gelu")
# (name, checkpoint, seed, pad): the inputs of each hidden-state reference.
CASES = (("encoder_pad0", "encoder", 0, (0, 0, 0)), ("encoder_pad310", "encoder", 0, (3, 1, 0)),
         ("masked_lm", "masked_lm", 1, (2, 0, 0)), ("encoder_seed2", "encoder", 2, (0, 0, 0)),
         ("encoder_cli", "encoder", 3, (1, 0, 4)))
MLM_POSITIONS = np.array([[0, 3], [1, 7], [5, 6]])
PRETRAIN_SEQ = 64  # model.pretrain's segment length in the test (positions: 64 + 2)
PRETRAIN_OURS = 95  # how many of our default tokens the pretrain checkpoint's vocabulary holds
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def inputs(seed=0, n=3, pad=(0, 0, 0)):
  """``(our_ids, hf_ids, mask)`` int ``[n, L]``: random tokens both vocabularies hold (no
  ``<pad>``, which moves RoBERTa's position ids), and the last ``pad[i]`` tokens padding."""
  shared = [i for i, t in enumerate(OUR_TOKENS) if t in HF_ID and t != "<pad>"]
  ours = np.random.RandomState(seed).choice(shared, size=(n, L))
  mask = (np.arange(L)[None] < L - np.array(pad)[:, None]).astype(np.int32)
  ours = np.where(mask > 0, ours, OUR_TOKENS.index("<pad>"))
  theirs = np.vectorize(lambda i: HF_ID[OUR_TOKENS[i]])(ours)
  return ours, theirs, mask


def pretrain_hf_tokens(our_tokens):
  """The pretrain checkpoint's vocabulary: RoBERTa's specials first (as RoBERTa's), the first
  ``PRETRAIN_OURS`` of ``our_tokens`` that are not specials, ``<mask>`` last."""
  words = [t for t in our_tokens if t not in SPECIALS + ["<mask>"]][:PRETRAIN_OURS]
  return SPECIALS + words + ["<mask>"]


def pretrain_inputs(our_tokens, hf_tokens):
  """``(our_ids, hf_ids, mask)`` int ``[2, PRETRAIN_SEQ]``: tokens both hold, no ``<pad>``."""
  index = {t: i for i, t in enumerate(hf_tokens)}
  shared = [i for i, t in enumerate(our_tokens) if t in index and t != "<pad>"]
  ours = np.random.RandomState(4).choice(shared, size=(2, PRETRAIN_SEQ))
  theirs = np.vectorize(lambda i: index[our_tokens[i]])(ours)
  return ours, theirs, np.ones([2, PRETRAIN_SEQ], np.int32)


def _default_tokens():
  """Our default vocabulary, id -> string, read as model.roberta_import.mapping.default_tokens reads
  it (GPT-2's encoder.json by id + <s> </s> <pad> <mask>), without importing TensorFlow."""
  from schemas import vocabulary  # pylint: disable=g-import-not-at-top
  vocab_bytes, _ = vocabulary.default_vocabulary_files()
  vocab = json.loads(vocab_bytes.decode("utf-8"))
  tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
  return tokens + [t for t in vocabulary.SPECIAL_TOKENS.values() if t not in vocab]


def main() -> int:
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top

  def randomise(module, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
      for name, p in module.named_parameters():
        noise = 0.3 * torch.randn(p.shape, generator=gen)
        p.copy_(1.0 + noise if ("LayerNorm" in name or "layer_norm" in name)
                and name.endswith("weight") else noise)
    return module.eval()

  def save(module, name, fmt, vocab):
    directory = DATA_DIR / name
    module.save_pretrained(str(directory))
    if fmt == "bin":  # transformers 5 always writes safetensors
      os.remove(directory / "model.safetensors")
      torch.save(module.state_dict(), str(directory / "pytorch_model.bin"))
    (directory / "vocab.json").write_text(json.dumps(vocab))

  def hidden(module, theirs, mask):
    with torch.no_grad():
      out = module(input_ids=torch.tensor(theirs), attention_mask=torch.tensor(mask))
    return out.last_hidden_state.numpy()

  if DATA_DIR.exists():
    shutil.rmtree(DATA_DIR)
  DATA_DIR.mkdir(parents=True)
  config = transformers.RobertaConfig(**HF_CONFIG)
  models = {"encoder": randomise(transformers.RobertaModel(config, add_pooling_layer=True), 1),
            "masked_lm": randomise(transformers.RobertaForMaskedLM(config), 2)}
  for name, module in models.items():
    for fmt in ("safetensors", "bin"):
      save(module, f"{name}_{fmt}", fmt, HF_ID)
  ref = {}
  for case, name, seed, pad in CASES:
    ours, theirs, mask = inputs(seed=seed, pad=pad)
    module = models[name] if name == "encoder" else models[name].roberta
    ref.update({f"{case}.ours": ours, f"{case}.theirs": theirs, f"{case}.mask": mask,
                f"{case}.hidden": hidden(module, theirs, mask)})
  _, theirs, mask = inputs(seed=1, pad=(2, 0, 0))
  with torch.no_grad():
    logits = models["masked_lm"](input_ids=torch.tensor(theirs),
                                 attention_mask=torch.tensor(mask)).logits.numpy()
  ref["masked_lm.logits"] = np.take_along_axis(logits, MLM_POSITIONS[..., None], axis=1)
  mlm, enc = models["masked_lm"], models["encoder"]
  ref["masked_lm.word_embeddings"] = mlm.roberta.embeddings.word_embeddings.weight.detach().numpy()
  ref["masked_lm.lm_head_bias"] = mlm.lm_head.bias.detach().numpy()
  ref["encoder.position_embeddings"] = enc.embeddings.position_embeddings.weight.detach().numpy()
  ref["encoder.token_type_embeddings"] = (
      enc.embeddings.token_type_embeddings.weight.detach().numpy())
  ref["encoder.layer0_intermediate_weight"] = (
      enc.encoder.layer[0].intermediate.dense.weight.detach().numpy())

  ours = _default_tokens()
  hf_tokens = pretrain_hf_tokens(ours)
  pre_config = transformers.RobertaConfig(**dict(HF_CONFIG, vocab_size=len(hf_tokens),
                                                 max_position_embeddings=PRETRAIN_SEQ + 2))
  pre = randomise(transformers.RobertaModel(pre_config), 5)
  save(pre, "pretrain", "safetensors", {t: i for i, t in enumerate(hf_tokens)})
  our_ids, their_ids, mask = pretrain_inputs(ours, hf_tokens)
  ref.update({"pretrain.ours": our_ids, "pretrain.theirs": their_ids, "pretrain.mask": mask,
              "pretrain.hidden": hidden(pre, their_ids, mask)})

  base = torch.randn(5, 6, generator=torch.Generator().manual_seed(7))
  tensors = {"f32": base, "f16": base.half(), "bf16": base.bfloat16(), "i64": torch.arange(4)}
  views = {"transposed": base.t(), "slice": base[1:, 2:], **tensors}  # shared storages
  for fmt, written in (("safetensors", tensors), ("bin", views)):
    directory = DATA_DIR / f"dtypes_{fmt}"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    if fmt == "safetensors":
      save_file({k: v.contiguous() for k, v in written.items()},
                str(directory / "model.safetensors"))
    else:
      torch.save(written, str(directory / "pytorch_model.bin"))
  for k, v in views.items():
    ref[f"dtypes.{k}"] = v.float().numpy() if v.is_floating_point() else v.numpy()

  np.savez_compressed(REFERENCE, **ref)
  (DATA_DIR / "versions.json").write_text(json.dumps(
      {"torch": torch.__version__, "transformers": transformers.__version__}, indent=1) + "\n")
  total = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
  print(f"wrote {DATA_DIR} ({total / 1024:.0f} KiB)")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
