"""Transformer encoder block and stack (pre- or post-LayerNorm) with a padding mask."""

from __future__ import annotations

import keras
import tensorflow as tf

from model.network.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="readtwice")
class TransformerBlock(keras.layers.Layer):
  """One encoder block: self-attention + feed-forward, each with residual and LayerNorm.

  Post-LN (BERT/RoBERTa): ``x = LN(x + Attn(x)); x = LN(x + FFN(x))``.
  Pre-LN: ``x = x + Attn(LN(x)); x = x + FFN(LN(x))``.

  Call args:
    x: float ``[B, L, H]``.
    attention_mask: int/bool ``[B, L]``, 1 for tokens that may be attended to (or None).
    training: dropout switch.

  Returns:
    float ``[B, L, H]``.
  """

  def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int,
               dropout: float = 0.1, pre_layer_norm: bool = False,
               layer_norm_epsilon: float = 1e-12, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.dropout_rate = dropout
    self.pre_layer_norm = pre_layer_norm
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range
    # One initializer instance per weight (see model.network.layers.initializers);
    # MultiHeadAttention itself clones its kernel initializer for each of its query/key/value/output
    # projections.
    self.attention = keras.layers.MultiHeadAttention(
        num_heads=num_heads, key_dim=hidden_size // num_heads, dropout=dropout,
        kernel_initializer=truncated_normal(initializer_range), name="attention")
    self.attention_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon,
                                                          name="attention_norm")
    self.intermediate = keras.layers.Dense(
        intermediate_size, activation="gelu",
        kernel_initializer=truncated_normal(initializer_range), name="intermediate")
    self.output_dense = keras.layers.Dense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="output")
    self.output_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon,
                                                       name="output_norm")
    self.dropout = keras.layers.Dropout(dropout)

  def build(self, input_shape):
    self.attention.build(input_shape, input_shape)
    self.attention_norm.build(input_shape)
    self.intermediate.build(input_shape)
    self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_size,))
    self.output_norm.build(input_shape)
    super().build(input_shape)

  def call(self, x, attention_mask=None, training=False):
    mask = None
    if attention_mask is not None:
      m = tf.cast(attention_mask, tf.bool)  # [B, L]
      mask = tf.logical_and(m[:, None, :], tf.ones_like(m)[:, :, None])  # [B, L(q), L(k)]
    y = self.attention_norm(x) if self.pre_layer_norm else x
    y = self.attention(y, y, attention_mask=mask, training=training)
    x = x + self.dropout(y, training=training)
    if not self.pre_layer_norm:
      x = self.attention_norm(x)
    y = self.output_norm(x) if self.pre_layer_norm else x
    y = self.output_dense(self.intermediate(y))
    x = x + self.dropout(y, training=training)
    if not self.pre_layer_norm:
      x = self.output_norm(x)
    return x

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  intermediate_size=self.intermediate_size, dropout=self.dropout_rate,
                  pre_layer_norm=self.pre_layer_norm,
                  layer_norm_epsilon=self.layer_norm_epsilon,
                  initializer_range=self.initializer_range)
    return config


@keras.saving.register_keras_serializable(package="readtwice")
class TransformerStack(keras.layers.Layer):
  """``num_layers`` TransformerBlocks (plus a final LayerNorm when pre-LN).

  Call args:
    x: float ``[B, L, H]``; attention_mask: ``[B, L]`` or None.

  Returns:
    float ``[B, L, H]``.
  """

  def __init__(self, num_layers: int, hidden_size: int, num_heads: int, intermediate_size: int,
               dropout: float = 0.1, pre_layer_norm: bool = False,
               layer_norm_epsilon: float = 1e-12, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.num_layers = num_layers
    self._block_kwargs = dict(hidden_size=hidden_size, num_heads=num_heads,
                              intermediate_size=intermediate_size, dropout=dropout,
                              pre_layer_norm=pre_layer_norm,
                              layer_norm_epsilon=layer_norm_epsilon,
                              initializer_range=initializer_range)
    self.blocks = [TransformerBlock(name=f"layer_{i}", **self._block_kwargs)
                   for i in range(num_layers)]
    # Also one attribute per block: tf.train.Checkpoint does not follow a Python list of
    # layers under Keras 3, so without these every checkpoint silently lacked the stacks.
    for i, block in enumerate(self.blocks):
      setattr(self, f"layer_{i}", block)
    self.final_norm = (keras.layers.LayerNormalization(epsilon=layer_norm_epsilon,
                                                       name="final_norm")
                       if pre_layer_norm else None)

  def build(self, input_shape):
    for b in self.blocks:
      b.build(input_shape)
    if self.final_norm is not None:
      self.final_norm.build(input_shape)
    super().build(input_shape)

  def call(self, x, attention_mask=None, training=False):
    for block in self.blocks:
      x = block(x, attention_mask=attention_mask, training=training)
    if self.final_norm is not None:
      x = self.final_norm(x)
    return x

  def get_config(self):
    config = super().get_config()
    config.update(num_layers=self.num_layers, **self._block_kwargs)
    return config
