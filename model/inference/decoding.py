"""Span decoding: a question's answers from the model's logits (pure Python + NumPy; no TF
import at module level: only :func:`load_documents` imports it, to read the side files with
``tf.io.gfile`` through :data:`model.data.pack_reader.GFILE`).  Task-agnostic: each task of
:mod:`model.tasks` turns a :class:`Decoder`'s answers into its official prediction format.

Candidates
  Per segment, every pair of the top-k begin x top-k end *context* tokens with ``begin <= end``
  and ``end - begin < max_answer_tokens`` is a candidate
  (:func:`model.inference.spans.span_candidates`); its score is ``begin logit + end logit``.  Each
  pair is then snapped to whole words (see
  :mod:`model.inference.spans`: why, the word rules, the edges and the fallback).  A candidate
  maps to ``(document_id, char_begin, char_end)``
  through the token char offsets of the records (``char_begin[begin]``, ``char_end[end]``) and to
  its text as ``text[char_begin:char_end]`` of that document in the side file
  (:mod:`schemas.documents`).  Texts are sliced from the original string, never detokenised, so
  whitespace, casing and unicode survive exactly.  Sub-documents' offsets index the full source
  document, so their candidates map the same way.

Aggregation per question (``question_id``, across segments, sub-documents and packs)
  * ``reduction="max"``: the single best-scoring candidate wins (first seen on ties).
  * ``reduction="sum"``: candidates are grouped by their answer text normalised with
    :func:`normalize_answer_text` (lower-case, whitespace runs collapsed to one space,
    surrounding punctuation and whitespace stripped); a group's score is the logsumexp of its
    candidates' scores (so an answer found in several places accumulates evidence), and the
    winning group answers with its best-scoring surface string (the original text of its best
    candidate, not the normalised key).
  The same reduction is also kept per ``(question_id, document_id)`` for per-document formats
  (TriviaQA web / per-document evaluation).

Answer type
  The answer-type head's logits are averaged over the question's segments; argmax decides span /
  "yes" / "no" (:meth:`Decoder.answer_type`).  Only the HotpotQA task
  (:mod:`model.tasks.hotpotqa`) uses it; the other tasks' answers are always spans.

HotpotQA supporting facts
  The model has a *per-segment* supporting head, so facts are predicted at paragraph level:
  a paragraph is supporting when it overlaps (in chars) the context of a segment whose supporting
  probability exceeds ``sp_threshold``, and then ALL of its sentences are predicted.  Hook for a
  sentence-level head: pass ``supporting_evidence_fn`` returning ``(char_begin, char_end,
  probability)`` ranges per segment (e.g. one per sentence) and ``sp_granularity="sentence"``, so
  only the sentences overlapping a range above the threshold are predicted
  (:func:`supporting_facts`).

Output formats: ``model.tasks.get(name).predictions(decoder)``.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
import warnings
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from model.inference import spans
from model.configs import REDUCTIONS  # declared TF-free, for the parsers
from schemas import documents as documents_lib
from schemas import records

SP_GRANULARITIES = ("paragraph", "sentence")

# (char_begin, char_end, probability) ranges of one segment's supporting evidence.
SupportingEvidenceFn = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray], int],
                                List[Tuple[int, int, float]]]


def _str(x) -> str:
  return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def _logaddexp(a: float, b: float) -> float:
  """``log(exp(a) + exp(b))`` without overflow."""
  if a == -math.inf:
    return b
  if b == -math.inf:
    return a
  hi, lo = (a, b) if a >= b else (b, a)
  return hi + math.log1p(math.exp(lo - hi))


def normalize_answer_text(text: str) -> str:
  """Grouping key of the ``sum`` reduction.

  Lower-cases, collapses every whitespace run to one space and strips surrounding punctuation
  (any Unicode ``P*`` category character) and whitespace, repeatedly, from both ends: ``" The
  Beatles."``, ``"the  beatles"`` and ``"(The Beatles)"`` all become ``"the beatles"``.  Inner
  punctuation is kept (``"o'neil"`` stays distinct from ``"o neil"``).
  """
  text = " ".join(text.lower().split())
  strip = lambda ch: ch.isspace() or unicodedata.category(ch).startswith("P")
  b, e = 0, len(text)
  while b < e and strip(text[b]):
    b += 1
  while e > b and strip(text[e - 1]):
    e -= 1
  return text[b:e]


@dataclasses.dataclass(frozen=True)
class Candidate:
  """A span candidate mapped back to its source document."""
  score: float
  document_id: str
  char_begin: int
  char_end: int
  text: str


class _Aggregate:
  """Running max / sum reduction over candidates (constant memory per answer group)."""

  def __init__(self, reduction: str):
    self.reduction = reduction
    self.best: Optional[Candidate] = None
    # normalised text -> [logsumexp score, best candidate of the group]
    self.groups: Dict[str, list] = {}

  def add(self, c: Candidate) -> None:
    if self.best is None or c.score > self.best.score:
      self.best = c
    if self.reduction == "sum":
      key = normalize_answer_text(c.text)
      g = self.groups.get(key)
      if g is None:
        self.groups[key] = [c.score, c]
      else:
        g[0] = _logaddexp(g[0], c.score)
        if c.score > g[1].score:
          g[1] = c

  def winner(self) -> Optional[Candidate]:
    """The max candidate, or (sum) the best candidate of the highest-logsumexp group."""
    if self.reduction == "max" or not self.groups:
      return self.best
    best = None
    for score, c in self.groups.values():  # insertion order: first seen wins ties
      if best is None or score > best[0]:
        best = (score, c)
    return best[1]

  def answer(self) -> str:
    c = self.winner()
    return c.text if c is not None else ""


def segment_supporting_evidence(features: Mapping[str, np.ndarray],
                                outputs: Mapping[str, np.ndarray], s: int
                                ) -> List[Tuple[int, int, float]]:
  """Default evidence: segment ``s``'s whole context range with its supporting probability."""
  return [(int(features["context_char_begin"][s]), int(features["context_char_end"][s]),
           float(sigmoid(outputs["supporting_logits"][s])))]


def supporting_facts(document: Mapping, ranges: Sequence[Tuple[int, int]],
                     granularity: str = "paragraph") -> List[List]:
  """``[[title, sent_id], ...]`` of ``document`` selected by supporting char ``ranges``.

  ``"paragraph"``: every sentence of each paragraph overlapping a range; ``"sentence"``: only
  the sentences overlapping a range.  Document order, no duplicates.
  """
  if granularity not in SP_GRANULARITIES:
    raise ValueError(f"sp_granularity must be one of {SP_GRANULARITIES}, got {granularity!r}")
  overlaps = lambda b, e: any(b < ce and e > cb for cb, ce in ranges)
  facts = []
  for para in document.get("paragraphs", []):
    if not overlaps(para["begin"], para["end"]):
      continue
    for i, (sb, se) in enumerate(para.get("sentences", [])):
      if granularity == "paragraph" or overlaps(sb, se):
        facts.append([para["title"], i])
  return facts


@dataclasses.dataclass
class _Question:
  aggregate: _Aggregate
  per_document: Dict[str, _Aggregate] = dataclasses.field(default_factory=dict)
  answer_type_sum: Optional[np.ndarray] = None
  answer_type_max: Optional[np.ndarray] = None
  segments: int = 0
  supporting: List[Tuple[str, int, int]] = dataclasses.field(default_factory=list)

  def answer_type(self, mode: str = "mean") -> int:
    """``"mean"``: argmax of the answer-type logits averaged over the question's segments;
    ``"paper"``: the type of the best (segment, type) pair (the model's ``answer_type_mode``)."""
    if self.answer_type_sum is None:
      return records.ANSWER_TYPE_SPAN
    if mode == "paper":
      return int(np.argmax(self.answer_type_max))
    return int(np.argmax(self.answer_type_sum / max(self.segments, 1)))


class Decoder:
  """Accumulates model outputs pack by pack; the tasks of :mod:`model.tasks` format them."""

  def __init__(self, documents: Mapping[str, Mapping], top_k: int = 20,
               max_answer_tokens: int = 30, sp_threshold: float = 0.5,
               reduction: str = "max",
               supporting_evidence_fn: SupportingEvidenceFn = segment_supporting_evidence,
               sp_granularity: str = "paragraph", answer_type_mode: str = "mean",
               snap_to_words: bool = True):
    if answer_type_mode not in ("mean", "paper"):
      raise ValueError(f"answer_type_mode must be 'mean' or 'paper', got {answer_type_mode!r}")
    if reduction not in REDUCTIONS:
      raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if sp_granularity not in SP_GRANULARITIES:
      raise ValueError(f"sp_granularity must be one of {SP_GRANULARITIES}, "
                       f"got {sp_granularity!r}")
    self.documents = documents
    self.top_k = top_k
    self.max_answer_tokens = max_answer_tokens
    self.sp_threshold = sp_threshold
    self.reduction = reduction
    self.supporting_evidence_fn = supporting_evidence_fn
    self.sp_granularity = sp_granularity
    self.answer_type_mode = answer_type_mode
    self.questions: Dict[str, _Question] = {}
    self.unmapped_candidates = 0  # candidates without a side-file text or valid offsets
    self.snap_to_words = snap_to_words  # see "Snapping to whole words" in model.inference.spans
    self.segments_without_word_start = 0  # decoded on token spans (no word_start to snap to)
    self._warned_word_start = False

  def _word_start_fallback(self, why: str) -> None:
    self.segments_without_word_start += 1
    if not self._warned_word_start:
      self._warned_word_start = True
      warnings.warn(f"{why}: answer spans are decoded on tokens, not snapped to whole words "
                    "(they may begin or end inside a word); warned once per Decoder, see "
                    "Decoder.segments_without_word_start", RuntimeWarning, stacklevel=3)

  def _snap_word_starts(self, features: Mapping[str, np.ndarray], s: int,
                        doc: Optional[Mapping]) -> Optional[np.ndarray]:
    """Segment ``s``'s word starts to snap candidates to, or None for token spans."""
    if not self.snap_to_words or doc is None:
      return None
    if "word_start" not in features:
      self._word_start_fallback("the packs have no word_start feature (older records?)")
      return None
    word_start, kinds = features["word_start"][s], features["token_kind"][s]
    if not np.any(np.asarray(word_start)[np.asarray(kinds) == records.TOKEN_KIND_CONTEXT]):
      self._word_start_fallback("a segment's word_start is 0 on all its context tokens "
                                "(records written without word starts?)")
      return None
    return spans.snap_word_starts(word_start, kinds, features["char_begin"][s],
                                  features["char_end"][s], doc["text"])

  def segment_candidates(self, features: Mapping[str, np.ndarray],
                         outputs: Mapping[str, np.ndarray], s: int) -> List[Candidate]:
    """All valid candidates of segment ``s`` of a pack, mapped to char offsets and text
    (snapped to whole words unless ``snap_to_words=False``; see :mod:`model.inference.spans`)."""
    doc_id = _str(features["document_id"][s])
    doc = self.documents.get(doc_id)
    out = []
    for score, b, e in spans.span_candidates(outputs["begin_logits"][s],
                                             outputs["end_logits"][s],
                                             features["token_kind"][s], self.top_k,
                                             self.max_answer_tokens,
                                             self._snap_word_starts(features, s, doc)):
      cb, ce = int(features["char_begin"][s][b]), int(features["char_end"][s][e])
      if doc is None or cb < 0 or ce < cb or ce > len(doc["text"]):
        self.unmapped_candidates += 1
        continue
      out.append(Candidate(score, doc_id, cb, ce, doc["text"][cb:ce]))
    return out

  def add_pack(self, features: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]
               ) -> None:
    """Adds one pack: ``features`` (NumPy pack features) and ``outputs`` (NumPy model outputs)."""
    for s in range(len(features["segment_mask"])):
      qid = _str(features["question_id"][s])
      if not features["segment_mask"][s] or features["document_index"][s] < 0 or not qid:
        continue
      q = self.questions.get(qid)
      if q is None:
        q = self.questions[qid] = _Question(_Aggregate(self.reduction))
      doc_id = _str(features["document_id"][s])
      per_doc = q.per_document.get(doc_id)
      if per_doc is None:
        per_doc = q.per_document[doc_id] = _Aggregate(self.reduction)
      at = np.asarray(outputs["answer_type_logits"][s], np.float64)
      q.answer_type_sum = at if q.answer_type_sum is None else q.answer_type_sum + at
      q.answer_type_max = at if q.answer_type_max is None else np.maximum(q.answer_type_max, at)
      q.segments += 1
      for c in self.segment_candidates(features, outputs, s):
        q.aggregate.add(c)
        per_doc.add(c)
      for cb, ce, prob in self.supporting_evidence_fn(features, outputs, s):
        if prob > self.sp_threshold:
          q.supporting.append((doc_id, int(cb), int(ce)))

  def question_ids(self) -> List[str]:
    return sorted(self.questions)

  def span_answer(self, qid: str) -> str:
    """The question's span answer under the decoder's reduction ("" without candidates)."""
    return self.questions[qid].aggregate.answer()

  def document_answers(self, qid: str) -> Dict[str, str]:
    """``{document_id: span answer}`` of the question, one per document it was read with."""
    return {d: agg.answer() for d, agg in sorted(self.questions[qid].per_document.items())}

  def answer_type(self, qid: str) -> int:
    """The question's ``records.ANSWER_TYPE_*`` from the answer-type head (under the decoder's
    ``answer_type_mode``)."""
    return self.questions[qid].answer_type(self.answer_type_mode)

  def supporting_facts(self, qid: str) -> List[List]:
    """``[[title, sent_id], ...]`` of the question (see the module docstring)."""
    ranges: Dict[str, List[Tuple[int, int]]] = {}
    for doc_id, cb, ce in self.questions[qid].supporting:
      ranges.setdefault(doc_id, []).append((cb, ce))
    facts, seen = [], set()
    for doc_id, rs in ranges.items():
      doc = self.documents.get(doc_id)
      if doc is None:
        continue
      for title, i in supporting_facts(doc, rs, self.sp_granularity):
        if (title, i) not in seen:
          seen.add((title, i))
          facts.append([title, i])
    return facts


def load_documents(records_dir: str) -> Dict[str, Dict]:
  """``{document_id: document}`` from the documents side files of ``records_dir``:
  :func:`schemas.documents.load` with every path through ``tf.io.gfile`` (local, ``gs://``,
  ``ram://``; TensorFlow is imported here, not at module level).

  Raises:
    ValueError: A gzip side file is corrupt.
  """
  from model.data import pack_reader as input_lib  # pylint: disable=g-import-not-at-top
  return documents_lib.load(records_dir, fs=input_lib.GFILE)
