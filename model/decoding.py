"""Span decoding: a question's answers from the model's logits (pure Python + NumPy; no TF
import at module level: only :func:`load_documents` imports it, to read the side files with
``tf.io.gfile``).  Task-agnostic: each task of :mod:`model.tasks` turns a :class:`Decoder`'s
answers into its official prediction format.

Candidates
  Per segment, every pair of the top-k begin x top-k end *context* tokens with ``begin <= end``
  and ``end - begin < max_answer_tokens`` is a candidate (:func:`span_candidates`); its score is
  ``begin logit + end logit``.  Each pair is then snapped to whole words (below).  A candidate
  maps to ``(document_id, char_begin, char_end)``
  through the token char offsets of the records (``char_begin[begin]``, ``char_end[end]``) and to
  its text as ``text[char_begin:char_end]`` of that document in the side file
  (:mod:`schemas.documents`).  Texts are sliced from the original string, never detokenised, so
  whitespace, casing and unicode survive exactly.  Sub-documents' offsets index the full source
  document, so their candidates map the same way.

Snapping to whole words (``Decoder(snap_to_words=True)``, the default)
  Byte-level BPE splits words ("Erskine" = "E" "rs" "k" "ine"), and the model's best begin (end)
  token may be a continuation token, which gives answers such as "rskine Hamilton Childers".  So
  a candidate's begin moves back to the first token of its word and its end forward to the last
  token of its word.  A word is what the records' ``word_start`` marks (a token with
  ``word_start=0`` continues the previous token's word: whitespace-delimited words), split
  further where a continuation token meets punctuation, i.e. where the characters on the two
  sides of the token boundary are not both letters / digits / marks, except that an apostrophe
  inside a word joins unless it starts an English clitic ('s 't 're 've 'm 'll 'd); a boundary
  inside one character always joins.  So "Child" in "Childers." snaps to "Childers", not
  "Childers."; "Hamilton" in "Hamilton's" stays "Hamilton" ("hamiltons" would miss the gold
  "Hamilton" under every official normaliser, and NarrativeQA's BLEU / ROUGE split on spaces
  only); "O" in "O'Neill" becomes "O'Neill".  See :func:`snap_word_starts` and
  :func:`word_bounds`.

  Snap *after* the pair search, not before: the pairs are searched over all context tokens with
  their own logits, and a winning pair is widened to its words; its score stays the pair's score,
  and pairs that snap to the same span in a segment count once, with the best score (so the
  ``sum`` reduction does not add up one span several times).  Restricting begins to word-start
  tokens and ends to word-end tokens instead (decoding over whole-word positions) would discard
  the model's most confident position whenever it lands inside a word and let a different,
  lower-scoring word win; snapping keeps the model's choice of *where* the answer is and only
  repairs its edges, and for a model whose logits already peak on word edges (the training
  labels usually cover whole words) both give the same spans.

  Edges: only context tokens form words, so a span never grows into the question prefix or the
  special / padding tokens, and a word cut by a segment edge (the segmenter cuts between words
  whenever it can, see :func:`pipelines.text.segmenter.context_windows`; the overlap means a
  neighbouring segment holds the whole word and offers it as its own candidate) snaps to its
  part inside the segment.  A snapped span longer than ``max_answer_tokens`` (a "word" of a
  script written without spaces, a long URL) keeps the pair's token span.  Fallback: packs
  without a ``word_start`` feature, and segments whose context tokens have no word start at all
  (records written with an all-zero ``word_start``), are decoded on token spans as before, with
  one ``RuntimeWarning`` per :class:`Decoder` (counted in ``Decoder.segments_without_word_start``).
  (The record parser of :mod:`model.input` requires ``word_start``, so this concerns feature
  dicts built by other callers.)

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

The module is over 500 lines because candidates, word snapping, aggregation and supporting facts
are one algorithm whose invariants (above) span all of them; about a sixth of it is this
docstring.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
import warnings
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from schemas import documents as documents_lib
from schemas import records

REDUCTIONS = ("max", "sum")
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


def _is_word_char(ch: str) -> bool:
  """Letters, digits and combining marks (Unicode ``L*``, ``N*``, ``M*``)."""
  return unicodedata.category(ch)[0] in "LNM"


_APOSTROPHES = frozenset("'\u2019\u02bc")
# English clitics split off a word ("Hamilton" + "'s", "don" + "'t"): snapping never adds them.
_CLITICS = ("s", "t", "re", "ve", "m", "ll", "d")


def _joins(text: str, i: int) -> bool:
  """Whether snapping joins the characters ``text[i - 1]`` and ``text[i]`` (``0 < i < len``).

  Two word characters join; so does an inner apostrophe (one between two word characters, as
  in "O'Neill") with its neighbours, unless it starts an English clitic ("Hamilton's").
  """
  left, right = text[i - 1], text[i]
  if _is_word_char(left) and _is_word_char(right):
    return True
  if right in _APOSTROPHES:
    apostrophe = i
  elif left in _APOSTROPHES:
    apostrophe = i - 1
  else:
    return False
  if not (0 < apostrophe < len(text) - 1 and _is_word_char(text[apostrophe - 1]) and
          _is_word_char(text[apostrophe + 1])):
    return False
  for clitic in _CLITICS:
    j = apostrophe + 1 + len(clitic)
    if (text[apostrophe + 1:j].lower() == clitic and
        (j == len(text) or not _is_word_char(text[j]))):
      return False
  return True


def snap_word_starts(word_start: np.ndarray, token_kind: np.ndarray, char_begin: np.ndarray,
                     char_end: np.ndarray, text: str) -> np.ndarray:
  """Where snapped spans may start: the records' ``word_start`` plus the punctuation cuts.

  A context token that continues a word (``word_start=0``) still starts a snapping unit when
  its boundary with the previous token is a punctuation cut: the characters on its two sides do
  not join (:func:`_joins`: two word characters -- letters, digits, marks -- join, and so does
  an inner apostrophe except before an English clitic), as in "Childers" | "." or "Hamilton" |
  "'s" but not "O" | "'" | "Neill"; or when the offsets (into ``text``, the document text) are
  invalid.  A boundary inside one character (the two tokens share it: ``char_begin[i] <
  char_end[i - 1]``) never starts one.  ``[L]`` arrays in, ``[L]`` bool out; only context
  tokens matter (see :func:`word_bounds`).
  """
  starts = np.asarray(word_start) > 0
  ctx = np.asarray(token_kind) == records.TOKEN_KIND_CONTEXT
  cont = np.flatnonzero(ctx[1:] & ctx[:-1] & ~starts[1:]) + 1
  out = starts.copy()
  n = len(text)
  for i in cont.tolist():
    cb, pe = int(char_begin[i]), int(char_end[i - 1])
    if 0 <= cb < pe <= n:  # the tokens share a character
      continue
    out[i] = not (cb == pe and 0 < cb < n and _joins(text, cb))
  return out


def word_bounds(word_start: np.ndarray, token_kind: np.ndarray
                ) -> Tuple[np.ndarray, np.ndarray]:
  """``(first, last)``: per token, the first and last token of its word (``[L]`` int arrays).

  Words are runs of context tokens; a context token starts a word when ``word_start`` marks it
  or the token before it is not a context token (question, special or padding token, or the
  segment's start), and a context run ends one.  Every non-context token is its own "word".
  """
  n = len(token_kind)
  ctx = np.asarray(token_kind) == records.TOKEN_KIND_CONTEXT
  prev_ctx = np.concatenate([[False], ctx[:-1]])
  starts = ~ctx | ~prev_ctx | (np.asarray(word_start) > 0)
  pos = np.arange(n)
  first = np.maximum.accumulate(np.where(starts, pos, 0))
  ends = np.concatenate([starts[1:], [True]]) | ~ctx
  last = np.minimum.accumulate(np.where(ends, pos, n)[::-1])[::-1]
  return first, last


def span_candidates(begin_logits: np.ndarray, end_logits: np.ndarray, token_kind: np.ndarray,
                    top_k: int = 20, max_answer_tokens: int = 30,
                    word_start: Optional[np.ndarray] = None
                    ) -> List[Tuple[float, int, int]]:
  """All valid ``(score, begin, end)`` of one segment (``[L]`` arrays), best first.

  Pairs of the top-k begin x top-k end context tokens with ``begin <= end`` and
  ``end - begin < max_answer_tokens``; ``score = begin_logits[begin] + end_logits[end]``.  Ties
  keep (begin rank, end rank) order.  Empty without context tokens.

  With ``word_start`` (``[L]``, where words start; :func:`snap_word_starts`) each pair is then
  snapped to whole words (:func:`word_bounds`; the module docstring says why after the search):
  ``begin`` moves back to its word's first token, ``end`` forward to its word's last token,
  unless the snapped span would exceed ``max_answer_tokens`` tokens (then the pair's own span is
  kept).  Spans are unique: of the pairs giving the same span the best one's score is kept.
  """
  context = np.flatnonzero(np.asarray(token_kind) == records.TOKEN_KIND_CONTEXT)
  if context.size == 0:
    return []
  begin_logits = np.asarray(begin_logits, np.float64)
  end_logits = np.asarray(end_logits, np.float64)
  k = min(top_k, context.size)
  b_top = context[np.argsort(-begin_logits[context], kind="stable")[:k]]
  e_top = context[np.argsort(-end_logits[context], kind="stable")[:k]]
  b, e = np.meshgrid(b_top, e_top, indexing="ij")
  b, e = b.reshape(-1), e.reshape(-1)
  valid = (b <= e) & (e - b < max_answer_tokens)
  b, e = b[valid], e[valid]
  scores = begin_logits[b] + end_logits[e]
  order = np.argsort(-scores, kind="stable")
  if word_start is None:
    return [(float(scores[i]), int(b[i]), int(e[i])) for i in order]
  first, last = word_bounds(word_start, token_kind)
  sb, se = first[b], last[e]
  keep = se - sb < max_answer_tokens
  sb, se = np.where(keep, sb, b), np.where(keep, se, e)
  out, seen = [], set()
  for i in order:
    span = (int(sb[i]), int(se[i]))
    if span not in seen:
      seen.add(span)
      out.append((float(scores[i]),) + span)
  return out


def best_span(begin_logits: np.ndarray, end_logits: np.ndarray, token_kind: np.ndarray,
              top_k: int = 20, max_answer_tokens: int = 30,
              word_start: Optional[np.ndarray] = None) -> Optional[Tuple[float, int, int]]:
  """Best ``(score, begin, end)`` in one segment (``[L]`` arrays), or None without context.

  ``word_start``: snap to whole words, as in :func:`span_candidates`.
  """
  candidates = span_candidates(begin_logits, end_logits, token_kind, top_k, max_answer_tokens,
                               word_start)
  return candidates[0] if candidates else None


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
    self.snap_to_words = snap_to_words  # see "Snapping to whole words" in the module docstring
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
    return snap_word_starts(word_start, kinds, features["char_begin"][s],
                            features["char_end"][s], doc["text"])

  def segment_candidates(self, features: Mapping[str, np.ndarray],
                         outputs: Mapping[str, np.ndarray], s: int) -> List[Candidate]:
    """All valid candidates of segment ``s`` of a pack, mapped to char offsets and text
    (snapped to whole words unless ``snap_to_words=False``; see the module docstring)."""
    doc_id = _str(features["document_id"][s])
    doc = self.documents.get(doc_id)
    out = []
    for score, b, e in span_candidates(outputs["begin_logits"][s], outputs["end_logits"][s],
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

  def predictions(self) -> Dict[str, Dict]:
    """HotpotQA predictions (kept for callers of the original API)."""
    from model.tasks import hotpotqa  # pylint: disable=g-import-not-at-top
    return hotpotqa.TASK.predictions(self)


class _GFiles:
  """:class:`schemas.records_dir.LocalFiles`' operations through ``tf.io.gfile``."""

  def __init__(self):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self.exists = tf.io.gfile.exists
    self.glob = tf.io.gfile.glob
    self._gfile = tf.io.gfile.GFile

  def open(self, path: str):
    return self._gfile(path, "rb")


def load_documents(records_dir: str) -> Dict[str, Dict]:
  """``{document_id: document}`` from the documents side files of ``records_dir``:
  :func:`schemas.documents.load` with every path through ``tf.io.gfile`` (local, ``gs://``,
  ``ram://``; TensorFlow is imported here, not at module level).

  Raises:
    ValueError: A gzip side file is corrupt.
  """
  return documents_lib.load(records_dir, fs=_GFiles())
