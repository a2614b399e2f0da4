"""SQuAD v1.1 metrics (model/evaluation/squad.py) on hand-computed examples."""

import pytest

from model.evaluation import common, squad


@pytest.mark.parametrize('text, normalised', [
    ('The Cat!', 'cat'),
    ("O'Neil", 'oneil'),  # punctuation is deleted, not replaced by a space (TriviaQA)
    ('  a  Tale of\tTwo\nCities. ', 'tale of two cities'),
    ('theatre an anthem', 'theatre anthem'),  # articles only as whole words
    ('Zürich, Straße', 'zürich straße'),
    ('', ''),
])
def test_normalize_answer(text, normalised):
  assert squad.normalize_answer(text) == normalised


def test_exact_match_and_f1_by_hand():
  assert squad.exact_match_score('The Cat!', 'cat')
  assert squad.f1_score('The Cat!', 'cat') == 1.0
  # "black cat sat" vs "cat sat down": 2 shared tokens of 3 and 3: P = R = 2/3, F1 = 2/3.
  assert squad.f1_score('the black cat sat', 'a cat sat down') == pytest.approx(2 / 3)
  assert not squad.exact_match_score('the black cat sat', 'a cat sat down')
  # "cat" vs "cat sat down": P = 1, R = 1/3, F1 = 2 * 1/3 / (4/3) = 1/2.
  assert squad.f1_score('cat', 'cat sat down') == pytest.approx(0.5)
  # Repeated tokens count by multiplicity: "cat cat" vs "cat": P = 1/2, R = 1, F1 = 2/3.
  assert squad.f1_score('cat cat', 'cat') == pytest.approx(2 / 3)
  assert squad.f1_score('', 'cat') == 0 and squad.f1_score('dog', 'cat') == 0
  assert squad.f1_score('the', 'a') == 0  # both normalise to nothing: no shared token
  assert squad.metric_max_over_ground_truths(squad.f1_score, 'cat',
                                             ['dog', 'cat sat down', 'a cat']) == 1.0


def test_evaluate_percentages_over_all_gold_questions():
  gold = {'q1': ['The Cat'], 'q2': ['cat sat down', 'dog'], 'q3': ['Paris'], 'q4': []}
  predictions = {'q1': 'cat.', 'q2': 'cat', 'q9': 'x', 'q4': 'anything'}
  metrics = squad.evaluate(predictions, gold)
  # q1: EM 1, F1 1; q2: EM 0, F1 max(1/2, 0); q3 missing: 0; q4 has no gold answer: unscored.
  assert metrics == {
      'exact_match': 100.0 * 1 / 3, 'f1': 100.0 * 1.5 / 3, 'n_gold': 3, 'n_answered': 2,
      'n_missing': 1, 'n_no_answer': 1, common.IGNORED_KEY: 1}
  assert set(metrics) == set(squad.METRIC_KEYS + squad.COUNT_KEYS)
  # Predictions for ids not in the gold leave the metrics unchanged.
  without = squad.evaluate({'q1': 'cat.', 'q2': 'cat'}, gold)
  assert {k: v for k, v in without.items() if k != common.IGNORED_KEY} == {
      k: v for k, v in metrics.items() if k != common.IGNORED_KEY}
  with pytest.raises(ValueError, match='no gold question has an answer'):
    squad.evaluate({}, {'q1': []})


def test_checks():
  squad.check_predictions({'q1': 'a'})
  with pytest.raises(ValueError, match='answer for .q1. is int'):
    squad.check_predictions({'q1': 3}, 'p.json')
  with pytest.raises(ValueError, match='top level is list'):
    squad.check_predictions([], 'p.json')
  squad.check_gold({'q1': ['a'], 'q2': []})
  with pytest.raises(ValueError, match='no gold questions'):
    squad.check_gold({})
  with pytest.raises(ValueError, match='not a list of strings'):
    squad.check_gold({'q1': 'a'})
  with pytest.raises(ValueError, match='test file cannot be scored'):
    squad.check_gold({'q1': [], 'q2': []})
