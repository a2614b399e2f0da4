"""Controlled documents for the memory ladder (``benchmarks/experiments/memory_ladder.py``):
token-level synthetic packs with entity mentions, made with NumPy (no pipeline, no TensorFlow).

Every document has two segments of ``seq_length`` tokens, ``[CLS]`` first, an optional
question (``[Q] book [SEP]``) prefixed to both, then context made of *units* (mentions and
facts) and filler words in a random order.  Entity names are drawn afresh for every document
from a pool of name tokens, so nothing can be memorised across documents; the answer is one
of ``candidates`` (4) places of the same kind, so chance is ``1 / candidates``.

Rungs (``RUNGS``):

* ``R0`` lookup: segment A mentions ``candidates`` entities as ``[det, name]``, one of them
  with ``det = [MARK]`` (the marker inside the mention's memory span, the others ``[the]``);
  segment B mentions the same entities by name alone; the answer is B's mention of the marked
  entity.  Only memory can solve it (B alone has no marker).
* ``R1`` lookup-then-read: as R0, but B's mentions are ``[the, name]``, each followed by a
  random word (from a small pool of its own), and the answer is the word after the marked
  entity's mention.
* ``R2`` local control: the bridge ``book -> author -> city``.  Facts ``[book, by, author]``
  and ``[author, from, city]`` for ``candidates`` books, authors and cities, all in ONE
  segment (the other one holds the question and fillers); the question names a book, the
  answer is the city of its author.  Every model can see everything it needs.
* ``R3`` bridge across segments: the same, with the book facts in one segment and the city
  facts in the other (the answer's segment).  Without memory the answer's segment says
  nothing about which author wrote the asked book: chance.

Which segment comes first is random (both relative distances are used).  Every name token in
the context is an entity mention (single token, or ``[det, name]`` in R0/R1) with an entity id
unique within the pack.  ``reader`` marks the token whose memory read carries the answer
(R0/R1: the name token of B's mention of the marked entity; R2/R3: the author token of the
asked author's city fact) and ``reader_entity`` its entity: the memory it should read is the
OTHER mention of that entity (R0/R1: A's mention of the marked entity; R2/R3: the asked
author's mention in the book fact).

Pre-training corpus (``make_pretrain_packs``): documents of the same world and style -- the
same token classes, two segments of ``seq_length`` tokens, ``[CLS]`` or the question header
``[Q] book [SEP]``, facts ``[book, by, author]`` and ``[author, from, city]`` among fillers --
without questions to answer.  A document holds 2 or 3 chains ``book -> author -> city``; each
fact is stated once, and some (all, for 2 chains) a second time, in a random segment, so a
masked mention (masked-LM) can be recovered from another statement of its fact, by matching
the fact's other entity: in the same segment or in the other one.  Facts (token pairs) of
the rungs' dev documents can be excluded (``exclude``), so that nothing a dev question asks
was seen in pre-training.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Tuple

import numpy as np

PAD, CLS, SEP, THE, MARK, BY, FROM, QUESTION = 0, 1, 2, 3, 4, 5, 6, 7
MASK = 8  # the masked-LM mask token of the pre-training corpus (never in a rung's documents)
WORD_FIRST, WORDS = 10, 8  # R1's words after a mention 10..17
FILLER_FIRST, FILLERS = WORD_FIRST + WORDS, 24  # filler words 18..41
NAME_FIRST = FILLER_FIRST + FILLERS  # entity names 42..vocab_size-1
VOCAB_SIZE = 256
# Books, authors and cities come from three disjoint name pools (kinds of names, as in text);
# which name plays which part is drawn afresh for every document.
NAME_POOLS = tuple(np.array_split(np.arange(NAME_FIRST, VOCAB_SIZE), 3))
# TOKEN_KIND_* of schemas.records (copied: this module stays free of the project's imports).
KIND_PAD, KIND_SPECIAL, KIND_QUESTION, KIND_CONTEXT = 0, 1, 2, 3
RUNGS = ("R0", "R1", "R2", "R3")
DESCRIPTIONS = {
    "R0": "lookup (one hop, memory only)",
    "R1": "lookup, then read the next token",
    "R2": "bridge, both facts in one segment (control)",
    "R3": "bridge, facts in different segments",
}


@dataclasses.dataclass(frozen=True)
class Geometry:
  seq_length: int = 32
  docs_per_pack: int = 8
  candidates: int = 4

  @property
  def segments_per_pack(self) -> int:
    return 2 * self.docs_per_pack

  @property
  def mentions_per_doc(self) -> int:
    return 4 * self.candidates  # R2/R3: books, authors twice, cities; R0/R1: 2 per entity

  @property
  def max_mentions(self) -> int:
    return self.docs_per_pack * self.mentions_per_doc


@dataclasses.dataclass
class _Segment:
  tokens: List[int]
  kinds: List[int]
  mentions: List[Tuple[int, int, int]]  # (begin, end, entity id), inclusive
  answer: Tuple[int, int] = None  # (begin, end)
  reader: int = -1  # token position
  reader_entity: int = 0


def _layout(rng, header: List[int], header_kinds: List[int], units: List[List[Tuple]],
            seq_length: int) -> _Segment:
  """Places ``units`` (lists of ``(token, entity_id or 0, tag)``) in a random order among
  filler words after ``header``; a unit's tokens with an entity id form one mention (their
  first to last such token)."""
  room = seq_length - len(header) - sum(len(u) for u in units)
  if room < 0:
    raise ValueError(f"segment of {seq_length} tokens cannot hold {len(units)} units")
  items = [list(u) for u in units] + [[(FILLER_FIRST + int(rng.integers(FILLERS)), 0, "")]
                                      for _ in range(room)]
  order = rng.permutation(len(items))
  seg = _Segment(list(header), list(header_kinds), [])
  for i in order:
    start = len(seg.tokens)
    for token, entity, tag in items[i]:
      pos = len(seg.tokens)
      seg.tokens.append(token)
      seg.kinds.append(KIND_CONTEXT)
      if tag in ("answer", "answer_reader"):
        seg.answer = (pos, pos)
      if tag in ("reader", "answer_reader"):  # R0: the answer mention itself reads
        seg.reader = pos
    for j, (_, e, _) in enumerate(items[i]):  # mentions: a name, or [det, name]
      if e:
        begin = start + j - 1 if j > 0 and items[i][j - 1][2] == "det" else start + j
        seg.mentions.append((begin, start + j, e))
  return seg


def _lookup_doc(rng, rung: str, g: Geometry, first_id: int):
  k = g.candidates
  names = rng.choice(np.arange(NAME_FIRST, VOCAB_SIZE), size=k, replace=False)
  ids = [first_id + i for i in range(k)]
  marked = int(rng.integers(k))
  a_units = [[(MARK if i == marked else THE, 0, "det"), (int(names[i]), ids[i], "")]
             for i in range(k)]
  a = _layout(rng, [CLS], [KIND_SPECIAL], a_units, g.seq_length)
  b_units = []
  for i in range(k):
    if rung == "R0":
      b_units.append([(int(names[i]), ids[i], "answer_reader" if i == marked else "")])
    else:
      word = WORD_FIRST + int(rng.integers(WORDS))
      b_units.append([(THE, 0, "det"), (int(names[i]), ids[i], "reader" if i == marked else ""),
                      (word, 0, "answer" if i == marked else "")])
  b = _layout(rng, [CLS], [KIND_SPECIAL], b_units, g.seq_length)
  b.reader_entity = ids[marked]
  return a, b


def _bridge_doc(rng, rung: str, g: Geometry, first_id: int):
  k = g.candidates
  books, authors, cities = (rng.choice(pool, size=k, replace=False) for pool in NAME_POOLS)
  book_ids = [first_id + i for i in range(k)]
  author_ids = [first_id + k + i for i in range(k)]
  city_ids = [first_id + 2 * k + i for i in range(k)]
  asked = int(rng.integers(k))
  header = [CLS, QUESTION, int(books[asked]), SEP]
  header_kinds = [KIND_SPECIAL, KIND_QUESTION, KIND_QUESTION, KIND_SPECIAL]
  book_facts = [[(int(books[i]), book_ids[i], ""), (BY, 0, ""), (int(authors[i]), author_ids[i], "")]
                for i in range(k)]
  city_facts = [[(int(authors[i]), author_ids[i], "reader" if i == asked else ""), (FROM, 0, ""),
                 (int(cities[i]), city_ids[i], "answer" if i == asked else "")]
                for i in range(k)]
  if rung == "R2":
    facts = _layout(rng, header, header_kinds, book_facts + city_facts, g.seq_length)
    other = _layout(rng, header, header_kinds, [], g.seq_length)
    facts.reader_entity = author_ids[asked]
    return other, facts
  books_seg = _layout(rng, header, header_kinds, book_facts, g.seq_length)
  answer_seg = _layout(rng, header, header_kinds, city_facts, g.seq_length)
  answer_seg.reader_entity = author_ids[asked]
  return books_seg, answer_seg



def _empty_packs(p: int, g: Geometry, extra: Tuple[str, ...] = ()) -> Dict[str, np.ndarray]:
  """Zeroed parsed-pack features for ``p`` packs (``extra``: more ``[P, N, L]`` features)."""
  n, l, k = g.segments_per_pack, g.seq_length, g.max_mentions
  f = {name: np.zeros((p, n, l), np.int32) for name in (
      "token_ids", "input_mask", "token_kind", "answer_begin_labels", "answer_end_labels")
       + extra}
  f.update({name: np.zeros((p, n), np.int32) for name in (
      "segment_mask", "document_index", "segment_index", "answer_type")})
  f["supporting"] = np.full((p, n), -1, np.int32)
  f.update({f"mentions_{name}": np.zeros((p, k), np.int32) for name in (
      "segment", "begin", "end", "entity_id", "mask")})
  f["mentions_dropped"] = np.zeros((p,), np.int32)
  return f


def _put_segment(f: Dict[str, np.ndarray], pi: int, row: int, di: int, si: int, seg: _Segment,
                 m: int) -> int:
  """Writes ``seg`` as segment ``row`` (document ``di``, its ``si``-th) of pack ``pi`` and its
  mentions from slot ``m`` on; returns the next free mention slot."""
  t = len(seg.tokens)
  f["token_ids"][pi, row, :t] = seg.tokens
  f["input_mask"][pi, row, :t] = 1
  f["token_kind"][pi, row, :t] = seg.kinds
  if "word_start" in f:  # every ladder token is a word
    f["word_start"][pi, row, :t] = 1
  f["segment_mask"][pi, row] = 1
  f["document_index"][pi, row] = di
  f["segment_index"][pi, row] = si
  for begin, end, entity in seg.mentions:
    f["mentions_segment"][pi, m], f["mentions_begin"][pi, m] = row, begin
    f["mentions_end"][pi, m], f["mentions_entity_id"][pi, m] = end, entity
    f["mentions_mask"][pi, m] = 1
    m += 1
  return m


def make_packs(rung: str, num_packs: int, seed: int, g: Geometry = Geometry()
               ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
  """``(packs, meta)``: parsed-pack features (``model.data.pack_reader``'s names and dtypes, a
  leading pack axis) for ``num_packs`` packs of ``g.docs_per_pack`` documents of ``rung``, and per
  document the gold answer and the reader (``meta``, arrays ``[P, D]``)."""
  if rung not in RUNGS:
    raise ValueError(f"unknown rung {rung!r}; choose from {RUNGS}")
  rng = np.random.default_rng(seed)
  p, d = num_packs, g.docs_per_pack
  f = _empty_packs(p, g)
  meta = {name: np.zeros((p, d), np.int32) for name in (
      "answer_segment", "answer_begin", "answer_end", "reader_segment", "reader_position",
      "reader_entity")}
  make = _lookup_doc if rung in ("R0", "R1") else _bridge_doc
  for pi in range(p):
    m = 0
    for di in range(d):
      segs = list(make(rng, rung, g, first_id=1 + di * g.mentions_per_doc))
      if rng.integers(2):  # which segment comes first
        segs.reverse()
      for si, seg in enumerate(segs):
        row = 2 * di + si
        m = _put_segment(f, pi, row, di, si, seg, m)
        if seg.answer is not None:
          f["answer_begin_labels"][pi, row, seg.answer[0]] = 1
          f["answer_end_labels"][pi, row, seg.answer[1]] = 1
          meta["answer_segment"][pi, di] = row
          meta["answer_begin"][pi, di], meta["answer_end"][pi, di] = seg.answer
        if seg.reader >= 0:
          meta["reader_segment"][pi, di] = row
          meta["reader_position"][pi, di] = seg.reader
          meta["reader_entity"][pi, di] = seg.reader_entity
  return f, meta


# ---------------------------------------------------------------------------------------------
# Pre-training corpus


def facts_in(packs: Dict[str, np.ndarray]) -> frozenset:
  """Every fact ``(x, relation, y)`` (``relation`` BY or FROM) stated as three consecutive
  tokens in ``packs``' segments."""
  t = packs["token_ids"].reshape(-1, packs["token_ids"].shape[-1])
  found = set()
  for rel in (BY, FROM):
    rows, cols = np.nonzero(t[:, 1:-1] == rel)
    found.update(zip(t[rows, cols].tolist(), [rel] * len(rows), t[rows, cols + 2].tolist()))
  return frozenset(found)


def _pretrain_doc(rng, g: Geometry, first_id: int, exclude: frozenset):
  chains = int(rng.integers(2, 4))  # 2 or 3 chains book -> author -> city
  for _ in range(1000):
    books, authors, cities = (rng.choice(pool, size=chains, replace=False)
                              for pool in NAME_POOLS)
    facts = ([(int(books[i]), BY, int(authors[i])) for i in range(chains)]
             + [(int(authors[i]), FROM, int(cities[i])) for i in range(chains)])
    if not any(f in exclude for f in facts):
      break
  else:
    raise ValueError("cannot draw pre-training facts outside the excluded ones")
  ids = {}
  for i in range(chains):
    ids[int(books[i])], ids[int(authors[i])] = first_id + i, first_id + chains + i
    ids[int(cities[i])] = first_id + 2 * chains + i
  # Every fact once, then repeats (distinct facts) up to the document's mention budget.
  statements = list(range(len(facts)))
  budget = g.mentions_per_doc // 2
  statements += rng.choice(len(facts), size=min(budget - len(facts), len(facts)),
                           replace=False).tolist()
  if rng.integers(2):
    header = [CLS, QUESTION, int(books[rng.integers(chains)]), SEP]
    header_kinds = [KIND_SPECIAL, KIND_QUESTION, KIND_QUESTION, KIND_SPECIAL]
  else:
    header, header_kinds = [CLS], [KIND_SPECIAL]
  per_segment = [[], []]
  for s in statements:
    x, rel, y = facts[s]
    per_segment[int(rng.integers(2))].append([(x, ids[x], ""), (rel, 0, ""), (y, ids[y], "")])
  return tuple(_layout(rng, header, header_kinds, units, g.seq_length)
               for units in per_segment)


def make_pretrain_packs(num_packs: int, seed: int, g: Geometry = Geometry(),
                        exclude: frozenset = frozenset()) -> Dict[str, np.ndarray]:
  """Parsed-pack features (as :func:`make_packs`, plus ``word_start``: every token is a word)
  of ``num_packs`` packs of pre-training documents (see the module docstring); no answers.
  Facts ``(x, relation, y)`` in ``exclude`` (e.g. :func:`facts_in` of dev packs) are never
  stated."""
  rng = np.random.default_rng(seed)
  f = _empty_packs(num_packs, g, extra=("word_start",))
  for pi in range(num_packs):
    m = 0
    for di in range(g.docs_per_pack):
      segs = _pretrain_doc(rng, g, 1 + di * g.mentions_per_doc, exclude)
      for si, seg in enumerate(segs):
        m = _put_segment(f, pi, 2 * di + si, di, si, seg, m)
  return f
