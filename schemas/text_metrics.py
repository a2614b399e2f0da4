"""Text metrics both sides compute, written once: the pipelines' ROUGE-L oracle spans
(:mod:`pipelines.text.oracle`) and the official NarrativeQA scorer
(:mod:`model.evaluation.narrativeqa`) use the same longest common subsequence; the TriviaQA
answer labeller (:mod:`pipelines.datasets.triviaqa.answers`) and the official TriviaQA scorer
(:mod:`model.evaluation.triviaqa`) the same answer normalisation."""

from __future__ import annotations

import re
import string
from typing import Any, Sequence


def lcs_length(a: Sequence[Any], b: Sequence[Any]) -> int:
  """Length of the longest common subsequence of two token sequences (O(|a| |b|) DP, O(min)
  memory)."""
  if len(a) < len(b):
    a, b = b, a
  if not b:
    return 0
  previous = [0] * (len(b) + 1)
  for token_a in a:
    current = [0]
    left = 0  # current[j], the value just appended
    for j, token_b in enumerate(b):
      if token_a == token_b:
        left = previous[j] + 1
      else:
        up = previous[j + 1]
        if up > left:
          left = up
      current.append(left)
    previous = current
  return previous[-1]


# The official TriviaQA answer normalisation (the pipelines find answer spans with it, the
# official scorer compares with it): string.punctuation plus left/right single quotes, acute
# accent and backtick become spaces.
TRIVIAQA_PUNCTUATION = frozenset(string.punctuation + "\u2018\u2019\u00b4`")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT_TO_SPACE = str.maketrans({c: " " for c in TRIVIAQA_PUNCTUATION})


def triviaqa_normalize_answer(text: str) -> str:
  """The official TriviaQA normalisation, in its order: underscores to spaces, lower-case,
  punctuation to spaces, the articles a/an/the to spaces, whitespace collapsed."""
  text = text.replace("_", " ").lower()
  text = text.translate(_PUNCT_TO_SPACE)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())
