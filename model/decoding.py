"""Span decoding to HotpotQA predictions (pure Python + NumPy; no TensorFlow).

Per segment, the best span is searched over the top-k begin x top-k end context tokens with
``begin <= end`` and ``end - begin < max_answer_tokens``; score = begin logit + end logit.  Per
question (``question_id``, across segments, sub-documents and packs) the best-scoring span wins.
The answer-type head (mean of the question's segment logits) decides span / "yes" / "no".  A span
maps to text as ``text[char_begin[begin]:char_end[end]]`` of the document in the side file.

Supporting facts: all sentences of the paragraphs overlapping (in chars) the context of a
segment whose supporting probability exceeds ``sp_threshold``.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from schemas import documents as documents_lib
from schemas import records

ANSWER_TYPE_TEXT = {records.ANSWER_TYPE_YES: "yes", records.ANSWER_TYPE_NO: "no"}


def _str(x) -> str:
  return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def best_span(begin_logits: np.ndarray, end_logits: np.ndarray, token_kind: np.ndarray,
              top_k: int = 20, max_answer_tokens: int = 30) -> Optional[Tuple[float, int, int]]:
  """Best ``(score, begin, end)`` in one segment (``[L]`` arrays), or None without context."""
  context = np.flatnonzero(np.asarray(token_kind) == records.TOKEN_KIND_CONTEXT)
  if context.size == 0:
    return None
  b_logits = np.asarray(begin_logits, np.float64)[context]
  e_logits = np.asarray(end_logits, np.float64)[context]
  k = min(top_k, context.size)
  b_top = context[np.argsort(-b_logits, kind="stable")[:k]]
  e_top = context[np.argsort(-e_logits, kind="stable")[:k]]
  best = None
  for b in b_top:
    for e in e_top:
      if b <= e and e - b < max_answer_tokens:
        score = float(begin_logits[b]) + float(end_logits[e])
        if best is None or score > best[0]:
          best = (score, int(b), int(e))
  return best


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


@dataclasses.dataclass
class _Question:
  best: Optional[Tuple[float, str, int, int]] = None  # score, document_id, char begin, char end
  answer_type_sum: Optional[np.ndarray] = None
  segments: int = 0
  supporting: List[Tuple[str, int, int]] = dataclasses.field(default_factory=list)


class Decoder:
  """Accumulates model outputs pack by pack and builds the HotpotQA prediction JSON."""

  def __init__(self, documents: Mapping[str, Mapping], top_k: int = 20,
               max_answer_tokens: int = 30, sp_threshold: float = 0.5):
    self.documents = documents
    self.top_k = top_k
    self.max_answer_tokens = max_answer_tokens
    self.sp_threshold = sp_threshold
    self.questions: Dict[str, _Question] = {}

  def add_pack(self, features: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]
               ) -> None:
    """Adds one pack: ``features`` (NumPy pack features) and ``outputs`` (NumPy model outputs)."""
    n = len(features["segment_mask"])
    for s in range(n):
      qid = _str(features["question_id"][s])
      if not features["segment_mask"][s] or features["document_index"][s] < 0 or not qid:
        continue
      q = self.questions.setdefault(qid, _Question())
      doc_id = _str(features["document_id"][s])
      at = np.asarray(outputs["answer_type_logits"][s], np.float64)
      q.answer_type_sum = at if q.answer_type_sum is None else q.answer_type_sum + at
      q.segments += 1
      span = best_span(outputs["begin_logits"][s], outputs["end_logits"][s],
                       features["token_kind"][s], self.top_k, self.max_answer_tokens)
      if span is not None:
        score, b, e = span
        cb, ce = int(features["char_begin"][s][b]), int(features["char_end"][s][e])
        if cb >= 0 and ce >= cb and (q.best is None or score > q.best[0]):
          q.best = (score, doc_id, cb, ce)
      if sigmoid(outputs["supporting_logits"][s]) > self.sp_threshold:
        q.supporting.append((doc_id, int(features["context_char_begin"][s]),
                             int(features["context_char_end"][s])))

  def _supporting_facts(self, q: _Question) -> List[List]:
    facts, seen = [], set()
    for doc_id, cb, ce in q.supporting:
      doc = self.documents.get(doc_id)
      if doc is None:
        continue
      for para in doc.get("paragraphs", []):
        if para["begin"] < ce and para["end"] > cb:
          for i in range(len(para.get("sentences", []))):
            key = (para["title"], i)
            if key not in seen:
              seen.add(key)
              facts.append([para["title"], i])
    return facts

  def predictions(self) -> Dict[str, Dict]:
    """``{"answer": {qid: str}, "sp": {qid: [[title, sent_id], ...]}}``."""
    answers, sp = {}, {}
    for qid in sorted(self.questions):
      q = self.questions[qid]
      atype = int(np.argmax(q.answer_type_sum)) if q.answer_type_sum is not None else 0
      if atype in ANSWER_TYPE_TEXT:
        answers[qid] = ANSWER_TYPE_TEXT[atype]
      elif q.best is not None:
        _, doc_id, cb, ce = q.best
        doc = self.documents.get(doc_id)
        answers[qid] = doc["text"][cb:ce] if doc is not None else ""
      else:
        answers[qid] = ""
      sp[qid] = self._supporting_facts(q)
    return {"answer": answers, "sp": sp}


def load_documents(records_dir: str) -> Dict[str, Dict]:
  """``{document_id: document}`` from ``<records_dir>/documents/*.jsonl``."""
  docs = {}
  for path in sorted(glob.glob(os.path.join(records_dir, documents_lib.DOCUMENTS_DIR,
                                            "*.jsonl"))):
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip():
          d = json.loads(line)
          docs[d["document_id"]] = d
  return docs
