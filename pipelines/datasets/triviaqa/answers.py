"""TriviaQA answer labelling: every occurrence of every alias after the official normalisation.

:func:`normalize_answer` is the official TriviaQA answer normalisation (``evaluation/
triviaqa_evaluation.py``; the same as ``model.evaluation.triviaqa.normalize_answer``, which
pipelines must not import): underscores to spaces, lower-case, every punctuation character
(``string.punctuation`` plus U+2018, U+2019, U+00B4 and the backtick) to a space, the
word-bounded articles a / an / the to a space, whitespace runs collapsed.

:func:`normalize_with_offsets` normalises a document text the same way and keeps, for every
character of the result, the original character it comes from.  :func:`find_alias_spans` looks
for each normalised alias in the normalised text, at word boundaries (an edge is blocked only by
a word character of a spaced script, or a combining mark, next to it; as in
:mod:`pipelines.text.answers`, an alias edge in a script written without spaces, e.g. CJK, is
never blocked), and maps each occurrence back to an original char span that starts and ends on
characters that survive normalisation (so never on a space or punctuation: ``"U.S."`` in the
text is labelled ``U.S``, ``"The Who"`` is labelled ``Who`` for the alias ``The Who``).  An
exact prediction of such a span normalises to the alias, i.e. scores as an exact match.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple

from pipelines.text.answers import NO_SPACE_SCRIPTS
from schemas import text_metrics

PUNCTUATION = text_metrics.TRIVIAQA_PUNCTUATION
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT_TO_SPACE = str.maketrans({c: " " for c in PUNCTUATION})
_TOKEN = re.compile(r"\S+")  # str.split()'s whitespace is exactly re's \s (tested)
_NO_SPACE = re.compile(f"[{NO_SPACE_SCRIPTS}]")
_SPACED_WORD = re.compile(f"[^\\W{NO_SPACE_SCRIPTS}]")


normalize_answer = text_metrics.triviaqa_normalize_answer


class Normalized(NamedTuple):
  """A normalised text and where each of its characters comes from.

  ``text``: ``normalize_answer(original)``; its tokens are separated by one space.
  ``token_starts``: where each token starts in ``text``; ``token_origins``: where the same token
  starts in the lower-cased text; ``lower_origins``: the original index of each character of
  the lower-cased text, or None when lower-casing kept every length (the usual case: then the
  lower-cased text's indices are the original's).
  """
  text: str
  token_starts: List[int]
  token_origins: List[int]
  lower_origins: Optional[List[int]]

  def origin(self, i: int) -> int:
    """The original index of ``text[i]`` (not a separating space)."""
    t = bisect.bisect_right(self.token_starts, i) - 1
    j = self.token_origins[t] + i - self.token_starts[t]
    return j if self.lower_origins is None else self.lower_origins[j]

  def span(self, begin: int, end: int) -> Tuple[int, int]:
    """The original char span of ``text[begin:end]`` (non-empty, no outer spaces)."""
    return self.origin(begin), self.origin(end - 1) + 1


def _lower(text: str) -> Tuple[str, Optional[List[int]]]:
  """``text`` with ``_`` as space, lower-cased, and its origins (None: one char per char).

  Lower-casing the whole string (not char by char) keeps Python's context rule for the final
  sigma, as the official code; a char lower-cases to the same number of chars either way
  (``İ`` -> ``i̇``: two)."""
  lowered = text.replace("_", " ").lower()
  if len(lowered) == len(text):
    return lowered, None
  origins = [i for i, ch in enumerate(text) for _ in range(len(ch.lower()))]
  if len(origins) != len(lowered):  # not expected: lower-case char by char instead
    lowered = "".join(ch.lower() for ch in text.replace("_", " "))
    origins = [i for i, ch in enumerate(text) for _ in range(len(ch.lower()))]
  return lowered, origins


def normalize_with_offsets(text: str) -> Normalized:
  """:func:`normalize_answer` of ``text`` with the origin of each character.

  The articles are found over the whole text as the official regex does; as they are words,
  each lies inside one whitespace token, which it splits (``\\b`` at a token's edge behaves
  alike in the token and in the text, whitespace being no word character).
  """
  lowered, lower_origins = _lower(text)
  spaced = lowered.translate(_PUNCT_TO_SPACE)
  articles = [m.span() for m in _ARTICLES.finditer(spaced)]
  pieces: List[str] = []
  starts: List[int] = []
  origins: List[int] = []
  pos = 0
  a = 0
  for m in _TOKEN.finditer(spaced):
    b, e = m.span()
    while a < len(articles) and articles[a][1] <= b:
      a += 1
    parts = []
    while a < len(articles) and articles[a][0] < e:  # articles inside this token
      ab, ae = articles[a]
      parts.append((b, ab))
      b = ae
      a += 1
    parts.append((b, e))
    for pb, pe in parts:
      if pb >= pe:
        continue
      if pieces:
        pos += 1  # the separating space
      starts.append(pos)
      origins.append(pb)
      pieces.append(spaced[pb:pe])
      pos += pe - pb
  return Normalized(" ".join(pieces), starts, origins, lower_origins)


def _blocks(ch: str) -> bool:
  """Whether ``ch`` next to a match means the match is inside a word."""
  return bool(_SPACED_WORD.match(ch)) or unicodedata.category(ch).startswith("M")


def _occurrences(alias: str, norm: str) -> Iterable[Tuple[int, int]]:
  """Word-bounded occurrences of the normalised ``alias`` in the normalised text ``norm``."""
  check_head = not _NO_SPACE.match(alias[0])
  check_tail = not _NO_SPACE.match(alias[-1])
  n, k = len(norm), len(alias)
  p = norm.find(alias)
  while p >= 0:
    e = p + k
    if not ((check_head and p > 0 and _blocks(norm[p - 1]))
            or (check_tail and e < n and _blocks(norm[e]))):
      yield p, e
    p = norm.find(alias, p + 1)


def _loose(s: str) -> str:
  return " ".join(s.split()).lower()


class Found(NamedTuple):
  spans: List[Tuple[int, int]]  # sorted, distinct original char spans, end exclusive
  how: str  # "exact" | "normalised" | "not_found"


def find_alias_spans(text: str, aliases: Sequence[str],
                     normalized: Optional[Normalized] = None) -> Found:
  """Every word-bounded occurrence of every alias in ``text`` after normalisation.

  ``how``: ``exact`` if some occurrence is an alias verbatim (case and whitespace runs aside),
  ``normalised`` if all needed the normalisation (punctuation, articles, underscores), else
  ``not_found``.  Aliases that normalise to nothing (e.g. "The") find nothing.
  """
  targets = [a for a in dict.fromkeys(normalize_answer(a) for a in aliases) if a]
  if not targets or not text:
    return Found([], "not_found")
  norm = normalized if normalized is not None else normalize_with_offsets(text)
  spans = sorted({norm.span(b, e) for a in targets for b, e in _occurrences(a, norm.text)})
  if not spans:
    return Found([], "not_found")
  verbatim = {_loose(a) for a in aliases}
  exact = any(_loose(text[b:e]) in verbatim for b, e in spans)
  return Found(spans, "exact" if exact else "normalised")
