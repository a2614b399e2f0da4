"""Answer search: word boundaries for spaced scripts, none inside scripts without spaces."""

import pytest

from pipelines.text import answers
from pipelines.text.answers import find_answer_spans


def test_cjk_answer_inside_cjk_text_is_found():
  # Issue 8.5: the old "not inside a word" rule treated the neighbouring CJK characters as word
  # characters, so 富士山 was never found in a Japanese sentence.
  text = "日本の最高峰は富士山です"
  spans, how = find_answer_spans(text, ["富士山"])
  assert (spans, how) == ([(7, 10)], "exact")
  assert text[7:10] == "富士山"


@pytest.mark.parametrize("text,answer,expected", [
    ("東京Tower", "Tower", [(2, 7)]),  # Latin answer next to a CJK character
    ("Tower東京", "Tower", [(0, 5)]),
    ("東京Tower", "東京", [(0, 2)]),  # CJK answer next to a Latin character
    ("私は東京タワーに行った。東京は大きい", "東京", [(2, 4), (12, 14)]),
    ("北京和上海", "上海", [(3, 5)]),  # Chinese
    ("ประเทศไทยมีช้าง", "ไทย", [(6, 9)]),  # Thai: no spaces between words
])
def test_scripts_without_spaces_have_no_word_boundaries(text, answer, expected):
  assert find_answer_spans(text, [answer]) == (expected, "exact")


@pytest.mark.parametrize("text,answer", [
    ("a party tonight", "art"),  # inside a Latin word
    ("東京party", "art"),
    ("the Tokyoite said", "Tokyo"),
    ("서울시에서", "서울"),  # Hangul is written with spaces: bounded like Latin
    ("in 1990s music", "1990"),
])
def test_spaced_scripts_keep_word_boundaries(text, answer):
  assert find_answer_spans(text, [answer]) == ([], "not_found")


def test_answer_ending_in_punctuation_is_not_found_inside_a_word():
  # "U.S." is not an occurrence in "U.S.Army": the text goes on with a word character.  (The
  # normalised fallback strips the answer's trailing "." and finds "U.S", as before.)
  spans, how = find_answer_spans("U.S.Army", ["U.S."])
  assert how != "exact" and (0, 4) not in spans


def test_spaced_word_boundaries_still_match_whole_words():
  assert find_answer_spans("U.S. Army", ["U.S."]) == ([(0, 4)], "exact")
  assert find_answer_spans("art party art.", ["art"]) == ([(0, 3), (10, 13)], "exact")
  assert find_answer_spans("서울 시", ["서울"]) == ([(0, 2)], "exact")


def test_normalised_and_multi_answer_behaviour_is_kept():
  # Found only after dropping the article and the trailing punctuation.
  assert find_answer_spans("the band Beatles played", ["The Beatles."]) == (
      [(9, 16)], "normalised")
  # Whitespace inside an answer matches any whitespace run; case is ignored.
  assert find_answer_spans("He went  to\nNew   York.", ["new york"]) == ([(12, 22)], "exact")
  # Several answers: sorted, de-duplicated spans; exact matches win over normalised ones.
  assert find_answer_spans("Paris, France; paris", ["Paris", "paris", "the France"]) == (
      [(0, 5), (15, 20)], "exact")
  assert find_answer_spans("東京 and Tokyo", ["Tokyo", "東京"]) == ([(0, 2), (7, 12)], "exact")
  assert find_answer_spans("anything", ["", "  ", "missing"]) == ([], "not_found")


def _reference_spans(answer, text):
  """The rule written as one regex with look-behind / look-ahead (slow to compile)."""
  import re
  spaced_word = f"[^\\W{answers.NO_SPACE_SCRIPTS}]"
  no_space = re.compile(f"[{answers.NO_SPACE_SCRIPTS}]")
  head = "" if no_space.match(answer[0]) else f"(?<!{spaced_word})"
  tail = "" if no_space.match(answer[-1]) else f"(?!{spaced_word})"
  core = r"\s+".join(re.escape(p) for p in answer.split())
  return sorted(m.span() for m in re.finditer(head + core + tail, text, re.IGNORECASE))


@pytest.mark.slow
def test_occurrences_equal_the_lookaround_regex_on_random_texts():
  import random
  rng = random.Random(0)
  alphabet = "aAb  \t\n富士山x.-é"
  for _ in range(3000):
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
    answer = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))).strip()
    if not answer:
      continue
    got = sorted(answers._occurrences(answer, text))
    assert got == _reference_spans(answer, text), (answer, text)
