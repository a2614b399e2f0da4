"""Splits a tokenised document into fixed-length, overlapping, word-aligned segments.

Layout of one segment of ``seq_length`` L tokens::

  [CLS] question tokens [SEP] context tokens ... [SEP] [PAD] ...     (QA)
  [CLS] context tokens ... [SEP] [PAD] ...                           (no question)

Context windows (:func:`context_windows`) hold at most ``budget`` context tokens, consecutive
windows share at least ``overlap`` of them, and every window starts at least half a stride
(``ceil((budget - overlap) / 2)``) after the previous one, so a document of ``n`` tokens gets at
most ``2 * ceil((n - overlap) / (budget - overlap)) - 1`` windows (the ideal is
``ceil((n - overlap) / (budget - overlap))``; ordinary text gets it or a few percent more).
Window edges fall on word starts where the allowed range has one, else on a character boundary
(text without spaces: Thai, long identifiers, base64; counted as ``char_boundary_cuts``), so a
multi-byte character split into several byte-level tokens is never cut; only where a run of
tokens without a character start is as long as the allowed range (about half a stride) is a
character cut inside (``hard_cuts``; does not happen for byte-level BPE at sane lengths).  A
document with more than ``max_segments_per_document`` windows becomes several
explicit sub-documents of at most that many segments each (``sub_document_index`` /
``num_sub_documents``).

Spans (answers, entity mentions) arrive as char offsets into the document text and are mapped to
the tokens they overlap.  A span is labelled in every segment that contains it *entirely*; a
segment that contains only part of it does not get a truncated label (counted as ``*_cut``), and a
span that no segment contains entirely (longer than the overlap) is counted as ``*_lost``.  Spans
are never capped per segment.  Question-prefix tokens are never labelled: answers are searched in
the document text only, so an answer that also appears in the question is labelled where it
appears in the context.

Why this module is over 500 lines: window edges, span placement and sub-documents share
the windows' token and character positions; about a tenth of it is this docstring.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import math
import numbers
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from schemas import records
from pipelines import keys
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
    for name in ("seq_length", "overlap", "max_segments_per_document", "max_question_tokens"):
      value = getattr(self, name)
      if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValueError(f"--{name} must be an integer, got {value!r}")
    if self.overlap < 0:
      raise ValueError(f"--overlap must be >= 0, got {self.overlap}")
    if self.max_question_tokens < 0:
      raise ValueError(f"--max_question_tokens must be >= 0, got {self.max_question_tokens}")
    # The smallest context budget (a question of max_question_tokens tokens, CLS, 2 SEP) must
    # exceed the overlap: every window then advances by >= 1 token.  context_windows guarantees
    # its invariants for every budget > overlap, so nothing else is refused.
    budget = self.seq_length - self.max_question_tokens - 3
    if budget <= self.overlap:
      raise ValueError(
          f"--seq_length={self.seq_length} leaves {budget} context tokens after a question of "
          f"up to --max_question_tokens={self.max_question_tokens} tokens, [CLS] and two "
          f"[SEP]; that must exceed --overlap={self.overlap} (lower --overlap or "
          f"--max_question_tokens, or raise --seq_length).")
    if self.max_segments_per_document < 1:
      raise ValueError("--max_segments_per_document must be >= 1, got "
                       f"{self.max_segments_per_document}")


@dataclasses.dataclass
class SubDocument:
  """Segments of one (sub-)document, ready to pack, in a compact form.

  It holds the context tokens its windows cover (once, not once per overlapping segment), the
  question prefix and the windows; :meth:`fill` lays the segments out as ``[S, L]`` token
  features directly into a pack.  This keeps what travels between pipeline stages ~4x
  smaller than the laid-out segments.
  """
  key: str  # sort/shard key: document id, question id and sub-document index
  document_id: str
  question_id: str
  sub_document_index: int
  num_sub_documents: int
  seq_length: int
  special: Tuple[int, int, int]  # cls, sep, pad ids
  context: Dict[str, np.ndarray]  # ids/begins/ends (int32), word_start (int8): covered slice
  question: Dict[str, np.ndarray]  # same keys, truncated question tokens
  windows: np.ndarray  # [S, 2] half-open windows into ``context``
  segments: Dict[str, np.ndarray]  # SEGMENT_FEATURES -> [S]
  answers: np.ndarray  # [K, 3] (segment in this sub-document, begin, end), inclusive
  mentions: np.ndarray  # [M, 4] (segment, begin, end, entity_id), inclusive
  # When set, the mentions' last column indexes these entity keys (resolved to ids at pack
  # time, see ``entity_ids``) instead of holding ids.
  entity_keys: Tuple[str, ...] = ()
  context_begin: int = 0  # where ``context`` starts in the document's tokens
  # The document's tokens (``Encoded.compact``) that ``context`` is a slice of: one object for
  # every sub-document of a tokenised text, and for every question reading that text, so the
  # spill stage stores a story's tokens once, not once per question.  Not pickled.
  context_source: Optional[Dict[str, np.ndarray]] = dataclasses.field(
      default=None, compare=False, repr=False)

  @property
  def num_segments(self) -> int:
    return int(self.windows.shape[0])

  @property
  def context_length(self) -> int:
    """Tokens in ``context``: the windows are relative to it and the last ends at its end."""
    return int(self.windows[:, 1].max()) if len(self.windows) else 0

  def detached(self) -> "SubDocument":
    """This sub-document without its context tokens (stored once per text, apart): put them
    back with :meth:`attached`."""
    return dataclasses.replace(self, context={}, context_source=None)

  def attached(self, source: Dict[str, np.ndarray]) -> "SubDocument":
    """A :meth:`detached` sub-document with its context sliced from its document's tokens."""
    lo, hi = self.context_begin, self.context_begin + self.context_length
    if hi > len(source["ids"]):
      raise ValueError(f"sub-document {self.key}: context [{lo}, {hi}) runs past its document's "
                       f"{len(source['ids'])} tokens")
    return dataclasses.replace(self, context={k: v[lo:hi] for k, v in source.items()},
                               context_source=source)

  def fill(self, out: Dict[str, np.ndarray], row: int) -> None:
    """Writes TOKEN_FEATURES of the segments into ``out[name][row:row + S]`` (``[N, L]``
    arrays that already hold padding values); see :func:`lay_out`."""
    lay_out([self], out, row)

  def __reduce__(self):
    # Pickled between pipeline stages: one buffer for all arrays is several times faster than
    # pickling ~20 small numpy arrays one by one.
    groups = (self.context, self.question, self.segments)
    arrays = [a for g in groups for a in g.values()] + [self.windows, self.answers,
                                                         self.mentions]
    meta = ([list(g) for g in groups], [(a.dtype.str, a.shape) for a in arrays])
    blob = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
    head = (self.key, self.document_id, self.question_id, self.sub_document_index,
            self.num_sub_documents, self.seq_length, self.special)
    return _rebuild_sub_document, (head, meta, blob, self.entity_keys, self.context_begin)

  @property
  def tokens(self) -> Dict[str, np.ndarray]:
    """The laid-out ``[S, L]`` token features (int64)."""
    out = empty_token_features(self.num_segments, self.seq_length, self.special[2])
    self.fill(out, 0)
    return out


def _runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` in bulk."""
  total = int(lengths.sum())
  first = np.cumsum(lengths) - lengths
  return np.arange(total) - np.repeat(first - starts, lengths)


def lay_out(docs: Sequence[SubDocument], out: Dict[str, np.ndarray], row: int) -> None:
  """Writes the TOKEN_FEATURES of ``docs``' segments, one after the other from ``row``, into
  ``out[name]`` (``[N, L]`` int64 arrays that already hold padding values).

  Each segment is ``[CLS] question [SEP] context-window [SEP]`` (``[CLS] context [SEP]``
  without a question).  All documents are laid out with one gather and one scatter per
  feature over flat indices (a pack holds ~30 documents; per-document numpy calls cost more
  than the copying).
  """
  if not docs:
    return
  L = docs[0].seq_length
  cls, sep, _ = docs[0].special
  windows = np.concatenate([d.windows for d in docs]).astype(np.int64)
  per_doc = np.array([d.num_segments for d in docs])
  # Per segment: its row, question prefix (1 = CLS alone), and where its question and context
  # tokens start in the concatenated arrays of all documents.
  rows = np.arange(row, row + len(windows)) * L
  prefix = np.repeat([int(d.segments["question_length"][0]) for d in docs], per_doc)
  q_len = np.repeat([len(d.question["ids"]) for d in docs], per_doc) * (prefix > 1)
  q_start = np.repeat(np.cumsum([0] + [len(d.question["ids"]) for d in docs])[:-1], per_doc)
  c_base = np.repeat(np.cumsum([0] + [len(d.context["ids"]) for d in docs])[:-1], per_doc)
  c_len = windows[:, 1] - windows[:, 0]
  places = (
      # (flat destination, source index into the concatenated arrays, which arrays, kind)
      (np.repeat(rows + 1, q_len) + _runs(np.zeros_like(q_len), q_len),
       _runs(q_start, q_len), "question", records.TOKEN_KIND_QUESTION),
      (np.repeat(rows + prefix, c_len) + _runs(np.zeros_like(c_len), c_len),
       _runs(c_base + windows[:, 0], c_len), "context", records.TOKEN_KIND_CONTEXT),
  )
  flat = {name: out[name].reshape(-1) for name in TOKEN_FEATURES}
  for dest, src, part, kind in places:
    for name, key in (("token_ids", "ids"), ("word_start", "word_start"),
                      ("char_begin", "begins"), ("char_end", "ends")):
      flat[name][dest] = np.concatenate([getattr(d, part)[key] for d in docs])[src]
    flat["token_kind"][dest] = kind
  first_sep = (rows + prefix - 1)[prefix > 1]
  last_sep = rows + prefix + c_len
  for at, token in ((rows, cls), (first_sep, sep), (last_sep, sep)):
    flat["token_ids"][at] = token
    flat["token_kind"][at] = records.TOKEN_KIND_SPECIAL
  used = slice(row, row + len(windows))
  out["input_mask"][used] = np.arange(L)[None, :] < (last_sep - rows + 1)[:, None]


def _rebuild_sub_document(head, meta, blob, entity_keys=(), context_begin=0) -> SubDocument:
  names, specs = meta
  arrays, pos = [], 0
  for dtype, shape in specs:
    a = np.frombuffer(blob, dtype=dtype, count=math.prod(shape), offset=pos).reshape(shape)
    arrays.append(a)
    pos += a.nbytes
  it = iter(arrays)
  context, question, segments = ({n: next(it) for n in group} for group in names)
  windows, answers, mentions = next(it), next(it), next(it)
  return SubDocument(*head, context=context, question=question, windows=windows,
                     segments=segments, answers=answers, mentions=mentions,
                     entity_keys=tuple(entity_keys), context_begin=context_begin)


# An entity key standing for a mention's own id (a document mixing keyed and id'd mentions).
_ID_KEY = "\x00"


def entity_table(mentions) -> Tuple[List[Tuple[int, int, int]], Tuple[str, ...]]:
  """``(begin, end, entity)`` rows and entity keys for a document's :class:`Mention` s.

  Without entity keys the rows hold the ids and the keys are ``()``.  With keys, the last
  column indexes the returned keys (in order of first appearance); a mention with an id but
  no key gets the key ``"\x00<id>"``, which :func:`entity_ids` maps back to its id.
  """
  if not any(m.entity for m in mentions):
    return [(m.begin, m.end, m.entity_id) for m in mentions], ()
  index: Dict[str, int] = {}
  rows = [(m.begin, m.end, index.setdefault(m.entity or f"{_ID_KEY}{m.entity_id}", len(index)))
          for m in mentions]
  return rows, tuple(index)


def entity_ids(keys: Sequence[str], table: Optional[Mapping[str, int]]) -> np.ndarray:
  """The ids of entity keys (0 = unknown: not in ``table``)."""
  if keys and table is None:
    raise ValueError("documents carry entity keys but the job gave no entity table to resolve "
                     "them")
  return np.array([int(k[1:]) if k.startswith(_ID_KEY) else table.get(k, 0) for k in keys],
                  dtype=np.int64)


def empty_token_features(num_segments: int, seq_length: int, pad_id: int
                         ) -> Dict[str, np.ndarray]:
  """``[S, L]`` int64 token features holding only padding."""
  out = {name: np.zeros((num_segments, seq_length), dtype=np.int64) for name in TOKEN_FEATURES}
  out["token_ids"][:] = pad_id
  out["char_begin"][:] = -1
  out["char_end"][:] = -1
  return out


def sub_document_key(document_id: str, question_id: str, sub_index: int) -> str:
  """Sort key; the writer shards on its group, the document id (see :mod:`pipelines.keys`)."""
  return keys.join_key(document_id, question_id, f"{sub_index:06d}")


def character_starts(begins: np.ndarray, ends: np.ndarray) -> np.ndarray:
  """``[T]`` bool: token i starts a new character, i.e. a window edge before it cuts no character.

  Byte-level BPE splits a multi-byte character (CJK, emoji) into tokens that all carry that
  character's offsets, and a token may even hold the last bytes of one character and the first
  of the next (offsets covering both).  So i is an edge iff i == 0 or ``begins[i] !=
  begins[i-1]`` and ``begins[i] >= ends[i-1]``.  (The edge at i == n is always legal.)  A token
  after an empty one (spaces trimmed to ``(b, b)``) that begins at the same b is conservatively
  not an edge.
  """
  out = np.ones(len(begins), dtype=bool)
  if len(begins) > 1:
    out[1:] = (begins[1:] != begins[:-1]) & (begins[1:] >= ends[:-1])
  return out


def _last_at_most(edges: List[int], lo: int, hi: int) -> int:
  """The largest value of sorted ``edges`` in ``[lo, hi]``, or -1 (``bisect`` on a list: a
  document has hundreds of windows, and ``np.searchsorted`` on one value costs ~10x more)."""
  i = bisect.bisect_right(edges, hi) - 1
  if i >= 0:
    v = edges[i]
    if v >= lo:
      return v
  return -1


class WindowEdges:
  """The tokens :func:`context_windows` may cut before, as sorted lists: ``words`` (word starts
  that are also character starts) and :meth:`chars` (character starts, listed on the first
  call: only text without word starts for a while needs them; None: every token)."""

  def __init__(self, word_start: np.ndarray, char_start: Optional[np.ndarray] = None):
    ws = np.asarray(word_start, dtype=bool)
    self._char_start = None if char_start is None else np.asarray(char_start, dtype=bool)
    self.words: List[int] = np.flatnonzero(
        ws if self._char_start is None else ws & self._char_start).tolist()
    self._chars: Optional[List[int]] = None

  def chars(self) -> Optional[List[int]]:
    if self._chars is None and self._char_start is not None:
      self._chars = np.flatnonzero(self._char_start).tolist()
    return self._chars


_WORD, _CHAR, _HARD = 2, 1, 0  # edge tiers, best first


def context_windows(word_start: np.ndarray, budget: int, overlap: int,
                    stats: collections.Counter,
                    char_start: Optional[np.ndarray] = None,
                    edges: Optional[WindowEdges] = None) -> List[Tuple[int, int]]:
  """Half-open windows ``[s, e)`` covering ``n = len(word_start)`` tokens.

  ``edges``: the :class:`WindowEdges` of ``word_start`` and ``char_start``, when already
  computed (a story read by several questions); then ``char_start`` is not read.

  ``char_start`` (:func:`character_starts`; None: every token starts a character) marks the
  tokens a window may start or end before without cutting a character; a word start that is
  not also a character start is ignored.  With ``D = budget - overlap >= 1`` and
  ``h = ceil(D / 2)``, window ``[s, e)`` (not the last) and the next start ``s'`` satisfy

  * ``max(s + overlap + h, e_prev + 1) <= e <= s + budget`` and
  * ``s + h <= s' <= e - overlap``,

  so every window has <= ``budget`` tokens, consecutive windows share >= ``overlap`` tokens,
  starts and ends strictly increase, the last window ends at n, and (each start advancing by
  >= h) there are at most ``2 * ideal - 1`` windows, ``ideal = max(1, ceil((n - overlap) /
  D))`` (ordinary text, with dense word starts, gets within a few percent of the ideal).
  Within those ranges each edge is the largest word start, else the largest character start
  (``char_boundary_cuts``), else cut inside a character (``hard_cuts``): ``e`` is chosen so
  that the pair ``(e, s')`` has the fewest hard, then character cuts, then the latest ``e``, so
  a hard cut happens only when no pair of character starts fits, i.e. a run of tokens without
  a character start as long as about ``D / 2`` (byte-level BPE has at most 4 tokens per
  character, so this needs a tiny ``D`` below ~12 or a rare chain of tokens that each straddle
  two characters).  Preferring word starts costs windows where words are long: text of
  random 100-character "words" (~55 tokens each) gets ~1.25x the ideal.
  """
  n = len(word_start)
  if budget <= overlap or overlap < 0:
    raise ValueError(f"budget={budget} must exceed overlap={overlap} >= 0")
  if edges is None:
    edges = WindowEdges(word_start, char_start)
  words = edges.words
  half = (budget - overlap + 1) // 2

  def last_char(lo: int, hi: int) -> int:
    chars = edges.chars()
    return hi if chars is None else _last_at_most(chars, lo, hi)

  def best(lo: int, hi: int) -> Tuple[int, int]:
    """(edge, tier): the largest word start in [lo, hi], else character start, else hi."""
    e = _last_at_most(words, lo, hi)
    if e >= 0:
      return e, _WORD
    e = last_char(lo, hi)
    return (e, _CHAR) if e >= 0 else (hi, _HARD)

  cuts = [0, 0, 0]  # per tier
  windows = []
  s, prev_e = 0, 0
  while s + budget < n:
    lo, hi = max(s + overlap + half, prev_e + 1), s + budget
    e, te = best(lo, hi)
    nxt, tn = best(s + half, e - overlap)
    if te != _WORD or tn != _WORD:
      # A later end widens the range of the next start: try the largest character start and
      # the hard end too; fewest hard cuts, then fewest character cuts, then the later end.
      options = [(e, te, nxt, tn)]
      ec = last_char(lo, hi)
      for end, tier in ((ec, _CHAR), (hi, _HARD)):
        if end > options[-1][0]:
          options.append((end, tier, *best(s + half, end - overlap)))
      e, te, nxt, tn = max(options, key=lambda o: (min(o[1], o[3]) > _HARD,
                                                   -((o[1] == _HARD) + (o[3] == _HARD)),
                                                   -((o[1] == _CHAR) + (o[3] == _CHAR)),
                                                   o[0]))
    cuts[te] += 1
    cuts[tn] += 1
    windows.append((s, e))
    s, prev_e = nxt, e
  windows.append((s, n))
  stats["char_boundary_cuts"] += cuts[_CHAR]
  stats["hard_cuts"] += cuts[_HARD]
  return windows


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


def _compact(enc: Optional[Encoded], lo: int, hi: int) -> Dict[str, np.ndarray]:
  if enc is None:
    z = np.zeros(0, dtype=np.int32)
    return {"ids": z, "begins": z, "ends": z, "word_start": z.astype(np.int8)}
  return {k: v[lo:hi] for k, v in enc.compact().items()}  # views: no copy per question


def segment_document(document_id: str, question_id: str, context: Encoded,
                     question: Optional[Encoded], special_ids: Dict[str, int],
                     config: SegmenterConfig, answer_char_spans: Sequence[Tuple[int, int]] = (),
                     mentions: Sequence[Tuple[int, int, int]] = (),
                     answer_type: int = records.ANSWER_TYPE_NONE,
                     supporting_ranges: Optional[Sequence[Tuple[int, int]]] = None,
                     entity_keys: Tuple[str, ...] = (),
                     ) -> Tuple[List[SubDocument], collections.Counter]:
  """Segments one document.  ``supporting_ranges``: char ranges of supporting paragraphs, or
  None when unknown.  ``mentions``: (begin, end, entity id, or an index into ``entity_keys``
  when given; see :func:`entity_table`).  Returns the sub-documents and counters for the
  manifest."""
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
  # The edges depend on the text alone: computed once for all the questions reading it.
  edges = context.memo("window_edges", lambda: WindowEdges(
      context.word_start, character_starts(context.begins, context.ends)))
  windows = np.asarray(context_windows(context.word_start, budget, config.overlap, stats,
                                       edges=edges), dtype=np.int64).reshape(-1, 2)
  W = len(windows)

  seg = {name: np.zeros(W, dtype=np.int64) for name in SEGMENT_FEATURES}
  seg["context_char_begin"] = context.begins[windows[:, 0]].astype(np.int64)
  seg["context_char_end"] = context.ends[windows[:, 1] - 1].astype(np.int64)
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
  special = (special_ids["cls"], special_ids["sep"], special_ids["pad"])
  q_arrays = _compact(question, 0, q_len) if question is not None else _compact(None, 0, 0)
  subs = []
  for k in range(num_sub):
    lo, hi = k * max_s, min(W, (k + 1) * max_s)
    s_seg = {name: v[lo:hi].copy() for name, v in seg.items()}
    s_seg["segment_index"] = np.arange(hi - lo, dtype=np.int64)
    s_seg["num_segments"][:] = hi - lo
    c0, c1 = int(windows[lo:hi, 0].min()), int(windows[lo:hi, 1].max())

    def local(rows):
      keep = (rows[:, 0] >= lo) & (rows[:, 0] < hi)
      out = rows[keep].copy()
      out[:, 0] -= lo
      return out

    subs.append(SubDocument(
        key=sub_document_key(document_id, question_id, k), document_id=document_id,
        question_id=question_id, sub_document_index=k, num_sub_documents=num_sub,
        seq_length=L, special=special, context=_compact(context, c0, c1),
        question=q_arrays, windows=windows[lo:hi] - c0, segments=s_seg,
        answers=local(ans_rows), mentions=local(men_rows), entity_keys=entity_keys,
        context_begin=c0, context_source=context.compact()))
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
