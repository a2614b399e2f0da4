"""HotpotQA answer / supporting-fact / joint metrics.

A pure-Python re-implementation of the logic of the official HotpotQA
evaluation script (`hotpot_evaluate_v1.py`). The arithmetic (including the
order in which per-question values are accumulated and the final division by
the number of gold questions) follows the official script so that results are
numerically identical, not merely close.

Rules reproduced from the official script:

* Answers are normalised by lower-casing, removing ASCII punctuation
  (`string.punctuation`), removing the articles a/an/the (word-bounded) and
  collapsing whitespace, in that order.
* Answer F1 is 0 (with precision and recall 0) whenever the normalised
  prediction or the normalised gold is one of 'yes', 'no', 'noanswer' and the
  two differ; otherwise it is token-level bag-of-words F1.
* Supporting facts are compared as sets of `(title, sent_id)` tuples; sp EM is
  1 iff the sets are equal.
* Joint precision/recall are the products of answer and sp precision/recall,
  joint F1 is the harmonic mean of those, joint EM is `em * sp_em`.
* Every metric is averaged over ALL gold questions. A question missing from
  `prediction['answer']` contributes 0 to the answer metrics, a question
  missing from `prediction['sp']` contributes 0 to the sp metrics, and either
  omission makes it contribute 0 to the joint metrics. Prediction ids that
  are not gold `_id`s are ignored (as in the official script).

Not part of the official script: the counts `n_gold`, `n_answered`,
`n_missing_answer`, `n_missing_sp` and `n_ignored` (distinct ids of
`prediction['answer']` or `prediction['sp']` that are not gold `_id`s; the
same key as TriviaQA and NarrativeQA report) are returned with the metrics.
"""

import collections
import re
import string
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from model.evaluation import common

METRIC_KEYS: Tuple[str, ...] = (
    'em', 'f1', 'prec', 'recall',
    'sp_em', 'sp_f1', 'sp_prec', 'sp_recall',
    'joint_em', 'joint_f1', 'joint_prec', 'joint_recall',
)
COUNT_KEYS: Tuple[str, ...] = (
    'n_gold', 'n_answered', 'n_missing_answer', 'n_missing_sp',
    common.IGNORED_KEY,
)
# Normalised answers that only match themselves (zero F1 otherwise).
SPECIAL_ANSWERS: Tuple[str, ...] = ('yes', 'no', 'noanswer')

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r'\b(a|an|the)\b')


def normalize_answer(text: str) -> str:
  """Normalises an answer string the way the official script does.

  Steps (order matters): lower-case, drop punctuation, replace the articles
  a/an/the by a space, collapse whitespace.

  Args:
    text: Raw answer string.

  Returns:
    The normalised answer.
  """
  text = text.lower()
  text = ''.join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES_RE.sub(' ', text)
  return ' '.join(text.split())


def f1_score(prediction: str, ground_truth: str) -> Tuple[float, float, float]:
  """Token-level answer F1 with the official yes/no/noanswer rule.

  Args:
    prediction: Predicted answer string.
    ground_truth: Gold answer string.

  Returns:
    `(f1, precision, recall)`.
  """
  norm_pred = normalize_answer(prediction)
  norm_gold = normalize_answer(ground_truth)
  zero = (0, 0, 0)
  if norm_pred != norm_gold and (norm_pred in SPECIAL_ANSWERS or
                                 norm_gold in SPECIAL_ANSWERS):
    return zero
  pred_tokens = norm_pred.split()
  gold_tokens = norm_gold.split()
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return zero
  precision = 1.0 * num_same / len(pred_tokens)
  recall = 1.0 * num_same / len(gold_tokens)
  f1 = (2 * precision * recall) / (precision + recall)
  return f1, precision, recall


def exact_match_score(prediction: str, ground_truth: str) -> bool:
  """Whether the normalised prediction equals the normalised gold answer."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def update_answer(metrics: Dict[str, float], prediction: str,
                  gold: str) -> Tuple[bool, float, float]:
  """Adds one question's answer metrics to `metrics` (in place).

  Args:
    metrics: Running sums keyed by `em`, `f1`, `prec`, `recall`.
    prediction: Predicted answer.
    gold: Gold answer.

  Returns:
    `(em, precision, recall)` for this question, for the joint metrics.
  """
  em = exact_match_score(prediction, gold)
  f1, prec, recall = f1_score(prediction, gold)
  metrics['em'] += float(em)
  metrics['f1'] += f1
  metrics['prec'] += prec
  metrics['recall'] += recall
  return em, prec, recall


def _as_fact_set(facts: Iterable[Sequence[Any]]) -> set:
  """Turns `[[title, sent_id], ...]` into a set of tuples."""
  return set(tuple(fact) for fact in facts)


def update_sp(metrics: Dict[str, float], prediction: Iterable[Sequence[Any]],
              gold: Iterable[Sequence[Any]]) -> Tuple[float, float, float]:
  """Adds one question's supporting-fact metrics to `metrics` (in place).

  Facts are compared as a set of `(title, sent_id)` tuples, so duplicates in
  either list are ignored and `sent_id` types must match (0 != '0').

  Args:
    metrics: Running sums keyed by `sp_em`, `sp_f1`, `sp_prec`, `sp_recall`.
    prediction: Predicted `[[title, sent_id], ...]`.
    gold: Gold `[[title, sent_id], ...]`.

  Returns:
    `(em, precision, recall)` for this question, for the joint metrics.
  """
  pred_set = _as_fact_set(prediction)
  gold_set = _as_fact_set(gold)
  tp = len(pred_set & gold_set)
  fp = len(pred_set) - tp
  fn = len(gold_set) - tp
  prec = 1.0 * tp / (tp + fp) if tp + fp > 0 else 0.0
  recall = 1.0 * tp / (tp + fn) if tp + fn > 0 else 0.0
  f1 = 2 * prec * recall / (prec + recall) if prec + recall > 0 else 0.0
  em = 1.0 if fp + fn == 0 else 0.0
  metrics['sp_em'] += em
  metrics['sp_f1'] += f1
  metrics['sp_prec'] += prec
  metrics['sp_recall'] += recall
  return em, prec, recall


def check_predictions(prediction: Any, source: str = 'predictions') -> None:
  """Validates the structure of a HotpotQA prediction object.

  Args:
    prediction: Parsed predictions JSON.
    source: Name (e.g. file path) used in error messages.

  Raises:
    ValueError: If the object is not
      `{"answer": {id: str}, "sp": {id: [[title, sent_id], ...]}}`.
  """
  expected = ('expected a JSON object {"answer": {_id: str}, '
              '"sp": {_id: [[title, sent_id], ...]}}')
  if not isinstance(prediction, Mapping):
    raise ValueError(f'{source}: top level is {type(prediction).__name__}; '
                     f'{expected}')
  for key in ('answer', 'sp'):
    if key not in prediction:
      raise ValueError(f'{source}: missing "{key}" key; {expected}')
    if not isinstance(prediction[key], Mapping):
      raise ValueError(f'{source}: "{key}" is '
                       f'{type(prediction[key]).__name__}, not an object; '
                       f'{expected}')
  for qid, answer in prediction['answer'].items():
    if not isinstance(answer, str):
      raise ValueError(f'{source}: answer for {qid!r} is '
                       f'{type(answer).__name__}, expected a string')
  for qid, facts in prediction['sp'].items():
    if not isinstance(facts, list) or not all(
        isinstance(f, list) and len(f) == 2 for f in facts):
      raise ValueError(f'{source}: sp for {qid!r} must be a list of '
                       '[title, sent_id] pairs')


def check_gold(gold: Any, source: str = 'gold') -> None:
  """Validates that `gold` looks like the official HotpotQA JSON list.

  Args:
    gold: Parsed gold JSON.
    source: Name (e.g. file path) used in error messages.

  Raises:
    ValueError: If `gold` is not a non-empty list of objects each holding
      `_id`, `answer` and `supporting_facts`.
  """
  expected = ('expected the official HotpotQA JSON list of objects with '
              '"_id", "answer" and "supporting_facts"')
  for i, example in common.iter_gold_items(gold, source, expected):
    for key in ('_id', 'answer', 'supporting_facts'):
      if key not in example:
        raise ValueError(f'{source}: item {i} lacks "{key}"; {expected}')


def evaluate(prediction: Mapping[str, Any],
             gold: List[Mapping[str, Any]]) -> Dict[str, Any]:
  """Scores HotpotQA predictions against the gold set.

  Args:
    prediction: `{"answer": {_id: str}, "sp": {_id: [[title, sent_id], ...]}}`.
      A missing "answer"/"sp" key is treated as an empty mapping.
    gold: Official HotpotQA examples (`_id`, `answer`, `supporting_facts`).

  Returns:
    The 12 official metrics (averaged over all gold questions) plus the
    counts `n_gold`, `n_answered`, `n_missing_answer`, `n_missing_sp` and
    `n_ignored` (distinct prediction ids, of "answer" or "sp", that are not
    gold `_id`s; they do not affect the metrics).

  Raises:
    ValueError: If `gold` is empty (the official script divides by zero).
  """
  if not gold:
    raise ValueError('gold set is empty')
  answers = prediction.get('answer', {})
  sp_facts = prediction.get('sp', {})
  metrics = {key: 0 for key in METRIC_KEYS}
  n_answered = 0
  n_missing_sp = 0
  for example in gold:
    qid = example['_id']
    has_answer = qid in answers
    has_sp = qid in sp_facts
    if has_answer:
      n_answered += 1
      em, prec, recall = update_answer(metrics, answers[qid],
                                       example['answer'])
    if has_sp:
      sp_em, sp_prec, sp_recall = update_sp(metrics, sp_facts[qid],
                                            example['supporting_facts'])
    else:
      n_missing_sp += 1
    if has_answer and has_sp:
      joint_prec = prec * sp_prec
      joint_recall = recall * sp_recall
      if joint_prec + joint_recall > 0:
        joint_f1 = 2 * joint_prec * joint_recall / (joint_prec + joint_recall)
      else:
        joint_f1 = 0.
      metrics['joint_em'] += em * sp_em
      metrics['joint_f1'] += joint_f1
      metrics['joint_prec'] += joint_prec
      metrics['joint_recall'] += joint_recall
  n_gold = len(gold)
  result: Dict[str, Any] = {key: metrics[key] / n_gold for key in METRIC_KEYS}
  result.update(n_gold=n_gold, n_answered=n_answered,
                n_missing_answer=n_gold - n_answered,
                n_missing_sp=n_missing_sp)
  gold_ids = {example['_id'] for example in gold}
  result[common.IGNORED_KEY] = common.count_ignored(
      list(answers) + list(sp_facts), gold_ids)
  return result
