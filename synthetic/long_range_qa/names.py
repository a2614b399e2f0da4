"""Names and filler of the long-range QA documents: unique pseudo-word names per split
(disjoint between splits by a hash of the name) and neutral Zipf-distributed filler words that
can never be a name."""

from __future__ import annotations

import bisect
import random
import zlib
from typing import List, Sequence, Tuple

# Name syllables: onset + vowel + optional coda, from letters that filler words never use alone
# (every filler word holds one of _MARKERS, which no name holds).
_ONSETS = "b d f g k l m n p r s t v z".split()
_VOWELS = "a e i o u".split()
_CODAS = ["", "", "n", "r", "l", "s"]
_NAME_SYLLABLES = sorted({o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS})
_MARKERS = frozenset("chjwxyq")
# City forms: a bare name, or a name with a common word (so that F1 gives partial credit).
_CITY_FORMS = ["{}"] * 6 + ["Port {}", "{} Falls", "New {}", "{} Harbour", "Upper {}"]
_BOOK_FORMS = ["The {} {}"] * 3 + ["{} of {}"] * 2
_FUNCTION_WORDS = ("the of and a to is that for it with as on at from this which or an had "
                   "were its their these one also most").split()
_RESERVED = frozenset(w.lower() for w in _FUNCTION_WORDS + [
    "port", "falls", "new", "harbour", "upper", "the", "of", "was", "written", "by", "born",
    "in", "where", "author", "related", "entries", "novel", "writer", "town", "and"])
_SPLIT_SLOTS = {"train": 0, "dev": 1, "test": 2}
_NUM_SLOTS = 4


def split_slot(split: str) -> int:
  """The quarter of the name space a split draws from: a name core ``w`` belongs to the split
  whose slot is ``crc32(w) % 4`` (train 0, dev 1, test 2, any other split 3), so different
  splits never share a name whatever their seeds."""
  return _SPLIT_SLOTS.get(split, 3)


def name_slot(core: str) -> int:
  return zlib.crc32(core.lower().encode("utf-8")) % _NUM_SLOTS


class NamePool:
  """Unique capitalised pseudo-word name cores of one split (each handed out once)."""

  def __init__(self, split: str):
    self.slot = split_slot(split)
    self.used = set(_RESERVED)

  def core(self, rng: random.Random, syllables: Sequence[int] = (2, 2, 3)) -> str:
    while True:
      word = "".join(rng.choice(_NAME_SYLLABLES) for _ in range(rng.choice(syllables)))
      if word not in self.used and name_slot(word) == self.slot:
        self.used.add(word)
        return word.capitalize()

  def triple(self, rng: random.Random) -> Tuple[str, str, str]:
    book = rng.choice(_BOOK_FORMS).format(self.core(rng), self.core(rng))
    author = f"{self.core(rng, (2, 2, 3))} {self.core(rng, (2, 3, 3))}"
    city = rng.choice(_CITY_FORMS).format(self.core(rng))
    return book, author, city


def name_cores(name: str) -> List[str]:
  """The generated words of a name (without "The", "of", "Port", ...)."""
  return [w for w in name.split() if w.lower() not in _RESERVED]


# --- filler ----------------------------------------------------------------------------------

class Filler:
  """Neutral sentences: Zipf-distributed pseudo-words, each holding a letter of ``chjwxyq``
  (never in a name), mixed with English function words.  The vocabulary is fixed (the same for
  every split and seed)."""

  def __init__(self, vocab_size: int = 3000, exponent: float = 1.1, seed: int = 1601):
    g = random.Random(seed)
    marked = [o + v + c for o in ["c", "ch", "j", "w", "wh", "y", "x", "qu", "h", "sh"]
              for v in _VOWELS for c in ["", "n", "x", "ck", "w", "th"]]
    plain = _NAME_SYLLABLES
    words = set()
    while len(words) < vocab_size:
      parts = [g.choice(marked)] + [g.choice(plain) for _ in range(g.choice((0, 0, 1, 1, 2)))]
      g.shuffle(parts)
      w = "".join(parts)
      if w not in _RESERVED and _MARKERS & set(w):
        words.add(w)
    self.words = sorted(words)
    g.shuffle(self.words)
    weights = [1.0 / (r + 1) ** exponent for r in range(vocab_size)]
    total, acc = sum(weights), 0.0
    self.cum = []
    for w in weights:
      acc += w / total
      self.cum.append(acc)

  def word(self, rng: random.Random) -> str:
    if rng.random() < 0.3:
      return rng.choice(_FUNCTION_WORDS)
    i = bisect.bisect_left(self.cum, rng.random())
    return self.words[min(i, len(self.words) - 1)]

  def words_(self, rng: random.Random, n: int) -> List[str]:
    out = [self.word(rng) for _ in range(n)]
    out[0] = self.words[min(bisect.bisect_left(self.cum, rng.random()), len(self.words) - 1)]
    return out

  def title(self, rng: random.Random) -> str:
    return " ".join(w.capitalize() for w in self.words_(rng, rng.choice((1, 2, 2))))
