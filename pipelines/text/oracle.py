"""Extractive ROUGE-L oracle for free-form answers (NarrativeQA): the story spans closest to them.

NarrativeQA answers were written by annotators; only about 40% of them are spans of the story.
To train an extractive reader we label, per question, the story spans whose ROUGE-L F1 against
either reference answer is high:

* every candidate window is a run of consecutive story words of at most ``2 * |a| + extra_words``
  words (``|a|``: the answer's word count), and is scored against that answer ``a``;
* the best score of the question is the maximum over both answers and all windows;
* spans scoring ``>= max(min_score, relative * best)`` are kept greedily by score (ties: the
  earlier, then the shorter window) when they share no word with a span kept before, at most
  ``max_spans`` of them; they are returned in story order as character offsets.

Labelling protocol (tokenisation and score)
  * Words are maximal runs of non-whitespace (``str.split()``, i.e. ``\\S+``, Unicode
    whitespace).  A word's normalised form is its ``str.lower()`` with every Unicode punctuation
    character (``unicodedata.category`` starting with ``"P"``) removed *anywhere in the word*
    (``"King's," -> "kings"``, ``"well-known" -> "wellknown"``); symbols (``$``, ``+``) are
    kept.  Words that normalise to ``""`` (a lone ``"--"``) are dropped: they never match and
    do not count in any length.  Answers are tokenised the same way (``normalize_words``).
  * ROUGE-L is the LCS F-measure with ``beta = 1`` against ONE reference,
    ``F1 = 2 * LCS / (|candidate| + |reference|)`` (equal to ``2PR / (P + R)``; this form makes
    the value bit-identical however it is computed), 0 when either side is empty.
  * A span is reported from the start of its first word to the end of its last word, so
    ``text[begin:end]`` keeps the punctuation attached to those words (``"the king,``).

Where this differs from the evaluation (``model/evaluation/narrativeqa.py``, 'paper' protocol,
which copies nlg-eval / pycocoevalcap): there, the whole string is lower-cased and only a
*trailing* run of spaces/periods is removed; tokens are ``str.split(' ')`` (single spaces: a
double space makes an empty token) and keep their punctuation (``"king,"`` != ``"king"``); and
ROUGE-L uses ``beta = 1.2`` with precision and recall each maximised over the two references
before the F-measure.  We strip all punctuation so that labels do not depend on commas and
quotes, and use per-reference F1 so that a span's score is that of one answer.  Consequently the
evaluation score of ``text[begin:end]`` used verbatim as a prediction can be lower than the
oracle score (attached punctuation, beta) -- the labels pick *where* the answer is, not the exact
string a generator should emit.  Lower-casing is identical (``str.lower``).  Text without spaces
between words (CJK) is one "word" per whitespace run here, as in the evaluation.

Algorithm (exact with respect to the window space above)
  A window that ends with a word absent from the answer scores strictly less than the window
  without it (same LCS, longer), and a window is only considered when it STARTS with an answer
  word; so the best window -- and every window the greedy selection can keep -- starts and ends
  with answer words.  For each answer ``a`` (``m`` words):

  1. starts: the positions of the answer's words in the story (inverted index of ``StoryIndex``);
  2. an upper bound per start: with ``c`` the clipped count of answer words in the next ``W``
     story words (``sum over word types of min(count in window, count in answer)``, from
     running counts along the sorted starts), no window there beats ``2c / (c + m)``;
  3. starts are processed in chunks by decreasing bound, vectorised with numpy: the window grows
     one word at a time and the LCS of every start's window with the answer is updated by the
     bit-parallel LCS recurrence (Allison-Dix / Hyyro: one machine word holds 64 answer
     positions; ``V <- (V + (V & M[w])) | (V & ~M[w])``, LCS = zero bits of ``V``; answers
     longer than 64 words use several words with a carry), so one extension costs a handful of
     array operations instead of an ``O(|window| * m)`` DP;
  4. the running best and threshold ``max(min_score, relative * best)`` only rise; a start is
     scored only while its bound reaches the threshold (it may give a span) or exceeds the best
     (it may raise it: the best is exact even when no window reaches min_score), so the first
     start failing both ends the search for that answer.

  The result equals the exhaustive search over every window of up to ``W`` words starting at an
  answer word (``benchmarks/oracle.py`` has that reference; the tests compare best scores and
  selected spans on random stories).

The module is a little over 500 lines because the word protocol, the story index and the pruned
bit-parallel search are one exact algorithm whose invariants (above) tie them together; about a
seventh of it is this docstring.

Why this module is over 500 lines: the labelling protocol written out above is an eighth of
it; the rest is one search (word index, candidate windows, scores) over one story.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
import unicodedata
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from schemas.settings import setting
from schemas.text_metrics import lcs_length

_WORD_RE = re.compile(r"\S+")
# Every code point with str.isspace() is <= U+3000 (IDEOGRAPHIC SPACE); StoryIndex checks its
# word count against str.split() anyway and falls back to the regex on a mismatch.
_WS_TABLE_SIZE = 0x3001
# Cells (starts x window words) scored per vectorised chunk: bounds the temporary memory
# (about 40 bytes a cell) and lets the rising threshold prune the remaining starts.
_CHUNK_CELLS = 1 << 18
_FIRST_CHUNK = 256
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclasses.dataclass(frozen=True)
class OracleConfig:
  """Selection rules of `oracle_spans`.

  Attributes:
    min_score: Absolute floor on a span's ROUGE-L F1, in [0, 1] (a span always shares at
      least one word with an answer, so its score is > 0 even with min_score 0).
    relative: A span must also score >= relative * (best score of the question), in [0, 1].
    max_spans: At most this many spans per question (>= 1).
    extra_words: Windows have at most 2 * |answer| + extra_words words (>= 0).
  """
  min_score: float = setting(
      0.35, help="smallest ROUGE-L F1 of an answer span (default: %(default)s)")
  relative: float = setting(
      0.9, help="keep spans scoring at least this share of the question's best (default: "
                "%(default)s)")
  max_spans: int = setting(100, help="answer spans per question at most (default: %(default)s)")
  extra_words: int = 5

  def __post_init__(self):
    for name in ("min_score", "relative"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"OracleConfig.{name} must be a number, got {value!r}")
      if not 0.0 <= value <= 1.0:
        raise ValueError(f"OracleConfig.{name} must be in [0, 1], got {value!r}")
    for name, low in (("max_spans", 1), ("extra_words", 0)):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"OracleConfig.{name} must be an integer, got {value!r}")
      if value < low:
        raise ValueError(f"OracleConfig.{name} must be >= {low}, got {value!r}")

  def threshold(self, best: float) -> float:
    """The score a span needs when the question's best score is ``best``."""
    return max(self.min_score, self.relative * best)

  def max_window(self, answer_words: int) -> int:
    """Most words a window scored against an answer of ``answer_words`` words may have."""
    return 2 * answer_words + self.extra_words


# ------------------------------------------------------------------ tokens


@functools.lru_cache(maxsize=None)
def _is_punctuation(char: str) -> bool:
  return unicodedata.category(char).startswith("P")


def normalize_word(word: str) -> str:
  """Lower-case with every Unicode punctuation character removed ("" if nothing is left)."""
  lowered = word.lower()
  if lowered.isalnum():  # letters and digits only: the common case, no punctuation inside
    return lowered
  return "".join(c for c in lowered if not _is_punctuation(c))


def normalize_words(text: str) -> List[Tuple[str, int, int]]:
  """The words of ``text`` as ``(normalised form, char begin, char end)``.

  Words are maximal runs of non-whitespace; ``text[begin:end]`` is the raw word.  Words whose
  normalised form is empty (punctuation only) are dropped.
  """
  out = []
  for m in _WORD_RE.finditer(text):
    norm = normalize_word(m.group())
    if norm:
      out.append((norm, m.start(), m.end()))
  return out


def rouge_l_f1(candidate_words: Sequence[str], reference_words: Sequence[str]) -> float:
  """ROUGE-L F1 (beta = 1): ``2 LCS / (|candidate| + |reference|)``; 0 if either is empty.

  Tokens are compared as given (pass normalised words, e.g. from `normalize_words`).
  """
  if not candidate_words or not reference_words:
    return 0.0
  lcs = lcs_length(candidate_words, reference_words)
  return 2 * lcs / (len(candidate_words) + len(reference_words))


# ------------------------------------------------------------------- index


@functools.lru_cache(maxsize=1)
def _whitespace_table() -> np.ndarray:
  """Bool per code point below _WS_TABLE_SIZE (one extra False entry for everything above)."""
  table = np.zeros(_WS_TABLE_SIZE + 1, dtype=bool)
  table[[c for c in range(_WS_TABLE_SIZE) if chr(c).isspace()]] = True
  return table


def _split_words(text: str) -> Tuple[List[str], np.ndarray, np.ndarray]:
  """(raw words, char begins, char ends) of the maximal non-whitespace runs, vectorised."""
  words = text.split()
  if not words:
    empty = np.zeros(0, dtype=np.int64)
    return words, empty, empty
  code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
  table = _whitespace_table()
  is_word = ~table[np.minimum(code_points, _WS_TABLE_SIZE)]
  edges = np.diff(is_word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
  begins = np.flatnonzero(edges == 1)
  ends = np.flatnonzero(edges == -1)
  if len(begins) != len(words):  # a whitespace character the table does not know
    spans = [m.span() for m in _WORD_RE.finditer(text)]
    begins = np.array([s for s, _ in spans], dtype=np.int64)
    ends = np.array([e for _, e in spans], dtype=np.int64)
  return words, begins.astype(np.int64), ends.astype(np.int64)


class StoryIndex:
  """A story's normalised words and an inverted index; build once, reuse for all questions.

  Attributes:
    text: The story text.
    ids: int32 normalised-word id of each kept word (words normalising to "" are dropped, so
      word positions count kept words only).
    begins, ends: int64 char span of each kept word in ``text``.
    vocab: normalised form -> id.
    forms: id -> normalised form.
  """

  def __init__(self, text: str):
    if not isinstance(text, str):
      raise TypeError(f"StoryIndex needs a str, got {type(text).__name__}")
    self.text = text
    raw, begins, ends = _split_words(text)
    raw_vocab: Dict[str, int] = {}
    raw_ids = np.fromiter((raw_vocab.setdefault(w, len(raw_vocab)) for w in raw),
                          dtype=np.int64, count=len(raw))
    self.vocab: Dict[str, int] = {}
    raw_to_norm = np.empty(len(raw_vocab), dtype=np.int32)
    for word, i in raw_vocab.items():
      norm = normalize_word(word)
      raw_to_norm[i] = self.vocab.setdefault(norm, len(self.vocab)) if norm else -1
    del raw, raw_vocab
    norm_ids = raw_to_norm[raw_ids]
    keep = norm_ids >= 0
    self.ids: np.ndarray = norm_ids[keep]
    self.begins: np.ndarray = begins[keep]
    self.ends: np.ndarray = ends[keep]
    self.forms: List[str] = list(self.vocab)
    # Inverted index: the positions of word id k are _positions[_offsets[k]:_offsets[k + 1]],
    # ascending (stable sort), one array for the whole story instead of one per word.
    self._positions = np.argsort(self.ids, kind="stable").astype(np.int32)
    self._offsets = np.zeros(len(self.vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(self.ids, minlength=len(self.vocab)), out=self._offsets[1:])
    # ids followed by one sentinel (len(vocab)) that windows running past the end read.
    self._ids_padded = np.append(self.ids, np.int32(len(self.vocab))).astype(np.int32)

  def __len__(self) -> int:
    return len(self.ids)

  def word_id(self, form: str) -> int:
    """Id of a normalised form, -1 if it does not occur in the story."""
    return self.vocab.get(form, -1)

  def positions(self, word_id: int) -> np.ndarray:
    """Ascending word positions of a normalised-word id (a read-only view)."""
    if not 0 <= word_id < len(self.vocab):
      return self._positions[:0]
    view = self._positions[self._offsets[word_id]:self._offsets[word_id + 1]]
    view.flags.writeable = False
    return view

  def word(self, position: int) -> str:
    """The raw text of the word at ``position``."""
    return self.text[self.begins[position]:self.ends[position]]

  def normalized(self, first: int = 0, last: Optional[int] = None) -> List[str]:
    """Normalised forms of the words ``first..last`` (inclusive; default: to the end)."""
    stop = len(self.ids) if last is None else last + 1
    return [self.forms[i] for i in self.ids[first:stop].tolist()]

  def char_span(self, first: int, last: int) -> Tuple[int, int]:
    """(begin of word ``first``, end of word ``last``) in ``text``."""
    return int(self.begins[first]), int(self.ends[last])

  def nbytes(self) -> int:
    """Bytes held by the numpy arrays (not counting ``text`` and the vocabulary)."""
    return sum(a.nbytes for a in (self.ids, self.begins, self.ends, self._positions,
                                  self._offsets, self._ids_padded))


# ------------------------------------------------------------------ search


if hasattr(np, "bitwise_count"):
  def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x)
else:  # numpy < 2.0
  _BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

  def _popcount(x: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(x).view(np.uint8).reshape(x.shape + (8,))
    return _BYTE_POPCOUNT[b].sum(axis=-1)


class _Search:
  """State shared by the answers of one question: running best and collected candidates."""

  def __init__(self, config: OracleConfig):
    self.config = config
    self.best = 0.0
    self.best_answer = -1
    self.firsts: List[np.ndarray] = []
    self.lasts: List[np.ndarray] = []
    self.scores: List[np.ndarray] = []
    self.starts = 0
    self.starts_scored = 0
    self.windows_scored = 0

  def threshold(self) -> float:
    return self.config.threshold(self.best)

  def needed(self, bound):
    """Whether a start with this score bound can still give a span or raise the best (the
    best is reported exactly even when it is below min_score); works on arrays too."""
    return (bound >= self.threshold()) | (bound > self.best)


def _answer_tables(index: StoryIndex, aids: np.ndarray
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """``(uniq, counts, local, bits)`` of an answer given as story word ids (-1: not in story).

  ``uniq``/``counts``: the answer's word ids that occur in the story and their multiplicity in
  the answer; ``local``: story word id (and the end sentinel ``len(vocab)``) -> row of ``bits``
  (``len(uniq)`` for words not in the answer); ``bits``: ``(len(uniq) + 1, limbs)`` uint64, bit
  ``j`` of row ``k`` set iff answer word ``j`` is ``uniq[k]``, the last row all zero.
  """
  uniq, counts = np.unique(aids[aids >= 0], return_counts=True)
  local = np.full(len(index.vocab) + 1, len(uniq), dtype=np.int32)
  local[uniq] = np.arange(len(uniq), dtype=np.int32)
  bits = np.zeros((len(uniq) + 1, (len(aids) + 63) // 64), dtype=np.uint64)
  for j, a in enumerate(aids.tolist()):
    if a >= 0:
      bits[local[a], j // 64] |= np.uint64(1 << (j % 64))
  return uniq, counts, local, bits


def _score_chunk(index: StoryIndex, starts: np.ndarray, local: np.ndarray, bits: np.ndarray,
                 m: int, width: int) -> Tuple[np.ndarray, np.ndarray]:
  """ROUGE-L F1 of every window ``starts[k] .. starts[k] + t`` against the answer.

  Returns ``(scores, ends_ok)``, both ``(len(starts), width)``: ``scores[k, t]`` is the F1 of
  the ``t + 1``-word window, 0 where it ends with a non-answer word or runs past the story.
  """
  n = len(index)
  limbs = bits.shape[1]
  cols = starts[:, None] + np.arange(width, dtype=np.int64)[None, :]
  loc = local[index._ids_padded[np.minimum(cols, n)]]  # pylint: disable=protected-access
  ends_ok = loc != len(bits) - 1
  masks = bits[loc]  # (K, width, limbs)
  low = np.full(limbs, _ALL_ONES, dtype=np.uint64)
  if m % 64:
    low[-1] = np.uint64((1 << (m % 64)) - 1)
  v = np.full((len(starts), limbs), _ALL_ONES, dtype=np.uint64)
  scores = np.zeros((len(starts), width), dtype=np.float64)
  for t in range(width):
    mt = masks[:, t, :]
    u = v & mt
    keep = v & ~mt
    if limbs == 1:
      total = v + u  # uint64 arithmetic wraps: the carry out of the top bit is dropped
    else:
      total = np.empty_like(v)
      carry = np.zeros(len(starts), dtype=np.uint64)
      for limb in range(limbs):
        s = v[:, limb] + u[:, limb]
        c1 = s < v[:, limb]
        s2 = s + carry
        carry = (c1 | (s2 < s)).astype(np.uint64)
        total[:, limb] = s2
    v = total | keep
    lcs = m - _popcount(v & low).sum(axis=1, dtype=np.int64)
    scores[:, t] = np.where(ends_ok[:, t], (2.0 * lcs) / (t + 1 + m), 0.0)
  return scores, ends_ok


def _search_answer(index: StoryIndex, aids: np.ndarray, answer: int, state: _Search) -> None:
  """Scores the candidate windows of one answer (story word ids ``aids``, -1 = not in story)."""
  m = len(aids)
  width = state.config.max_window(m)
  uniq, counts, local, bits = _answer_tables(index, aids)
  if not len(uniq):
    return
  starts = np.sort(np.concatenate([index.positions(int(u)) for u in uniq])).astype(np.int64)
  state.starts += len(starts)
  # Upper bound per start from the clipped count of answer words among the next `width` words:
  # the starts ARE the answer-word positions, so the count of type k in [s, s + width) is a
  # difference of its running count along `starts`.
  kinds = local[index.ids[starts]]
  stop_rank = np.searchsorted(starts, starts + width)
  clipped = np.zeros(len(starts), dtype=np.int64)
  running = np.zeros(len(starts) + 1, dtype=np.int64)
  for k, count in enumerate(counts.tolist()):
    np.cumsum(kinds == k, out=running[1:])
    clipped += np.minimum(running[stop_rank] - running[:-1], count)
  order = np.argsort((m - clipped).astype(np.int16 if m < 2**15 else np.int64), kind="stable")
  starts = starts[order]
  bounds = (2.0 * clipped[order]) / (clipped[order] + m)
  del clipped, order, kinds, stop_rank, running

  # Chunks grow geometrically: the first (highest bounds) sets the best early, so that later
  # starts can be skipped; the cap bounds the temporary memory.
  chunk, max_chunk = _FIRST_CHUNK, max(_FIRST_CHUNK, _CHUNK_CELLS // width)
  pos = 0
  while pos < len(starts):
    if not state.needed(bounds[pos]):  # bounds are non-increasing: nothing further matters
      break
    block = starts[pos:pos + chunk][state.needed(bounds[pos:pos + chunk])]
    pos += chunk
    chunk = min(4 * chunk, max_chunk)
    scores, ends_ok = _score_chunk(index, block, local, bits, m, width)
    state.starts_scored += len(block)
    state.windows_scored += int(np.count_nonzero(ends_ok))  # past the end: not ends_ok
    top = float(scores.max())
    if top > state.best:
      state.best, state.best_answer = top, answer
    rows, cols = np.nonzero(ends_ok & (scores >= state.threshold()))
    if len(rows):
      state.firsts.append(block[rows])
      state.lasts.append(block[rows] + cols)
      state.scores.append(scores[rows, cols])


def select_windows(firsts: np.ndarray, lasts: np.ndarray, scores: np.ndarray, best: float,
                   config: OracleConfig = OracleConfig()) -> List[Tuple[int, int, float]]:
  """The oracle's selection rule on scored windows (word positions, ``last`` inclusive).

  Keeps windows scoring ``>= config.threshold(best)`` and ``> 0``, greedily by score descending (ties: the
  earlier start, then the shorter window), skipping windows that share a word with one kept
  before, at most ``config.max_spans``.  The same window may appear several times (e.g. scored
  against both answers): its copies overlap the first one, so they are never kept twice.

  Returns:
    ``[(first, last, score)]`` in story order.
  """
  firsts = np.asarray(firsts, dtype=np.int64)
  lasts = np.asarray(lasts, dtype=np.int64)
  scores = np.asarray(scores, dtype=np.float64)
  if best <= 0 or not len(scores):
    return []
  sel = (scores >= config.threshold(best)) & (scores > 0)
  firsts, lasts, scores = firsts[sel], lasts[sel], scores[sel]
  order = np.lexsort((lasts - firsts, firsts, -scores))
  kept_firsts: List[int] = []
  kept_lasts: List[int] = []
  kept: List[Tuple[int, int, float]] = []
  for first, last, score in zip(firsts[order].tolist(), lasts[order].tolist(),
                                scores[order].tolist()):
    k = bisect.bisect_right(kept_firsts, first)
    if k and kept_lasts[k - 1] >= first:
      continue
    if k < len(kept_firsts) and kept_firsts[k] <= last:
      continue
    kept_firsts.insert(k, first)
    kept_lasts.insert(k, last)
    kept.append((first, last, score))
    if len(kept) >= config.max_spans:
      break
  kept.sort()
  return kept


def oracle_spans(index: StoryIndex, answers: Sequence[str],
                 config: OracleConfig = OracleConfig()
                 ) -> Tuple[List[Tuple[int, int, float]], Dict[str, Any]]:
  """The story spans with the highest ROUGE-L F1 against either answer.

  Args:
    index: The story's `StoryIndex`.
    answers: Reference answers (NarrativeQA: two); empty ones and duplicates are skipped.
    config: Selection rules.

  Returns:
    ``([(char_begin, char_end, score)] in story order, stats)``; ``stats`` holds ``best`` (best
    window score, 0 when no window), ``best_answer`` (index into ``answers``, -1 when none),
    ``threshold``, ``answer_words`` (normalised word count per answer), ``starts`` (answer-word
    positions), ``starts_scored`` (after the bound), ``windows_scored``, ``candidates``
    (windows at or above the threshold) and ``spans``.
  """
  if isinstance(answers, str):
    raise TypeError("answers must be a sequence of strings, not one string")
  state = _Search(config)
  answer_words = []
  seen = set()
  for k, answer in enumerate(answers):
    forms = [w for w, _, _ in normalize_words(answer)]
    answer_words.append(len(forms))
    if not forms or tuple(forms) in seen:
      continue
    seen.add(tuple(forms))
    aids = np.array([index.word_id(w) for w in forms], dtype=np.int64)
    _search_answer(index, aids, k, state)

  spans: List[Tuple[int, int, float]] = []
  candidates = 0
  if state.scores:
    firsts = np.concatenate(state.firsts)
    lasts = np.concatenate(state.lasts)
    scores = np.concatenate(state.scores)
    candidates = int(np.count_nonzero(scores >= state.threshold()))
    kept = select_windows(firsts, lasts, scores, state.best, config)
    if kept:
      begins = index.begins[[f for f, _, _ in kept]].tolist()
      ends = index.ends[[l for _, l, _ in kept]].tolist()
      spans = [(b, e, s) for b, e, (_, _, s) in zip(begins, ends, kept)]
  stats = {
      "best": state.best,
      "best_answer": state.best_answer,
      "threshold": state.threshold(),
      "answer_words": answer_words,
      "starts": state.starts,
      "starts_scored": state.starts_scored,
      "windows_scored": state.windows_scored,
      "candidates": candidates,
      "spans": len(spans),
  }
  return spans, stats
