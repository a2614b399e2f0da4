"""Keras layers of ReadTwice, one concept per module."""

from model.network.layers.memory import ExtractMemories
from model.network.layers.memory_attention import MemoryAttention, gather_memories
from model.network.layers.transformer import TransformerBlock, TransformerStack

__all__ = ["ExtractMemories", "MemoryAttention", "gather_memories", "TransformerBlock",
           "TransformerStack"]
