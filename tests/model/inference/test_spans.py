"""The span search and word snapping of one segment (:mod:`model.inference.spans`; pure NumPy).  How
the decoder uses them, end to end on byte-level BPE tokens, is tested in
:mod:`tests.model.inference.test_decoding`."""

from __future__ import annotations

import numpy as np

from model.inference import spans
from schemas import records
from tests.model.inference.test_decoding import BPE_L, BPE_TEXT, BPE_TOKENS, FIRST, _bpe_pack

S, Q, C, P = (records.TOKEN_KIND_SPECIAL, records.TOKEN_KIND_QUESTION,
              records.TOKEN_KIND_CONTEXT, records.TOKEN_KIND_PAD)


def test_span_candidates_all_valid_pairs():
  kinds = np.array([S, Q, S, C, C, C, C, S, P])
  begin = np.array([99, 98, 0, 1, 5, 0, 0, 97, 0], np.float64)
  end = np.array([99, 98, 0, 9, 0, 1, 3, 97, 0], np.float64)
  cands = spans.span_candidates(begin, end, kinds, top_k=2, max_answer_tokens=2)
  # Top-2 begins: tokens 4 (5), 3 (1); top-2 ends: 3 (9), 6 (3).  (4, 3) has begin > end,
  # (4, 6) and (3, 6) are too long: only (3, 3) is left.
  assert cands == [(10.0, 3, 3)]
  cands = spans.span_candidates(begin, end, kinds, top_k=4, max_answer_tokens=4)
  # All 10 pairs b <= e of the 4 context tokens, best first; ties in (begin rank, end rank)
  # order (begin ranks 4, 3, 5, 6; end ranks 3, 6, 5, 4).
  assert cands == [(10.0, 3, 3), (8.0, 4, 6), (6.0, 4, 5), (5.0, 4, 4), (4.0, 3, 6),
                   (3.0, 5, 6), (3.0, 6, 6), (2.0, 3, 5), (1.0, 3, 4), (1.0, 5, 5)]
  assert spans.best_span(begin, end, kinds, top_k=4, max_answer_tokens=4) == cands[0]
  assert spans.span_candidates(begin, end, np.full(9, S)) == []


def test_inner_apostrophes_join_but_clitics_do_not():
  assert [t for t in ("O'Neill", "Shi'a", "rock'n'roll")
          if not all(spans._joins(t, i) for i in range(1, len(t)))] == []
  assert [i for i in range(1, 10) if not spans._joins("Hamilton's", i)] == [8, 9]
  assert [i for i in range(1, 5) if not spans._joins("don't", i)] == [3, 4]
  assert not spans._joins("students' x", 8)  # a trailing apostrophe is punctuation


def test_snap_word_starts_and_word_bounds():
  f, _ = _bpe_pack()
  ws = spans.snap_word_starts(f["word_start"][0], f["token_kind"][0], f["char_begin"][0],
                                 f["char_end"][0], BPE_TEXT)
  # Records' word starts (context 0 4 5 8 10 12) plus the punctuation cuts before "." "'s"
  # "born" ")"; the question token keeps its own flag.
  assert np.flatnonzero(ws[FIRST:FIRST + len(BPE_TOKENS)]).tolist() == [
      0, 4, 5, 7, 8, 9, 10, 11, 12, 13]
  first, last = spans.word_bounds(ws, f["token_kind"][0])
  assert first[FIRST:FIRST + 8].tolist() == [FIRST + i for i in (0, 0, 0, 0, 4, 5, 5, 7)]
  assert last[FIRST:FIRST + 8].tolist() == [FIRST + i for i in (3, 3, 3, 3, 4, 6, 6, 7)]
  # Non-context tokens are words of their own: [CLS] q [SEP] ... [SEP] pad.
  end = FIRST + len(BPE_TOKENS)
  assert first[:FIRST].tolist() == last[:FIRST].tolist() == [0, 1, 2]
  assert first[end:].tolist() == last[end:].tolist() == list(range(end, BPE_L))
