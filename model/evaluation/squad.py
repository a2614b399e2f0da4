"""SQuAD v1.1 exact-match / F1 metrics (the ``extractive_qa`` task's official metrics).

A port of the functions of the official SQuAD v1.1 evaluation script
(`evaluate-v1.1.py`, https://rajpurkar.github.io/SQuAD-explorer/, by Pranav
Rajpurkar et al.): `normalize_answer`, `f1_score`, `exact_match_score`,
`metric_max_over_ground_truths` and the accumulation of `evaluate`, with the
same arithmetic and order, so results are identical. Pure Python.

Rules reproduced from the official script:

* Answers are normalised by, in this order: lower-casing, DELETING every
  `string.punctuation` character ("o'neil" becomes "oneil"; TriviaQA replaces
  punctuation by a space instead), replacing the word-bounded articles
  a/an/the by a space, and collapsing whitespace.
* F1 is bag-of-tokens overlap F1 on the normalised strings (0 when nothing
  overlaps, including an empty prediction); exact match compares the
  normalised strings. Both are the maximum over the question's gold answers.
* Both metrics are `100 * sum / number_of_gold_questions`: PERCENTAGES in
  [0, 100]. A gold question without a prediction scores 0 (the official script
  prints 'Unanswered question ... will receive score 0.'); predictions for ids
  that are not gold questions are ignored.

Input (instead of the SQuAD JSON tree): gold is `{id: [answer, ...]}` (the
`extractive_qa` task reads it from the dataset's JSON-lines file), predictions
`{id: answer}` as in SQuAD.

Additions that are not part of the official script (which would crash on the
first one):

* An id with no gold answer (a line of a test file) cannot be scored: it is
  left out of the metrics and counted in `n_no_answer`; a prediction for it is
  not "ignored" (its id is in the gold file). A gold set without any answer is
  rejected by `check_gold`.
* The counts `n_gold` (scored questions), `n_answered`, `n_missing` and
  `n_ignored` are reported alongside the metrics, as for the other tasks.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

from model.evaluation import common

METRIC_KEYS: Tuple[str, ...] = ('exact_match', 'f1')
COUNT_KEYS: Tuple[str, ...] = ('n_gold', 'n_answered', 'n_missing', 'n_no_answer',
                               common.IGNORED_KEY)

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r'\b(a|an|the)\b')


def normalize_answer(s: str) -> str:
  """Lower text and remove punctuation, articles and extra whitespace (official order)."""
  text = s.lower()
  text = ''.join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES_RE.sub(' ', text)
  return ' '.join(text.split())


def f1_score(prediction: str, ground_truth: str) -> float:
  """Token-overlap F1 of two answers after normalisation (a fraction in [0, 1])."""
  prediction_tokens = normalize_answer(prediction).split()
  ground_truth_tokens = normalize_answer(ground_truth).split()
  common_tokens = (collections.Counter(prediction_tokens) &
                   collections.Counter(ground_truth_tokens))
  num_same = sum(common_tokens.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction: str, ground_truth: str) -> bool:
  """Whether the two answers are equal after normalisation."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn: Callable[[str, str], Any], prediction: str,
                                  ground_truths: Sequence[str]) -> Any:
  """Best `metric_fn(prediction, gt)` over the (non-empty) `ground_truths`."""
  return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def check_predictions(predictions: Any, source: str = 'predictions') -> None:
  """ValueError unless `predictions` is `{id: answer_string}`."""
  common.check_answer_map(predictions, source,
                          'expected a JSON object {"<id>": answer_string}')


def check_gold(gold: Any, source: str = 'gold') -> None:
  """ValueError unless `gold` is `{id: [answer_string, ...]}` with at least one answer."""
  expected = 'expected {"<id>": [answer_string, ...]}'
  if not isinstance(gold, Mapping):
    raise ValueError(f'{source}: top level is {type(gold).__name__}; {expected}')
  if not gold:
    raise ValueError(f'{source}: no gold questions; {expected}')
  for key, answers in gold.items():
    if not isinstance(answers, (list, tuple)) or not all(isinstance(a, str) for a in answers):
      raise ValueError(f'{source}: answers of {key!r} are not a list of strings; {expected}')
  if not any(gold.values()):
    raise ValueError(f'{source}: no question has a gold answer (a test file cannot be scored)')


def evaluate(predictions: Mapping[str, str],
             gold: Mapping[str, Sequence[str]]) -> Dict[str, Any]:
  """Scores `{id: answer}` against `{id: [gold answers]}` (see the module docstring).

  Returns:
    `exact_match` and `f1` (percentages, over every gold question with an
    answer), `n_gold` (those questions), `n_answered`, `n_missing` (scored 0),
    `n_no_answer` (gold ids without answers, not scored) and `n_ignored`
    (prediction ids not in the gold).

  Raises:
    ValueError: No gold question has an answer (the official script divides by zero).
  """
  f1 = exact_match = total = n_answered = 0
  for qid, ground_truths in gold.items():
    if not ground_truths:
      continue
    total += 1
    if qid not in predictions:
      continue
    n_answered += 1
    prediction = predictions[qid]
    exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
    f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
  if not total:
    raise ValueError('no gold question has an answer')
  return {
      'exact_match': 100.0 * exact_match / total,
      'f1': 100.0 * f1 / total,
      'n_gold': total,
      'n_answered': n_answered,
      'n_missing': total - n_answered,
      'n_no_answer': len(gold) - total,
      common.IGNORED_KEY: common.count_ignored(predictions, gold),
  }
