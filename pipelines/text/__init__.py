"""Tokenizer, segmenter and span mapping (pure Python + numpy, no Beam)."""
