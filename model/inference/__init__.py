"""Inference: decoding answers from logits, and the libraries under ``model.predict`` and
``model.export``."""
