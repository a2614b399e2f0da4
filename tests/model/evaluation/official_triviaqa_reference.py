"""Independent reference of the official TriviaQA scorer, for cross-checks.

Written (not copied) to mirror the structure and names of the official
`evaluation/triviaqa_evaluation.py` and `utils/dataset_utils.py` from
`mandarjoshi90/triviaqa`: nested helpers inside `normalize_answer`,
`metric_max_over_ground_truths`, `get_ground_truths`, `evaluate_triviaqa`
looping over the ground-truth keys, and the dataset helpers
`read_triviaqa_data` / `read_clean_part` / `get_key_to_ground_truth` /
`get_qd_to_answer` / `get_question_doc_string`. It takes parsed objects
instead of file names (deep-copying, since the official reader edits the
questions in place), never prints, and keeps the official crash behaviour
(KeyError / AssertionError / ValueError from `max([])`).
"""

import collections
import copy
import re
import string
from typing import Any, Dict, Iterable, List, Optional


def normalize_answer(s: str) -> str:
  """Underscores, lower, punctuation to spaces, articles, whitespace."""

  def remove_articles(text: str) -> str:
    return re.sub(r'\b(a|an|the)\b', ' ', text)

  def white_space_fix(text: str) -> str:
    return ' '.join(text.split())

  def handle_punc(text: str) -> str:
    exclude = set(string.punctuation + ''.join(['\u2018', '\u2019', '\u00b4',
                                                '`']))
    return ''.join(' ' if ch in exclude else ch for ch in text)

  def lower(text: str) -> str:
    return text.lower()

  def replace_underscore(text: str) -> str:
    return text.replace('_', ' ')

  return white_space_fix(
      remove_articles(handle_punc(lower(replace_underscore(s))))).strip()


def f1_score(prediction: str, ground_truth: str) -> float:
  """Bag-of-tokens F1 after normalisation."""
  prediction_tokens = normalize_answer(prediction).split()
  ground_truth_tokens = normalize_answer(ground_truth).split()
  common = (collections.Counter(prediction_tokens) &
            collections.Counter(ground_truth_tokens))
  num_same = sum(common.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  f1 = (2 * precision * recall) / (precision + recall)
  return f1


def exact_match_score(prediction: str, ground_truth: str) -> bool:
  """Normalised string equality."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction: str,
                                  ground_truths: List[str]) -> Any:
  """Max of `metric_fn` over the ground truths (raises when empty)."""
  scores_for_ground_truths = []
  for ground_truth in ground_truths:
    scores_for_ground_truths.append(metric_fn(prediction, ground_truth))
  return max(scores_for_ground_truths)


def get_ground_truths(answer: Dict[str, Any]) -> List[str]:
  """NormalizedAliases plus normalised HumanAnswers."""
  return answer['NormalizedAliases'] + [
      normalize_answer(ans) for ans in answer.get('HumanAnswers', [])]


def evaluate_triviaqa(ground_truth: Dict[str, Any],
                      predicted_answers: Dict[str, str],
                      qid_list: Optional[Iterable[str]] = None
                     ) -> Dict[str, Any]:
  """Official-style loop: skip missing keys, divide by len(qid_list)."""
  f1 = exact_match = common = 0
  if qid_list is None:
    qid_list = ground_truth.keys()
  for qid in qid_list:
    if qid not in predicted_answers:
      continue
    if qid not in ground_truth:
      continue
    common += 1
    prediction = predicted_answers[qid]
    ground_truths = get_ground_truths(ground_truth[qid])
    em_for_this_question = metric_max_over_ground_truths(
        exact_match_score, prediction, ground_truths)
    exact_match += em_for_this_question
    f1_for_this_question = metric_max_over_ground_truths(
        f1_score, prediction, ground_truths)
    f1 += f1_for_this_question

  exact_match = 100.0 * exact_match / len(qid_list)
  f1 = 100.0 * f1 / len(qid_list)
  return {'exact_match': exact_match, 'f1': f1, 'common': common,
          'denominator': len(qid_list), 'pred_len': len(predicted_answers),
          'gold_len': len(ground_truth)}


# --- utils/dataset_utils.py ---------------------------------------------


def get_question_doc_string(qid: str, doc_name: str) -> str:
  """'{qid}--{doc_name}'."""
  return '{}--{}'.format(qid, doc_name)


def get_qd_to_answer(data: Dict[str, Any]) -> Dict[str, Any]:
  """Question-document key -> Answer over EntityPages + SearchResults."""
  key_to_answer = {}
  for datum in data['Data']:
    for page in datum.get('EntityPages', []) + datum.get('SearchResults', []):
      qd_tuple = get_question_doc_string(datum['QuestionId'], page['Filename'])
      key_to_answer[qd_tuple] = datum['Answer']
  return key_to_answer


def get_key_to_ground_truth(data: Dict[str, Any]) -> Dict[str, Any]:
  """QuestionId keys for Wikipedia, question-document keys otherwise."""
  if data['Domain'] == 'Wikipedia':
    return {datum['QuestionId']: datum['Answer'] for datum in data['Data']}
  return get_qd_to_answer(data)


def read_clean_part(datum: Dict[str, Any]) -> Dict[str, Any]:
  """Keeps only pages with DocPartOfVerifiedEval (in place)."""
  for key in ['EntityPages', 'SearchResults']:
    new_page_list = []
    for page in datum.get(key, []):
      if page['DocPartOfVerifiedEval']:
        new_page_list.append(page)
    datum[key] = new_page_list
  assert len(datum['EntityPages']) + len(datum['SearchResults']) > 0
  return datum


def read_triviaqa_data(data: Dict[str, Any]) -> Dict[str, Any]:
  """Verified filtering of a parsed question file (on a deep copy)."""
  data = copy.deepcopy(data)
  if data['VerifiedEval']:
    clean_data = []
    for datum in data['Data']:
      if datum['QuestionPartOfVerifiedEval']:
        if data['Domain'] == 'Web':
          datum = read_clean_part(datum)
        clean_data.append(datum)
    data['Data'] = clean_data
  return data


def official_main(dataset_json: Dict[str, Any],
                  predictions: Dict[str, str]) -> Dict[str, Any]:
  """What the official `__main__` computes for a parsed file pair."""
  dataset_json = read_triviaqa_data(dataset_json)
  key_to_ground_truth = get_key_to_ground_truth(dataset_json)
  return evaluate_triviaqa(key_to_ground_truth, predictions)
