"""Zipf-distributed pseudo-prose and the Project Gutenberg layout, deterministic for a seed
(:mod:`pipelines.fake_data`).

* :class:`ZipfWords`: pseudo-words of syllables with a Zipfian frequency distribution;
* :class:`Prose`: sentences and paragraphs of them (capitalised sentences, commas, ``. ? !``
  and the odd name);
* :func:`wrap`, :func:`gutenberg`, :func:`book_body`: hard-wrapped paragraphs, a Gutenberg file
  around a body, chapters of paragraphs;
* :func:`scaled`: a document count times a scale, and the length factor when that floors it.
"""

from __future__ import annotations

import bisect
import random
from typing import List, Tuple

MIN_WORDS = 100  # the shortest generated document, however small a fake input's scale

SYLLABLES = ["ka", "lo", "mi", "ran", "tes", "vo", "bel", "dor", "an", "is", "qu", "zen", "por",
             "lum", "sa", "rit", "ne", "gal", "ost", "fer", "mar", "th", "ul", "ve"]


class ZipfWords:
  """Pseudo-words with a Zipfian frequency distribution (like running text), so that BPE sees
  a realistic mix of frequent (cached) and rare words; used for throughput benchmarks."""

  def __init__(self, rng: random.Random, vocab_size: int = 30000, exponent: float = 1.1):
    self.words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
                  for _ in range(vocab_size)]
    weights = [1.0 / (r + 1) ** exponent for r in range(vocab_size)]
    total = sum(weights)
    acc, self.cum = 0.0, []
    for w in weights:
      acc += w / total
      self.cum.append(acc)

  def sentence(self, rng: random.Random, n: int) -> str:
    idx = [bisect.bisect_left(self.cum, rng.random()) for _ in range(n)]
    words = [self.words[min(i, len(self.words) - 1)] for i in idx]
    return " " + " ".join(words).capitalize() + "."


class Prose:
  """Sentences and paragraphs of Zipf-distributed pseudo-words (capitalised sentences, commas,
  . ? ! and the odd name), deterministic for a seed."""

  def __init__(self, seed: int):
    self._zipf = ZipfWords(random.Random(seed + 1000))
    self.rng = random.Random(seed)

  def words(self, n: int) -> List[str]:
    return self.rng.choices(self._zipf.words, cum_weights=self._zipf.cum, k=n)

  def name(self) -> str:
    return " ".join(w.capitalize() for w in self.words(2))

  def paragraph(self, n: int) -> str:
    rng = self.rng
    ws = self.words(n)
    out, i = [], 0
    while i < len(ws):
      s = ws[i:i + rng.randint(6, 24)]
      i += len(s)
      if len(s) > 8 and rng.random() < 0.5:
        s[rng.randrange(2, len(s) - 2)] += ","
      if len(s) > 1 and rng.random() < 0.3:
        s[rng.randrange(1, len(s))] = self.name()
      out.append(" ".join(s).capitalize() + rng.choice(".....?!"))
    return " ".join(out)

  def paragraphs(self, words: int) -> List[str]:
    """Paragraphs of 40-160 words, ``words`` in all."""
    out = []
    while words > 0:
      n = min(words, self.rng.randint(40, 160))
      out.append(self.paragraph(n))
      words -= n
    return out


def wrap(text: str, width: int = 70) -> str:
  """Hard-wrapped lines, as in Gutenberg files."""
  lines, line, size = [], [], 0
  for w in text.split(" "):
    if line and size + len(w) > width:
      lines.append(" ".join(line))
      line, size = [], 0
    line.append(w)
    size += len(w) + 1
  if line:
    lines.append(" ".join(line))
  return "\n".join(lines)


def gutenberg(title: str, body: str, end: str = "") -> str:
  """A Project Gutenberg file around ``body``: header, start marker, credit, footer, licence."""
  upper = title.upper()
  return (f"The Project Gutenberg EBook of {title}, by A. Benchmark\r\n\r\nThis eBook is for "
          f"the use of anyone anywhere at no cost.\r\n\r\n*** START OF THIS PROJECT GUTENBERG "
          f"EBOOK {upper} ***\r\n\r\nProduced by The Benchmark Press\r\n\r\n"
          + body.replace("\n", "\r\n") + end
          + f"\r\n\r\nEnd of the Project Gutenberg EBook of {title}\r\n\r\n*** END OF THIS "
          f"PROJECT GUTENBERG EBOOK {upper} ***\r\n\r\nLicence text, some lines of it.\r\n")


def book_body(prose: Prose, words: int) -> str:
  chapters = []
  per_chapter = max(MIN_WORDS, words // max(1, words // 4000))
  k = 0
  while words > 0:
    k += 1
    n = min(words, per_chapter)
    chapters.append(f"CHAPTER {k}.\n\n" + "\n\n".join(wrap(p) for p in prose.paragraphs(n)))
    words -= n
  return "\n\n\n".join(chapters)


def scaled(n: int, scale: float) -> Tuple[int, float]:
  """(count, length factor): ``n * scale`` documents, at least one; when that floors the count,
  the documents are shortened by the factor instead, so the input stays ``scale`` times its
  size."""
  count = max(1, round(n * scale))
  return count, min(1.0, n * scale / count)
