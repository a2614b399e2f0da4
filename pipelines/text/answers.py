"""Finds every occurrence of an answer string in a document text (char offsets).

An occurrence must not start or end inside a word of the text.  Scripts written without spaces
between words (CJK ideographs, kana, Thai, Lao, Khmer, Myanmar, Tibetan, Yi, ...) have no such
boundaries, so the rule is decided per edge of the answer: the edge is blocked only when the
text character next to it is a word character (``\\w``) of a *spaced* script and the answer's
own edge character is not from a script without spaces.  Hence ``富士山`` is found inside
``日本の最高峰は富士山です`` and ``Tower`` inside ``東京Tower``, while ``art`` is still not found
inside ``party`` and ``U.S.`` not inside ``U.S.Army``.  Hangul is written with spaces and is
treated like Latin.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, List, Tuple

_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)

# Code point ranges of scripts written without spaces between words (regex class body).
NO_SPACE_SCRIPTS = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u0f00-\u0fff"  # Tibetan
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff\u19e0-\u19ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u312f"  # CJK symbols and punctuation (々 〆 〇 ...), hiragana, katakana, bopomofo
    "\u31a0-\u31ff"  # bopomofo extended, CJK strokes, katakana phonetic extensions
    "\u3400-\u4dbf\u4e00-\u9fff"  # CJK unified ideographs (+ extension A)
    "\ua000-\ua4cf"  # Yi
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # halfwidth katakana
    "\U0001b000-\U0001b16f"  # kana supplement / extended
    "\U00020000-\U0003134f"  # CJK ideographs, supplementary planes
)
_NO_SPACE = re.compile(f"[{NO_SPACE_SCRIPTS}]")
# A word character of a spaced script: \w but not in NO_SPACE_SCRIPTS.  Compiled once: the
# class is large, and compiling it into every answer's pattern cost ~2 ms per answer.
_SPACED_WORD = re.compile(f"[^\\W{NO_SPACE_SCRIPTS}]")


def _core(answer: str) -> re.Pattern:
  """The answer with each whitespace run matching any whitespace run (re's cache reuses it)."""
  return re.compile(r"\s+".join(re.escape(p) for p in answer.split()), re.IGNORECASE)


def _occurrences(answer: str, text: str) -> Iterator[Tuple[int, int]]:
  """Spans of ``answer`` in ``text`` whose edges do not touch a word character of a spaced
  script, unless the answer's own edge character is from a script without spaces.

  The same spans as ``finditer`` with a look-behind/look-ahead for those edges: a start has
  at most one end (the answer's parts are literals between whitespace runs), a match whose
  edge fails is skipped by one character, an accepted one by its length.
  """
  core = _core(answer)
  check_head = not _NO_SPACE.match(answer[0])
  check_tail = not _NO_SPACE.match(answer[-1])
  pos, n = 0, len(text)
  while True:
    m = core.search(text, pos)
    if m is None:
      return
    b, e = m.span()
    if ((check_head and b > 0 and _SPACED_WORD.match(text, b - 1))
        or (check_tail and e < n and _SPACED_WORD.match(text, e))):
      pos = b + 1
      continue
    yield b, e
    pos = e if e > b else b + 1


def find_answer_spans(text: str, answers: Iterable[str]) -> Tuple[List[Tuple[int, int]], str]:
  """All case-insensitive, word-bounded occurrences of any answer in ``text``.

  Returns ``(spans, how)`` where ``how`` is 'exact', 'normalised' (found only after stripping a
  leading article and surrounding punctuation, as the official normalisation ignores them) or
  'not_found'.  Spans are sorted, de-duplicated ``(begin, end)`` char offsets, end exclusive.
  Word boundaries are checked only against spaced scripts (see the module docstring).
  """
  answers = [a.strip() for a in answers if a and a.strip()]
  spans = {span for a in answers for span in _occurrences(a, text)}
  if spans:
    return sorted(spans), "exact"
  relaxed = set()
  for a in answers:
    b = _ARTICLE.sub("", a).strip(" .,;:!?\"'")
    if b and b != a:
      relaxed.update(_occurrences(b, text))
  if relaxed:
    return sorted(relaxed), "normalised"
  return [], "not_found"
