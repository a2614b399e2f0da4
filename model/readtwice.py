"""The ReadTwice model: read every segment, share memories within documents, read again.

``embeddings -> BERT_1 (per segment) -> ExtractMemories -> gather_memories -> MemoryAttention
-> BERT_2 (per segment) -> heads``.

Inputs are the pack feature dict of :mod:`model.input` (one pack = one global batch of N
segments x L tokens).  Outputs (dict):

* ``begin_logits``/``end_logits``: float ``[N, L]`` span logits; non-context tokens are set to
  ``NEG_LOGIT``.
* ``answer_type_logits``: float ``[N, 3]`` (span / yes / no) from each segment's CLS.
* ``supporting_logits``: float ``[N]``.
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from model.configs import ModelConfig
from model.layers import ExtractMemories, MemoryAttention, TransformerStack, gather_memories
from model.layers.initializers import truncated_normal
from schemas import records

NEG_LOGIT = -10000.0
MODEL_INPUT_KEYS = ("token_ids", "input_mask", "token_kind", "segment_mask", "document_index",
                    "segment_index")


def model_inputs(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """The numeric subset of a pack feature dict that the model reads."""
  return {k: features[k] for k in MODEL_INPUT_KEYS}


@keras.saving.register_keras_serializable(package="readtwice")
class ReadTwiceModel(keras.Model):
  """ReadTwice over one pack.

  Call args:
    inputs: dict with ``token_ids``, ``input_mask``, ``token_kind`` int ``[N, L]`` and
      ``segment_mask``, ``document_index``, ``segment_index`` int ``[N]`` (extra keys ignored).
    training: dropout switch.

  Returns:
    dict of ``begin_logits`` ``[N, L]``, ``end_logits`` ``[N, L]``, ``answer_type_logits``
    ``[N, 3]``, ``supporting_logits`` ``[N]`` and ``memories`` ``[N, H]``.
  """

  def __init__(self, config: ModelConfig, **kwargs):
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = ModelConfig.from_dict(config)
    self.config = config
    c = config
    # A new initializer per weight: one shared instance would give identical values (the
    # position table would equal the first rows of the token table; see model.layers.initializers).
    def init():
      return truncated_normal(c.initializer_range)

    self.token_embedding = keras.layers.Embedding(c.vocab_size, c.hidden_size,
                                                  embeddings_initializer=init(),
                                                  name="token_embedding")
    self.position_embedding = keras.layers.Embedding(c.max_seq_length, c.hidden_size,
                                                     embeddings_initializer=init(),
                                                     name="position_embedding")
    self.embedding_norm = keras.layers.LayerNormalization(epsilon=c.layer_norm_epsilon,
                                                          name="embedding_norm")
    self.embedding_dropout = keras.layers.Dropout(c.dropout)
    stack = dict(hidden_size=c.hidden_size, num_heads=c.num_heads,
                 intermediate_size=c.intermediate_size, dropout=c.dropout,
                 pre_layer_norm=c.pre_layer_norm, layer_norm_epsilon=c.layer_norm_epsilon,
                 initializer_range=c.initializer_range)
    self.first_read = TransformerStack(c.num_layers_first, name="bert_1", **stack)
    self.extract_memories = ExtractMemories(c.hidden_size, source=c.memory_source,
                                            initializer_range=c.initializer_range,
                                            name="extract_memories")
    self.memory_attention = MemoryAttention(
        c.hidden_size, c.num_heads, c.max_segment_distance, top_k=c.memory_top_k,
        dropout=c.dropout, layer_norm_epsilon=c.layer_norm_epsilon,
        initializer_range=c.initializer_range, name="memory_attention")
    self.second_read = TransformerStack(c.num_layers_second, name="bert_2", **stack)
    self.span_head = keras.layers.Dense(2, kernel_initializer=init(), name="span_head")
    self.answer_type_head = keras.layers.Dense(3, kernel_initializer=init(),
                                               name="answer_type_head")
    self.supporting_head = keras.layers.Dense(1, kernel_initializer=init(),
                                              name="supporting_head")

  def call(self, inputs, training=False):
    token_ids = tf.cast(inputs["token_ids"], tf.int32)
    input_mask = tf.cast(inputs["input_mask"], tf.int32)
    token_kind = tf.cast(inputs["token_kind"], tf.int32)
    segment_mask = tf.cast(inputs["segment_mask"], tf.int32)
    document_index = tf.cast(inputs["document_index"], tf.int32)
    segment_index = tf.cast(inputs["segment_index"], tf.int32)
    l = tf.shape(token_ids)[1]

    x = self.token_embedding(token_ids) + self.position_embedding(tf.range(l))[None]
    x = self.embedding_dropout(self.embedding_norm(x), training=training)
    x = self.first_read(x, attention_mask=input_mask, training=training)

    memories, owner = self.extract_memories(x, inputs)
    mem = gather_memories({
        "memories": memories,
        "document": tf.gather(document_index, owner),
        "position": tf.gather(segment_index, owner),
        "mask": tf.gather(segment_mask, owner) * tf.cast(tf.gather(document_index, owner) >= 0,
                                                          tf.int32),
    })
    x = self.memory_attention(x, mem["memories"], query_document=document_index,
                              memory_document=mem["document"], query_position=segment_index,
                              memory_position=mem["position"], memory_mask=mem["mask"],
                              training=training)
    x = self.second_read(x, attention_mask=input_mask, training=training)

    span = self.span_head(x)  # [N, L, 2]
    is_context = tf.equal(token_kind, records.TOKEN_KIND_CONTEXT)
    begin = tf.where(is_context, span[..., 0], NEG_LOGIT)
    end = tf.where(is_context, span[..., 1], NEG_LOGIT)
    cls = x[:, 0, :]
    return {
        "begin_logits": begin,
        "end_logits": end,
        "answer_type_logits": self.answer_type_head(cls),
        "supporting_logits": tf.squeeze(self.supporting_head(cls), -1),
        "memories": memories,
    }

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config):
    return cls(ModelConfig.from_dict(config["config"]), name=config.get("name"))


def build_model(config: ModelConfig, seq_length: int = 8, segments_per_pack: int = 2
               ) -> ReadTwiceModel:
  """Creates the model and its variables by calling it once on a dummy pack."""
  model = ReadTwiceModel(config)
  n, l = segments_per_pack, min(seq_length, config.max_seq_length)
  dummy = {
      "token_ids": tf.zeros([n, l], tf.int32), "input_mask": tf.ones([n, l], tf.int32),
      "token_kind": tf.fill([n, l], records.TOKEN_KIND_CONTEXT),
      "segment_mask": tf.ones([n], tf.int32), "document_index": tf.zeros([n], tf.int32),
      "segment_index": tf.range(n, dtype=tf.int32),
  }
  model(dummy, training=False)
  return model
