"""Frozen dataclass configs for the ReadTwice model and trainer (pure Python, no TF import at
module level; only :func:`save_configs`/:func:`load_configs` import it, for ``tf.io.gfile``).

Configs round-trip through JSON (``to_json``/``from_json``) and are saved as ``config.json``
beside the checkpoints, so ``model.predict`` can rebuild the exact model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any, Dict, Mapping, Optional

from schemas import safe_json

MEMORY_SOURCES = ("cls", "sts", "entity")
IMPLEMENTED_MEMORY_SOURCES = MEMORY_SOURCES
MEMORY_APPLICATIONS = ("all", "entity")  # which tokens read memory
MEMORY_INITS = ("random", "identity")  # how the memory path's projections start
ANSWER_TYPE_MODES = ("mean", "paper")
CONFIG_FILE = "config.json"
# Settings of the commands' flags, declared here (TF-free) so that a command's parser (and
# its --help) needs no TensorFlow; the modules that act on them import them from here.
STRATEGIES = ("cpu", "mirrored", "tpu")  # model.training.strategies.make_strategy
MEMORY_SCOPES = ("sub_document", "book")  # model.network.book_memory
REDUCTIONS = ("max", "sum")  # model.inference.decoding: span aggregation across segments
DEFAULT_MAX_ANSWER_TOKENS = 30  # model.predict / model.export: longest answer span, tokens
# The coreference loss is the paper's auxiliary PRE-training task for ReadTwice(E) (appendix);
# fine-tuning leaves it out unless asked (it pulls every mention memory of an entity towards
# one vector, against carrying context).  model.training.objectives.
FINETUNE_COREF_WEIGHT = 0.0
PRETRAIN_COREF_WEIGHT = 1.0


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Architecture of ReadTwice.

  Attributes:
    vocab_size: Token vocabulary size.
    hidden_size: Transformer width H.
    num_heads: Attention heads (transformer and memory attention).
    intermediate_size: Feed-forward inner width.
    num_layers_first: Layers of BERT_1 (the first read).
    num_layers_second: Layers of BERT_2 (the second read, after memory attention).
    max_seq_length: Size of the position-embedding table (>= records' ``seq_length``).
    dropout: Dropout rate for embeddings, attention and feed-forward outputs.
    use_memory: False for the plain-encoder baseline (BERT_1 and the heads, no memory and no
      BERT_2): the paper's RoBERTa comparison.
    memory_source: Where memories come from: ``"cls"`` (one memory per segment, its CLS
      token), ``"sts"`` (every span of ``sts_length`` tokens) or ``"entity"`` (every entity
      mention of the pack, at most ``max_memories``).
    sts_length: Tokens per span memory of ``"sts"`` (the paper: 32).
    max_memories: Static cap of entity memories per pack (required for ``"entity"``); mentions
      beyond it are counted by the input pipeline (``mentions_dropped``), never dropped
      silently.
    memory_application: ``"all"`` tokens read memory, or only tokens inside entity mentions
      (``"entity"``, the paper's sparse application).
    memory_init: How the memory path's projections start.  ``"random"``: truncated normal
      (``initializer_range``) like every other kernel.  ``"identity"``: the memory starts as
      the mean of its span's first and last states (CLS: ``tanh`` of the CLS state) and the
      memory attention's query / key / value / output kernels as identities, so that at
      initialisation a token attends to the memories most similar to itself and reads them
      at full scale -- the projection-free side attention of the paper's released code
      (``num_heads=0``), with the projections kept trainable.  With ``"random"`` a tiny
      model's memory path does not learn (``benchmarks/experiments/memory_ladder.py``).
    same_segment_only: The SS ablation: a segment reads only its own memories.
    max_segment_distance: B; relative segment distances are clipped to ``[-B, B]`` (the paper
      uses B = 10, the default).
    memory_top_k: If set, each token attends only to its top-k memories (by score; the paper:
      100).
    memory_window: If set, each segment scores only the first ``memory_window`` memories of
      its own document instead of every memory of the pack with the others masked: the same
      result while no document has more memories, and far less work when a pack holds many
      documents.  None: dense.
    span_head_intermediate_size: Width of the span head's feed-forward layer (the paper's
      appendix); None: one Dense layer.
    answer_type_mode: ``"mean"`` (cross-entropy of the mean of segment logits) or ``"paper"``
      (normalised over (segment x {span, yes, no}), max at inference).
    pre_layer_norm: Pre-LN transformer blocks if True, post-LN (BERT/RoBERTa) if False.
    initializer_range: Stddev of the truncated-normal initialiser (RoBERTa's 0.02; the tiny
      presets' :data:`TINY_INITIALIZER_RANGE` was measured against other scales).
    layer_norm_epsilon: LayerNorm epsilon.
  """
  vocab_size: int = 50265
  hidden_size: int = 768
  num_heads: int = 12
  intermediate_size: int = 3072
  num_layers_first: int = 12
  num_layers_second: int = 2
  max_seq_length: int = 512
  dropout: float = 0.1
  use_memory: bool = True
  memory_source: str = "cls"
  sts_length: int = 32
  max_memories: Optional[int] = None
  memory_application: str = "all"
  memory_init: str = "random"
  same_segment_only: bool = False
  max_segment_distance: int = 10
  memory_top_k: Optional[int] = None
  memory_window: Optional[int] = None
  span_head_intermediate_size: Optional[int] = None
  answer_type_mode: str = "mean"
  pre_layer_norm: bool = False
  initializer_range: float = 0.02
  layer_norm_epsilon: float = 1e-12

  def __post_init__(self):
    if self.memory_source not in MEMORY_SOURCES:
      raise ValueError(f"memory_source must be one of {MEMORY_SOURCES}, got "
                       f"{self.memory_source!r}.")
    if self.hidden_size % self.num_heads:
      raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads "
                       f"{self.num_heads}.")
    if self.max_segment_distance < 0:
      raise ValueError("max_segment_distance must be >= 0.")
    if self.memory_top_k is not None and self.memory_top_k < 1:
      raise ValueError("memory_top_k must be None or >= 1.")
    if self.memory_window is not None and self.memory_window < 1:
      raise ValueError("memory_window must be None or >= 1.")
    if self.memory_application not in MEMORY_APPLICATIONS:
      raise ValueError(f"memory_application must be one of {MEMORY_APPLICATIONS}, got "
                       f"{self.memory_application!r}.")
    if self.memory_init not in MEMORY_INITS:
      raise ValueError(f"memory_init must be one of {MEMORY_INITS}, got {self.memory_init!r}.")
    if self.answer_type_mode not in ANSWER_TYPE_MODES:
      raise ValueError(f"answer_type_mode must be one of {ANSWER_TYPE_MODES}, got "
                       f"{self.answer_type_mode!r}.")
    if self.sts_length < 1:
      raise ValueError(f"sts_length must be >= 1, got {self.sts_length}.")
    if self.memory_source == "entity" and (self.max_memories is None or self.max_memories < 1):
      raise ValueError("memory_source='entity' needs max_memories >= 1 (a static cap of entity "
                       "memories per pack).")
    if self.span_head_intermediate_size is not None and self.span_head_intermediate_size < 1:
      raise ValueError("span_head_intermediate_size must be None or >= 1.")

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_dict(cls, d: Dict[str, Any]) -> "ModelConfig":
    return cls(**_known(cls, d))

  @classmethod
  def from_json(cls, text: str, source: str = "model config") -> "ModelConfig":
    return cls.from_dict(safe_json.loads(text, source))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Trainer settings.

  Attributes:
    learning_rate: Peak learning rate (> 0).
    steps: Number of training steps (>= 1; one pack = one global batch = one step).
    optimizer: ``"adamw"`` or ``"lamb"``.
    weight_decay: Decoupled weight decay (>= 0), applied to kernels and embeddings but not to
      LayerNorm parameters or biases (see ``model.training.optimization.decays_weight``).
    warmup_steps: Linear warm-up steps (in ``[0, steps]``), then linear decay to
      ``end_learning_rate_fraction * learning_rate`` at ``steps``.
    end_learning_rate_fraction: Learning rate reached at ``steps`` as a fraction of the peak, in
      ``[0, 1]`` (0: decay to 0; 1: constant after warm-up).
    clipnorm: Gradient-norm clip, Keras ``clipnorm``: each variable's gradient is clipped to
      this norm separately (not a global norm). None: no clipping; else > 0.
    seed: Seed for initialisation, dropout and data shuffling.
    shuffle: Shuffle packs (and files).
    jit_compile: XLA-compile the train step.
    checkpoint_every: Save a checkpoint every this many steps (and at the end).
    max_checkpoints: Checkpoints kept by the CheckpointManager.
    log_every: Write TensorBoard summaries (and log lines) every this many steps.
    steps_per_loop: Train steps run inside one ``tf.function`` call (one host round trip);
      checkpoints, logs and evaluations happen at loop boundaries.
  """
  learning_rate: float = 5e-5
  steps: int = 1000
  optimizer: str = "adamw"
  weight_decay: float = 0.01
  warmup_steps: int = 0
  end_learning_rate_fraction: float = 0.0
  clipnorm: Optional[float] = 1.0
  seed: int = 0
  shuffle: bool = True
  jit_compile: bool = False
  checkpoint_every: int = 1000
  max_checkpoints: int = 3
  log_every: int = 1
  steps_per_loop: int = 1

  def __post_init__(self):
    if self.optimizer not in ("adamw", "lamb"):
      raise ValueError(f"optimizer must be 'adamw' or 'lamb', got {self.optimizer!r}.")
    if self.steps < 1:
      raise ValueError(f"steps must be >= 1, got {self.steps}.")
    if not self.learning_rate > 0:
      raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}.")
    if not 0 <= self.warmup_steps <= self.steps:
      raise ValueError(f"warmup_steps must be in [0, steps={self.steps}], got "
                       f"{self.warmup_steps}.")
    if not 0.0 <= self.end_learning_rate_fraction <= 1.0:
      raise ValueError("end_learning_rate_fraction must be in [0, 1], got "
                       f"{self.end_learning_rate_fraction}.")
    if not self.weight_decay >= 0:
      raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}.")
    if self.clipnorm is not None and not self.clipnorm > 0:
      raise ValueError(f"clipnorm must be None (no clipping) or > 0, got {self.clipnorm}.")
    for name in ("checkpoint_every", "max_checkpoints", "log_every", "steps_per_loop"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_dict(cls, d: Dict[str, Any]) -> "TrainConfig":
    return cls(**_known(cls, d))

  @classmethod
  def from_json(cls, text: str, source: str = "train config") -> "TrainConfig":
    return cls.from_dict(safe_json.loads(text, source))


def _is_int(x) -> bool:
  return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_rate(x) -> bool:
  return isinstance(x, numbers.Real) and not isinstance(x, bool) and 0.0 <= float(x) <= 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskingConfig:
  """Masked-LM masking options (all keyword-only; ``mask_token_id``/``vocab_size`` required).

  Attributes:
    mask_token_id: Id written at ``replace_mask`` of the masked positions.
    vocab_size: V; random replacements are uniform in ``[0, V)``.
    mention_rate: Probability that an entity mention (or entity, ``whole_entity``) is masked.
    token_rate: Fraction of the eligible non-mention context tokens masked in whole-word spans.
    max_span_words: Span lengths are uniform in ``[1, max_span_words]`` words.
    max_predictions: P, masked positions kept per segment (static); None: ``ceil(0.2 * L)``.
    replace_mask: Probability that a masked position becomes ``mask_token_id``.
    replace_random: Probability that it becomes a random id (the rest keep their token).
    whole_entity: Mask every mention of the same (known) entity in a segment together.
  """

  mask_token_id: int
  vocab_size: int
  mention_rate: float = 0.25
  token_rate: float = 0.15
  max_span_words: int = 3
  max_predictions: Optional[int] = None
  replace_mask: float = 0.8
  replace_random: float = 0.1
  whole_entity: bool = False

  def __post_init__(self):
    if not _is_int(self.vocab_size) or self.vocab_size < 1:
      raise ValueError(f"vocab_size must be an int >= 1, got {self.vocab_size!r}.")
    if not _is_int(self.mask_token_id) or not 0 <= self.mask_token_id < self.vocab_size:
      raise ValueError(f"mask_token_id must be an int in [0, vocab_size={self.vocab_size}), "
                       f"got {self.mask_token_id!r}.")
    for name in ("mention_rate", "token_rate", "replace_mask", "replace_random"):
      if not _is_rate(getattr(self, name)):
        raise ValueError(f"{name} must be a number in [0, 1], got {getattr(self, name)!r}.")
    if self.replace_mask + self.replace_random > 1.0 + 1e-9:
      raise ValueError(f"replace_mask + replace_random must be <= 1, got "
                       f"{self.replace_mask} + {self.replace_random}.")
    if not _is_int(self.max_span_words) or self.max_span_words < 1:
      raise ValueError(f"max_span_words must be an int >= 1, got {self.max_span_words!r}.")
    if self.max_predictions is not None and (not _is_int(self.max_predictions) or
                                             self.max_predictions < 1):
      raise ValueError(f"max_predictions must be None or an int >= 1, got "
                       f"{self.max_predictions!r}.")
    if not isinstance(self.whole_entity, bool):
      raise ValueError(f"whole_entity must be a bool, got {self.whole_entity!r}.")

  def predictions_for(self, seq_length: int) -> int:
    """P for segments of ``seq_length`` tokens."""
    if self.max_predictions is not None:
      return int(self.max_predictions)
    return max(1, math.ceil(0.2 * seq_length))


def _known(cls, d: Dict[str, Any]) -> Dict[str, Any]:
  names = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(d) - names)
  if unknown:
    raise ValueError(f"Unknown {cls.__name__} fields {unknown}.")
  return dict(d)


# Initialisation scale of the tiny presets (hidden 64): RoBERTa's 0.02, like the base presets,
# measured against 0.05, 0.1 and 1/sqrt(64) on the memory ladder and the demo
# (docs/benchmarks.md, "Initialisation of the tiny presets").  0.05 lets the plain tiny reader
# learn the ladder's masked LM (held-out entity-token accuracy after 2,000 steps 0.175 against
# 0.029 at 0.02) but not ReadTwice(E): E's masked LM is level (0.175 / 0.196), R0 from scratch
# 5 / 4 of 8 seeds, and R0 fine-tuned from E's pre-trained reader 0 of 8 against 4 of 8 at
# 0.02; no scale made R1-R3 learnable.  So no value helps the models the presets are for.
TINY_INITIALIZER_RANGE = 0.02


def tiny(vocab_size: int = 128, max_seq_length: int = 64, **overrides) -> ModelConfig:
  """A tiny model for tests and the demo (hidden 64, 2 heads, 1 + 1 layers; initialisation
  stddev :data:`TINY_INITIALIZER_RANGE`)."""
  kw = dict(vocab_size=vocab_size, hidden_size=64, num_heads=2, intermediate_size=128,
            num_layers_first=1, num_layers_second=1, max_seq_length=max_seq_length,
            dropout=0.0, max_segment_distance=2, layer_norm_epsilon=1e-6,
            initializer_range=TINY_INITIALIZER_RANGE)
  kw.update(overrides)
  return ModelConfig(**kw)


def base(**overrides) -> ModelConfig:
  """RoBERTa-base shaped: 768 / 12 heads / 3072, 12 layers BERT_1 + 2 layers BERT_2, B = 10."""
  kw = dict(vocab_size=50265, hidden_size=768, num_heads=12, intermediate_size=3072,
            num_layers_first=12, num_layers_second=2, max_seq_length=512, dropout=0.1,
            max_segment_distance=10, layer_norm_epsilon=1e-5)
  kw.update(overrides)
  return ModelConfig(**kw)


def _variant(size, **variant):
  def make(**overrides):
    config = size(**dict(variant, **overrides))
    if "span_head_intermediate_size" not in overrides:  # the appendix's FFN, hidden wide
      config = dataclasses.replace(config, span_head_intermediate_size=config.hidden_size)
    return config
  make.__doc__ = f"{size.__name__} with {variant}, the appendix's span FFN and answer-type head"
  return make


# The paper's variants (Zemlyanskiy et al. 2021, §3-4): ReadTwice with CLS, STS (32-token span)
# or entity memories; E(SS): each segment reads only its own memories; E(SS, 10L): the same
# with 10 first-read layers, so that the model has the baseline's 12 layers in all; and the
# plain RoBERTa encoder (12 layers, no memory) they are compared with.  All with the appendix's
# heads: a feed-forward layer before the span projection, and the answer type normalised over
# (segment x {span, yes, no}) with the best pair at inference.
_PAPER_HEADS = dict(answer_type_mode="paper")
# ReadTwice(E) reads memory only at entity-mention tokens (the appendix's sparse application)
# and starts its memory path at identity (memory_init; ours, measured on the memory ladder:
# with random 0.02 projections a tiny E never learns to look memories up).
_E = dict(memory_source="entity", max_memories=4096, memory_top_k=100,
          memory_application="entity", memory_init="identity")
_VARIANTS = {
    "cls": dict(memory_source="cls"),
    "sts": dict(memory_source="sts", sts_length=32),
    "e": dict(_E),
    "e_ss": dict(_E, same_segment_only=True),
    "e_ss_10l": dict(_E, same_segment_only=True, num_layers_first=10),
    "roberta": dict(use_memory=False),
}
_VARIANTS = {k: dict(_PAPER_HEADS, **v) for k, v in _VARIANTS.items()}

PRESETS = {"tiny": tiny, "base": base}
PRESETS.update({f"readtwice_{k}" if k != "roberta" else "roberta_base": _variant(base, **v)
                for k, v in _VARIANTS.items()})
# Tiny E presets: 256 memories per pack, headroom over the 64 mentions of memory_gap's packs
# (mentions beyond the cap have no memory; the trainer warns when any are dropped).
PRESETS.update({f"tiny_{k}": _variant(tiny, **dict(v, max_memories=256) if "max_memories" in v
                                      else v)
                for k, v in _VARIANTS.items() if k != "e_ss_10l"})  # no layers to take away


def preset(name: str, **overrides) -> ModelConfig:
  if name not in PRESETS:
    raise ValueError(f"Unknown preset {name!r}; choose from {sorted(PRESETS)}.")
  return PRESETS[name](**overrides)


def config_from_manifest(manifest: Mapping[str, Any], preset_name: str = "tiny",
                         **overrides) -> ModelConfig:
  """Preset ``preset_name`` fitted to the records of a pipeline ``manifest``: their vocabulary
  and (tiny presets) seq length; ``overrides`` on top."""
  kw = dict(vocab_size=int(manifest["tokenizer"]["vocab_size"]))
  if preset_name.startswith("tiny"):
    kw["max_seq_length"] = int(manifest["config"]["seq_length"])
  kw.update(overrides)
  return preset(preset_name, **kw)


def save_configs(model_dir: str, model_config: ModelConfig,
                 train_config: Optional[TrainConfig] = None) -> str:
  """Writes ``<model_dir>/config.json`` holding ``{"model": ..., "train": ...}``.

  ``model_dir`` may be any ``tf.io.gfile`` path (local, ``gs://``, ``ram://``); TensorFlow is
  imported here, not at module level.
  """
  import os  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.io.gfile.makedirs(model_dir)
  path = os.path.join(model_dir, CONFIG_FILE)
  payload = {"model": model_config.to_dict()}
  if train_config is not None:
    payload["train"] = train_config.to_dict()
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
  return path


def load_configs(model_dir: str):
  """Reads ``<model_dir>/config.json`` -> ``(ModelConfig, TrainConfig | None)``.

  ``model_dir`` may be any ``tf.io.gfile`` path.  Raises FileNotFoundError when there is no
  ``config.json``.
  """
  import os  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = os.path.join(model_dir, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"{path} does not exist: {model_dir} holds no saved configs")
  with tf.io.gfile.GFile(path, "rb") as f:
    payload = safe_json.loads(f.read(), path)
  train = payload.get("train")
  return (ModelConfig.from_dict(payload["model"]),
          TrainConfig.from_dict(train) if train is not None else None)
