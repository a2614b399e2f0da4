"""Every task counts the prediction ids that are not in the gold under one metrics key,
`n_ignored`, and such predictions leave the official metrics unchanged."""

import pytest

from model.evaluation import common, hotpotqa, narrativeqa, squad, triviaqa


def _without_count(metrics):
  return {k: v for k, v in metrics.items() if k != common.IGNORED_KEY}


def test_the_key_is_triviaqas():
  assert common.IGNORED_KEY == 'n_ignored'
  for module in (hotpotqa, triviaqa, narrativeqa, squad):
    assert common.IGNORED_KEY in module.COUNT_KEYS


def test_hotpotqa_counts_unknown_ids_of_answer_and_sp():
  gold = [{'_id': 'q1', 'answer': 'Paris', 'supporting_facts': [['A', 0]]},
          {'_id': 'q2', 'answer': 'yes', 'supporting_facts': [['B', 1]]}]
  known = {'answer': {'q1': 'Paris', 'q2': 'no'}, 'sp': {'q1': [['A', 0]], 'q2': []}}
  base = hotpotqa.evaluate(known, gold)
  assert base[common.IGNORED_KEY] == 0
  # 'zz' in both answer and sp counts once; 'yy' only in sp, 'xx' only in answer.
  extra = {'answer': dict(known['answer'], zz='Paris', xx='no'),
           'sp': dict(known['sp'], zz=[['A', 0]], yy=[['B', 1]])}
  metrics = hotpotqa.evaluate(extra, gold)
  assert metrics[common.IGNORED_KEY] == 3
  assert _without_count(metrics) == _without_count(base)
  assert metrics['em'] == 0.5 and metrics['n_gold'] == 2


@pytest.mark.parametrize('per_document', [False, True])
def test_triviaqa_counts_unknown_keys(per_document):
  gold = {'Domain': 'Wikipedia', 'VerifiedEval': False, 'Data': [{
      'QuestionId': 'tq1', 'Answer': {'NormalizedAliases': ['paris']},
      'EntityPages': [{'Filename': 'Paris.txt'}]}]}
  key = 'tq1--Paris.txt' if per_document else 'tq1'
  base = triviaqa.evaluate({key: 'Paris'}, gold, per_document=per_document)
  # The other setting's key is unknown too.
  other = 'tq1' if per_document else 'tq1--Paris.txt'
  metrics = triviaqa.evaluate({key: 'Paris', 'tq9': 'x', other: 'Paris'}, gold,
                              per_document=per_document)
  assert (base[common.IGNORED_KEY], metrics[common.IGNORED_KEY]) == (0, 2)
  assert _without_count(metrics) == _without_count(base)
  assert metrics['exact_match'] == 100.0


def test_narrativeqa_counts_unknown_keys():
  def row(doc, question, a1, a2, split='test'):
    return {'document_id': doc, 'set': split, 'question': question, 'answer1': a1,
            'answer2': a2, 'question_tokenized': '', 'answer1_tokenized': '',
            'answer2_tokenized': ''}
  gold = [row('d1', 'Who?', 'Tom.', 'Tom'), row('d2', 'Who?', 'Ann.', 'Ann', split='train')]
  key = narrativeqa.prediction_key('d1', 'Who?')
  base = narrativeqa.evaluate({key: 'tom'}, gold, meteor=False, split='test')
  # An unknown story, and a row of another set than the one scored.
  metrics = narrativeqa.evaluate(
      {key: 'tom', 'zz: Who?': 'x', narrativeqa.prediction_key('d2', 'Who?'): 'ann'}, gold,
      meteor=False, split='test')
  assert (base[common.IGNORED_KEY], metrics[common.IGNORED_KEY]) == (0, 2)
  assert _without_count(metrics) == _without_count(base)
  assert metrics['rouge_l'] == 1.0


def test_squad_counts_unknown_ids():
  gold = {'q1': ['Paris'], 'q2': []}
  base = squad.evaluate({'q1': 'Paris'}, gold)
  # 'q2' is in the gold (without answers, so unscored): not ignored.
  metrics = squad.evaluate({'q1': 'Paris', 'q2': 'x', 'zz': 'Paris'}, gold)
  assert (base[common.IGNORED_KEY], metrics[common.IGNORED_KEY]) == (0, 1)
  assert _without_count(metrics) == _without_count(base)
  assert metrics['exact_match'] == 100.0
