"""What one training step reads and optimises: the fine-tuning and pretraining tasks.

An :class:`Objective` chooses the input features of the model, the in-pipeline preprocessing
(dynamic masking for pretraining, :mod:`model.data.masking`) and the losses / metrics of one step
(:mod:`model.training.losses`); :class:`model.training.trainer.Trainer` runs it.

* :class:`FinetuneObjective`: question answering from the records' answer labels (span OR-loss,
  answer type, supporting heads; + the coreference loss on entity memories when asked).
* :class:`PretrainObjective`: masked LM with masks drawn per pack in the input pipeline + the
  coreference loss on entity memories (the paper's auxiliary pre-training task).
"""

from __future__ import annotations

from typing import Dict, Mapping, Tuple

import tensorflow as tf

from model import configs as configs_lib
from model.training import losses as losses_lib
from model.data import masking as masking_lib
from model.network import readtwice
from model.data.training_data import TrainingError

ANSWER_KEYS = ("answer_type", "supporting", "answer_begin_labels", "answer_end_labels")
MASK_KEYS = ("masked_positions", "masked_ids", "masked_weights", "masked_is_entity")


def noop_sums(outputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
  """float ``[2]`` (this replica's): the no-op attention weight summed over the tokens that
  read memories, and their number (zeros without memory)."""
  if "memory_noop_probability" not in outputs:
    return tf.zeros([2])
  readers = tf.cast(outputs["memory_readers"], tf.float32)
  return tf.stack([tf.reduce_sum(outputs["memory_noop_probability"] * readers),
                   tf.reduce_sum(readers)])


def _noop_rate(outputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
  """Global mean no-op attention weight over the tokens that read memories (0 without)."""
  sums = losses_lib.cross_replica_sum(noop_sums(outputs))
  return sums[0] / tf.maximum(sums[1], 1.0)


class Objective:
  """What one training step reads and optimises.

  ``prepare(ds, seed)`` maps the parsed-pack dataset to the model's numeric input dicts;
  ``step_metrics(outputs, features)`` returns ``(losses, stats)`` in replica context: losses
  are this replica's share (``loss_global / R``, summed over replicas; ``total`` is
  optimised), stats are global values (identical on every replica).  Their keys are fixed
  (``loss_keys`` / ``stat_keys``) so a multi-step loop can accumulate them.
  """

  name = "task"
  loss_keys: Tuple[str, ...] = ("total",)
  stat_keys: Tuple[str, ...] = ()

  def __init__(self, model_config: configs_lib.ModelConfig, coref_weight: float = 0.0):
    if coref_weight < 0:
      raise ValueError(f"coref_weight must be >= 0, got {coref_weight}")
    self.model_config = model_config
    self.max_mentions = readtwice.max_mentions(model_config)
    self.has_memory = bool(model_config.use_memory)
    self.coref_weight = float(coref_weight)
    # The coreference loss needs entity memories and a positive weight.
    self.coref = (self.has_memory and model_config.memory_source == "entity"
                  and self.coref_weight > 0)

  def input_keys(self) -> Tuple[str, ...]:
    keys = readtwice.MODEL_INPUT_KEYS
    if self.max_mentions:
      keys += readtwice.MENTION_INPUT_KEYS
    return keys

  def memory_stat_keys(self) -> Tuple[str, ...]:
    return ((("memory_noop_rate",) if self.has_memory else ())
            + (("mentions_dropped",) if self.max_mentions else ())
            + (("coref_pairs",) if self.coref else ()))

  def memory_stats(self, outputs, features) -> Dict[str, tf.Tensor]:
    """The no-op rate of memory attention and the entity mentions beyond ``max_memories``
    (logged, not lost silently), as global values."""
    stats = {}
    if self.has_memory:
      stats["memory_noop_rate"] = _noop_rate(outputs)
    if self.max_mentions:
      stats["mentions_dropped"] = losses_lib.cross_replica_sum(
          tf.cast(features["mentions_dropped"], tf.float32))
    return stats

  # Extra pack features the step needs besides the model's and the losses' (e.g. the book keys
  # of whole-book memory, set by the trainer).
  keep_keys: Tuple[str, ...] = ()

  def prepare(self, ds: tf.data.Dataset, seed: int) -> tf.data.Dataset:
    keys = tuple(self.input_keys()) + tuple(k for k in self.keep_keys
                                            if k not in self.input_keys())
    return ds.map(lambda f: {k: f[k] for k in keys})

  def step_metrics(self, outputs, features) -> Tuple[Dict[str, tf.Tensor], Dict[str, tf.Tensor]]:
    raise NotImplementedError


class FinetuneObjective(Objective):
  """Question answering: span OR-loss, answer type and supporting heads, from the records'
  answer labels (+ the coreference loss on entity memories when ``coref_weight`` > 0)."""

  name = "finetune"

  def __init__(self, model_config: configs_lib.ModelConfig,
               coref_weight: float = configs_lib.FINETUNE_COREF_WEIGHT):
    super().__init__(model_config, coref_weight)
    self.loss_keys = (("total", "span_begin", "span_end", "answer_type", "supporting")
                      + (("coref",) if self.coref else ()))
    self.stat_keys = self.memory_stat_keys()

  def input_keys(self):
    return super().input_keys() + ANSWER_KEYS

  def step_metrics(self, outputs, features):
    if not self.coref:  # no coreference term (nor its [M, M] pair matrix)
      outputs = {k: v for k, v in outputs.items() if k != "memory_table"}
    out = losses_lib.readtwice_losses(outputs, features,
                                      answer_type_mode=self.model_config.answer_type_mode,
                                      coref_weight=self.coref_weight)
    stats = self.memory_stats(outputs, features)
    if self.coref:
      stats["coref_pairs"] = out["coref_pairs"]
    return {k: out[k] for k in self.loss_keys}, stats


class PretrainObjective(Objective):
  """Masked LM with dynamic masking in the input pipeline (:mod:`model.data.masking`) + the
  coreference loss on entity memories.

  Masks are drawn per pack from ``(seed, running pack index)``, so every epoch masks anew and
  a resumed run (whose iterator state includes the index) draws the same masks.
  """

  name = "pretrain"

  def __init__(self, model_config: configs_lib.ModelConfig, masking: configs_lib.MaskingConfig,
               coref_weight: float = configs_lib.PRETRAIN_COREF_WEIGHT):
    super().__init__(model_config, coref_weight)
    self.masking = masking
    self.loss_keys = ("total", "mlm") + (("coref",) if self.coref else ())
    self.stat_keys = (("mlm_accuracy", "mlm_entity_accuracy", "masked_tokens")
                      + self.memory_stat_keys())

  def input_keys(self):
    return super().input_keys() + MASK_KEYS

  def mask(self, ds: tf.data.Dataset, seed: int) -> tf.data.Dataset:
    """Masks every pack of ``ds`` with the seed ``(seed, index of the pack in ds)``."""
    config = self.masking
    return ds.enumerate().map(tf.autograph.experimental.do_not_convert(
        lambda i, f: masking_lib.mask_segments(f, config, seed, pack_index=i)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def prepare(self, ds, seed):
    return super().prepare(self.mask(ds, seed), seed)

  def step_metrics(self, outputs, features):
    mlm = losses_lib.mlm_loss(outputs["mlm_logits"], features["masked_ids"],
                              features["masked_weights"], features["masked_is_entity"],
                              outputs.get("mlm_index"))
    losses = {"mlm": mlm["loss"], "total": mlm["loss"]}
    if self.coref:
      coref = losses_lib.coref_loss(outputs["memory_table"], outputs["memory_entity_id"],
                                    outputs["memory_mask"], outputs["coref_bias"])
      losses["coref"] = coref["loss"]
      losses["total"] = mlm["loss"] + self.coref_weight * coref["loss"]
      pairs = coref["pairs"]
    stats = {"mlm_accuracy": mlm["accuracy"], "mlm_entity_accuracy": mlm["entity_accuracy"],
             "masked_tokens": mlm["weight"]}
    stats.update(self.memory_stats(outputs, features))
    if self.coref:
      stats["coref_pairs"] = pairs
    return losses, stats


def masking_config(manifest: Mapping, **overrides) -> configs_lib.MaskingConfig:
  """The masking of the records' tokenizer: its ``<mask>`` id and vocabulary size."""
  special = manifest["tokenizer"].get("special_ids", {})
  if "mask" not in special:
    raise TrainingError("the records' manifest names no <mask> token id (tokenizer.special_ids)")
  return configs_lib.MaskingConfig(mask_token_id=int(special["mask"]),
                                   vocab_size=int(manifest["tokenizer"]["vocab_size"]),
                                   **overrides)
