"""Tests for the HotpotQA metrics and the `model.evaluate` CLI."""

import copy
import json
import math
import os
import pathlib
import random
import subprocess
import sys
from fractions import Fraction
from typing import Any, Dict, List

import pytest

from model.evaluation import hotpotqa

from . import official_hotpot_reference as reference
from tests import REPO_ROOT

SAMPLE_PATH = (REPO_ROOT.parent / 'shared' / 'samples' / 'hotpotqa' /
               'hotpot_dev_distractor_v1.head20.json')


def _close(actual: float, expected: Fraction) -> bool:
  """Float/fraction comparison tolerant to the last-ulp rounding only."""
  return math.isclose(actual, float(expected), rel_tol=1e-12, abs_tol=1e-15)


def _gold(qid: str, answer: str, facts: List[List[Any]]) -> Dict[str, Any]:
  """Builds one minimal gold example."""
  return {'_id': qid, 'answer': answer, 'supporting_facts': facts}


def _load_sample() -> List[Dict[str, Any]]:
  """Loads the shared 20-question dev sample or skips the test."""
  if not SAMPLE_PATH.exists():
    pytest.skip(f'HotpotQA samples file not present: {SAMPLE_PATH}')
  with open(SAMPLE_PATH, encoding='utf-8') as f:
    return json.load(f)


# ----------------------------------------------------------------- answers


@pytest.mark.parametrize('raw, expected', [
    ('The Quick, Brown Fox!', 'quick brown fox'),
    ('An apple a day', 'apple day'),
    ('theater  THE\tanother', 'theater another'),
    ('  Hello,   World.  ', 'hello world'),
    # Punctuation goes before articles: 'a-team' -> 'ateam', kept.
    ('A-Team', 'ateam'),
    # ...and removing punctuation can expose an article: 'the.' -> ''.
    ('the.', ''),
    ("Rock 'n' Roll", 'rock n roll'),
    ('', ''),
])
def test_normalize_answer(raw: str, expected: str) -> None:
  assert hotpotqa.normalize_answer(raw) == expected
  assert reference.normalize_answer(raw) == expected


def test_exact_match_ignores_case_articles_punctuation() -> None:
  assert hotpotqa.exact_match_score('The Eiffel Tower.', 'eiffel tower')
  assert not hotpotqa.exact_match_score('Eiffel', 'eiffel tower')


def test_yes_no_rule_zeroes_f1_despite_overlap() -> None:
  # Token overlap would give non-zero F1 without the special rule.
  assert hotpotqa.f1_score('yes', 'yes it is') == (0, 0, 0)
  assert hotpotqa.f1_score('no way', 'no') == (0, 0, 0)
  assert hotpotqa.f1_score('no', 'yes') == (0, 0, 0)
  # Matching yes/no after normalisation scores fully.
  assert hotpotqa.f1_score('Yes.', 'yes') == (1.0, 1.0, 1.0)
  assert hotpotqa.exact_match_score('Yes.', 'yes')


def test_noanswer_rule() -> None:
  assert hotpotqa.f1_score('noanswer', 'noanswer') == (1.0, 1.0, 1.0)
  # 'no answer' normalises to two tokens, which is not 'noanswer'.
  assert hotpotqa.f1_score('noanswer', 'no answer') == (0, 0, 0)
  assert hotpotqa.f1_score('answer here', 'noanswer') == (0, 0, 0)
  # Overlapping token 'noanswer' would give F1 2/3 without the rule.
  assert hotpotqa.f1_score('noanswer', 'noanswer given') == (0, 0, 0)
  assert hotpotqa.f1_score('the noanswer given', 'noanswer') == (0, 0, 0)


def test_partial_overlap_f1() -> None:
  # pred tokens [big, red, barn], gold [red, barn, door, in, town].
  f1, prec, recall = hotpotqa.f1_score('The big red barn',
                                       'red barn door in town')
  assert _close(prec, Fraction(2, 3))
  assert _close(recall, Fraction(2, 5))
  assert _close(f1, Fraction(1, 2))


def test_repeated_tokens_are_clipped() -> None:
  # Counter intersection: 'new' and 'york' match once each.
  f1, prec, recall = hotpotqa.f1_score('New York, New York', 'new york')
  assert _close(prec, Fraction(1, 2))
  assert recall == 1.0
  assert _close(f1, Fraction(2, 3))


def test_empty_prediction() -> None:
  assert hotpotqa.f1_score('', 'Paris') == (0, 0, 0)
  assert not hotpotqa.exact_match_score('', 'Paris')
  # Official quirk: both normalise to '' -> EM true but F1 0.
  assert hotpotqa.exact_match_score('', 'The')
  assert hotpotqa.f1_score('', 'The') == (0, 0, 0)


# ---------------------------------------------------------- supporting facts


def _sp(prediction: List[List[Any]], gold: List[List[Any]]) -> Dict[str, Any]:
  metrics = {'sp_em': 0, 'sp_f1': 0, 'sp_prec': 0, 'sp_recall': 0}
  returned = hotpotqa.update_sp(metrics, prediction, gold)
  return dict(metrics, returned=returned)


def test_sp_partial_overlap() -> None:
  out = _sp([['A', 0], ['C', 2], ['C', 3]], [['A', 0], ['B', 1]])
  assert out['sp_em'] == 0.0
  assert _close(out['sp_prec'], Fraction(1, 3))
  assert _close(out['sp_recall'], Fraction(1, 2))
  assert _close(out['sp_f1'], Fraction(2, 5))
  assert out['returned'] == (0.0, out['sp_prec'], out['sp_recall'])


def test_sp_exact_with_duplicates_and_order() -> None:
  out = _sp([['B', 1], ['A', 0], ['A', 0]], [['A', 0], ['B', 1]])
  assert (out['sp_em'], out['sp_f1'], out['sp_prec'],
          out['sp_recall']) == (1.0, 1.0, 1.0, 1.0)


def test_sp_empty_and_type_mismatch() -> None:
  out = _sp([], [['A', 0]])
  assert (out['sp_em'], out['sp_f1'], out['sp_prec'],
          out['sp_recall']) == (0.0, 0.0, 0.0, 0.0)
  # sent_id '0' (string) is not sent_id 0.
  out = _sp([['A', '0']], [['A', 0]])
  assert out['sp_f1'] == 0.0


# -------------------------------------------------------------- evaluate()


def test_joint_metrics_single_question() -> None:
  gold = [_gold('q1', 'red barn door in town', [['A', 0], ['B', 1]])]
  pred = {'answer': {'q1': 'The big red barn'},
          'sp': {'q1': [['A', 0], ['C', 2], ['C', 3]]}}
  m = hotpotqa.evaluate(pred, gold)
  # answer P=2/3 R=2/5; sp P=1/3 R=1/2.
  assert _close(m['joint_prec'], Fraction(2, 9))
  assert _close(m['joint_recall'], Fraction(1, 5))
  assert _close(m['joint_f1'], Fraction(4, 19))
  assert m['joint_em'] == 0.0
  assert m['em'] == 0.0 and m['sp_em'] == 0.0


def test_joint_em_requires_both() -> None:
  gold = [_gold('q1', 'Paris', [['A', 0]]), _gold('q2', 'yes', [['B', 1]])]
  pred = {'answer': {'q1': 'paris', 'q2': 'yes'},
          'sp': {'q1': [['A', 0]], 'q2': [['B', 1], ['B', 2]]}}
  m = hotpotqa.evaluate(pred, gold)
  assert m['em'] == 1.0
  assert m['sp_em'] == 0.5
  assert m['joint_em'] == 0.5
  # q1 joint 1; q2 joint P = 1*1/2, R = 1*1, F1 = 2/3.
  assert _close(m['joint_f1'], (1 + Fraction(2, 3)) / 2)
  assert _close(m['joint_prec'], Fraction(3, 4))
  assert m['joint_recall'] == 1.0


def test_missing_predictions_divide_by_all_gold() -> None:
  gold = [_gold('q1', 'Paris', [['A', 0]]),
          _gold('q2', 'London', [['B', 0]]),
          _gold('q3', 'Rome', [['C', 0]]),
          _gold('q4', 'Oslo', [['D', 0]])]
  pred = {'answer': {'q1': 'Paris', 'unknown': 'Oslo'},
          'sp': {'q1': [['A', 0]], 'q2': [['B', 0]]}}
  m = hotpotqa.evaluate(pred, gold)
  assert m['em'] == 0.25 and m['f1'] == 0.25
  assert m['sp_em'] == 0.5 and m['sp_f1'] == 0.5
  # q2 has sp but no answer -> no joint credit.
  assert m['joint_em'] == 0.25 and m['joint_f1'] == 0.25
  assert (m['n_gold'], m['n_answered'], m['n_missing_answer'],
          m['n_missing_sp']) == (4, 1, 3, 2)


def test_empty_prediction_string_counts_as_answered() -> None:
  gold = [_gold('q1', 'Paris', [['A', 0]])]
  m = hotpotqa.evaluate({'answer': {'q1': ''}, 'sp': {'q1': [['A', 0]]}},
                        gold)
  assert m['em'] == 0.0 and m['f1'] == 0.0
  assert m['sp_em'] == 1.0
  assert m['joint_em'] == 0.0 and m['joint_f1'] == 0.0
  assert m['n_answered'] == 1 and m['n_missing_answer'] == 0


def test_evaluate_returns_all_keys_and_rejects_empty_gold() -> None:
  m = hotpotqa.evaluate({'answer': {}, 'sp': {}},
                        [_gold('q1', 'x', [['A', 0]])])
  assert set(m) == set(hotpotqa.METRIC_KEYS) | set(hotpotqa.COUNT_KEYS)
  assert all(m[k] == 0 for k in hotpotqa.METRIC_KEYS)
  with pytest.raises(ValueError):
    hotpotqa.evaluate({'answer': {}, 'sp': {}}, [])


def test_check_predictions_messages() -> None:
  with pytest.raises(ValueError, match=r'p\.json.*"answer"'):
    hotpotqa.check_predictions({'sp': {}}, 'p.json')
  with pytest.raises(ValueError, match='expected a string'):
    hotpotqa.check_predictions({'answer': {'q': 3}, 'sp': {}}, 'p.json')
  with pytest.raises(ValueError, match='title, sent_id'):
    hotpotqa.check_predictions({'answer': {}, 'sp': {'q': ['A']}}, 'p.json')
  with pytest.raises(ValueError, match='g.json'):
    hotpotqa.check_gold({'data': []}, 'g.json')


# ---------------------------------------------------------- sample file


def test_sample_gold_as_predictions_scores_perfectly() -> None:
  gold = _load_sample()
  pred = {'answer': {d['_id']: d['answer'] for d in gold},
          'sp': {d['_id']: d['supporting_facts'] for d in gold}}
  m = hotpotqa.evaluate(pred, gold)
  for key in ('em', 'f1', 'sp_em', 'sp_f1', 'joint_em', 'joint_f1'):
    assert m[key] == 1.0, key
  assert m['n_gold'] == len(gold) and m['n_missing_answer'] == 0


# ------------------------------------------------ cross-check vs reference

HANDMADE_GOLD = [
    _gold('h1', 'yes', [['Alpha', 0], ['Beta', 2]]),
    _gold('h2', 'no', [['Gamma', 1], ['Delta', 0]]),
    _gold('h3', 'The Big Red Barn', [['Alpha', 1], ['Gamma', 3]]),
    _gold('h4', 'New York City, New York', [['Beta', 0], ['Beta', 1]]),
    _gold('h5', 'an apple', [['Delta', 4], ['Alpha', 0], ['Beta', 2]]),
    _gold('h6', '1,024', [['Eps', 0], ['Zeta', 5]]),
    _gold('h7', 'noanswer', [['Zeta', 0]]),
]
_NOISE_WORDS = ['the', 'a', 'red', 'york', 'city', 'yes', 'no', 'noanswer',
                'barn', '1024', 'apple', 'of', '.', ',', 'An']


def _perturb_answer(rng: random.Random, answer: str) -> str:
  """Returns a randomly corrupted variant of `answer`."""
  tokens = answer.split()
  choice = rng.randrange(9)
  if choice == 0:
    return answer
  if choice == 1:
    return ''
  if choice == 2:
    return rng.choice(['yes', 'no', 'noanswer', 'Yes.', 'NO'])
  if choice == 3:
    swap = {'yes': 'no', 'no': 'yes'}
    return swap.get(hotpotqa.normalize_answer(answer), answer + ' yes')
  if choice == 4 and tokens:
    tokens[rng.randrange(len(tokens))] = rng.choice(_NOISE_WORDS)
  elif choice == 5:
    tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(_NOISE_WORDS))
  elif choice == 6 and len(tokens) > 1:
    del tokens[rng.randrange(len(tokens))]
  elif choice == 7:
    return 'The ' + answer.upper() + rng.choice(['!', '.', '', ' ,'])
  else:
    tokens = tokens * rng.randint(1, 3)
  return ' '.join(tokens)


def _perturb_sp(rng: random.Random, facts: List[List[Any]]) -> List[List[Any]]:
  """Returns a randomly corrupted copy of a supporting-facts list."""
  facts = copy.deepcopy(facts)
  choice = rng.randrange(6)
  if choice == 1:
    return []
  if choice == 2 and facts:
    return rng.sample(facts, rng.randint(1, len(facts)))
  if choice == 3:
    facts.append([rng.choice(['Alpha', 'Omega', 'Beta']), rng.randint(0, 6)])
  elif choice == 4 and facts:
    facts[rng.randrange(len(facts))][1] += 1
  elif choice == 5:
    facts = facts + facts
    rng.shuffle(facts)
  return facts


def _random_predictions(rng: random.Random,
                        gold: List[Dict[str, Any]]) -> Dict[str, Any]:
  pred = {'answer': {}, 'sp': {}}
  for example in gold:
    qid = example['_id']
    if rng.random() > 0.15:
      pred['answer'][qid] = _perturb_answer(rng, example['answer'])
    if rng.random() > 0.15:
      pred['sp'][qid] = _perturb_sp(rng, example['supporting_facts'])
  if rng.random() < 0.3:
    pred['answer']['not-in-gold'] = 'stray'
  return pred


def _assert_matches_reference(pred: Dict[str, Any],
                              gold: List[Dict[str, Any]]) -> None:
  ours = hotpotqa.evaluate(pred, gold)
  theirs = reference.eval(copy.deepcopy(pred), copy.deepcopy(gold))
  assert set(theirs) == set(hotpotqa.METRIC_KEYS)
  for key, value in theirs.items():
    # Bit-for-bit identical, not approximately equal.
    assert ours[key] == value, (key, ours[key], value)


@pytest.mark.parametrize('seed', range(40))
def test_matches_reference_on_handmade_gold(seed: int) -> None:
  rng = random.Random(seed)
  gold = HANDMADE_GOLD * rng.randint(1, 3)
  _assert_matches_reference(_random_predictions(rng, gold), gold)


def test_matches_reference_on_sample_gold() -> None:
  gold = _load_sample()
  rng = random.Random(1234)
  for _ in range(50):
    _assert_matches_reference(_random_predictions(rng, gold), gold)


def test_per_question_functions_match_reference() -> None:
  rng = random.Random(7)
  for _ in range(500):
    example = rng.choice(HANDMADE_GOLD)
    answer = _perturb_answer(rng, example['answer'])
    assert (hotpotqa.f1_score(answer, example['answer']) ==
            reference.f1_score(answer, example['answer']))
    assert (hotpotqa.exact_match_score(answer, example['answer']) ==
            reference.exact_match_score(answer, example['answer']))


# ------------------------------------------------------------------- CLI


def _run_cli(*args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ)
  env['PYTHONPATH'] = os.pathsep.join(
      p for p in (str(REPO_ROOT), env.get('PYTHONPATH', '')) if p)
  return subprocess.run(
      [sys.executable, '-m', 'model.evaluate', *args],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
      check=False)


def _write(path: pathlib.Path, obj: Any) -> str:
  path.write_text(json.dumps(obj), encoding='utf-8')
  return str(path)


def test_cli_prints_metrics_on_last_line(tmp_path: pathlib.Path) -> None:
  gold = [_gold('q1', 'red barn door in town', [['A', 0], ['B', 1]]),
          _gold('q2', 'yes', [['C', 0]])]
  pred = {'answer': {'q1': 'The big red barn'},
          'sp': {'q1': [['A', 0], ['B', 1]], 'q2': [['C', 0]]}}
  out_path = tmp_path / 'out.json'
  proc = _run_cli('--task', 'hotpotqa',
                  '--predictions', _write(tmp_path / 'p.json', pred),
                  '--gold', _write(tmp_path / 'g.json', gold),
                  '--output', str(out_path))
  assert proc.returncode == 0, proc.stderr
  last_line = proc.stdout.strip().splitlines()[-1]
  metrics = json.loads(last_line)
  assert list(metrics) == sorted(metrics)
  assert metrics == hotpotqa.evaluate(pred, gold)
  assert _close(metrics['f1'], Fraction(1, 4))
  assert metrics['sp_em'] == 1.0
  assert metrics['n_missing_answer'] == 1
  assert json.loads(out_path.read_text(encoding='utf-8')) == metrics


def test_cli_reports_invalid_predictions(tmp_path: pathlib.Path) -> None:
  gold = _write(tmp_path / 'g.json', [_gold('q1', 'x', [['A', 0]])])
  bad = _write(tmp_path / 'bad_preds.json', {'sp': {}})
  proc = _run_cli('--task', 'hotpotqa', '--predictions', bad, '--gold', gold)
  assert proc.returncode != 0
  assert 'bad_preds.json' in proc.stderr and '"answer"' in proc.stderr

  broken = tmp_path / 'broken.json'
  broken.write_text('{not json', encoding='utf-8')
  proc = _run_cli('--task', 'hotpotqa', '--predictions', str(broken),
                  '--gold', gold)
  assert proc.returncode != 0 and 'not valid JSON' in proc.stderr

  proc = _run_cli('--task', 'hotpotqa', '--predictions',
                  str(tmp_path / 'absent.json'), '--gold', gold)
  assert proc.returncode != 0 and 'absent.json' in proc.stderr

  proc = _run_cli('--task', 'nosuchtask', '--predictions', bad,
                  '--gold', gold)
  assert proc.returncode != 0
