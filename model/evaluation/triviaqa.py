"""TriviaQA (reading-comprehension setting) exact-match / F1 metrics.

A pure-Python re-implementation of the rules of the official TriviaQA
evaluation (repository `mandarjoshi90/triviaqa`, files
`evaluation/triviaqa_evaluation.py` and `utils/dataset_utils.py`). The order
in which per-key scores are accumulated and the final division follow the
official script, so results are numerically identical, not merely close.

Rules reproduced from the official code:

* Answers are normalised by, in this order: replacing `_` with a space,
  lower-casing, replacing every punctuation character (`string.punctuation`
  plus the typographic quotes/accents U+2018, U+2019, U+00B4 and the backtick)
  by a SPACE (SQuAD deletes punctuation instead; here "o'neil" becomes
  "o neil", two tokens), replacing the word-bounded articles a/an/the by a
  space, and collapsing whitespace.
* The ground truths of a question are the answer's `NormalizedAliases` (used
  as stored) followed by its `HumanAnswers` (if the field is present) run
  through the normaliser. Exact match and F1 of a prediction are the maxima
  over these ground truths (each ground truth is normalised again when
  compared; that is a no-op for already-normalised strings).
* F1 is bag-of-tokens overlap F1 on the normalised strings (0 when nothing
  overlaps, including an empty prediction). There is no yes/no special case.
* Evaluation keys: for `Domain == 'Wikipedia'` one key per question, its
  `QuestionId`; for any other domain (i.e. `Web`) one key per
  question-document pair, `'{QuestionId}--{Filename}'`, over the question's
  `EntityPages` followed by its `SearchResults` (the official code includes
  both lists for web). Keys are collected in a dict, so a repeated key counts
  once (the last occurrence's answer wins, at the first occurrence's
  position).
* Verified subset: when the gold file has `VerifiedEval: true`, only
  questions with `QuestionPartOfVerifiedEval` true are kept, and for the Web
  domain only their pages with `DocPartOfVerifiedEval` true.
* Both metrics are `100 * sum / number_of_gold_keys`, i.e. PERCENTAGES in
  [0, 100]. A gold key without a prediction contributes 0 but still counts in
  the denominator; predictions for keys not in the gold set are ignored.

Additions that are not part of the official script:

* `per_document=True` scores a Wikipedia file per question-document pair
  (keys `'{QuestionId}--{Filename}'` over `EntityPages`), the way the Web
  domain is always scored. With `VerifiedEval: true` it also keeps only pages
  with `DocPartOfVerifiedEval` true, since the unit of evaluation is then a
  question-document pair. (The current official revision filters documents
  only for Web; an earlier revision of `utils/dataset_utils.py` filtered them
  for Wikipedia, where it has no effect on per-question keys.)
* Where the official script would crash (a verified question left with no
  verified document, a question with no ground truth) this module does not:
  the former simply contributes no key, the latter scores 0.
* The counts `n_gold`, `n_answered`, `n_missing` and `n_ignored` (predictions
  whose key is not a gold key) are reported alongside the metrics.
"""

import collections
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

from model.evaluation import common
from schemas import text_metrics

METRIC_KEYS: Tuple[str, ...] = ('exact_match', 'f1')
COUNT_KEYS: Tuple[str, ...] = ('n_gold', 'n_answered', 'n_missing',
                               common.IGNORED_KEY)
DOMAINS: Tuple[str, ...] = ('Wikipedia', 'Web')
# Separator between question id and document file name in web keys.
KEY_SEPARATOR = '--'



# The official normalisation (shared with the pipelines' answer labeller).
normalize_answer = text_metrics.triviaqa_normalize_answer


def f1_score(prediction: str, ground_truth: str) -> float:
  """Token-overlap F1 between two normalised answers (a fraction in [0, 1]).

  Args:
    prediction: Predicted answer string.
    ground_truth: One gold answer string.

  Returns:
    The F1; 0 when no token is shared (e.g. an empty prediction).
  """
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(ground_truth).split()
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_tokens)
  recall = 1.0 * num_same / len(gold_tokens)
  return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction: str, ground_truth: str) -> bool:
  """Whether the normalised prediction equals the normalised gold answer."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def max_over_ground_truths(metric_fn: Callable[[str, str], Any],
                           prediction: str,
                           ground_truths: Sequence[str]) -> Any:
  """Best score of `prediction` against any ground truth.

  Args:
    metric_fn: `exact_match_score` or `f1_score`.
    prediction: Predicted answer.
    ground_truths: Gold answers.

  Returns:
    The maximum of `metric_fn(prediction, gt)`; 0 if there is no ground truth
    (the official script raises in that case).
  """
  if not ground_truths:
    return 0
  return max(metric_fn(prediction, gt) for gt in ground_truths)


def get_ground_truths(answer: Mapping[str, Any]) -> List[str]:
  """Gold answers of a question: `NormalizedAliases` + normalised humans.

  Args:
    answer: The `Answer` object of a TriviaQA question.

  Returns:
    `NormalizedAliases` as stored, followed by each `HumanAnswers` entry (when
    the field exists) passed through `normalize_answer`.
  """
  return (list(answer.get('NormalizedAliases', [])) +
          [normalize_answer(a) for a in answer.get('HumanAnswers', [])])


def question_doc_key(question_id: str, filename: str) -> str:
  """Key of one question-document pair: `'{question_id}--{filename}'`."""
  return f'{question_id}{KEY_SEPARATOR}{filename}'


def _verified_pages(datum: Mapping[str, Any]) -> Dict[str, List[Any]]:
  """The `EntityPages` / `SearchResults` of `datum` marked as verified."""
  return {
      field: [page for page in datum.get(field, [])
              if page.get('DocPartOfVerifiedEval')]
      for field in ('EntityPages', 'SearchResults')
  }


def select_data(gold: Mapping[str, Any],
                per_document: bool = False) -> List[Mapping[str, Any]]:
  """Questions (and documents) that take part in the evaluation.

  Without `VerifiedEval` this is `gold['Data']` unchanged. With it, only the
  questions whose `QuestionPartOfVerifiedEval` is true, and (for Web, or
  when `per_document`) only their pages whose `DocPartOfVerifiedEval` is
  true. The input is never modified.

  Args:
    gold: Parsed official question file.
    per_document: Whether Wikipedia is scored per question-document pair.

  Returns:
    The list of (possibly shallow-copied, page-filtered) question objects.
  """
  data = gold['Data']
  if not gold.get('VerifiedEval'):
    return list(data)
  filter_docs = gold['Domain'] != 'Wikipedia' or per_document
  selected = []
  for datum in data:
    if not datum.get('QuestionPartOfVerifiedEval'):
      continue
    if filter_docs:
      datum = dict(datum, **_verified_pages(datum))
    selected.append(datum)
  return selected


def key_to_answer(gold: Mapping[str, Any],
                  per_document: bool = False) -> Dict[str, Mapping[str, Any]]:
  """Maps every evaluation key to the `Answer` object it is scored against.

  Args:
    gold: Parsed official question file.
    per_document: Score a Wikipedia file per question-document pair instead
      of per question. Web files are always per pair.

  Returns:
    An insertion-ordered dict `key -> Answer`.
  """
  keys: Dict[str, Mapping[str, Any]] = {}
  per_question = gold['Domain'] == 'Wikipedia' and not per_document
  for datum in select_data(gold, per_document):
    if per_question:
      keys[datum['QuestionId']] = datum['Answer']
      continue
    for page in (list(datum.get('EntityPages', [])) +
                 list(datum.get('SearchResults', []))):
      keys[question_doc_key(datum['QuestionId'], page['Filename'])] = (
          datum['Answer'])
  return keys


def check_predictions(predictions: Any, source: str = 'predictions') -> None:
  """Validates a TriviaQA prediction object `{key: answer_string}`.

  Args:
    predictions: Parsed predictions JSON.
    source: Name (e.g. file path) used in error messages.

  Raises:
    ValueError: If it is not an object mapping keys to strings.
  """
  expected = ('expected a JSON object {key: answer_string} with key = '
              'QuestionId (Wikipedia) or "QuestionId--Filename" (Web / '
              'per-document)')
  common.check_answer_map(predictions, source, expected)


def check_gold(gold: Any, source: str = 'gold') -> None:
  """Validates that `gold` looks like an official TriviaQA question file.

  Args:
    gold: Parsed gold JSON.
    source: Name (e.g. file path) used in error messages.

  Raises:
    ValueError: If `Data` (a list of questions with `QuestionId` and an
      `Answer` holding `NormalizedAliases`) or `Domain` (Wikipedia or Web) is
      missing or malformed, or a verified file lacks the verification fields.
  """
  expected = ('expected the official TriviaQA question file {"Data": [...], '
              '"Domain": "Wikipedia"|"Web", "VerifiedEval": bool, ...}')
  if not isinstance(gold, Mapping):
    raise ValueError(f'{source}: top level is {type(gold).__name__}; '
                     f'{expected}')
  if 'Domain' not in gold:
    raise ValueError(f'{source}: missing "Domain"; {expected}')
  if gold['Domain'] not in DOMAINS:
    raise ValueError(f'{source}: unknown Domain {gold["Domain"]!r}; '
                     f'{expected}')
  if not isinstance(gold.get('Data'), list):
    raise ValueError(f'{source}: missing or non-list "Data"; {expected}')
  verified = bool(gold.get('VerifiedEval'))
  for i, datum in enumerate(gold['Data']):
    if not isinstance(datum, Mapping):
      raise ValueError(f'{source}: Data[{i}] is {type(datum).__name__}; '
                       f'{expected}')
    if 'QuestionId' not in datum:
      raise ValueError(f'{source}: Data[{i}] lacks "QuestionId"; {expected}')
    qid = datum['QuestionId']
    answer = datum.get('Answer')
    if not isinstance(answer, Mapping):
      raise ValueError(f'{source}: question {qid!r} has no "Answer" object '
                       '(a test file without answers cannot be scored)')
    if not isinstance(answer.get('NormalizedAliases'), list):
      raise ValueError(f'{source}: Answer of question {qid!r} lacks the '
                       '"NormalizedAliases" list')
    for field in ('EntityPages', 'SearchResults'):
      pages = datum.get(field, [])
      if not isinstance(pages, list) or not all(
          isinstance(p, Mapping) and 'Filename' in p for p in pages):
        raise ValueError(f'{source}: {field} of question {qid!r} must be a '
                         'list of objects with "Filename"')
    if verified:
      if 'QuestionPartOfVerifiedEval' not in datum:
        raise ValueError(f'{source}: VerifiedEval file but question {qid!r} '
                         'lacks "QuestionPartOfVerifiedEval"')
      if gold['Domain'] == 'Web' and datum['QuestionPartOfVerifiedEval']:
        for field in ('EntityPages', 'SearchResults'):
          for page in datum.get(field, []):
            if 'DocPartOfVerifiedEval' not in page:
              raise ValueError(
                  f'{source}: VerifiedEval file but page '
                  f'{page["Filename"]!r} of question {qid!r} lacks '
                  '"DocPartOfVerifiedEval"')


def evaluate(predictions: Mapping[str, str], gold: Mapping[str, Any],
             per_document: bool = False) -> Dict[str, Any]:
  """Scores TriviaQA predictions against an official question file.

  Args:
    predictions: `{key: answer_string}` (see `key_to_answer` for keys).
    gold: Parsed official question file (`Data`, `Domain`, `VerifiedEval`).
    per_document: Score a Wikipedia file per question-document pair.

  Returns:
    `exact_match` and `f1` as percentages in [0, 100], averaged over ALL gold
    keys, plus `n_gold`, `n_answered` (gold keys with a prediction),
    `n_missing` (gold keys without one, scored 0) and `n_ignored`
    (predictions whose key is not a gold key).

  Raises:
    ValueError: If the gold set yields no evaluation key (the official
      script divides by zero).
  """
  answers = key_to_answer(gold, per_document)
  if not answers:
    raise ValueError('gold set has no evaluation keys')
  exact_match = 0
  f1 = 0
  n_answered = 0
  for key, answer in answers.items():
    if key not in predictions:
      continue
    n_answered += 1
    prediction = predictions[key]
    ground_truths = get_ground_truths(answer)
    exact_match += max_over_ground_truths(exact_match_score, prediction,
                                          ground_truths)
    f1 += max_over_ground_truths(f1_score, prediction, ground_truths)
  n_gold = len(answers)
  return {
      'exact_match': 100.0 * exact_match / n_gold,
      'f1': 100.0 * f1 / n_gold,
      'n_gold': n_gold,
      'n_answered': n_answered,
      'n_missing': n_gold - n_answered,
      common.IGNORED_KEY: common.count_ignored(predictions, answers),
  }


def evaluate_per_document(predictions: Mapping[str, str],
                          gold: Mapping[str, Any]) -> Dict[str, Any]:
  """`evaluate` with `per_document=True` (for a task registry)."""
  return evaluate(predictions, gold, per_document=True)
