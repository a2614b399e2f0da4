"""Exact segments and spans on hand-made inputs (predictable one-token-per-word encodings)."""

import collections
import math

import numpy as np
import pytest

from schemas import records
from pipelines.document import BadInput
from pipelines.text import segmenter
from pipelines.text.segmenter import SegmenterConfig, segment_document
from synthetic.text import cjk_text, unbroken_words
from tests.pipelines.helpers import SPECIAL, numbered_words, word_encoding


def char_span(text, word):
  b = text.index(word)
  return (b, b + len(word))


def test_windows_overlap_and_layout_without_question():
  text = numbered_words(20)
  enc = word_encoding(text)
  cfg = SegmenterConfig(seq_length=10, overlap=3, max_segments_per_document=8,
                        max_question_tokens=2)
  subs, stats = segment_document("d", "", enc, None, SPECIAL, cfg)
  assert len(subs) == 1
  sub = subs[0]
  # budget = 10 - CLS - SEP = 8 context tokens; stride 8 - 3 = 5.
  ctx = sub.tokens["token_ids"] - 100
  assert sub.num_segments == 4
  assert ctx[0].tolist() == [-100] + list(range(0, 8)) + [2 - 100]
  assert ctx[1].tolist() == [-100] + list(range(5, 13)) + [2 - 100]
  assert ctx[2].tolist() == [-100] + list(range(10, 18)) + [2 - 100]
  assert sub.tokens["token_ids"][3].tolist() == [0, 115, 116, 117, 118, 119, 2, 1, 1, 1]
  assert sub.tokens["input_mask"][3].tolist() == [1] * 7 + [0] * 3
  assert sub.tokens["token_kind"][3].tolist() == [1, 3, 3, 3, 3, 3, 1, 0, 0, 0]
  assert sub.tokens["char_begin"][3, 1] == text.index("w15")
  assert sub.segments["question_length"].tolist() == [1, 1, 1, 1]
  assert sub.segments["segment_index"].tolist() == [0, 1, 2, 3]
  assert sub.segments["num_segments"].tolist() == [4, 4, 4, 4]
  assert sub.segments["context_char_begin"][1] == text.index("w5")
  assert sub.segments["context_char_end"][1] == text.index("w12") + 3
  assert stats["segments"] == 4 and stats["hard_cuts"] == 0


def test_answer_at_segment_boundary_is_labelled_only_where_whole():
  text = numbered_words(20)
  enc = word_encoding(text)
  cfg = SegmenterConfig(seq_length=10, overlap=3, max_segments_per_document=8,
                        max_question_tokens=2)
  # "w7 w8" straddles the end of window 0 ([0, 8)); window 1 ([5, 13)) holds it whole.
  b = text.index("w7")
  span = (b, text.index("w8") + 2)
  subs, stats = segment_document("d", "q", enc, None, SPECIAL, cfg,
                                 answer_char_spans=[span],
                                 answer_type=records.ANSWER_TYPE_SPAN)
  assert subs[0].answers.tolist() == [[1, 1 + 7 - 5, 1 + 8 - 5]]
  assert stats["answer_spans_cut"] == 1
  assert stats["answer_spans_lost"] == 0
  # The labelled tokens are exactly the answer's words.
  seg, lo, hi = subs[0].answers[0]
  assert (subs[0].tokens["token_ids"][seg, lo:hi + 1] - 100).tolist() == [7, 8]


def test_span_longer_than_any_window_is_counted_lost():
  text = numbered_words(20)
  enc = word_encoding(text)
  cfg = SegmenterConfig(seq_length=10, overlap=3, max_segments_per_document=8,
                        max_question_tokens=2)
  span = (text.index("w2"), text.index("w12") + 3)
  subs, stats = segment_document("d", "q", enc, None, SPECIAL, cfg, answer_char_spans=[span],
                                 answer_type=records.ANSWER_TYPE_SPAN)
  assert subs[0].answers.shape == (0, 3)
  assert stats["answer_spans_lost"] == 1
  assert stats["span_questions_without_label"] == 1


def test_boundaries_never_split_a_word():
  text = numbered_words(20)
  # w7 is 3 tokens: the first window would end inside it, so it ends before w7 instead.
  enc = word_encoding(text, split={"w7": 3})
  cfg = SegmenterConfig(seq_length=10, overlap=3, max_segments_per_document=8,
                        max_question_tokens=2)
  subs, stats = segment_document("d", "", enc, None, SPECIAL, cfg)
  sub = subs[0]
  ws = sub.tokens["word_start"]
  for s in range(sub.num_segments):
    n = int(sub.tokens["token_kind"][s].tolist().count(records.TOKEN_KIND_CONTEXT))
    assert ws[s, 1] == 1, "a segment starts inside a word"
    if s < sub.num_segments - 1:
      # the token after this window (in the whole document) starts a word
      last_char = sub.tokens["char_end"][s, n]
      nxt = int(np.searchsorted(enc.begins, last_char))
      assert enc.word_start[nxt]
  n0 = int((sub.tokens["token_kind"][0] == records.TOKEN_KIND_CONTEXT).sum())
  assert n0 == 7  # window 0 = w0..w6: ending after 8 tokens would cut w7
  assert text[sub.tokens["char_begin"][0, n0]:].startswith("w6 w7")
  assert stats["hard_cuts"] == 0


def test_question_prefix_and_truncation():
  text = numbered_words(6)
  q_text = "who is w3 really here"
  q = word_encoding(q_text)
  cfg = SegmenterConfig(seq_length=12, overlap=2, max_segments_per_document=4,
                        max_question_tokens=3)
  ans = char_span(text, "w3")
  subs, stats = segment_document("d", "q1", word_encoding(text), q, SPECIAL, cfg,
                                 answer_char_spans=[ans],
                                 answer_type=records.ANSWER_TYPE_SPAN)
  sub = subs[0]
  assert stats["questions_truncated"] == 1
  assert sub.tokens["token_ids"][0, :5].tolist() == [0, 100, 101, 102, 2]
  assert sub.tokens["token_kind"][0, :6].tolist() == [1, 2, 2, 2, 1, 3]
  assert sub.segments["question_length"].tolist() == [5]
  # "w3" also appears in the question; only the context occurrence is labelled.
  assert sub.answers.tolist() == [[0, 5 + 3, 5 + 3]]
  assert sub.tokens["token_kind"][0, 8] == records.TOKEN_KIND_CONTEXT


def test_long_document_becomes_sub_documents():
  text = numbered_words(1400)
  enc = word_encoding(text)
  cfg = SegmenterConfig(seq_length=16, overlap=4, max_segments_per_document=128,
                        max_question_tokens=2)
  ans = char_span(text, "w1390")
  mention = (*char_span(text, "w3"), 42)
  subs, stats = segment_document("long", "q", enc, None, SPECIAL, cfg,
                                 answer_char_spans=[ans], mentions=[mention],
                                 answer_type=records.ANSWER_TYPE_SPAN)
  # budget 14, stride 10: windows start at 0, 10, ..., 1390 -> 140 windows.
  assert stats["segments"] == 140
  assert [s.num_segments for s in subs] == [128, 12]
  assert [s.sub_document_index for s in subs] == [0, 1]
  assert {s.num_sub_documents for s in subs} == {2}
  assert subs[1].segments["segment_index"].tolist() == list(range(12))
  assert subs[1].segments["num_segments"].tolist() == [12] * 12
  assert subs[0].key != subs[1].key and subs[1].key.startswith("long\x1fq\x1f")
  # w1390 lies in the windows starting at 1380 (global 138 -> sub 1, local 10) and 1390
  # (global 139 -> sub 1, local 11).
  assert subs[0].answers.shape == (0, 3)
  assert subs[1].answers.tolist() == [[10, 1 + 10, 1 + 10], [11, 1, 1]]
  assert subs[0].mentions.tolist() == [[0, 4, 4, 42]]
  assert stats["documents_split"] == 1


def test_empty_context_is_bad_input():
  with pytest.raises(BadInput) as e:
    segment_document("d", "", word_encoding(""), None, SPECIAL, SegmenterConfig())
  assert e.value.reason == "empty_context"


def test_config_rejects_overlap_that_leaves_no_progress():
  with pytest.raises(ValueError, match="overlap"):
    SegmenterConfig(seq_length=64, overlap=60, max_question_tokens=10)


def test_config_refusal_names_the_flags():
  # budget = 256 - 64 - 3 = 189 context tokens: overlap 189 leaves no progress, 188 is fine.
  SegmenterConfig(seq_length=256, overlap=188, max_question_tokens=64)
  with pytest.raises(ValueError) as e:
    SegmenterConfig(seq_length=256, overlap=189, max_question_tokens=64)
  for flag in ("--overlap", "--seq_length", "--max_question_tokens"):
    assert flag in str(e.value)
  with pytest.raises(ValueError, match="--overlap must be >= 0"):
    SegmenterConfig(overlap=-5)
  with pytest.raises(ValueError, match="--max_question_tokens must be >= 0"):
    SegmenterConfig(max_question_tokens=-1)
  with pytest.raises(ValueError, match="--max_segments_per_document must be >= 1"):
    SegmenterConfig(max_segments_per_document=0)
  with pytest.raises(ValueError, match="--seq_length must be an integer"):
    SegmenterConfig(seq_length=256.0)


def test_hard_cut_only_when_no_character_start_fits():
  # One 12-token "word" in 14 tokens; budget 8, overlap 2 (stride 6, half stride 3): window 0
  # must end in [5, 8] and window 1 start in [3, end - 2], both inside the long word.
  text = "a " + "x" * 30 + " b"
  enc = word_encoding(text, split={"x" * 30: 12})
  assert np.flatnonzero(enc.word_start).tolist() == [0, 1, 13]
  # char_start=None: every token starts a character, so the word is cut at character starts.
  stats = collections.Counter()
  windows = segmenter.context_windows(enc.word_start, 8, 2, stats)
  assert windows == [(0, 8), (6, 14)]
  assert stats["hard_cuts"] == 0 and stats["char_boundary_cuts"] == 2
  # Characters of 3 tokens each inside the word: the edges fall on their starts.
  char_start = enc.word_start.copy()
  char_start[1::3] = True
  stats = collections.Counter()
  windows = segmenter.context_windows(enc.word_start, 8, 2, stats, char_start)
  assert windows == [(0, 7), (4, 10), (7, 14)]
  assert all(char_start[x] for w in windows for x in w if x < len(enc))
  assert stats["hard_cuts"] == 0 and stats["char_boundary_cuts"] == 4
  # The whole word is one character (12 tokens, longer than half a window): cut hard.
  stats = collections.Counter()
  windows = segmenter.context_windows(enc.word_start, 8, 2, stats, enc.word_start)
  assert windows == [(0, 8), (6, 14)]
  assert stats["hard_cuts"] == 2 and stats["char_boundary_cuts"] == 0


def test_later_character_end_avoids_a_hard_cut():
  # budget 10, overlap 4: window 0 ends in [7, 10].  Ending at the word start 7 leaves only
  # token 3 for the next start, inside a character; ending at the character start 9 lets the
  # next window start at the character start 5, so no character is cut.
  n = 30
  word_start = np.zeros(n, dtype=bool)
  word_start[[0, 7, 15, 22]] = True
  char_start = word_start.copy()
  char_start[[5, 9]] = True
  char_start[11:] = True
  stats = collections.Counter()
  windows = segmenter.context_windows(word_start, 10, 4, stats, char_start)
  assert windows[0] == (0, 9) and windows[1][0] == 5
  assert stats["hard_cuts"] == 0


def _check_windows(windows, n, budget, overlap, word_start, char_start, stats):
  """Every invariant context_windows promises."""
  assert windows[0][0] == 0 and windows[-1][1] == n
  for s, e in windows:
    assert 0 <= s < e <= n or n == 0
    assert e - s <= budget
  for (s0, e0), (s1, e1) in zip(windows, windows[1:]):
    assert s0 < s1 and e0 < e1, "windows must advance"
    assert s1 <= e0 - overlap, "consecutive windows share < overlap tokens"
  ideal = max(1, math.ceil((n - overlap) / (budget - overlap)))
  assert len(windows) <= 2 * ideal - 1
  # Inner edges: the next window's start and every end but the last, each counted once.
  edges = [s for s, _ in windows[1:]] + [e for _, e in windows[:-1]]
  cs = np.ones(n, dtype=bool) if char_start is None else char_start
  word = word_start & cs
  assert stats["hard_cuts"] == sum(not cs[x] for x in edges)
  assert stats["char_boundary_cuts"] == sum(bool(cs[x] and not word[x]) for x in edges)

  # Each (end, next start) pair has the fewest hard, then character cuts of all the pairs the
  # ranges allow, so a hard cut happens only where no pair of character starts fits.
  def cost(x):
    return (0, 0) if word[x] else (0, 1) if cs[x] else (1, 0)

  half = (budget - overlap + 1) // 2
  prev_e = 0
  for (s, e), (s1, _) in zip(windows, windows[1:]):
    lo = max(s + overlap + half, prev_e + 1)
    assert lo <= e <= s + budget and s + half <= s1 <= e - overlap
    best = min(tuple(map(sum, zip(cost(e2), cost(s2))))
               for e2 in range(lo, s + budget + 1) for s2 in range(s + half, e2 - overlap + 1))
    assert tuple(map(sum, zip(cost(e), cost(s1)))) == best
    prev_e = e


@pytest.mark.parametrize("seed", range(12))
def test_context_windows_invariants_on_random_inputs(seed):
  rng = np.random.default_rng(seed)
  for _ in range(60):
    n = int(rng.integers(1, 400))
    budget = int(rng.integers(1, 70))
    overlap = int(rng.choice([0, budget - 1, rng.integers(0, budget)]))
    word_start = rng.random(n) < rng.choice([0.0, 0.02, 0.1, 0.5, 1.0])
    word_start[0] = True
    if rng.random() < 0.2:
      char_start = None
    else:
      char_start = rng.random(n) < rng.choice([0.05, 0.3, 0.6, 0.9, 1.0])
      char_start[0] = True
    stats = collections.Counter()
    args = (word_start, budget, overlap, stats) + ((char_start,) if char_start is not None else ())
    windows = segmenter.context_windows(*args)
    _check_windows(windows, n, budget, overlap, word_start, char_start, stats)
    if char_start is None:
      assert stats["hard_cuts"] == 0


def test_context_windows_dense_word_starts_give_the_ideal_count():
  stats = collections.Counter()
  for n, budget, overlap in [(1000, 189, 128), (5000, 509, 128), (1, 5, 3), (7, 8, 7)]:
    windows = segmenter.context_windows(np.ones(n, dtype=bool), budget, overlap, stats)
    assert len(windows) == max(1, math.ceil((n - overlap) / (budget - overlap)))
  assert stats["hard_cuts"] == 0 and stats["char_boundary_cuts"] == 0


def test_context_windows_refuses_budget_not_above_overlap():
  with pytest.raises(ValueError):
    segmenter.context_windows(np.ones(10, dtype=bool), 4, 4, collections.Counter())


def test_supporting_flags_follow_paragraph_ranges():
  text = numbered_words(20)
  enc = word_encoding(text)
  cfg = SegmenterConfig(seq_length=10, overlap=3, max_segments_per_document=8,
                        max_question_tokens=2)
  para = (text.index("w16"), len(text))
  subs, _ = segment_document("d", "q", enc, None, SPECIAL, cfg, supporting_ranges=[para])
  assert subs[0].segments["supporting"].tolist() == [0, 0, 1, 1]
  subs, _ = segment_document("d", "q", enc, None, SPECIAL, cfg, supporting_ranges=None)
  assert subs[0].segments["supporting"].tolist() == [-1] * 4


def test_sub_document_pickles_to_an_equal_object():
  import pickle
  text = numbered_words(40)
  q = word_encoding("who is w3")
  cfg = SegmenterConfig(seq_length=16, overlap=4, max_segments_per_document=2,
                        max_question_tokens=4)
  subs, _ = segment_document("d", "q", word_encoding(text), q, SPECIAL, cfg,
                             answer_char_spans=[char_span(text, "w30")],
                             mentions=[(*char_span(text, "w2"), 2**40)],
                             answer_type=records.ANSWER_TYPE_SPAN)
  assert len(subs) > 1
  for sub in subs:
    back = pickle.loads(pickle.dumps(sub))
    assert (back.key, back.sub_document_index, back.num_sub_documents, back.special) == (
        sub.key, sub.sub_document_index, sub.num_sub_documents, sub.special)
    for name in sub.tokens:
      np.testing.assert_array_equal(back.tokens[name], sub.tokens[name])
    for name in sub.segments:
      np.testing.assert_array_equal(back.segments[name], sub.segments[name])
    np.testing.assert_array_equal(back.answers, sub.answers)
    np.testing.assert_array_equal(back.mentions, sub.mentions)
  assert subs[0].mentions[0, 3] == 2**40


# ---- Through the real byte-level BPE tokenizer -------------------------------------------


@pytest.fixture(scope="module")
def tok():
  from pipelines.text.tokenizer import Tokenizer
  return Tokenizer()


def global_windows(subs):
  assert len(subs) == 1  # max_segments_per_document is large: windows index the document
  return subs[0].windows.astype(int)


@pytest.mark.parametrize("length,with_question", [(100, True), (200, False)])
def test_seq_length_256_long_unbroken_words_keep_the_overlap(tok, length, with_question):
  # Issue 8.5: at --seq_length 256 (budget 189 after a 64-token question, 254 without) the old
  # code gave 109 segments for ~8.4k tokens, half of them sharing 0 tokens with the previous
  # one and not advancing its end.
  text = unbroken_words(55 if length == 200 else 110, length)
  enc = tok.encode(text)
  assert 8000 < len(enc) < 9000
  question = tok.encode("what " * 80) if with_question else None
  cfg = SegmenterConfig(seq_length=256, overlap=128, max_segments_per_document=10_000)
  subs, stats = segment_document("d", "q", enc, question, tok.special_ids, cfg)
  windows = global_windows(subs)
  budget = 256 - (66 if with_question else 1) - 1
  assert (windows[:, 1] - windows[:, 0]).max() <= budget
  shared = windows[:-1, 1] - windows[1:, 0]
  assert shared.min() >= 128
  assert (np.diff(windows[:, 0]) > 0).all() and (np.diff(windows[:, 1]) > 0).all()
  assert windows[0, 0] == 0 and windows[-1, 1] == len(enc)
  ideal = math.ceil((len(enc) - 128) / (budget - 128))
  assert len(windows) <= 1.3 * ideal  # (guaranteed: <= 2 * ideal - 1)
  assert stats["hard_cuts"] == 0 and stats["char_boundary_cuts"] > 0
  # Each segment's context decodes to exactly its text.
  for sub in subs:
    t = sub.tokens
    for row in range(sub.num_segments):
      ids = t["token_ids"][row][t["token_kind"][row] == records.TOKEN_KIND_CONTEXT]
      b, e = sub.segments["context_char_begin"][row], sub.segments["context_char_end"][row]
      assert tok.decode(ids).strip() == text[b:e]


@pytest.mark.parametrize("seq_length,with_question", [(256, False), (512, True)])
def test_cjk_window_edges_never_split_a_character(tok, seq_length, with_question):
  # Issue 8.5: in text without spaces the old code cut 43 of 89 window edges inside a
  # multi-byte character (the segment then ended with half a character).
  text = cjk_text(sentence="日本の最高峰は富士山です。")
  enc = tok.encode(text)
  assert len(enc) > 4000 and len(enc) > 1.5 * len(text)  # characters of several byte tokens
  question = tok.encode("富士山はどこですか") if with_question else None
  spans = [(text.index("富士山"), text.index("富士山") + 3)]
  cfg = SegmenterConfig(seq_length=seq_length, overlap=128, max_segments_per_document=10_000)
  subs, stats = segment_document("d", "q", enc, question, tok.special_ids, cfg,
                                 answer_char_spans=spans,
                                 answer_type=records.ANSWER_TYPE_SPAN)
  windows = global_windows(subs)
  assert len(windows) > 10
  edges = sorted({x for x in windows.ravel().tolist() if 0 < x < len(enc)})
  for x in edges:
    # An edge inside a character leaves invalid UTF-8 (decoded as U+FFFD) on both sides.
    assert "\ufffd" not in tok.decode(enc.ids[:x]) + tok.decode(enc.ids[x:]), x
  assert segmenter.character_starts(enc.begins, enc.ends)[edges].all()
  assert stats["hard_cuts"] == 0
  assert (windows[:-1, 1] - windows[1:, 0]).min() >= 128
  sub = subs[0]
  t = sub.tokens
  for row in range(sub.num_segments):
    ids = t["token_ids"][row][t["token_kind"][row] == records.TOKEN_KIND_CONTEXT]
    b, e = sub.segments["context_char_begin"][row], sub.segments["context_char_end"][row]
    decoded = tok.decode(ids)
    assert "\ufffd" not in decoded
    assert decoded == text[b:e]
  assert len(sub.answers) >= 1
  for row, lo, hi in sub.answers.tolist():
    assert tok.decode(t["token_ids"][row, lo:hi + 1]) == "富士山"
