"""The books dataset's fake input (its spec's ``fake_input``): Gutenberg-style plain-text books of
``BOOK_KB`` KB (header, credit, chapters of hard-wrapped Zipf paragraphs, licence footer), one
per file, ``BOOKS`` of them at scale 1.0 (:mod:`pipelines.fake_data.prose`)."""

from __future__ import annotations

import os
from typing import List, Tuple

from pipelines.datasets import FakeInput
from pipelines.fake_data.prose import MIN_WORDS, Prose, book_body, gutenberg, scaled

BOOKS = 32  # at scale 1.0
BOOK_KB = (300, 700)


def write_books(root: str, books: int, factor: float = 1.0) -> List[Tuple[str, bytes]]:
  """``books`` books of ``BOOK_KB`` KB (times ``factor``), ``root/<n>.txt``; returns (path,
  bytes) of each, in order."""
  os.makedirs(root)
  prose = Prose(seed=3)
  out = []
  for i in range(books):
    kb = prose.rng.randint(*BOOK_KB) * factor
    words = max(MIN_WORDS, int(kb * 1000 / 7.5))  # ~7.5 bytes per word, spaces and wraps
    data = gutenberg(f"The Tale of {prose.name()}", book_body(prose, words)).encode("utf-8")
    path = os.path.join(root, f"{10000 + i}.txt")
    with open(path, "wb") as f:
      f.write(data)
    out.append((path, data))
  return out


def write(root: str, scale: float) -> FakeInput:
  """The dataset's fake input under ``root`` (:class:`pipelines.datasets.FakeInput`)."""
  write_books(root, *scaled(BOOKS, scale))
  return FakeInput(os.path.join(root, "*.txt"))
