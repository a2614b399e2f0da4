"""Tests for `model.evaluation.triviaqa` (official TriviaQA EM / F1)."""

import copy
import json
import random
import string
from typing import Any, Dict, List

import pytest

from model.evaluation import triviaqa
from tests.model.evaluation import official_triviaqa_reference as reference
from tests import REPO_ROOT

SAMPLES_DIR = (REPO_ROOT.parent / 'shared' / 'samples' / 'triviaqa' / 'qa')


def _answer(aliases: List[str], human: Any = None) -> Dict[str, Any]:
  """A minimal TriviaQA `Answer` object."""
  answer: Dict[str, Any] = {'NormalizedAliases': list(aliases),
                            'NormalizedValue': aliases[0] if aliases else ''}
  if human is not None:
    answer['HumanAnswers'] = list(human)
  return answer


def _page(filename: str, verified: Any = None) -> Dict[str, Any]:
  """A document entry, optionally with `DocPartOfVerifiedEval`."""
  page: Dict[str, Any] = {'Filename': filename, 'Title': filename}
  if verified is not None:
    page['DocPartOfVerifiedEval'] = verified
  return page


def _gold(domain: str, data: List[Dict[str, Any]],
          verified: bool = False) -> Dict[str, Any]:
  """A question file wrapper."""
  return {'Data': data, 'Domain': domain, 'VerifiedEval': verified,
          'Version': 1.0}


def _load_sample(name: str) -> Dict[str, Any]:
  """Loads a shared samples file or skips the test."""
  path = SAMPLES_DIR / name
  if not path.exists():
    pytest.skip(f'TriviaQA samples file not present: {path}')
  with open(path, encoding='utf-8') as f:
    return json.load(f)


# --- normalisation -------------------------------------------------------


@pytest.mark.parametrize('raw, expected', [
    ("O'Neil", 'o neil'),  # punctuation becomes a space, not deleted
    ('Sunset Blvd.', 'sunset blvd'),
    ('U.S.A.', 'u s'),  # "a" is split off by the punctuation, then dropped
    ('Rock-\'n\'-Roll', 'rock n roll'),
    ('\u2018Quoted\u2019 text\u00b4s', 'quoted text s'),
    ('`tick`', 'tick'),
    ('New_York', 'new york'),
    ('The_Beatles', 'beatles'),  # underscore -> space before articles
    ('An apple a day, THE end', 'apple day end'),
    ('theatre anthem', 'theatre anthem'),  # articles are word-bounded
    ('  lots\tof \n space ', 'lots of space'),
    ('', ''),
    ('the', ''),
])
def test_normalize_answer(raw: str, expected: str) -> None:
  assert triviaqa.normalize_answer(raw) == expected
  assert reference.normalize_answer(raw) == expected


def test_punctuation_space_rule_changes_em_and_f1() -> None:
  # SQuAD would make both "oneil"; TriviaQA gives "o neil" vs "oneil".
  assert not triviaqa.exact_match_score("O'Neil", 'oneil')
  assert triviaqa.f1_score("O'Neil", 'oneil') == 0
  assert triviaqa.exact_match_score("Paul O'Neil", 'paul o neil')
  # "o neil" vs "o neil smith": 2 common, p = 1, r = 2/3 -> f1 = 0.8.
  assert triviaqa.f1_score("O'Neil", 'o neil smith') == pytest.approx(0.8)


def test_f1_repeated_tokens_are_clipped() -> None:
  # pred "paris paris" vs "paris": 1 common, p = 1/2, r = 1 -> 2/3.
  assert triviaqa.f1_score('Paris Paris', 'paris') == pytest.approx(2 / 3)


def test_alias_max_for_em_and_f1() -> None:
  gold = _gold('Wikipedia', [{
      'QuestionId': 'q1',
      'Answer': _answer(['sunset boulevard', 'west sunset boulevard',
                         'sunset blvd']),
  }, {
      'QuestionId': 'q2',
      'Answer': _answer(['sunset boulevard', 'west sunset boulevard']),
  }])
  # q1: "Sunset Blvd." == alias 3 -> EM 1, F1 1.
  # q2: "west sunset": vs alias 1 f1 0.5, vs alias 2 (p 1, r 2/3) 0.8.
  result = triviaqa.evaluate({'q1': 'Sunset Blvd.', 'q2': 'west sunset'},
                             gold)
  assert result['exact_match'] == pytest.approx(50.0)
  assert result['f1'] == pytest.approx(100.0 * (1 + 0.8) / 2)


def test_human_answers_are_normalised_ground_truths() -> None:
  answer = _answer(['tour eiffel'], human=['The Eiffel-Tower!'])
  assert triviaqa.get_ground_truths(answer) == ['tour eiffel', 'eiffel tower']
  gold = _gold('Wikipedia', [{'QuestionId': 'q', 'Answer': answer}])
  assert triviaqa.evaluate({'q': 'eiffel tower'}, gold)['exact_match'] == 100
  # Without HumanAnswers the same prediction only half-matches.
  del answer['HumanAnswers']
  result = triviaqa.evaluate({'q': 'eiffel tower'}, gold)
  assert result['exact_match'] == 0
  assert result['f1'] == pytest.approx(50.0)


def test_missing_predictions_divide_by_all_gold_keys() -> None:
  gold = _gold('Wikipedia', [
      {'QuestionId': f'q{i}', 'Answer': _answer(['big red dog'])}
      for i in range(4)
  ])
  # q0 exact; q1 "red dog": p 1, r 2/3 -> 0.8; q2, q3 missing; extra ignored.
  predictions = {'q0': 'Big red dog', 'q1': 'red dog', 'zz': 'big red dog'}
  result = triviaqa.evaluate(predictions, gold)
  assert result == {
      'exact_match': pytest.approx(25.0),
      'f1': pytest.approx(100.0 * 1.8 / 4),
      'n_gold': 4, 'n_answered': 2, 'n_missing': 2, 'n_ignored': 1,
  }


def test_empty_prediction_is_answered_and_scores_zero() -> None:
  gold = _gold('Wikipedia', [{'QuestionId': 'q', 'Answer': _answer(['x'])}])
  result = triviaqa.evaluate({'q': ''}, gold)
  assert result['exact_match'] == 0 and result['f1'] == 0
  assert result['n_answered'] == 1 and result['n_missing'] == 0
  # A prediction that normalises to nothing is not an exact match either.
  assert triviaqa.evaluate({'q': 'The ...'}, gold)['f1'] == 0


def test_empty_normalised_strings_match_but_have_zero_f1() -> None:
  # Official quirk: "" == "" is an exact match, yet F1 has no tokens -> 0.
  gold = _gold('Wikipedia', [{'QuestionId': 'q', 'Answer': _answer([''])}])
  result = triviaqa.evaluate({'q': 'The!'}, gold)
  assert result['exact_match'] == 100.0 and result['f1'] == 0


def test_web_keys_cover_entity_pages_and_search_results() -> None:
  gold = _gold('Web', [{
      'QuestionId': 'tc_1',
      'Answer': _answer(['david seville']),
      'EntityPages': [_page('David_Seville.txt')],
      'SearchResults': [_page('61/61_97.txt'), _page('10/10_99.txt')],
  }, {
      'QuestionId': 'tc_2',
      'Answer': _answer(['chipmunks']),
      'EntityPages': [],
      'SearchResults': [_page('1/1_1.txt')],
  }])
  assert list(triviaqa.key_to_answer(gold)) == [
      'tc_1--David_Seville.txt', 'tc_1--61/61_97.txt', 'tc_1--10/10_99.txt',
      'tc_2--1/1_1.txt']
  # Per-question key "tc_1" is not a web key: ignored, not scored.
  result = triviaqa.evaluate(
      {'tc_1--61/61_97.txt': 'David Seville', 'tc_1': 'David Seville',
       'tc_2--1/1_1.txt': 'the chipmunks'}, gold)
  assert result['exact_match'] == pytest.approx(50.0)
  assert result['n_gold'] == 4 and result['n_answered'] == 2
  assert result['n_ignored'] == 1


def test_duplicate_keys_count_once() -> None:
  gold = _gold('Web', [{
      'QuestionId': 'q', 'Answer': _answer(['a b']),
      'SearchResults': [_page('d.txt'), _page('d.txt')],
  }])
  assert triviaqa.evaluate({'q--d.txt': 'b'}, gold)['n_gold'] == 1


def test_per_document_wikipedia_keys() -> None:
  gold = _gold('Wikipedia', [{
      'QuestionId': 'tc_33', 'Answer': _answer(['sunset boulevard']),
      'EntityPages': [_page('Andrew_Lloyd_Webber.txt'), _page('Sunset.txt')],
  }])
  assert list(triviaqa.key_to_answer(gold)) == ['tc_33']
  assert list(triviaqa.key_to_answer(gold, per_document=True)) == [
      'tc_33--Andrew_Lloyd_Webber.txt', 'tc_33--Sunset.txt']
  result = triviaqa.evaluate_per_document(
      {'tc_33--Sunset.txt': 'Sunset Boulevard'}, gold)
  assert result['exact_match'] == pytest.approx(50.0)
  assert result['n_gold'] == 2 and result['n_missing'] == 1


def _verified_data() -> List[Dict[str, Any]]:
  """Two verified questions (one with an unverified page), one not."""
  return [{
      'QuestionId': 'q1', 'Answer': _answer(['one']),
      'QuestionPartOfVerifiedEval': True,
      'EntityPages': [_page('E1.txt', True), _page('E2.txt', False)],
      'SearchResults': [_page('s/1.txt', False), _page('s/2.txt', True)],
  }, {
      'QuestionId': 'q2', 'Answer': _answer(['two']),
      'QuestionPartOfVerifiedEval': False,
      'EntityPages': [_page('E3.txt', True)],
      'SearchResults': [_page('s/3.txt', True)],
  }, {
      'QuestionId': 'q3', 'Answer': _answer(['three']),
      'QuestionPartOfVerifiedEval': True,
      'EntityPages': [_page('E4.txt', False)],
      'SearchResults': [],
  }]


def test_verified_web_keeps_only_verified_pairs() -> None:
  gold = _gold('Web', _verified_data(), verified=True)
  # q2 dropped (question not verified); unverified pages dropped; q3 has no
  # verified page left and contributes no key (the official code asserts).
  assert list(triviaqa.key_to_answer(gold)) == ['q1--E1.txt', 'q1--s/2.txt']
  result = triviaqa.evaluate({'q1--E1.txt': 'one', 'q1--E2.txt': 'one',
                              'q2--E3.txt': 'two'}, gold)
  assert result['exact_match'] == pytest.approx(50.0)
  assert result['n_gold'] == 2 and result['n_ignored'] == 2
  # Without VerifiedEval every pair counts.
  assert len(triviaqa.key_to_answer(_gold('Web', _verified_data()))) == 7


def test_verified_wikipedia_filters_questions() -> None:
  gold = _gold('Wikipedia', _verified_data(), verified=True)
  assert list(triviaqa.key_to_answer(gold)) == ['q1', 'q3']
  result = triviaqa.evaluate({'q1': 'one', 'q2': 'two'}, gold)
  assert result['exact_match'] == pytest.approx(50.0)
  # Per document, the unverified pages are dropped as well.
  assert list(triviaqa.key_to_answer(gold, per_document=True)) == [
      'q1--E1.txt', 'q1--s/2.txt']
  assert gold['Data'][0]['EntityPages'][1]['Filename'] == 'E2.txt'  # intact


def test_evaluate_rejects_empty_gold() -> None:
  with pytest.raises(ValueError, match='no evaluation keys'):
    triviaqa.evaluate({}, _gold('Wikipedia', []))


def test_check_predictions_messages() -> None:
  triviaqa.check_predictions({'q': 'a'}, 'p.json')
  with pytest.raises(ValueError, match=r'p\.json: top level is list'):
    triviaqa.check_predictions(['a'], 'p.json')
  with pytest.raises(ValueError, match=r"p\.json: answer for 'q' is int"):
    triviaqa.check_predictions({'q': 3}, 'p.json')
  with pytest.raises(ValueError, match='p.json'):
    triviaqa.check_predictions({'q': None}, 'p.json')


@pytest.mark.parametrize('gold, message', [
    ([], 'top level is list'),
    ({'Data': []}, 'missing "Domain"'),
    ({'Data': [], 'Domain': 'News'}, 'unknown Domain'),
    ({'Domain': 'Web'}, '"Data"'),
    ({'Domain': 'Web', 'Data': [{'Answer': {}}]}, 'QuestionId'),
    ({'Domain': 'Web', 'Data': [{'QuestionId': 'q'}]}, 'without answers'),
    ({'Domain': 'Web', 'Data': [{'QuestionId': 'q', 'Answer': {}}]},
     'NormalizedAliases'),
    ({'Domain': 'Web', 'Data': [{'QuestionId': 'q', 'Answer': _answer(['x']),
                                 'SearchResults': [{}]}]}, 'Filename'),
    ({'Domain': 'Web', 'VerifiedEval': True,
      'Data': [{'QuestionId': 'q', 'Answer': _answer(['x'])}]},
     'QuestionPartOfVerifiedEval'),
    ({'Domain': 'Web', 'VerifiedEval': True,
      'Data': [{'QuestionId': 'q', 'Answer': _answer(['x']),
                'QuestionPartOfVerifiedEval': True,
                'SearchResults': [_page('d')]}]},
     'DocPartOfVerifiedEval'),
])
def test_check_gold_messages(gold: Any, message: str) -> None:
  with pytest.raises(ValueError, match='g.json') as info:
    triviaqa.check_gold(gold, 'g.json')
  assert message in str(info.value)


def test_check_gold_accepts_minimal_files() -> None:
  triviaqa.check_gold(_gold('Wikipedia', []), 'g.json')
  triviaqa.check_gold(_gold('Web', _verified_data(), verified=True), 'g.json')


# --- shared samples ------------------------------------------------------


def _alias_predictions(gold: Dict[str, Any], per_document: bool,
                       rng: random.Random) -> Dict[str, str]:
  """Predicts, for every key, a randomly chosen gold alias."""
  return {key: rng.choice(answer['NormalizedAliases'])
          for key, answer in triviaqa.key_to_answer(gold,
                                                    per_document).items()}


@pytest.mark.parametrize('name, per_document', [
    ('wikipedia-dev.json', False),
    ('wikipedia-dev.json', True),
    ('web-dev.json', False),
])
def test_sample_gold_aliases_score_perfectly(name: str,
                                             per_document: bool) -> None:
  gold = _load_sample(name)
  triviaqa.check_gold(gold, name)
  predictions = _alias_predictions(gold, per_document, random.Random(0))
  triviaqa.check_predictions(predictions, 'predictions')
  result = triviaqa.evaluate(predictions, gold, per_document=per_document)
  assert result['exact_match'] == 100.0 and result['f1'] == 100.0
  assert result['n_missing'] == 0 and result['n_ignored'] == 0
  if gold['Domain'] == 'Web' or per_document:
    assert all('--' in key for key in predictions)


def test_sample_web_keys_include_entity_pages() -> None:
  gold = _load_sample('web-dev.json')
  expected = [f'{d["QuestionId"]}--{p["Filename"]}' for d in gold['Data']
              for p in d.get('EntityPages', []) + d.get('SearchResults', [])]
  assert list(triviaqa.key_to_answer(gold)) == list(dict.fromkeys(expected))


def test_sample_test_files_without_answers_are_rejected() -> None:
  gold = _load_sample('wikipedia-test-without-answers.json')
  with pytest.raises(ValueError, match='without answers'):
    triviaqa.check_gold(gold, 'wikipedia-test-without-answers.json')


# --- randomized equality with the reference ------------------------------

_WORDS = ('the', 'a', 'an', 'sunset', 'boulevard', 'o', 'neil', 'rock',
          'roll', 'new', 'york', 'eiffel', 'tower', 'theatre', 'u', 's')
_NOISE = list(string.punctuation) + ['\u2018', '\u2019', '\u00b4', '_', ' ',
                                     '\t', '\u00e9', 'A', 'The']


def _random_text(rng: random.Random) -> str:
  """A short random phrase with punctuation, case and spacing noise."""
  out = []
  for _ in range(rng.randint(0, 4)):
    word = rng.choice(_WORDS)
    if rng.random() < 0.3:
      word = word.upper() if rng.random() < 0.5 else word.title()
    out.append(word)
    out.append(rng.choice([' ', ' ', '_', '-', "'", '. ', ', ', '\u2019']))
  return ''.join(out)


def _perturb(rng: random.Random, text: str) -> str:
  """A randomly corrupted variant of `text`."""
  choice = rng.randrange(6)
  if choice == 0:
    return text
  if choice == 1:
    return text.upper().replace(' ', rng.choice(['_', ' - ', '  ']))
  if choice == 2:
    return rng.choice(['The ', 'a ', '']) + text + rng.choice(_NOISE)
  if choice == 3:
    tokens = text.split()
    return ' '.join(tokens[:rng.randint(0, len(tokens))])
  if choice == 4:
    return text + ' ' + _random_text(rng)
  pos = rng.randint(0, len(text))
  return text[:pos] + rng.choice(_NOISE) + text[pos:]


def _random_gold(rng: random.Random, domain: str,
                 verified: bool) -> Dict[str, Any]:
  """A random question file that always yields at least one key.

  The first question and one page of every verified question are verified,
  so the official `read_clean_part` assertion holds.
  """
  data = []
  for i in range(rng.randint(1, 8)):
    qid = f'q{rng.randint(0, 6) if rng.random() < 0.2 else i}'
    aliases = [reference.normalize_answer(_random_text(rng))
               for _ in range(rng.randint(1, 3))]
    human = ([_random_text(rng) for _ in range(rng.randint(0, 2))]
             if rng.random() < 0.4 else None)
    datum: Dict[str, Any] = {'QuestionId': qid,
                             'Answer': _answer(aliases, human)}
    pages = [_page(f'{rng.randint(0, 3)}/{rng.randint(0, 5)}.txt',
                   rng.random() < 0.6) for _ in range(rng.randint(1, 4))]
    split = rng.randint(0, len(pages))
    datum['EntityPages'] = pages[:split]
    if domain == 'Web':
      datum['SearchResults'] = pages[split:]
    else:
      datum['EntityPages'] = pages
      datum['SearchResults'] = []
    if verified:
      datum['QuestionPartOfVerifiedEval'] = i == 0 or rng.random() < 0.6
      if datum['QuestionPartOfVerifiedEval']:
        pages[0]['DocPartOfVerifiedEval'] = True
    data.append(datum)
  return _gold(domain, data, verified)


def _random_predictions(rng: random.Random, gold: Dict[str, Any],
                        per_document: bool) -> Dict[str, str]:
  """Perturbed aliases / human answers for most keys, plus stray keys."""
  predictions = {}
  for key, answer in triviaqa.key_to_answer(gold, per_document).items():
    if rng.random() < 0.15:
      continue
    candidates = (answer['NormalizedAliases'] +
                  answer.get('HumanAnswers', []) + [_random_text(rng)])
    predictions[key] = _perturb(rng, rng.choice(candidates))
  if rng.random() < 0.3:
    predictions['stray--key'] = _random_text(rng)
  return predictions


def _assert_matches_reference(predictions: Dict[str, str],
                              gold: Dict[str, Any],
                              per_document: bool) -> None:
  """Exact (bitwise) equality of EM / F1 and the counts."""
  snapshot = copy.deepcopy(gold)
  ours = triviaqa.evaluate(predictions, gold, per_document=per_document)
  assert gold == snapshot  # evaluate() never edits its input
  # Per-document Wikipedia is scored exactly like the official Web path.
  official_gold = dict(gold, Domain='Web') if per_document else gold
  theirs = reference.official_main(official_gold, predictions)
  assert ours['exact_match'] == theirs['exact_match']
  assert ours['f1'] == theirs['f1']
  assert ours['n_gold'] == theirs['denominator']
  assert ours['n_answered'] == theirs['common']


@pytest.mark.parametrize('seed', range(60))
def test_matches_reference_on_random_gold(seed: int) -> None:
  rng = random.Random(seed)
  domain = rng.choice(['Wikipedia', 'Web'])
  verified = rng.random() < 0.4
  per_document = domain == 'Wikipedia' and rng.random() < 0.4
  gold = _random_gold(rng, domain, verified)
  triviaqa.check_gold(gold, 'random')
  _assert_matches_reference(_random_predictions(rng, gold, per_document),
                            gold, per_document)


@pytest.mark.parametrize('name, per_document', [
    ('wikipedia-dev.json', False),
    ('wikipedia-dev.json', True),
    ('web-dev.json', False),
])
def test_matches_reference_on_sample_gold(name: str,
                                          per_document: bool) -> None:
  gold = _load_sample(name)
  rng = random.Random(1234)
  for _ in range(20):
    _assert_matches_reference(_random_predictions(rng, gold, per_document),
                              gold, per_document)


def test_per_answer_functions_match_reference() -> None:
  rng = random.Random(7)
  for _ in range(500):
    pred, gold_text = _random_text(rng), _random_text(rng)
    pred = _perturb(rng, pred)
    assert triviaqa.normalize_answer(pred) == reference.normalize_answer(pred)
    assert (triviaqa.exact_match_score(pred, gold_text) ==
            reference.exact_match_score(pred, gold_text))
    assert (triviaqa.f1_score(pred, gold_text) ==
            reference.f1_score(pred, gold_text))
