"""Placing facts in segments: which segment each triple's two facts go to
(:func:`place_triples`) and the document text grown sentence by sentence with exact token costs
until every fact lies wholly inside its intended window (:func:`lay_out`)."""

from __future__ import annotations

import collections
import random
from typing import Any, Dict, List, Optional, Tuple

from pipelines.datasets.hotpotqa import reader as hotpot_reader
from pipelines.text import segmenter as segmenter_lib
from synthetic.long_range_qa.documents import Fact, Params
from synthetic.long_range_qa.names import Filler


def place_triples(rng: random.Random, params: Params, distance: int,
                  attempts: int = 100_000) -> List[Tuple[int, int]]:
  """(book segment, birth segment) of each triple, the target's (index 0) ``distance`` apart
  and every other's a distance drawn from ``params.distances``, each in a random direction;
  no segment holds both a book and a birth fact, none more than ``max_facts_per_segment``;
  with ``sub_document_segments``, no triple has both facts in one sub-document."""
  S, M = params.segments, params.candidates
  for _ in range(attempts):
    pairs = []
    for k in range(M):
      d = distance if k == 0 else rng.choice(params.distances)
      b = rng.randrange(S - d)
      pairs.append((b, b + d) if rng.random() < 0.5 else (b + d, b))
    books, births = [b for b, _ in pairs], [r for _, r in pairs]
    if set(books) & set(births):
      continue
    sub = params.sub_document_segments
    if sub and any(b // sub == r // sub for b, r in pairs):
      continue  # a triple's two facts must be in different sub-documents
    if max(collections.Counter(books + births).values()) > params.max_facts_per_segment:
      continue
    return pairs
  raise ValueError(f"no layout of {M} triples in {params.segments} segments with distances "
                   f"{params.distances} after {attempts} attempts")


class _Layout:
  """The document's paragraphs as the reader renders them (``title\\n`` + sentences,
  paragraphs joined by a blank line), grown sentence by sentence, with exact token costs."""

  def __init__(self, tok, filler: Filler, rng: random.Random):
    self.tok, self.filler, self.rng = tok, filler, rng
    self.paragraphs: List[List[Any]] = []  # [title, [sentences]]
    self.titles = set()
    self.length = 0  # characters
    self.para_target = 0
    self._costs: Dict[str, int] = {}

  def snapshot(self):
    return ([[t, list(s)] for t, s in self.paragraphs], set(self.titles), self.length,
            self.para_target)

  def restore(self, snap) -> None:
    paragraphs, titles, self.length, self.para_target = snap
    self.paragraphs = [[t, list(s)] for t, s in paragraphs]
    self.titles = set(titles)

  def text(self) -> str:
    return hotpot_reader.PARAGRAPH_SEPARATOR.join(t + "\n" + "".join(s)
                                                  for t, s in self.paragraphs)

  def cost(self, piece: str) -> int:
    """Tokens of a piece appended to the text.  Pieces start with a space or a newline after
    a sentence's final period, where byte-level BPE's pre-tokenizer always splits, so costs
    add up (checked against the real windows after every segment)."""
    c = self._costs.get(piece)
    if c is None:
      c = self._costs[piece] = len(self.tok.encode(piece))
    return c

  def breaks(self) -> bool:
    """Whether the next sentence opens a new paragraph."""
    return not self.paragraphs or len(self.paragraphs[-1][1]) >= self.para_target

  def _new_title(self) -> str:
    while True:
      t = self.filler.title(self.rng)
      if t not in self.titles:
        self.titles.add(t)
        return t

  def piece(self, sentence: str, new_paragraph: bool, title: str = "") -> str:
    if new_paragraph:
      head = (hotpot_reader.PARAGRAPH_SEPARATOR if self.paragraphs else "") + title + "\n"
      return head + sentence
    return " " + sentence

  def sentence_cost(self, sentence: str, new_paragraph: bool, title: str = "") -> int:
    words = self.piece(sentence, new_paragraph, title).split(" ")
    # per word (with its leading space), the final period apart: all memoised
    total = 0
    for k, w in enumerate(words):
      if not w:
        continue
      lead = " " if k else ""
      if w.endswith("."):
        total += self.cost(lead + w[:-1]) + 1
      else:
        total += self.cost(lead + w)
    return total

  def append(self, sentence: str, new_paragraph: bool, title: str = "") -> Tuple[int, int]:
    """Appends; returns the sentence's char span in the text (without its leading space)."""
    piece = self.piece(sentence, new_paragraph, title)
    if new_paragraph:
      self.paragraphs.append([title, [sentence]])
      self.para_target = self.rng.randint(3, 7)
    else:
      self.paragraphs[-1][1].append(" " + sentence)
    begin = self.length + len(piece) - len(sentence)
    self.length += len(piece)
    return begin, self.length

  def add(self, sentence: str, room: Optional[int] = None) -> Optional[Tuple[int, int, int]]:
    """Appends ``sentence`` (opening a paragraph when due and it fits ``room`` tokens);
    returns (begin, end, cost), or None (nothing appended) when it does not fit ``room``."""
    if self.breaks():
      title = self._new_title()
      c = self.sentence_cost(sentence, True, title)
      if room is None or c <= room:
        b, e = self.append(sentence, True, title)
        return b, e, c
      self.titles.discard(title)
      if not self.paragraphs:  # the first sentence must open a paragraph
        return None
    c = self.sentence_cost(sentence, False)
    if room is not None and c > room:
      return None
    b, e = self.append(sentence, False)
    return b, e, c

  def add_filler(self, room: int, words: Optional[int] = None) -> int:
    """Appends one filler sentence of at most ``room`` tokens; returns its cost (0: none)."""
    rng = self.rng
    n = words or rng.randint(4, 16)
    ws = self.filler.words_(rng, n)
    while len(ws) >= 2:
      s = " ".join([ws[0].capitalize()] + ws[1:]) + "."
      got = self.add(s, room)
      if got is not None:
        return got[2]
      ws = ws[:-1]
    return 0


def _windows(tok, text: str, budget: int, overlap: int):
  enc = tok.encode(text)
  if not len(enc):
    return enc, []
  stats: collections.Counter = collections.Counter()
  return enc, segmenter_lib.context_windows(
      enc.word_start, budget, overlap, stats,
      segmenter_lib.character_starts(enc.begins, enc.ends))


def _exclusive_window(enc, windows, span: Tuple[int, int]) -> Optional[int]:
  """The window holding ``span`` entirely, if exactly one does (and no other touches it)."""
  tb, te = segmenter_lib.char_spans_to_tokens(enc, [span])[0].tolist()
  if tb < 0:
    return None
  inside = [k for k, (s, e) in enumerate(windows) if s <= tb and te < e]
  touching = [k for k, (s, e) in enumerate(windows) if s <= te and tb < e]
  return inside[0] if len(inside) == 1 and touching == inside else None


def lay_out(tok, filler: Filler, rng: random.Random, params: Params, budget: int,
             facts: List[Fact], attempts: int = 20) -> Optional[Tuple[_Layout, Dict[int, Tuple]]]:
  """Fills the segments one after the other; returns the layout and each fact's char span
  (None when a segment cannot be laid out in ``attempts`` tries)."""
  S, overlap = params.segments, params.overlap
  limit = budget - overlap - params.edge_margin  # facts end before this (window-relative)
  layout = _Layout(tok, filler, rng)
  spans: Dict[int, Tuple[int, int]] = {}
  by_segment = collections.defaultdict(list)
  for i, f in enumerate(facts):
    by_segment[f.segment].append(i)
  for k in range(S):
    snap = layout.snapshot()
    for _ in range(attempts):
      layout.restore(snap)
      if k == 0:
        start, n = 0, 0
      else:
        enc, ws = _windows(tok, layout.text(), budget, overlap)
        if len(ws) != k + 1:
          return None
        start, n = ws[k][0], len(enc)
      pos = n - start
      mine = list(by_segment[k])
      rng.shuffle(mine)
      plain = [layout.sentence_cost(facts[i].text, False) for i in mine]
      ok = True
      for j, i in enumerate(mine):
        rest = sum(plain[j + 1:])
        latest = limit - rest - plain[j] - 6  # 6: a paragraph title the fact may open
        if latest < pos:
          ok = False
          break
        target = rng.randint(pos, latest)
        while target - pos >= 5:
          c = layout.add_filler(target - pos, rng.randint(3, 16))
          if not c:
            break
          pos += c
        got = layout.add(facts[i].text, limit - rest - pos)
        if got is None:
          ok = False
          break
        spans[i] = got[:2]
        pos += got[2]
      if not ok:
        continue
      if k < S - 1:
        while pos <= budget:  # close the window: the text must run past its last token
          pos += layout.add_filler(10 ** 6)
      else:
        while budget - pos >= 5:
          c = layout.add_filler(budget - pos)
          if not c:
            break
          pos += c
      enc, ws = _windows(tok, layout.text(), budget, overlap)
      if len(ws) != (k + 2 if k < S - 1 else S):
        continue
      if all(_exclusive_window(enc, ws, spans[i]) == k for i in mine):
        break
    else:
      return None
  return layout, spans
