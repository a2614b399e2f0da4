"""Independent reference of the official HotpotQA scorer, for cross-checks.

Written (not copied) to mirror the structure of `hotpot_evaluate_v1.py`:
module-level `normalize_answer`, `f1_score`, `exact_match_score`,
`update_answer`, `update_sp` and an `eval`-style loop over the gold list that
skips missing answers / sp facts and divides every sum by `len(gold)`. It
takes parsed objects instead of file names and returns instead of printing.
"""

import collections
import re
import string
from typing import Any, Dict, List, Tuple


def normalize_answer(s: str) -> str:
  """Lower, strip punctuation, strip articles, fix whitespace."""

  def remove_articles(text: str) -> str:
    return re.sub(r'\b(a|an|the)\b', ' ', text)

  def white_space_fix(text: str) -> str:
    return ' '.join(text.split())

  def remove_punc(text: str) -> str:
    exclude = set(string.punctuation)
    return ''.join(ch for ch in text if ch not in exclude)

  def lower(text: str) -> str:
    return text.lower()

  return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction: str, ground_truth: str) -> Tuple[float, float, float]:
  """Answer F1/precision/recall with the yes/no/noanswer rule."""
  normalized_prediction = normalize_answer(prediction)
  normalized_ground_truth = normalize_answer(ground_truth)
  zero_metric = (0, 0, 0)
  if (normalized_prediction in ['yes', 'no', 'noanswer'] and
      normalized_prediction != normalized_ground_truth):
    return zero_metric
  if (normalized_ground_truth in ['yes', 'no', 'noanswer'] and
      normalized_prediction != normalized_ground_truth):
    return zero_metric
  prediction_tokens = normalized_prediction.split()
  ground_truth_tokens = normalized_ground_truth.split()
  common = (collections.Counter(prediction_tokens) &
            collections.Counter(ground_truth_tokens))
  num_same = sum(common.values())
  if num_same == 0:
    return zero_metric
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  f1 = (2 * precision * recall) / (precision + recall)
  return f1, precision, recall


def exact_match_score(prediction: str, ground_truth: str) -> bool:
  """Normalised string equality."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def update_answer(metrics: Dict[str, float], prediction: str,
                  gold: str) -> Tuple[bool, float, float]:
  """Accumulates answer metrics for one question."""
  em = exact_match_score(prediction, gold)
  f1, prec, recall = f1_score(prediction, gold)
  metrics['em'] += float(em)
  metrics['f1'] += f1
  metrics['prec'] += prec
  metrics['recall'] += recall
  return em, prec, recall


def update_sp(metrics: Dict[str, float], prediction: List[Any],
              gold: List[Any]) -> Tuple[float, float, float]:
  """Accumulates supporting-fact metrics for one question."""
  cur_sp_pred = set(map(tuple, prediction))
  gold_sp_pred = set(map(tuple, gold))
  tp, fp, fn = 0, 0, 0
  for e in cur_sp_pred:
    if e in gold_sp_pred:
      tp += 1
    else:
      fp += 1
  for e in gold_sp_pred:
    if e not in cur_sp_pred:
      fn += 1
  prec = 1.0 * tp / (tp + fp) if tp + fp > 0 else 0.0
  recall = 1.0 * tp / (tp + fn) if tp + fn > 0 else 0.0
  f1 = 2 * prec * recall / (prec + recall) if prec + recall > 0 else 0.0
  em = 1.0 if fp + fn == 0 else 0.0
  metrics['sp_em'] += em
  metrics['sp_f1'] += f1
  metrics['sp_prec'] += prec
  metrics['sp_recall'] += recall
  return em, prec, recall


def eval(prediction: Dict[str, Any],  # pylint: disable=redefined-builtin
         gold: List[Dict[str, Any]]) -> Dict[str, float]:
  """The official evaluation loop over parsed prediction and gold objects."""
  metrics = {'em': 0, 'f1': 0, 'prec': 0, 'recall': 0,
             'sp_em': 0, 'sp_f1': 0, 'sp_prec': 0, 'sp_recall': 0,
             'joint_em': 0, 'joint_f1': 0, 'joint_prec': 0, 'joint_recall': 0}
  for dp in gold:
    cur_id = dp['_id']
    can_eval_joint = True
    if cur_id not in prediction['answer']:
      can_eval_joint = False  # official: print('missing answer ...')
    else:
      em, prec, recall = update_answer(
          metrics, prediction['answer'][cur_id], dp['answer'])
    if cur_id not in prediction['sp']:
      can_eval_joint = False  # official: print('missing sp fact ...')
    else:
      sp_em, sp_prec, sp_recall = update_sp(
          metrics, prediction['sp'][cur_id], dp['supporting_facts'])

    if can_eval_joint:
      joint_prec = prec * sp_prec
      joint_recall = recall * sp_recall
      if joint_prec + joint_recall > 0:
        joint_f1 = 2 * joint_prec * joint_recall / (joint_prec + joint_recall)
      else:
        joint_f1 = 0.
      joint_em = em * sp_em

      metrics['joint_em'] += joint_em
      metrics['joint_f1'] += joint_f1
      metrics['joint_prec'] += joint_prec
      metrics['joint_recall'] += joint_recall

  n = len(gold)
  for k in metrics.keys():
    metrics[k] /= n
  return metrics
