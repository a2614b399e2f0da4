"""The ReadTwice model: read every segment, share memories within documents, read again.

``embeddings -> BERT_1 (per segment) -> ExtractMemories (cls | sts | entity) ->
gather_memories (all replicas) -> MemoryAttention -> BERT_2 (per segment) -> heads``; with
``use_memory=False`` (the plain-encoder baseline) ``embeddings -> BERT_1 -> heads``.

Inputs are the pack feature dict of :mod:`model.data.pack_reader` (one pack = one global batch of N
segments x L tokens; under a strategy, each replica's share of it: :mod:`model.training.replicas`).
Entity memories read the static ``mentions_*`` features (``parse_pack(max_mentions=...)``).
Outputs (dict):

* ``begin_logits``/``end_logits``: float ``[N, L]`` span logits; non-context tokens are set to
  ``NEG_LOGIT``.
* ``answer_type_logits``: float ``[N, 3]`` (span / yes / no) from each segment's CLS.
* ``supporting_logits``: float ``[N]``.
* ``mlm_logits``: float ``[N, P, V]`` when the inputs hold ``masked_positions`` ``[N, P]``
  (the MLM head, tied to the token embeddings, on the second read's output).  With the
  model's ``sparse_mlm`` on and ``masked_weights`` ``[N, P]`` in the inputs: ``[K, V]`` for
  the K slots of weight > 0 only, and ``mlm_index`` int ``[K, 2]`` their ``(row, slot)``
  (dynamic shapes; :func:`model.training.losses.mlm_token_sums` takes it).
* with memory: ``memories`` (this replica's ``[M, H]``), ``memory_table`` / ``memory_entity_id``
  / ``memory_mask`` (all replicas' memories, for the coreference loss; with
  ``memory_init="identity"`` the table is scaled by ``H^-1/4``, so the loss' logits are
  ``m_i . m_j / sqrt(H)``), ``coref_bias`` and
  ``memory_noop_probability`` float ``[N, L]`` (the no-op's attention weight per token, mean
  over heads) and ``memory_readers`` int ``[N, L]`` (1 for the tokens that read memories: real
  tokens, or with ``memory_application="entity"`` mention tokens).
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from model.network import memory_table as memory_table_lib
from model.configs import ModelConfig
from model.network.layers import ExtractMemories, MemoryAttention, TransformerStack, gather_memories
from model.network.layers.heads import AnswerTypeHead, CorefBias, MLMHead, SpanHead
from model.network.layers.initializers import truncated_normal
from model.network.layers.memory import mention_token_mask
from schemas import records

NEG_LOGIT = -10000.0
MODEL_INPUT_KEYS = ("token_ids", "input_mask", "token_kind", "segment_mask", "document_index",
                    "segment_index")
MENTION_INPUT_KEYS = ("mentions_segment", "mentions_begin", "mentions_end",
                      "mentions_entity_id", "mentions_mask", "mentions_dropped")
# External memories: a whole book's memories from other packs (model.network.book_memory).
OPTIONAL_INPUT_KEYS = (MENTION_INPUT_KEYS[:-1] + ("masked_positions",)
                       + memory_table_lib.EXTERNAL_KEYS)


def max_mentions(config: ModelConfig):
  """The ``max_mentions`` the input pipeline must give this model (entity memories), or None."""
  if config.use_memory and config.memory_source == "entity":
    return config.max_memories
  return None


def model_inputs(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """The numeric subset of a pack feature dict that the model reads."""
  out = {k: features[k] for k in MODEL_INPUT_KEYS}
  out.update({k: features[k] for k in OPTIONAL_INPUT_KEYS if k in features})
  return out


@keras.saving.register_keras_serializable(package="readtwice")
class ReadTwiceModel(keras.Model):
  """ReadTwice over one pack.

  Call args:
    inputs: dict with ``token_ids``, ``input_mask``, ``token_kind`` int ``[N, L]`` and
      ``segment_mask``, ``document_index``, ``segment_index`` int ``[N]`` (extra keys ignored).
    training: dropout switch.
    memory_chunk: inference only, None or the memories per chunk of the memory attention's
      chunked read (bounded memory whatever the table's length; see ``MemoryAttention``).
    sparse_queries: None (the model's ``sparse_memory_queries``) or a bool: with
      ``memory_application="entity"``, the memory attention computed for the mention tokens
      only (same numbers; dynamic shapes: not inside XLA).

  Returns:
    dict of ``begin_logits`` ``[N, L]``, ``end_logits`` ``[N, L]``, ``answer_type_logits``
    ``[N, 3]``, ``supporting_logits`` ``[N]`` and ``memories`` ``[N, H]``.
  """

  def __init__(self, config: ModelConfig, **kwargs):
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = ModelConfig.from_dict(config)
    self.config = config
    # With memory_application="entity": compute the memory attention for the mention tokens
    # only (MemoryAttention's sparse_queries; dynamic shapes, so off by default: the trainer
    # turns it on when the step is not XLA-compiled, model.predict always).
    self.sparse_memory_queries = False
    # The MLM head over the masked slots of weight > 0 only (padding segments and unused
    # slots skipped: with a 50k vocabulary most of a pre-training step's cost and memory);
    # dynamic shapes, so off by default: the trainer turns it on when the step is not
    # XLA-compiled.
    self.sparse_mlm = False
    c = config
    # A new initializer per weight: one shared instance would give identical values (the
    # position table would equal the first rows of the token table; see
    # model.network.layers.initializers).
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
    if c.use_memory:
      self.extract_memories = ExtractMemories(
          c.hidden_size, source=c.memory_source, sts_length=c.sts_length,
          max_memories=c.max_memories, initializer_range=c.initializer_range,
          kernel_init=c.memory_init, name="extract_memories")
      self.memory_attention = MemoryAttention(
          c.hidden_size, c.num_heads, c.max_segment_distance, top_k=c.memory_top_k,
          dropout=c.dropout, layer_norm_epsilon=c.layer_norm_epsilon,
          initializer_range=c.initializer_range, same_segment_only=c.same_segment_only,
          memory_window=c.memory_window, kernel_init=c.memory_init, name="memory_attention")
      self.second_read = TransformerStack(c.num_layers_second, name="bert_2", **stack)
      self.coref_bias = CorefBias(name="coref_bias")
    self.span_head = SpanHead(c.hidden_size, c.span_head_intermediate_size,
                              initializer_range=c.initializer_range, name="span_head")
    self.answer_type_head = AnswerTypeHead(c.hidden_size, mode=c.answer_type_mode,
                                           initializer_range=c.initializer_range,
                                           name="answer_type_head")
    self.supporting_head = keras.layers.Dense(1, kernel_initializer=init(),
                                              name="supporting_head")
    self.mlm_head = MLMHead(self.token_embedding, c.hidden_size,
                            layer_norm_epsilon=c.layer_norm_epsilon,
                            initializer_range=c.initializer_range, name="mlm_head")

  def build(self, input_shape=None):
    """Marks the model built; each sublayer creates its weights (its own ``build``) when the
    first call reaches it, in the order of the call (:func:`build_model` makes that call on a
    dummy pack).  Without this method Keras would first trace the whole ``call`` on symbolic
    inputs to build the sublayers, then run it: ~0.3 s more per model, the same weights."""
    del input_shape
    self.built = True

  def call(self, inputs, training=False, memory_chunk=None, sparse_queries=None):
    x, local = self.first_pass(inputs, training=training)
    return self.second_pass(inputs, x, local, memory_table(local, inputs), training=training,
                            memory_chunk=memory_chunk, sparse_queries=sparse_queries)

  # The call in two halves around the one collective (the memory all-gather), so that a
  # strategy whose collectives cannot sit inside XLA (MirroredStrategy: they go through
  # merge_call) can still compile each half per replica (see ``compiled_halves``).

  def first_pass(self, inputs, training=False):
    """Embeddings, BERT_1 and this replica's memories: ``(x [N, L, H], local)`` where
    ``local`` holds ``memories`` [M, H] and their ``document``, ``position``, ``mask``,
    ``entity_id`` [M] ({} without memory)."""
    token_ids = tf.cast(inputs["token_ids"], tf.int32)
    input_mask = tf.cast(inputs["input_mask"], tf.int32)
    l = tf.shape(token_ids)[1]
    x = self.token_embedding(token_ids) + self.position_embedding(tf.range(l))[None]
    x = self.embedding_dropout(self.embedding_norm(x), training=training)
    x = self.first_read(x, attention_mask=input_mask, training=training)
    if not self.config.use_memory:
      return x, {}
    document_index = tf.cast(inputs["document_index"], tf.int32)
    ex = self.extract_memories(x, inputs)
    owner = ex["segment"]
    document = tf.gather(document_index, owner)
    mask = (tf.cast(ex["mask"], tf.int32) * tf.gather(tf.cast(inputs["segment_mask"], tf.int32),
                                                      owner)
            * tf.cast(document >= 0, tf.int32))
    return x, {"memories": ex["memories"], "document": document,
               "position": tf.gather(tf.cast(inputs["segment_index"], tf.int32), owner),
               "mask": mask, "entity_id": tf.cast(ex["entity_id"], tf.int32)}

  def second_pass(self, inputs, x, local, table, training=False, memory_chunk=None,
                  sparse_queries=None):
    """Memory attention over ``table`` (:func:`gather_memories` of every replica's
    ``local``), BERT_2 and the heads: the output dict (see the class docstring).
    ``memory_chunk`` (inference): read the table in chunks of that many memories
    (``MemoryAttention``'s bounded-memory path, for a whole book's table); ``sparse_queries``
    (None: ``self.sparse_memory_queries``): the memory attention on the reading tokens only."""
    input_mask = tf.cast(inputs["input_mask"], tf.int32)
    token_kind = tf.cast(inputs["token_kind"], tf.int32)
    extra = {}
    if self.config.use_memory:
      token_mask, (x, noop) = self._read_memories(inputs, x, table, training,
                                                  return_noop_probability=True,
                                                  memory_chunk=memory_chunk,
                                                  sparse_queries=sparse_queries)
      x = self.second_read(x, attention_mask=input_mask, training=training)
      # The coreference logits m_i . m_j: identity-initialised memories are token-state sized
      # (norm ~ sqrt(H)), so their table is scaled by H^-1/4 (logits / sqrt(H)) to start where
      # 0.02-initialised ones do.
      coref_table = table["memories"]
      if self.config.memory_init == "identity":
        coref_table = coref_table * float(self.config.hidden_size) ** -0.25
      extra = {"memories": local["memories"], "memory_table": coref_table,
               "memory_entity_id": table["entity_id"], "memory_mask": table["mask"],
               "coref_bias": self.coref_bias(local["memories"]),
               "memory_noop_probability": noop,
               "memory_readers": input_mask if token_mask is None
                                 else input_mask * tf.cast(token_mask, tf.int32)}
    span = self.span_head(x)  # [N, L, 2]
    is_context = tf.equal(token_kind, records.TOKEN_KIND_CONTEXT)
    begin = tf.where(is_context, span[..., 0], NEG_LOGIT)
    end = tf.where(is_context, span[..., 1], NEG_LOGIT)
    cls = x[:, 0, :]
    out = {
        "begin_logits": begin,
        "end_logits": end,
        "answer_type_logits": self.answer_type_head(cls),
        "supporting_logits": tf.squeeze(self.supporting_head(cls), -1),
        **extra,
    }
    if "masked_positions" in inputs:
      positions = tf.cast(inputs["masked_positions"], tf.int32)
      if self.sparse_mlm and "masked_weights" in inputs:
        index = tf.cast(tf.where(tf.cast(inputs["masked_weights"], tf.float32) > 0),
                        tf.int32)  # [K, 2]
        out["mlm_logits"] = self.mlm_head(x, tf.gather_nd(positions, index), rows=index[:, 0])
        out["mlm_index"] = index
      else:
        out["mlm_logits"] = self.mlm_head(x, positions)
    return out

  def _read_memories(self, inputs, x, table, training, **returns):
    """The memory attention of ``x`` over ``table``: ``(token_mask, its output)`` (token_mask:
    the tokens that read memories with ``memory_application="entity"``, else None);
    ``returns``: MemoryAttention's ``return_*`` flags."""
    token_mask = None
    if self.config.memory_application == "entity":
      token_mask = mention_token_mask(inputs, tf.shape(x)[0], tf.shape(x)[1])
      if returns.get("sparse_queries") is None and not returns.get("return_attention"):
        returns["sparse_queries"] = self.sparse_memory_queries
    return token_mask, self.memory_attention(
        x, table["memories"], query_document=tf.cast(inputs["document_index"], tf.int32),
        memory_document=table["document"],
        query_position=tf.cast(inputs["segment_index"], tf.int32),
        memory_position=table["position"], memory_mask=table["mask"], training=training,
        query_token_mask=token_mask, **returns)

  def memory_attention_probe(self, inputs):
    """Which memories the tokens read (analysis, inference mode): BERT_1, the memories and the
    memory attention's probabilities, without BERT_2 or the heads.  A dict: ``memories`` float
    ``[N, L, C]`` (each token's attention on each candidate, mean over heads), ``noop`` float
    ``[N, L]``, ``memory_index`` int ``[N, C]`` (see ``MemoryAttention``'s
    ``return_attention``), and per memory (all ``M``) its ``entity_id``, ``position``
    (segment index in its document), ``document`` and ``mask``."""
    if not self.config.use_memory:
      raise ValueError("memory_attention_probe needs a model with memory (use_memory=True)")
    x, local = self.first_pass(inputs, training=False)
    table = memory_table(local, inputs)
    _, (_, attention) = self._read_memories(inputs, x, table, False, return_attention=True)
    return dict(attention, entity_id=table["entity_id"], position=table["position"],
                document=table["document"], mask=table["mask"])

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config):
    return cls(ModelConfig.from_dict(config["config"]), name=config.get("name"))


def memory_table(local, inputs):
  """The memory table the pack's tokens read: every replica's memories (``local`` all-gathered),
  then the external ones of the inputs (other packs' memories of the same books, without
  gradient; :mod:`model.network.book_memory`) when given; ``{}`` without memory."""
  if not local:
    return {}
  table = gather_memories(local)
  if memory_table_lib.has_external(inputs):
    table = memory_table_lib.with_external(table, inputs)
  return table


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
      "masked_positions": tf.zeros([n, 1], tf.int32),  # builds the MLM head too
  }
  if config.memory_source == "entity" and config.use_memory:
    k = config.max_memories
    dummy.update({key: tf.zeros([k], tf.int32) for key in (
        "mentions_segment", "mentions_begin", "mentions_end", "mentions_entity_id",
        "mentions_mask")})
  model(dummy, training=False)
  return model


def compiled_halves(model: ReadTwiceModel, jit_compile: bool = True):
  """A forward function ``(inputs, training) -> outputs`` equal to ``model(inputs)``, whose
  two halves (:meth:`ReadTwiceModel.first_pass`, :meth:`ReadTwiceModel.second_pass`) are each
  XLA-compiled, with the memory all-gather between them outside XLA.

  Use it inside ``strategy.run`` under MirroredStrategy, where a collective inside a
  jit-compiled function fails (``merge_call``); gradients flow through both compiled halves
  and the gather (its gradient is the collective's own).  Under one device (or TPUStrategy,
  which compiles the whole replica function) plain ``jit_compile=True`` on the step works too.
  """
  first = tf.function(model.first_pass, jit_compile=jit_compile, reduce_retracing=True,
                      autograph=False)
  second = tf.function(model.second_pass, jit_compile=jit_compile, reduce_retracing=True,
                       autograph=False)

  def forward(inputs, training=False):
    x, local = first(inputs, training=training)
    return second(inputs, x, local, memory_table(local, inputs), training=training)

  return forward
