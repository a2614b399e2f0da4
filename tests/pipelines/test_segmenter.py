"""Exact segments and spans on hand-made inputs (predictable one-token-per-word encodings)."""

import collections

import numpy as np
import pytest

from schemas import records
from pipelines.document import BadInput
from pipelines.text import segmenter
from pipelines.text.segmenter import SegmenterConfig, segment_document
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


def test_hard_cut_when_a_word_is_longer_than_half_a_window():
  text = "a " + "x" * 30 + " b"
  enc = word_encoding(text, split={"x" * 30: 12})
  stats = collections.Counter()
  windows = segmenter.context_windows(enc.word_start, 8, 2, stats)
  assert windows[0] == (0, 8)
  assert stats["hard_cuts"] >= 1
  assert windows[-1][1] == len(enc)


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
