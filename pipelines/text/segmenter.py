"""Splits a tokenised document into fixed-length, overlapping, word-aligned segments.

Layout of one segment of ``seq_length`` L tokens::

  [CLS] question tokens [SEP] context tokens ... [SEP] [PAD] ...     (QA)
  [CLS] context tokens ... [SEP] [PAD] ...                           (no question)

Context windows advance so that consecutive windows share at least ``overlap`` context tokens;
both window edges fall on word starts (a word or a multi-byte character is never cut), except
when a single "word" is longer than half a window, which is cut hard and counted.  A document
with more than ``max_segments_per_document`` windows becomes several explicit sub-documents of at
most that many segments each (``sub_document_index`` / ``num_sub_documents``).

Spans (answers, entity mentions) arrive as char offsets into the document text and are mapped to
the tokens they overlap.  A span is labelled in every segment that contains it *entirely*; a
segment that contains only part of it does not get a truncated label (counted as ``*_cut``), and a
span that no segment contains entirely (longer than the overlap) is counted as ``*_lost``.  Spans
are never capped per segment.  Question-prefix tokens are never labelled: answers are searched in
the document text only, so an answer that also appears in the question is labelled where it
appears in the context.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from schemas import records
from pipelines.document import BadInput
from pipelines.text.tokenizer import Encoded

TOKEN_FEATURES = ("token_ids", "input_mask", "word_start", "token_kind", "char_begin", "char_end")
SEGMENT_FEATURES = ("segment_index", "num_segments", "question_length", "context_char_begin",
                    "context_char_end", "answer_type", "supporting")


@dataclasses.dataclass(frozen=True)
class SegmenterConfig:
  seq_length: int = 512
  overlap: int = 128
  max_segments_per_document: int = 128
  max_question_tokens: int = 64

  def __post_init__(self):
    budget = self.seq_length - self.max_question_tokens - 3
    if self.overlap < 0 or budget <= self.overlap:
      raise ValueError(
          f"seq_length={self.seq_length} leaves {budget} context tokens after a question of up "
          f"to {self.max_question_tokens} tokens; that must exceed overlap={self.overlap}.")
    if self.max_segments_per_document < 1:
      raise ValueError("max_segments_per_document must be >= 1")


@dataclasses.dataclass
class SubDocument:
  """Segments of one (sub-)document, ready to pack.  Token arrays are int32, others int64."""
  key: str  # sort/shard key: document id, question id and sub-document index
  document_id: str
  question_id: str
  sub_document_index: int
  num_sub_documents: int
  tokens: Dict[str, np.ndarray]  # TOKEN_FEATURES -> [S, L]
  segments: Dict[str, np.ndarray]  # SEGMENT_FEATURES -> [S]
  answers: np.ndarray  # [K, 3] (segment in this sub-document, begin, end), inclusive
  mentions: np.ndarray  # [M, 4] (segment, begin, end, entity_id), inclusive

  @property
  def num_segments(self) -> int:
    return int(self.tokens["token_ids"].shape[0])


def sub_document_key(document_id: str, question_id: str, sub_index: int) -> str:
  """Sort key; the writer shards on the part before the first \\x1f (the document id)."""
  return f"{document_id}\x1f{question_id}\x1f{sub_index:06d}"


def context_windows(word_start: np.ndarray, budget: int, overlap: int,
                    stats: collections.Counter) -> List[Tuple[int, int]]:
  """Half-open windows ``[s, e)`` over ``n`` tokens; edges on word starts where possible."""
  n = len(word_start)
  starts_at = np.flatnonzero(word_start)
  windows = []
  s = 0
  while True:
    e = min(s + budget, n)
    if e < n:
      i = np.searchsorted(starts_at, e, side="right") - 1
      if i >= 0 and starts_at[i] > s + budget // 2:
        e = int(starts_at[i])
      else:
        stats["hard_cuts"] += 1
    windows.append((s, e))
    if e >= n:
      return windows
    nxt = e - overlap
    i = np.searchsorted(starts_at, nxt, side="right") - 1
    if i >= 0 and starts_at[i] > s:
      nxt = int(starts_at[i])
    elif nxt <= s:
      nxt = e
    s = nxt


def char_spans_to_tokens(enc: Encoded, spans: Sequence[Tuple[int, int]]) -> np.ndarray:
  """``[K, 2]`` inclusive token spans of the tokens overlapping each char span; -1 rows if none."""
  if not len(spans):
    return np.zeros((0, 2), dtype=np.int64)
  sp = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
  first = np.searchsorted(enc.ends, sp[:, 0], side="right")
  last = np.searchsorted(enc.begins, sp[:, 1], side="left") - 1
  bad = (first > last) | (first >= len(enc)) | (last < 0)
  out = np.stack([first, last], axis=1)
  out[bad] = -1
  return out


def _place_spans(token_spans: np.ndarray, windows: np.ndarray, prefix: int, name: str,
                 stats: collections.Counter) -> Tuple[np.ndarray, np.ndarray]:
  """Returns (window index, local begin, local end) rows and, per row, the source span index."""
  if not len(token_spans):
    return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
  valid = token_spans[:, 0] >= 0
  stats[f"{name}_unmappable"] += int((~valid).sum())
  tb, te = token_spans[:, 0:1], token_spans[:, 1:2]
  ws, we = windows[None, :, 0], windows[None, :, 1]
  contained = (ws <= tb) & (te < we) & valid[:, None]
  overlapping = (ws <= te) & (tb < we) & valid[:, None]
  stats[f"{name}_cut"] += int((overlapping & ~contained).sum())
  stats[f"{name}_lost"] += int((valid & ~contained.any(axis=1)).sum())
  span_idx, win_idx = np.nonzero(contained)
  rows = np.stack([win_idx, tb[span_idx, 0] - windows[win_idx, 0] + prefix,
                   te[span_idx, 0] - windows[win_idx, 0] + prefix], axis=1)
  stats[f"{name}_labels"] += len(rows)
  return rows.astype(np.int64), span_idx


def segment_document(document_id: str, question_id: str, context: Encoded,
                     question: Optional[Encoded], special_ids: Dict[str, int],
                     config: SegmenterConfig, answer_char_spans: Sequence[Tuple[int, int]] = (),
                     mentions: Sequence[Tuple[int, int, int]] = (),
                     answer_type: int = records.ANSWER_TYPE_NONE,
                     supporting_ranges: Optional[Sequence[Tuple[int, int]]] = None,
                     ) -> Tuple[List[SubDocument], collections.Counter]:
  """Segments one document.  ``supporting_ranges``: char ranges of supporting paragraphs, or
  None when unknown.  Returns the sub-documents and counters for the manifest."""
  stats: collections.Counter = collections.Counter()
  L = config.seq_length
  if question is not None:
    q_len = len(question)
    if q_len > config.max_question_tokens:
      stats["questions_truncated"] += 1
      q_len = config.max_question_tokens
    prefix = q_len + 2
  else:
    q_len, prefix = 0, 1
  budget = L - prefix - 1
  n = len(context)
  if n == 0:
    raise BadInput("empty_context", "the document has no tokens")
  windows = np.asarray(context_windows(context.word_start, budget, config.overlap, stats),
                       dtype=np.int64).reshape(-1, 2)
  W = len(windows)

  # int32 halves what travels between pipeline stages; records store int64 anyway.
  tok = {name: np.zeros((W, L), dtype=np.int32) for name in TOKEN_FEATURES}
  tok["token_ids"][:] = special_ids["pad"]
  tok["char_begin"][:] = -1
  tok["char_end"][:] = -1
  tok["token_ids"][:, 0] = special_ids["cls"]
  tok["token_kind"][:, 0] = records.TOKEN_KIND_SPECIAL
  if question is not None:
    sl = slice(1, 1 + q_len)
    tok["token_ids"][:, sl] = question.ids[:q_len]
    tok["word_start"][:, sl] = question.word_start[:q_len]
    tok["token_kind"][:, sl] = records.TOKEN_KIND_QUESTION
    tok["char_begin"][:, sl] = question.begins[:q_len]
    tok["char_end"][:, sl] = question.ends[:q_len]
    tok["token_ids"][:, 1 + q_len] = special_ids["sep"]
    tok["token_kind"][:, 1 + q_len] = records.TOKEN_KIND_SPECIAL
  seg = {name: np.zeros(W, dtype=np.int64) for name in SEGMENT_FEATURES}
  for w, (s, e) in enumerate(windows):
    k = e - s
    sl = slice(prefix, prefix + k)
    tok["token_ids"][w, sl] = context.ids[s:e]
    tok["word_start"][w, sl] = context.word_start[s:e]
    tok["token_kind"][w, sl] = records.TOKEN_KIND_CONTEXT
    tok["char_begin"][w, sl] = context.begins[s:e]
    tok["char_end"][w, sl] = context.ends[s:e]
    tok["token_ids"][w, prefix + k] = special_ids["sep"]
    tok["token_kind"][w, prefix + k] = records.TOKEN_KIND_SPECIAL
    tok["input_mask"][w, :prefix + k + 1] = 1
    seg["context_char_begin"][w] = context.begins[s]
    seg["context_char_end"][w] = context.ends[e - 1]
  seg["question_length"][:] = prefix
  seg["answer_type"][:] = answer_type
  if supporting_ranges is None:
    seg["supporting"][:] = -1
  else:
    for b, e in supporting_ranges:
      seg["supporting"] |= ((seg["context_char_begin"] < e) &
                            (b < seg["context_char_end"])).astype(np.int64)

  ans_rows, _ = _place_spans(char_spans_to_tokens(context, answer_char_spans), windows, prefix,
                             "answer_spans", stats)
  stats["answer_spans_found"] += len(answer_char_spans)
  men = np.asarray(mentions, dtype=np.int64).reshape(-1, 3)
  men_rows, men_idx = _place_spans(char_spans_to_tokens(context, men[:, :2]), windows, prefix,
                                   "mentions", stats)
  men_rows = np.concatenate([men_rows, men[men_idx, 2:3]], axis=1)

  max_s = config.max_segments_per_document
  num_sub = (W + max_s - 1) // max_s
  subs = []
  for k in range(num_sub):
    lo, hi = k * max_s, min(W, (k + 1) * max_s)
    s_seg = {name: v[lo:hi].copy() for name, v in seg.items()}
    s_seg["segment_index"] = np.arange(hi - lo, dtype=np.int64)
    s_seg["num_segments"][:] = hi - lo

    def local(rows):
      keep = (rows[:, 0] >= lo) & (rows[:, 0] < hi)
      out = rows[keep].copy()
      out[:, 0] -= lo
      return out

    subs.append(SubDocument(
        key=sub_document_key(document_id, question_id, k), document_id=document_id,
        question_id=question_id, sub_document_index=k, num_sub_documents=num_sub,
        tokens={name: v[lo:hi] for name, v in tok.items()}, segments=s_seg,
        answers=local(ans_rows), mentions=local(men_rows)))
  stats["documents"] += 1
  stats["sub_documents"] += num_sub
  stats["segments"] += W
  stats["context_tokens"] += n
  stats["question_tokens"] += q_len
  if num_sub > 1:
    stats["documents_split"] += 1
  if answer_type == records.ANSWER_TYPE_SPAN and not len(ans_rows):
    stats["span_questions_without_label"] += 1
  return subs, stats
