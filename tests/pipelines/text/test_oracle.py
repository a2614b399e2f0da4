"""Extractive ROUGE-L oracle: hand-made cases, the selection rules, offsets, and equality with
the exhaustive reference of benchmarks/oracle.py on random stories."""

import importlib.util
import os
import random
import re
import unicodedata

import numpy as np
import pytest

from pipelines.text import oracle
from pipelines.text.oracle import OracleConfig, StoryIndex, oracle_spans, rouge_l_f1
from tests import REPO_ROOT

REPO = str(REPO_ROOT)


def _load_benchmark():
  spec = importlib.util.spec_from_file_location(
      "benchmark_oracle", os.path.join(REPO, "benchmarks", "oracle.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


bench = _load_benchmark()


def spans_of(text, answers, config=OracleConfig()):
  spans, stats = oracle_spans(StoryIndex(text), answers, config)
  return [(text[b:e], round(s, 6)) for b, e, s in spans], stats


# ------------------------------------------------------------- ROUGE-L / tokens


def test_rouge_l_f1_by_hand():
  cand = "the cat sat on the mat".split()
  ref = "the cat on a mat".split()
  # LCS "the cat on mat" = 4; P = 4/6, R = 4/5; F1 = 2PR / (P + R) = 8/11.
  p, r = 4 / 6, 4 / 5
  assert rouge_l_f1(cand, ref) == pytest.approx(2 * p * r / (p + r))
  assert rouge_l_f1(cand, ref) == 8 / 11
  assert rouge_l_f1(ref, cand) == 8 / 11
  assert rouge_l_f1(["a"], ["a"]) == 1.0
  assert rouge_l_f1(["a", "b"], ["b", "a"]) == 2 * 1 / 4
  assert rouge_l_f1([], ["a"]) == 0.0
  assert rouge_l_f1(["a"], []) == 0.0
  assert rouge_l_f1(["x"], ["y"]) == 0.0
  assert oracle.lcs_length("abcbdab", "bdcaba") == 4


def test_normalize_words_offsets_and_punctuation():
  text = "  \u201cMr. O'Brien's DOG!\u201d -- she\tsaid,\r\nwell-known \u2026 $5"
  words = oracle.normalize_words(text)
  assert [w for w, _, _ in words] == ["mr", "obriens", "dog", "she", "said", "wellknown", "$5"]
  assert [text[b:e] for _, b, e in words] == [
      "\u201cMr.", "O'Brien's", "DOG!\u201d", "she", "said,", "well-known", "$5"]


def test_isalnum_fast_path_never_skips_punctuation():
  # normalize_word skips the per-character check for isalnum() words: no punctuation is alnum.
  assert not [c for c in range(0x110000)
              if chr(c).isalnum() and unicodedata.category(chr(c)).startswith("P")]


def test_story_index_agrees_with_normalize_words():
  text = ("A\u00a0b\u2003c\u3000d\x1ce\x85f\u2028g -- h\r\n\r\n\u00c9T\u00c9 \ud83d\ude00x "
          "\U0001F600 end. ... \u00bfqu\u00e9?")
  index = StoryIndex(text)
  words = oracle.normalize_words(text)
  assert index.normalized() == [w for w, _, _ in words]
  assert index.begins.tolist() == [b for _, b, _ in words]
  assert index.ends.tolist() == [e for _, _, e in words]
  assert [index.word(i) for i in range(len(index))] == [text[b:e] for _, b, e in words]
  assert index.normalized(1, 2) == ["b", "c"]
  # Whitespace runs are those of str.split(), whatever the script.
  raw = [m.group() for m in re.finditer(r"\S+", text)]
  assert raw == text.split()


def test_story_index_inverted_index():
  text = "the cat and the dog and THE bird. The end"
  index = StoryIndex(text)
  the = index.word_id("the")
  assert index.positions(the).tolist() == [0, 3, 6, 8]
  assert index.positions(index.word_id("and")).tolist() == [2, 5]
  assert index.word_id("zebra") == -1
  assert index.positions(-1).tolist() == []
  with pytest.raises(ValueError):
    index.positions(the)[0] = 5
  assert StoryIndex("").normalized() == [] and len(StoryIndex(" -- ")) == 0


# --------------------------------------------------------------- hand-made cases


def test_verbatim_answer_scores_one_at_the_right_offsets():
  text = "Once upon a time the old King of Spain went to sea. Then the old man came back."
  spans, stats = oracle_spans(StoryIndex(text), ["The old king.", "an old king"])
  b = text.index("the old King")
  assert spans == [(b, b + len("the old King"), 1.0)]
  assert stats["best"] == 1.0 and stats["best_answer"] == 0 and stats["answer_words"] == [3, 3]


def test_paraphrase_gets_the_expected_window():
  text = "Long ago the king sailed across the wide sea to find gold for the queen."
  spans, stats = spans_of(text, ["King sailed the sea"])
  # "king sailed across the wide sea": LCS 4 of 6 and 4 words -> 8/10; "king sailed across
  # the" (0.75) and "the king ... sea" (8/11) overlap it.
  assert spans == [("king sailed across the wide sea", 0.8)]
  assert stats["best"] == 0.8


def test_punctuation_and_case_differences_do_not_matter():
  text = "She said, \u201cMr. O'Brien's DOG!\u201d and left."
  spans, _ = spans_of(text, ["mr obriens dog"])
  assert spans == [("\u201cMr. O'Brien's DOG!\u201d", 1.0)]


def test_absent_answer_words_give_nothing():
  spans, stats = oracle_spans(StoryIndex("The cat sat on the mat."), ["zebra xylophone", ""])
  assert spans == [] and stats["best"] == 0.0 and stats["best_answer"] == -1
  spans, stats = oracle_spans(StoryIndex("The cat sat on the mat."), [])
  assert spans == [] and stats["best"] == 0.0
  spans, stats = oracle_spans(StoryIndex(""), ["cat"])
  assert spans == [] and stats["best"] == 0.0
  with pytest.raises(TypeError):
    oracle_spans(StoryIndex("cat"), "cat")


def test_best_below_min_score_is_reported_but_gives_no_span():
  # One shared word of a 6-word answer: best 2/7 < 0.35.
  spans, stats = oracle_spans(StoryIndex("a cat sat there"), ["cat one two three four five"])
  assert spans == [] and stats["best"] == 2 / 7


def test_two_references_take_the_max():
  text = "Mary walked to the old mill by the river at dawn."
  spans, stats = spans_of(text, ["a boat on a lake", "the old mill by the river"])
  assert spans == [("the old mill by the river", 1.0)]
  assert stats["best_answer"] == 1
  spans, stats = spans_of(text, ["the old mill by the river", "the old mill by the river."])
  assert stats["best_answer"] == 0 and len(spans) == 1


def test_threshold_non_overlap_and_max_spans():
  text = ("The red fox ran. A red dog sat. The red fox hid. Then the red fox slept. "
          "The big red fox woke.")
  spans, stats = spans_of(text, ["the red fox"])
  # Three exact copies (1.0); "The big red fox" scores 2*3/7 = 0.857 < 0.9; "red dog" less.
  assert spans == [("The red fox", 1.0), ("The red fox", 1.0), ("the red fox", 1.0)]
  assert stats["threshold"] == 0.9
  spans, _ = spans_of(text, ["the red fox"], OracleConfig(relative=0.8))
  assert [s for _, s in spans] == [1.0, 1.0, 1.0, 0.857143]
  spans, _ = spans_of(text, ["the red fox"], OracleConfig(relative=0.5))
  # "red dog" (2 * 1 / 5... "A red dog": no "the"; "red" alone: 2 * 1 / 4 = 0.5).
  assert [s for _, s in spans] == [1.0, 0.5, 1.0, 1.0, 0.857143]
  spans, _ = spans_of(text, ["the red fox"], OracleConfig(max_spans=2))
  assert spans == [("The red fox", 1.0), ("The red fox", 1.0)]  # ties: the earlier first
  spans, _ = spans_of(text, ["the red fox"], OracleConfig(relative=0.0, min_score=0.9))
  assert len(spans) == 3
  # No threshold at all: only windows inside the story that end with an answer word count.
  spans, stats = spans_of("x red the", ["the red"], OracleConfig(relative=0.0, min_score=0.0))
  assert spans == [("red", round(2 / 3, 6)), ("the", round(2 / 3, 6))]
  assert stats["candidates"] == 3  # "red", "red the", "the"


def test_select_windows_greedy_rules():
  config = OracleConfig(relative=0.9, min_score=0.0)
  firsts = [0, 1, 4, 3, 8, 8, 20]
  lasts = [2, 3, 5, 4, 11, 9, 21]
  scores = [0.9, 0.95, 0.9, 0.9, 0.9, 0.9, 0.5]
  kept = oracle.select_windows(np.array(firsts), np.array(lasts), np.array(scores), 0.95,
                               config)
  # (1,3) first; (0,2) and (3,4) overlap it; (4,5) fits; (8,9) before (8,11) (shorter);
  # 0.5 < 0.855.
  assert kept == [(1, 3, 0.95), (4, 5, 0.9), (8, 9, 0.9)]
  assert oracle.select_windows(np.array([0]), np.array([0]), np.array([0.5]), 0.0) == []
  kept = oracle.select_windows(np.array([5, 0, 2]), np.array([5, 0, 2]),
                               np.array([1.0, 1.0, 1.0]), 1.0, OracleConfig(max_spans=2))
  assert kept == [(0, 0, 1.0), (2, 2, 1.0)]


def test_crlf_and_non_ascii_offsets_are_exact():
  text = ("\ufeff\U0001F600 \u00dcn\u00efcode\r\nw\u00f6rds \u2014 caf\u00e9 au lait\r\n"
          "\u65e5\u672c na\u00efve Stra\u00dfe.\r\n")
  spans, _ = spans_of(text, ["w\u00f6rds caf\u00e9"])
  assert spans == [("w\u00f6rds \u2014 caf\u00e9", 1.0)]  # the dash is not a word
  spans, _ = spans_of(text, ["NA\u00cfVE stra\u00dfe"])
  assert spans == [("na\u00efve Stra\u00dfe.", 1.0)]
  spans, _ = spans_of(text, ["lait \u65e5\u672c"])
  assert spans == [("lait\r\n\u65e5\u672c", 1.0)]


def test_long_answers_use_several_machine_words():
  rng = random.Random(7)
  words = [f"w{rng.randrange(12)}" for _ in range(400)]
  text = " ".join(words)
  answer = " ".join(words[100:230])  # 130 words: three 64-bit limbs
  spans, stats = oracle_spans(StoryIndex(text), [answer])
  assert stats["best"] == 1.0
  b = len(" ".join(words[:100])) + 1
  assert (b, b + len(answer), 1.0) in spans


def _lcs_rows(window, answer):
  """LCS of answer with each prefix of window (plain DP, one row per window word)."""
  row = [0] * (len(answer) + 1)
  out = []
  for w in window:
    new = [0]
    for j, a in enumerate(answer):
      new.append(row[j] + 1 if w == a else max(row[j + 1], new[j]))
    row = new
    out.append(row[-1])
  return out


def test_bit_parallel_window_scores_equal_the_dp():
  # Every window score of the vectorised search, for answers of 1..200 words (1-4 limbs, with
  # carries between them), equals ROUGE-L from an LCS DP.
  rng = random.Random(3)
  cases = []
  for m in (1, 2, 7, 63, 64, 65, 127, 128, 129, 200):
    vocab = [f"w{i}" for i in range(rng.choice((2, 3, 6)))]
    words = [rng.choice(vocab) for _ in range(min(60, rng.randint(m // 2, 2 * m + 10)))]
    cases.append((words, [rng.choice(vocab + ["zz"]) for _ in range(m)]))
  # A carry that crosses a whole limb (limb 1 all ones after the addition, carry in from 0).
  cases.append((["a", "a", "b", "a", "b"] * 6, ["a"] * 64 + ["b"] * 64 + ["a"] * 10))
  cases.append((["a"] * 20, ["a"] * 64 + ["b"] * 64 + ["a"] * 10))
  for words, answer in cases:
    m = len(answer)
    index = StoryIndex(" ".join(words))
    aids = np.array([index.word_id(w) for w in answer], dtype=np.int64)
    _, _, local, bits = oracle._answer_tables(index, aids)  # pylint: disable=protected-access
    width = 2 * m + 5
    starts = np.arange(len(words), dtype=np.int64)
    scores, ends_ok = oracle._score_chunk(index, starts, local, bits, m, width)  # pylint: disable=protected-access
    for s in range(len(words)):
      lcs = _lcs_rows(words[s:s + width], answer)
      for t in range(width):
        end_in = s + t < len(words) and words[s + t] in answer
        assert ends_ok[s, t] == end_in
        expected = 2 * lcs[t] / (t + 1 + m) if end_in else 0.0
        assert scores[s, t] == expected, (m, s, t)
        if end_in and t < 3:
          assert expected == rouge_l_f1(words[s:s + t + 1], answer)


def test_many_starts_span_several_chunks():
  # 400 exact copies: starts beyond the first chunks (same bound as the best) are still scored.
  text = " ".join(f"the red fox w{i}." for i in range(400))
  spans, stats = oracle_spans(StoryIndex(text), ["the red fox"],
                              OracleConfig(max_spans=1000, relative=1.0))
  assert len(spans) == 400 and {s for _, _, s in spans} == {1.0}
  assert stats["starts"] == 1200


def test_config_validation():
  for kwargs in ({"min_score": -0.1}, {"min_score": 1.5}, {"relative": 2}, {"max_spans": 0},
                 {"extra_words": -1}, {"max_spans": 2.5}, {"min_score": True},
                 {"relative": "0.9"}):
    with pytest.raises(ValueError):
      OracleConfig(**kwargs)
  config = OracleConfig(min_score=0.5, relative=0.8, max_spans=1, extra_words=0)
  assert config.threshold(1.0) == 0.8 and config.threshold(0.5) == 0.5
  assert config.max_window(4) == 8


# ------------------------------------------------------ equality with the reference


def _window_score(words, first, last, answers, config):
  """Max ROUGE-L of a window over the answers whose window space holds it."""
  best = 0.0
  for answer in answers:
    a = [w for w, _, _ in oracle.normalize_words(answer)]
    if a and words[first] in a and last - first + 1 <= config.max_window(len(a)):
      best = max(best, rouge_l_f1(words[first:last + 1], a))
  return best


@pytest.mark.slow
@pytest.mark.parametrize("first_chunk, chunk_cells", [(256, 1 << 18), (1, 8), (3, 40)])
def test_random_stories_match_the_exhaustive_reference(monkeypatch, first_chunk, chunk_cells):
  # Small chunks exercise the pruning between chunks that long books rely on.
  monkeypatch.setattr(oracle, "_FIRST_CHUNK", first_chunk)
  monkeypatch.setattr(oracle, "_CHUNK_CELLS", chunk_cells)
  rng = random.Random(12345 + first_chunk)
  checked = spans_total = 0
  for case in range(60):
    vocab = [f"w{i}" for i in range(rng.randint(3, 25))] + ["The", "the,", "--", "A."]
    n = rng.randint(1, 120)
    seps = [" ", " ", " ", "\n", "\r\n", "  "]
    text = "".join(rng.choice(vocab) + rng.choice(seps) for _ in range(n))
    story_words = text.split()

    def answer():
      if rng.random() < 0.4 and story_words:  # a (noisy) copy of a story span
        length = rng.randint(1, 9)
        i = rng.randrange(len(story_words))
        a = [w for w in story_words[i:i + length] if rng.random() < 0.8] or ["x"]
        if rng.random() < 0.5:
          a.insert(rng.randrange(len(a) + 1), rng.choice(vocab + ["zz"]))
        return " ".join(a)
      if case % 15 == 0:  # long answers (several machine words), short story
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(60, 140)))
      return " ".join(rng.choice(vocab + ["zz", "yy"]) for _ in range(rng.randint(0, 8)))

    answers = [answer() for _ in range(rng.choice((1, 2, 2, 3)))]
    config = OracleConfig(min_score=rng.choice((0.0, 0.2, 0.35, 0.6)),
                          relative=rng.choice((0.0, 0.5, 0.9, 1.0)),
                          max_spans=rng.choice((1, 3, 100)),
                          extra_words=rng.randint(0, 5))
    index = StoryIndex(text)
    spans, stats = oracle_spans(index, answers, config)
    ref_spans, ref_best = bench.reference_oracle(bench.ReferenceStory(text), answers, config)
    assert stats["best"] >= ref_best
    assert stats["best"] == ref_best, (case, text, answers, config)
    assert spans == ref_spans, (case, text, answers, config)
    words = index.normalized()
    begins, ends = index.begins.tolist(), index.ends.tolist()
    for b, e, score in spans:
      first, last = begins.index(b), ends.index(e)
      assert [w for w, _, _ in oracle.normalize_words(text[b:e])] == words[first:last + 1]
      assert score == _window_score(words, first, last, answers, config)
      assert score >= config.threshold(stats["best"])
    assert len(spans) <= config.max_spans
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
    checked += 1
    spans_total += len(spans)
  assert checked == 60 and spans_total > 30
