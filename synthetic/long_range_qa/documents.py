"""What a long-range QA document is: the generation parameters (:class:`Params`), its facts
(:class:`Fact`) and the generated document with its HotpotQA record (:class:`LongRangeDoc`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

from pipelines.text import segmenter as segmenter_lib

SPLITS = ("train", "dev")
BOOK_FACT = "{book} was written by {author}."
BIRTH_FACT = "{author} was born in {city}."
QUESTION = "Where was the author of {book} born?"


@dataclasses.dataclass(frozen=True)
class Params:
  """What shapes the generated documents.

  ``segments``: segments per document (exactly); ``distances``: the target's book and birth
  facts lie this many segments apart (one drawn per document; distractor triples draw theirs
  from the same list); ``distractors``: triples besides the target (M = distractors + 1
  candidate cities); ``seq_length`` / ``overlap`` / ``max_question_tokens``: the HotpotQA job's
  flags the documents are laid out for; ``max_facts_per_segment``: facts one segment holds at
  most; ``edge_margin``: tokens kept free of facts before a window's planned end (the real
  cut, at a word start, is then verified); ``sub_document_segments`` (0: off): the job's
  ``--max_segments_per_document``, so a document becomes explicit sub-documents of this many
  segments, and every triple's book fact and birth fact lie in DIFFERENT sub-documents: only a
  memory that crosses sub-documents (``--memory_scope book``) can join them.
  """
  segments: int = 6
  distances: Tuple[int, ...] = (1, 2, 3, 4)
  distractors: int = 3
  seq_length: int = 128
  overlap: int = 0
  max_question_tokens: int = 64
  max_facts_per_segment: int = 3
  edge_margin: int = 8
  sub_document_segments: int = 0

  def __post_init__(self):
    object.__setattr__(self, "distances", tuple(int(d) for d in self.distances))
    if self.segments < 2:
      raise ValueError(f"segments must be >= 2 (facts in different segments), got "
                       f"{self.segments}")
    if not self.distances or not all(1 <= d < self.segments for d in self.distances):
      raise ValueError(f"distances must be in [1, segments - 1 = {self.segments - 1}], got "
                       f"{self.distances}")
    if self.distractors < 0:
      raise ValueError(f"distractors must be >= 0, got {self.distractors}")
    if self.overlap < 0 or self.max_facts_per_segment < 1 or self.edge_margin < 0:
      raise ValueError("overlap and edge_margin must be >= 0, max_facts_per_segment >= 1")
    segmenter_lib.SegmenterConfig(seq_length=self.seq_length, overlap=self.overlap,
                                  max_question_tokens=self.max_question_tokens)  # validates
    s = self.sub_document_segments
    if s:
      if not 1 <= s < self.segments:
        raise ValueError(f"sub_document_segments must be 0 (off) or in [1, segments - 1 = "
                         f"{self.segments - 1}], got {s}")
      if self.overlap:
        raise ValueError("sub_document_segments needs overlap 0 (sub-documents then cut at "
                         "whole segments)")
      if any(s - 1 + d >= self.segments for d in self.distances if d < s):
        raise ValueError(f"with sub-documents of {s} segments, facts {self.distances} apart "
                         f"cannot all lie in different sub-documents of {self.segments} "
                         "segments")
    # Book facts and birth facts never share a segment: each kind needs its own segments.
    per_kind = -(-(self.distractors + 1) // self.max_facts_per_segment)
    if 2 * per_kind > self.segments:
      raise ValueError(f"{self.distractors + 1} book facts and as many birth facts, in separate "
                       f"segments of at most {self.max_facts_per_segment} facts, need "
                       f"{2 * per_kind} segments; got {self.segments}")

  @property
  def candidates(self) -> int:
    return self.distractors + 1

  def describe(self) -> Dict[str, Any]:
    d = dataclasses.asdict(self)
    d["distances"] = list(self.distances)
    return d


@dataclasses.dataclass
class Fact:
  kind: str  # "book" or "birth"
  triple: int  # index into the document's triples; 0 is the target
  text: str
  segment: int  # the segment it was placed in
  title: str = ""  # its paragraph's title and sentence index (set when laid out)
  sentence: int = -1

  def names(self, triples: Sequence[Tuple[str, str, str]]) -> Tuple[str, str]:
    book, author, city = triples[self.triple]
    return (book, author) if self.kind == "book" else (author, city)


@dataclasses.dataclass
class LongRangeDoc:
  """One generated document: the HotpotQA ``record`` and what the tests and the benchmark need
  (``book_segment`` / ``birth_segment``: the target's facts, ``distance`` = |difference|)."""
  id: str
  split: str
  question: str
  answer: str
  distance: int
  book_segment: int
  birth_segment: int
  candidates: List[str]  # the M birth cities, in document order of their birth facts
  triples: List[Tuple[str, str, str]]  # (book, author, city); 0 is the target
  facts: List[Fact]
  num_segments: int
  record: Dict[str, Any]

  @property
  def names(self) -> List[str]:
    return [n for t in self.triples for n in t]

  def meta(self) -> Dict[str, Any]:
    """The ``docs-<split>.jsonl`` line."""
    return {"id": self.id, "split": self.split, "question": self.question,
            "answer": self.answer, "distance": self.distance,
            "book_segment": self.book_segment, "birth_segment": self.birth_segment,
            "direction": "forward" if self.birth_segment > self.book_segment else "backward",
            "num_segments": self.num_segments, "candidates": self.candidates,
            "triples": [list(t) for t in self.triples],
            "facts": [{"kind": f.kind, "triple": f.triple, "segment": f.segment,
                       "title": f.title, "sentence": f.sentence, "text": f.text.strip()}
                      for f in self.facts]}
