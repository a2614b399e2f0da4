"""Finds every occurrence of an answer string in a document text (char offsets)."""

from __future__ import annotations

import re
from typing import Iterable, List, Tuple

_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


def _pattern(answer: str) -> re.Pattern:
  parts = [re.escape(p) for p in answer.split()]
  # Whitespace inside the answer matches any whitespace run; the answer must not start or end
  # inside a word of the text.
  return re.compile(r"(?<!\w)" + r"\s+".join(parts) + r"(?!\w)", re.IGNORECASE)


def find_answer_spans(text: str, answers: Iterable[str]) -> Tuple[List[Tuple[int, int]], str]:
  """All case-insensitive, word-bounded occurrences of any answer in ``text``.

  Returns ``(spans, how)`` where ``how`` is 'exact', 'normalised' (found only after stripping a
  leading article and surrounding punctuation, as the official normalisation ignores them) or
  'not_found'.  Spans are sorted, de-duplicated ``(begin, end)`` char offsets, end exclusive.
  """
  answers = [a.strip() for a in answers if a and a.strip()]
  spans = {m.span() for a in answers for m in _pattern(a).finditer(text)}
  if spans:
    return sorted(spans), "exact"
  relaxed = set()
  for a in answers:
    b = _ARTICLE.sub("", a).strip(" .,;:!?\"'")
    if b and b != a:
      relaxed.update(m.span() for m in _pattern(b).finditer(text))
  if relaxed:
    return sorted(relaxed), "normalised"
  return [], "not_found"
