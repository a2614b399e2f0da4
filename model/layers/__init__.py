"""Keras layers of ReadTwice, one concept per module."""

from model.layers.memory import ExtractMemories
from model.layers.memory_attention import MemoryAttention, gather_memories
from model.layers.transformer import TransformerBlock, TransformerStack

__all__ = ["ExtractMemories", "MemoryAttention", "gather_memories", "TransformerBlock",
           "TransformerStack"]
