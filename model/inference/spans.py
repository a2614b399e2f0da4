"""One segment's answer spans from its begin / end logits: the top-k pair search
(:func:`span_candidates`, :func:`best_span`) and the snapping of each pair to whole words
(:func:`snap_word_starts`, :func:`word_bounds`).  Pure Python + NumPy. 
:mod:`model.inference.decoding` maps the spans to document text and reduces them per question.

Candidates
  Every pair of the top-k begin x top-k end *context* tokens with ``begin <= end`` and
  ``end - begin < max_answer_tokens``, scored ``begin logit + end logit``, best first.

Snapping to whole words (``model.inference.decoding.Decoder(snap_to_words=True)``, the default)
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
  one ``RuntimeWarning`` per :class:`model.inference.decoding.Decoder` (counted in its
  ``segments_without_word_start``).  (The record parser of :mod:`model.data.pack_reader` requires
  ``word_start``, so this concerns feature dicts built by other callers.)
"""

from __future__ import annotations

import unicodedata
from typing import List, Optional, Tuple

import numpy as np

from schemas import records


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
