"""TriviaQA answer labelling: the official normalisation (with offsets) and alias spans."""

import random

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from model.evaluation.triviaqa import normalize_answer as official
from schemas import records
from pipelines.beam.stats import STATS, Distribution, SumStats
from pipelines.beam.label_answers import LabelAnswers
from pipelines.datasets.triviaqa.answers import find_alias_spans
from pipelines.document import Document, Question
from pipelines.datasets.triviaqa import answers as ta

TRICKY = [
    "The The", "the the the", "a.k.a. Puff Daddy", "U.S.", "U.S.A.", "‘Tis the ’season’",
    "´acute´ and `backtick`", "“curly double quotes”", "snake_case_Name", "__init__",
    "Jean-Paul Sartre", "--leading and trailing--", "...!!!", "Beyoncé Knowles", "Ångström",
    "Cafe\u0301 (decomposed)", "東京タワー and 富士山", "日本の最高峰は富士山です", "1,000,000",
    "3.14 and 2,718", "  many   spaces\t\tand\ttabs \n\n newlines  ", "\u00a0no-break\u2003em\u3000",
    "An Apple a Day", "THE END", "the—end–dash", "theatre anthem atheist", "a_the_an", "A", "",
    "   ", "don't stop", "O'Neil", "Rock 'n' Roll", "AC/DC", "C++ & C#", "ΟΔΟΣ ΣΑΣ.", "ὈΔΥΣΣΕΎΣ",
    "İstanbul İZMİR", "Straße STRASSE", "ﬁnal ligature", "x\u0130y", "Ⅻ roman", "[a] (an) {the}",
    "a\u200bthe zero-width", "K\u00f8benhavn", "émigré the élite", "‘a’ an’ ´the´",
]


@pytest.mark.parametrize("text", TRICKY)
def test_normalisation_equals_the_official_one(text):
  assert ta.normalize_answer(text) == official(text)
  n = ta.normalize_with_offsets(text)
  assert n.text == official(text)
  # Every kept character comes from a character that is no space, punctuation or underscore.
  for i, ch in enumerate(n.text):
    if ch != " ":
      o = n.origin(i)
      assert not text[o].isspace() and text[o] not in ta.PUNCTUATION and text[o] != "_"


def test_normalisation_with_offsets_on_random_text():
  rng = random.Random(3)
  alphabet = (list("abcdefghijklmnopqrstuvwxyz ABTHEN_.,'-‘’´`\t\n\u00a0İΣσéé東京ßﬁ\u0301")
              + ["the ", "a ", "an ", " The ", "A.", "_the_"])
  for _ in range(3000):
    s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
    n = ta.normalize_with_offsets(s)
    assert n.text == official(s), s
    for i, ch in enumerate(n.text):
      if ch != " ":
        assert s[n.origin(i)] not in ta.PUNCTUATION and not s[n.origin(i)].isspace(), s


def spans_text(text, aliases):
  found = ta.find_alias_spans(text, aliases)
  return [text[b:e] for b, e in found.spans], found.how


@pytest.mark.parametrize("text,aliases,expected,how", [
    ("Paris is big. I like paris.", ["Paris"], ["Paris", "paris"], "exact"),
    # Punctuation becomes a space: the span stops on the last kept character.
    ("He served in the U.S. Army.", ["U.S."], ["U.S"], "normalised"),
    ("He served in the U.S. Army.", ["us"], [], "not_found"),
    # Articles go: the span starts on the word after.
    ("I love the Beatles' songs", ["The Beatles"], ["Beatles"], "normalised"),
    ("Eugene O’Neill wrote plays", ["O'Neill"], ["O’Neill"], "normalised"),
    ("Eugene O´Neill and O`Neill", ["o neill"], ["O´Neill", "O`Neill"], "normalised"),
    ("The Sunset_Boulevard film", ["Sunset Boulevard"], ["Sunset_Boulevard"], "normalised"),
    ("Sunset \n\t Boulevard", ["Sunset Boulevard"], ["Sunset \n\t Boulevard"], "exact"),
    ("a.k.a. Puff Daddy", ["aka"], [], "not_found"),
    ("a.k.a. Puff Daddy", ["k.a. Puff"], ["k.a. Puff"], "exact"),
    # Word boundaries: not inside a word of a spaced script; CJK edges are never blocked.
    ("the party of art and arts", ["art"], ["art"], "exact"),
    ("日本の最高峰は富士山です", ["富士山"], ["富士山"], "exact"),
    ("Café au lait and cafe", ["cafe"], ["cafe"], "exact"),
    ("Cafe\u0301 au lait", ["cafe"], [], "not_found"),  # a combining accent follows
    ("Born in 1914—1918 war", ["1914"], ["1914"], "exact"),
    ("Beyonce sang", ["Beyoncé"], [], "not_found"),  # accents are kept by the normalisation
    # Overlapping aliases are each labelled; "The" alone normalises to nothing.
    ("West Sunset Boulevard", ["Sunset Boulevard", "West Sunset Boulevard", "The"],
     ["West Sunset Boulevard", "Sunset Boulevard"], "exact"),
    # Lower-casing that changes lengths (İ -> i̇) keeps the offsets exact.
    ("İzmir and İstanbul, then Paris", ["Paris", "İstanbul"], ["İstanbul", "Paris"], "exact"),
    ("ΟΔΟΣ ΣΑΣ", ["οδος"], ["ΟΔΟΣ"], "exact"),
    ("1,000,000 people", ["1 000 000"], ["1,000,000"], "normalised"),
    ("nothing here", [], [], "not_found"),
])
def test_alias_spans(text, aliases, expected, how):
  got, got_how = spans_text(text, aliases)
  assert (sorted(got), got_how) == (sorted(expected), how)
  for span in got:  # an exact prediction of the span scores as an exact match
    assert any(official(span) == official(a) for a in aliases)
    assert not span[0].isspace() and span[0] not in ta.PUNCTUATION
    assert not span[-1].isspace() and span[-1] not in ta.PUNCTUATION


def test_spans_are_sorted_distinct_and_every_occurrence():
  text = "York, York! new york; YORK-shire and Yorkshire. york"
  found = ta.find_alias_spans(text, ["York", "york", "YORK"])
  assert [text[b:e] for b, e in found.spans] == ["York", "York", "york", "YORK", "york"]
  assert found.spans == sorted(set(found.spans))


def _doc(doc_id, text, answers, answer_type=records.ANSWER_TYPE_SPAN):
  return Document(id=doc_id, text=text, source_id=f"f#{doc_id}",
                  question=Question(doc_id, "Q?", tuple(answers), answer_type))


def test_label_stage_contract():
  docs = [_doc("a", "The U.S. Army and the U.S. Navy.", ["U.S."]),
          _doc("b", "Paris is big.", ["Paris", "paris"]),
          _doc("c", "Nothing to see.", ["Lyon"]),
          _doc("d", "No answers: a test file.", [], records.ANSWER_TYPE_NONE)]
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | beam.Create(docs) | LabelAnswers(find_alias_spans)
    assert_that(out.documents | beam.Map(lambda d: (d.id, d.question.answer_spans)),
                equal_to([("a", ((4, 7), (22, 25))), ("b", ((0, 5),)), ("c", ()), ("d", ())]),
                label="spans")
    assert_that(out[STATS] | beam.CombineGlobally(SumStats()),
                equal_to([{"answers/input": 4, "answers/output": 4, "answers/exact": 1,
                           "answers/normalised": 1, "answers/not_found": 1,
                           "answers/answers_per_question": Distribution.of([2, 1, 0])}]),
                label="stats")
