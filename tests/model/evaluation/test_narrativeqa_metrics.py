"""Tests for the NarrativeQA ROUGE-L / BLEU / METEOR metrics.

ROUGE-L and BLEU are checked against hand-computed fractions and against
pycocoevalcap's `Rouge` / `Bleu` (the scorers nlg-eval wraps) on random
cases; METEOR is checked against pycocoevalcap's `Meteor` output, with a
single JVM for the whole module.
"""

import math
import random
import shutil
from fractions import Fraction
from typing import Dict

import pytest

from model.evaluation import narrativeqa as nqa
from tests import REPO_ROOT

SAMPLE_QAPS = REPO_ROOT / '..' / 'shared' / 'samples' / 'narrativeqa' / 'qaps.csv'

try:
  from pycocoevalcap.bleu.bleu import Bleu
  from pycocoevalcap.rouge.rouge import Rouge
  _PYCOCO_REASON = None
except ImportError:
  _PYCOCO_REASON = 'pycocoevalcap is not installed (pip install pycocoevalcap==1.2)'

needs_pycoco = pytest.mark.skipif(_PYCOCO_REASON is not None,
                                  reason=str(_PYCOCO_REASON))

BETA2 = Fraction(36, 25)  # 1.2 ** 2


def rouge_f(prec: Fraction, rec: Fraction) -> Fraction:
  """Exact ROUGE-L F-measure with beta = 1.2."""
  return (1 + BETA2) * prec * rec / (rec + BETA2 * prec)


def row(doc: str, question: str, answer1: str, answer2: str,
        split: str = 'test') -> Dict[str, str]:
  """A gold row in `load_gold` form."""
  return {'document_id': doc, 'set': split, 'question': question,
          'answer1': answer1, 'answer2': answer2,
          'question_tokenized': question, 'answer1_tokenized': answer1,
          'answer2_tokenized': answer2}


# ------------------------------------------------------------ hand-computed


def test_rouge_l_single_reference_exact_fraction():
  # LCS('cat sat', 'the cat sat down') = 2 -> P = 1, R = 1/2.
  expected = rouge_f(Fraction(1), Fraction(1, 2))
  assert expected == Fraction(61, 97)
  assert nqa.rouge_l('cat sat', ['the cat sat down']) == pytest.approx(
      float(expected), abs=1e-15)
  # P == R -> F == P.
  assert nqa.rouge_l('the cat sat on the mat',
                     ['the cat is on the mat']) == pytest.approx(5 / 6,
                                                                 abs=1e-15)


def test_rouge_l_multi_reference_maximises_p_and_r_separately():
  # ref1: LCS 2 -> P 2/3, R 2/5; ref2: LCS 1 -> P 1/3, R 1.
  # pycocoevalcap combines max P (2/3) with max R (1): 122/147, which is
  # NOT the best per-reference F (61/111).
  expected = rouge_f(Fraction(2, 3), Fraction(1))
  assert expected == Fraction(122, 147)
  per_ref_best = max(rouge_f(Fraction(2, 3), Fraction(2, 5)),
                     rouge_f(Fraction(1, 3), Fraction(1)))
  assert per_ref_best == Fraction(61, 111)
  got = nqa.rouge_l('a b c', ['a b x y z', 'c'])
  assert got == pytest.approx(float(expected), abs=1e-15)
  # Reference order does not matter.
  assert nqa.rouge_l('a b c', ['c', 'a b x y z']) == got


def test_rouge_l_empty_and_disjoint():
  assert nqa.rouge_l('', ['a b']) == 0.0
  assert nqa.rouge_l('x y', ['a b', 'c']) == 0.0


def test_bleu_1_clipping_and_closest_reference_length():
  # 'the' occurs twice in the hypothesis but at most once in a reference;
  # of the bigrams 'the the' / 'the cat' only the second matches.
  stats = nqa.bleu_statistics('the the cat', ['the cat sat', 'a cat'])
  assert stats == {'testlen': 3, 'reflen': 3, 'guess': [3, 2, 1, 0],
                   'correct': [2, 1, 0, 0]}
  # Equal lengths still give a (negligible) brevity penalty because of the
  # 1e-15 / 1e-9 smoothing constants of pycocoevalcap.
  assert nqa.corpus_bleu(['the the cat'], [['the cat sat', 'a cat']])[0] == (
      pytest.approx(2 / 3, abs=1e-8))
  # Tie between lengths 2 and 4 for a 3-token hypothesis: the shorter wins,
  # so there is no brevity penalty.
  stats = nqa.bleu_statistics('a b c', ['a b', 'a b c d'])
  assert stats['reflen'] == 2 and stats['correct'][0] == 3
  assert nqa.corpus_bleu(['a b c'], [['a b', 'a b c d']])[0] == (
      pytest.approx(1.0, abs=1e-8))


def test_bleu_is_corpus_level():
  # Totals: correct 4 of 5 unigrams, testlen 5, reflen 4 + 3 = 7.
  bleu = nqa.corpus_bleu(['a b', 'x y z'], [['a b c d'], ['x q z']])
  assert bleu[0] == pytest.approx(0.8 * math.exp(1 - 7 / 5), abs=1e-8)
  # BLEU-4 with matches 4/5, 3/4, 2/3, 1/2 and equal lengths.
  bleu = nqa.corpus_bleu(['a b c d e'], [['a b c d f']])
  assert bleu[3] == pytest.approx(float(Fraction(1, 5)) ** 0.25, abs=1e-8)
  assert bleu[0] == pytest.approx(0.8, abs=1e-8)


def test_empty_prediction_scores_zero():
  assert nqa.corpus_bleu([''], [['a b']])[0] == pytest.approx(0.0, abs=1e-12)
  gold = [row('d1', 'Who?', 'John Smith.', 'Smith'),
          row('d2', 'Where?', 'in Paris', 'Paris.')]
  metrics = nqa.evaluate({'d1: Who?': 'john smith'}, gold, meteor=False)
  assert metrics['n_gold'] == 2
  assert metrics['n_answered'] == 1
  assert metrics['n_missing'] == 1
  assert metrics['meteor'] is None
  # d1 is exact (1.0 after the paper protocol), d2 empty (0.0).
  assert metrics['rouge_l'] == pytest.approx(0.5, abs=1e-15)
  metrics_all_missing = nqa.evaluate({}, gold, meteor=False)
  assert metrics_all_missing['rouge_l'] == 0.0
  assert metrics_all_missing['bleu_1'] == pytest.approx(0.0, abs=1e-12)
  assert metrics_all_missing['n_missing'] == 2


def test_protocol_paper_vs_raw():
  assert nqa.normalize('He ran to the Park . .', 'paper') == 'he ran to the park'
  assert nqa.normalize('  He ran.\n', 'raw') == 'He ran.'
  assert nqa.normalize('a\r\nb', 'raw') == 'a b'
  gold = [row('d', 'Q?', 'He ran.', 'He left.')]
  preds = {'d: Q?': 'he ran'}
  paper = nqa.evaluate(preds, gold, meteor=False)
  raw = nqa.evaluate(preds, gold, protocol='raw', meteor=False)
  assert paper['rouge_l'] == 1.0
  assert paper['protocol'] == 'paper'
  # raw: 'he ran' vs 'He ran.'/'He left.' share no token at all.
  assert raw['rouge_l'] == 0.0
  with pytest.raises(ValueError, match='protocol'):
    nqa.evaluate(preds, gold, protocol='lower', meteor=False)


def test_split_filter_and_unmatched_predictions():
  gold = [row('d1', 'Q?', 'yes', 'yes', 'test'),
          row('d2', 'Q?', 'no', 'no', 'train')]
  metrics = nqa.evaluate({'d1: Q?': 'yes', 'zz: Q?': 'x'}, gold,
                         meteor=False, split='test')
  assert metrics['n_gold'] == 1
  assert metrics['n_ignored'] == 1  # 'zz: Q?' and nothing else
  assert metrics['rouge_l'] == 1.0
  with pytest.raises(ValueError, match='valid'):
    nqa.evaluate({}, gold, meteor=False, split='valid')


def test_meteor_unavailable_is_a_clear_error(monkeypatch):
  monkeypatch.setattr(nqa.shutil, 'which', lambda name: None)
  gold = [row('d', 'Q?', 'a', 'b')]
  with pytest.raises(nqa.MeteorUnavailableError, match='meteor=False'):
    nqa.evaluate({'d: Q?': 'a'}, gold)
  assert nqa.evaluate({'d: Q?': 'a'}, gold, meteor=False)['meteor'] is None


# ----------------------------------------------------------------- CSV / I/O


def test_load_gold_handles_bom_crlf_and_quotes(tmp_path):
  header = ','.join(nqa.GOLD_COLUMNS)
  lines = [
      header,
      'doc1,test,"Who, exactly?","Mr. ""Big"", the boss.",Big,'
      'Who exactly ?,Mr. Big the boss .,Big',
      'doc2,valid,Where?,"Paris,\r\nFrance",Paris,Where ?,Paris France,Paris',
  ]
  path = tmp_path / 'qaps.csv'
  path.write_bytes(b'\xef\xbb\xbf' + '\r\n'.join(lines).encode() + b'\r\n')
  rows = nqa.load_gold(str(path))
  nqa.check_gold(rows, str(path))
  assert len(rows) == 2
  assert list(rows[0]) == list(nqa.GOLD_COLUMNS)  # BOM not in 1st column.
  assert rows[0]['question'] == 'Who, exactly?'
  assert rows[0]['answer1'] == 'Mr. "Big", the boss.'
  assert rows[1]['answer1'] == 'Paris,\r\nFrance'
  assert rows[1]['set'] == 'valid'
  assert nqa.prediction_key(rows[0]['document_id'], rows[0]['question']) == (
      'doc1: Who, exactly?')


def test_load_gold_and_check_gold_reject_bad_input(tmp_path):
  path = tmp_path / 'bad.csv'
  path.write_text('document_id,set,question,answer1\nd,test,Q,A\n')
  with pytest.raises(ValueError, match='answer2'):
    nqa.load_gold(str(path))
  short = tmp_path / 'short.csv'
  short.write_text(','.join(nqa.GOLD_COLUMNS) + '\nd,test,Q\n')
  with pytest.raises(ValueError, match='row 0'):
    nqa.check_gold(nqa.load_gold(str(short)), str(short))
  with pytest.raises(ValueError, match='no gold'):
    nqa.check_gold([], 'g')
  with pytest.raises(ValueError, match='top level'):
    nqa.check_gold({'a': 1}, 'g')


def test_check_predictions():
  nqa.check_predictions({'d: Q?': 'a'})
  with pytest.raises(ValueError, match='top level'):
    nqa.check_predictions(['a'])
  with pytest.raises(ValueError, match='expected a string'):
    nqa.check_predictions({'d: Q?': 3})


# ------------------------------------------------- equality with pycocoevalcap


def _random_cases(n: int, seed: int):
  """Random hypotheses / reference pairs, including empty and odd spacing."""
  rng = random.Random(seed)
  vocab = ['the', 'a', 'cat', 'dog', 'sat', 'on', 'mat', 'he', 'she', 'ran',
           'Paris', 'paris', 'x', 'y']
  def sentence() -> str:
    length = rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 12])
    text = ' '.join(rng.choice(vocab) for _ in range(length))
    if text and rng.random() < 0.15:
      text = text.replace(' ', '  ', 1)  # double space inside
    if rng.random() < 0.2:
      text += rng.choice(['.', ' .', '..'])
    return text
  hyps = [sentence() for _ in range(n)]
  refs = [[sentence() or 'x', sentence() or 'y'] for _ in range(n)]
  return hyps, refs


@needs_pycoco
@pytest.mark.parametrize('protocol', ['paper', 'raw'])
def test_rouge_and_bleu_equal_pycocoevalcap(protocol):
  raw_hyps, raw_refs = _random_cases(50, seed=7)
  hyps = [nqa.normalize(h, protocol) for h in raw_hyps]
  refs = [[nqa.normalize(r, protocol) for r in rs] for rs in raw_refs]
  gts = {i: rs for i, rs in enumerate(refs)}
  res = {i: [h] for i, h in enumerate(hyps)}
  official_rouge, official_rows = Rouge().compute_score(gts, res)
  ours_rows = [nqa.rouge_l(h, rs) for h, rs in zip(hyps, refs)]
  assert ours_rows == [float(x) for x in official_rows]
  official_bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
  assert nqa.corpus_bleu(hyps, refs) == official_bleu
  # Through `evaluate` (mean computed by sum / n vs numpy's mean).
  gold = [row(f'd{i}', f'q{i}', rs[0], rs[1])
          for i, rs in enumerate(raw_refs)]
  preds = {f'd{i}: q{i}': h for i, h in enumerate(raw_hyps)}
  metrics = nqa.evaluate(preds, gold, protocol=protocol, meteor=False)
  assert metrics['rouge_l'] == pytest.approx(float(official_rouge), rel=1e-12)
  assert [metrics[f'bleu_{n}'] for n in range(1, 5)] == official_bleu


# ------------------------------------------------------------------- METEOR

# (prediction, answer1, answer2). Each INEXACT prediction (stems, WordNet
# synonym, paraphrase) is followed by a control in which the inexactly
# matching words are replaced by unrelated ones, so both have the same exact
# token overlap (same ROUGE-L / BLEU) and only METEOR can tell them apart.
METEOR_CASES = [
    ('He is a student.', 'He is a student', 'A pupil.'),
    ('the dogs ran', 'The dog ran.', 'zzz'),  # stem
    ('the cats ran', 'The dog ran.', 'zzz'),
    ('he was glad', 'He was happy.', 'zzz'),  # synonym
    ('he was table', 'He was happy.', 'zzz'),
    ('in the end he passed away', 'In the end he died.', 'zzz'),  # paraphrase
    ('in the end he table chair', 'In the end he died.', 'zzz'),
    ('table chair', 'He was happy.', 'joyful'),
    ('', 'Nothing.', 'none'),
]
INEXACT_PAIRS = ((1, 2), (3, 4), (5, 6))


def _meteor_skip_reason():
  if _PYCOCO_REASON is not None:
    return 'java METEOR needs ' + _PYCOCO_REASON
  if shutil.which('java') is None:
    return 'java is not on PATH (needed for METEOR 1.5)'
  return None


@pytest.fixture(scope='module')
def meteor_results():
  """Scores METEOR_CASES with ONE pycocoevalcap Meteor JVM, three ways."""
  reason = _meteor_skip_reason()
  if reason is not None:
    pytest.skip(reason)
  from pycocoevalcap.meteor.meteor import Meteor
  scorer = Meteor()
  hyps = [nqa.normalize(p) for p, _, _ in METEOR_CASES]
  refs = [[nqa.normalize(a1), nqa.normalize(a2)] for _, a1, a2 in METEOR_CASES]
  direct = scorer.compute_score({i: r for i, r in enumerate(refs)},
                                {i: [h] for i, h in enumerate(hyps)})
  ours = nqa.corpus_meteor(hyps, refs, scorer=scorer)
  gold = [row(f'd{i}', 'Q?', a1, a2) for i, (_, a1, a2)
          in enumerate(METEOR_CASES)]
  preds = {f'd{i}: Q?': p for i, (p, _, _) in enumerate(METEOR_CASES)}
  metrics = nqa.evaluate(preds, gold, meteor_scorer=scorer)
  del scorer
  return {'direct': direct, 'ours': ours, 'metrics': metrics,
          'hyps': hyps, 'refs': refs}


@pytest.mark.slow
def test_meteor_equals_pycocoevalcap(meteor_results):
  direct_score, direct_rows = meteor_results['direct']
  ours_score, ours_rows = meteor_results['ours']
  assert ours_score == float(direct_score)
  assert ours_rows == [float(x) for x in direct_rows]
  assert meteor_results['metrics']['meteor'] == float(direct_score)


@pytest.mark.slow
def test_meteor_rewards_inexact_matches(meteor_results):
  _, rows = meteor_results['ours']
  hyps, refs = meteor_results['hyps'], meteor_results['refs']
  assert rows[0] > 0.9
  assert rows[7] == 0.0  # unrelated
  assert rows[8] == 0.0  # empty prediction
  for inexact, control in INEXACT_PAIRS:
    assert nqa.rouge_l(hyps[inexact], refs[inexact]) == nqa.rouge_l(
        hyps[control], refs[control])
    assert nqa.corpus_bleu([hyps[inexact]], [refs[inexact]])[0] == (
        pytest.approx(nqa.corpus_bleu([hyps[control]], [refs[control]])[0]))
    assert rows[inexact] > rows[control] + 0.1, (inexact, rows)


# ------------------------------------------------------------------ samples


def test_sample_qaps_gold_answer_beats_wrong_answer():
  if not SAMPLE_QAPS.exists():
    pytest.skip(f'NarrativeQA samples not present at {SAMPLE_QAPS}')
  gold = nqa.load_gold(str(SAMPLE_QAPS))
  nqa.check_gold(gold, str(SAMPLE_QAPS))
  assert len({r['set'] for r in gold}) >= 1
  keys = [nqa.prediction_key(r['document_id'], r['question']) for r in gold]
  right = {k: r['answer1'] for k, r in zip(keys, gold)}
  # Wrong answer: another question's answer (or a fixed string if only one).
  wrong = {k: (gold[(i + 1) % len(gold)]['answer1'] if len(gold) > 1
               else 'zzz qqq') for i, k in enumerate(keys)}
  good = nqa.evaluate(right, gold, meteor=False)
  bad = nqa.evaluate(wrong, gold, meteor=False)
  assert good['n_answered'] == len(gold) and good['n_missing'] == 0
  assert good['rouge_l'] == 1.0
  assert good['rouge_l'] >= bad['rouge_l']
  assert good['bleu_1'] >= bad['bleu_1']
  assert good['bleu_4'] >= bad['bleu_4']
  assert good['bleu_1'] == pytest.approx(1.0, abs=1e-8)
  half = dict(list(right.items())[:1])
  partial = nqa.evaluate(half, gold, meteor=False)
  assert partial['n_missing'] == len(gold) - 1
  assert partial['rouge_l'] <= good['rouge_l']
