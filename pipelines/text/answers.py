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
from typing import Iterable, List, Tuple

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
# A word character of a spaced script: \w but not in NO_SPACE_SCRIPTS.
_SPACED_WORD = f"[^\\W{NO_SPACE_SCRIPTS}]"


def _pattern(answer: str) -> re.Pattern:
  parts = [re.escape(p) for p in answer.split()]
  # Whitespace inside the answer matches any whitespace run; an edge of the answer must not
  # touch a word character of a spaced script in the text, unless the answer's edge character
  # itself is from a script without spaces.
  head = "" if _NO_SPACE.match(answer[0]) else f"(?<!{_SPACED_WORD})"
  tail = "" if _NO_SPACE.match(answer[-1]) else f"(?!{_SPACED_WORD})"
  return re.compile(head + r"\s+".join(parts) + tail, re.IGNORECASE)


def find_answer_spans(text: str, answers: Iterable[str]) -> Tuple[List[Tuple[int, int]], str]:
  """All case-insensitive, word-bounded occurrences of any answer in ``text``.

  Returns ``(spans, how)`` where ``how`` is 'exact', 'normalised' (found only after stripping a
  leading article and surrounding punctuation, as the official normalisation ignores them) or
  'not_found'.  Spans are sorted, de-duplicated ``(begin, end)`` char offsets, end exclusive.
  Word boundaries are checked only against spaced scripts (see the module docstring).
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
