"""Hugging Face RoBERTa checkpoints as a ReadTwice initialisation: reading the checkpoint
(without torch) and mapping its config, vocabulary and weights (the library under
``python -m model.roberta``)."""
