"""NarrativeQA answer-generation metrics: ROUGE-L, BLEU-1..4 and METEOR.

The ReadTwice paper reports NarrativeQA with the scores of nlg-eval
(Maluuba/nlg-eval), which wraps the MS-COCO caption scorers
(`pycocoevalcap`). This module reproduces that pipeline:

Input
  * Gold: a `qaps.csv`-format file (columns `document_id, set, question,
    answer1, answer2, question_tokenized, answer1_tokenized,
    answer2_tokenized`), read with `load_gold`. Every row is one question,
    scored against the two references `answer1` and `answer2`.
  * Predictions: `{"<document_id>: <question>": answer}` where `<question>` is
    the `question` column exactly as in the CSV (see `prediction_key`).

Protocol (string preparation before scoring)
  * `protocol="paper"` (default): prediction and both references are
    lower-cased and a trailing run of spaces/periods is removed
    (`"He ran ."` -> `"he ran"`). This is what the ReadTwice authors did
    before calling nlg-eval.
  * `protocol="raw"`: strings are left unchanged.
  * Then, in both protocols, exactly like nlg-eval's `compute_metrics`:
    every string is `.strip()`-ped, line breaks inside a string are replaced
    by spaces (nlg-eval reads one string per line of a file, so a string
    there can never contain one) and the strings are handed to the
    pycocoevalcap scorers WITHOUT the PTB tokenizer. The scorers tokenise
    themselves: BLEU with `str.split()` (any whitespace run), ROUGE-L with
    `str.split(' ')` (single spaces, so a double space yields an empty token
    and an empty string is one empty token), METEOR with its own `-norm`
    normalisation (lower-casing and punctuation tokenisation inside Java).

Metrics (0-1 floats, as nlg-eval reports them; multiply by 100 for tables)
  * `rouge_l`: pycocoevalcap `Rouge`. Per question, LCS precision
    (LCS / hypothesis length) and recall (LCS / reference length) are taken
    against every reference; the MAXIMUM precision and the MAXIMUM recall
    (possibly from different references) are combined as
    `(1 + b^2) P R / (R + b^2 P)` with `b = 1.2` (0 if either is 0). The
    corpus score is the mean over questions.
  * `bleu_1` .. `bleu_4`: pycocoevalcap `Bleu(4)`, corpus-level. Clipped n-gram
    counts (clipped by the maximum count over references) and n-gram totals
    are summed over all questions; the reference length of a question is the
    reference length closest to the hypothesis length (ties: the shorter);
    `bleu_n = (prod_{k<=n} (correct_k + 1e-15) / (guess_k + 1e-9)) ** (1/n)`,
    times the brevity penalty `exp(1 - 1/ratio)` when
    `ratio = (testlen + 1e-15) / (reflen + 1e-9) < 1`. Because of those
    constants a perfect prediction scores 0.9999999999, not exactly 1, just
    as in nlg-eval.
  * `meteor`: pycocoevalcap `Meteor` (Java METEOR 1.5, `-l en -norm`, exact,
    stem, synonym and paraphrase matching), corpus score as returned by the
    jar's `EVAL` line. One JVM is started per `evaluate` call. Requires
    `pycocoevalcap` and `java`; pass `meteor=False` to skip it (the key is
    then `None`).

ROUGE-L and BLEU are re-implemented here in pure Python following the same
arithmetic, so they need no third-party package; the tests assert equality
with pycocoevalcap's `Rouge` / `Bleu` on the same inputs.

Missing predictions
  A gold question without a prediction is scored with an EMPTY hypothesis
  (it gets 0 ROUGE-L and METEOR and adds reference length but no n-grams to
  BLEU) and is counted in `n_missing`; `n_gold = n_answered + n_missing`.
  Predictions whose key matches no scored gold row (including rows of other
  sets when `split` is given) are counted in `n_ignored` (the key every task
  reports) and otherwise ignored.
"""

import collections
import csv
import math
import re
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from model.evaluation import common
from schemas.text_metrics import lcs_length

GOLD_COLUMNS: Tuple[str, ...] = (
    'document_id', 'set', 'question', 'answer1', 'answer2',
    'question_tokenized', 'answer1_tokenized', 'answer2_tokenized',
)
PROTOCOLS: Tuple[str, ...] = ('paper', 'raw')
COUNT_KEYS: Tuple[str, ...] = ('n_gold', 'n_answered', 'n_missing',
                               common.IGNORED_KEY)
ROUGE_BETA = 1.2
BLEU_MAX_N = 4
# Smoothing constants of pycocoevalcap's BleuScorer.
_BLEU_TINY = 1e-15
_BLEU_SMALL = 1e-9

_TRAILING_RE = re.compile(r'[ .]+$')
_LINE_BREAK_RE = re.compile(r'[\r\n]+')


class MeteorUnavailableError(RuntimeError):
  """METEOR was requested but pycocoevalcap or Java is not available."""


def prediction_key(document_id: str, question: str) -> str:
  """Key of a question in the predictions JSON: `"<document_id>: <question>"`."""
  return f'{document_id}: {question}'


def normalize(text: str, protocol: str = 'paper') -> str:
  """Prepares one string for scoring (protocol step, then nlg-eval's strip).

  Args:
    text: Prediction or reference.
    protocol: 'paper' (lower-case, drop trailing spaces/periods) or 'raw'.

  Returns:
    The string exactly as it is handed to the scorers.

  Raises:
    ValueError: On an unknown protocol.
  """
  if protocol not in PROTOCOLS:
    raise ValueError(f'unknown protocol {protocol!r}; choose from {PROTOCOLS}')
  if protocol == 'paper':
    text = _TRAILING_RE.sub('', text.lower())
  return _LINE_BREAK_RE.sub(' ', text).strip()


# ----------------------------------------------------------------- ROUGE-L


def rouge_l(hypothesis: str, references: Sequence[str],
            beta: float = ROUGE_BETA) -> float:
  """Sentence ROUGE-L of one hypothesis against several references.

  Tokens are `str.split(' ')`; precision and recall are maximised separately
  over the references before the F-measure (pycocoevalcap `Rouge` rule).

  Args:
    hypothesis: Prepared hypothesis string.
    references: Prepared reference strings (at least one).
    beta: Recall weight of the F-measure.

  Returns:
    The ROUGE-L F-measure in [0, 1].
  """
  if not references:
    raise ValueError('ROUGE-L needs at least one reference')
  hyp_tokens = hypothesis.split(' ')
  precisions = []
  recalls = []
  for reference in references:
    ref_tokens = reference.split(' ')
    lcs = lcs_length(ref_tokens, hyp_tokens)
    precisions.append(lcs / float(len(hyp_tokens)))
    recalls.append(lcs / float(len(ref_tokens)))
  prec = max(precisions)
  rec = max(recalls)
  if prec == 0 or rec == 0:
    return 0.0
  return ((1 + beta**2) * prec * rec) / float(rec + beta**2 * prec)


# -------------------------------------------------------------------- BLEU


def _ngram_counts(tokens: Sequence[str],
                  max_n: int) -> Dict[Tuple[str, ...], int]:
  """Counts all n-grams of orders 1..max_n."""
  counts: Dict[Tuple[str, ...], int] = collections.defaultdict(int)
  for n in range(1, max_n + 1):
    for i in range(len(tokens) - n + 1):
      counts[tuple(tokens[i:i + n])] += 1
  return counts


def bleu_statistics(hypothesis: str, references: Sequence[str],
                    max_n: int = BLEU_MAX_N) -> Dict[str, Any]:
  """Sufficient BLEU statistics of one question (whitespace tokens).

  Args:
    hypothesis: Prepared hypothesis string.
    references: Prepared reference strings (at least one).
    max_n: Highest n-gram order.

  Returns:
    `{'testlen', 'reflen', 'guess': [per order], 'correct': [per order]}` with
    `reflen` the reference length closest to the hypothesis length (ties go
    to the shorter reference).
  """
  if not references:
    raise ValueError('BLEU needs at least one reference')
  ref_lengths = []
  max_ref_counts: Dict[Tuple[str, ...], int] = {}
  for reference in references:
    ref_tokens = reference.split()
    ref_lengths.append(len(ref_tokens))
    for ngram, count in _ngram_counts(ref_tokens, max_n).items():
      max_ref_counts[ngram] = max(max_ref_counts.get(ngram, 0), count)
  hyp_tokens = hypothesis.split()
  testlen = len(hyp_tokens)
  reflen = min((abs(length - testlen), length) for length in ref_lengths)[1]
  correct = [0] * max_n
  for ngram, count in _ngram_counts(hyp_tokens, max_n).items():
    correct[len(ngram) - 1] += min(max_ref_counts.get(ngram, 0), count)
  guess = [max(0, testlen - k + 1) for k in range(1, max_n + 1)]
  return {'testlen': testlen, 'reflen': reflen, 'guess': guess,
          'correct': correct}


def corpus_bleu(hypotheses: Sequence[str],
                references: Sequence[Sequence[str]],
                max_n: int = BLEU_MAX_N) -> List[float]:
  """Corpus BLEU-1..BLEU-max_n as pycocoevalcap `Bleu(max_n)` computes it.

  Args:
    hypotheses: Prepared hypothesis strings, one per question.
    references: For each question, its prepared reference strings.
    max_n: Highest n-gram order.

  Returns:
    `[bleu_1, ..., bleu_max_n]`.
  """
  if len(hypotheses) != len(references):
    raise ValueError('hypotheses and references differ in length')
  testlen = 0
  reflen = 0
  guess = [0] * max_n
  correct = [0] * max_n
  for hypothesis, refs in zip(hypotheses, references):
    stats = bleu_statistics(hypothesis, refs, max_n)
    testlen += stats['testlen']
    reflen += stats['reflen']
    for k in range(max_n):
      guess[k] += stats['guess'][k]
      correct[k] += stats['correct'][k]
  scores = []
  product = 1.
  for k in range(max_n):
    product *= float(correct[k] + _BLEU_TINY) / (guess[k] + _BLEU_SMALL)
    scores.append(product ** (1. / (k + 1)))
  ratio = (testlen + _BLEU_TINY) / (reflen + _BLEU_SMALL)
  if ratio < 1:
    for k in range(max_n):
      scores[k] *= math.exp(1 - 1 / ratio)
  return scores


# ------------------------------------------------------------------ METEOR


def meteor_available() -> Optional[str]:
  """Returns None if METEOR can run, else the reason why it cannot."""
  try:
    import pycocoevalcap.meteor.meteor  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return ('pycocoevalcap is not installed '
            '(pip install pycocoevalcap==1.2)')
  if shutil.which('java') is None:
    return 'java is not on PATH (METEOR 1.5 is a Java program)'
  return None


def corpus_meteor(hypotheses: Sequence[str],
                  references: Sequence[Sequence[str]],
                  scorer: Optional[Any] = None) -> Tuple[float, List[float]]:
  """Scores all questions with pycocoevalcap's Meteor in ONE JVM.

  Args:
    hypotheses: Prepared hypothesis strings, one per question.
    references: For each question, its prepared reference strings.
    scorer: An already started `pycocoevalcap.meteor.meteor.Meteor` to reuse
      (saves the ~10 s JVM start); by default a new one is started and
      stopped.

  Returns:
    `(corpus_score, per_question_scores)` as pycocoevalcap returns them.

  Raises:
    MeteorUnavailableError: If pycocoevalcap or java is missing, or the JVM
      fails.
  """
  gts = {i: list(refs) for i, refs in enumerate(references)}
  res = {i: [hyp] for i, hyp in enumerate(hypotheses)}
  owned = scorer is None
  if owned:
    reason = meteor_available()
    if reason is not None:
      raise MeteorUnavailableError(
          f'METEOR cannot run: {reason}; pass meteor=False to skip it')
    from pycocoevalcap.meteor.meteor import Meteor  # pylint: disable=g-import-not-at-top
    try:
      scorer = Meteor()
    except OSError as e:
      raise MeteorUnavailableError(f'cannot start the METEOR JVM: {e}') from e
  try:
    score, scores = scorer.compute_score(gts, res)
  except (ValueError, OSError) as e:
    raise MeteorUnavailableError(
        f'the METEOR JVM failed (is -Xmx2G available?): {e}') from e
  finally:
    if owned:
      del scorer
  return float(score), [float(s) for s in scores]


# -------------------------------------------------------------- gold / I/O


def load_gold(path: str) -> List[Dict[str, str]]:
  """Reads a `qaps.csv`-format file into a list of row dicts.

  Handles a UTF-8 byte-order mark, CRLF line endings and quoted fields
  (commas, quotes and line breaks inside quotes).

  Args:
    path: CSV file (a local path, or a `tf.io.gfile` URL such as `gs://...`).

  Returns:
    One dict per data row, keyed by the header columns.

  Raises:
    ValueError: If the header lacks one of `GOLD_COLUMNS`.
    OSError: If the file cannot be read.
  """
  with common.open_text(path, encoding='utf-8-sig', newline='') as f:
    reader = csv.DictReader(f)
    header = reader.fieldnames or []
    missing = [c for c in GOLD_COLUMNS if c not in header]
    if missing:
      raise ValueError(f'{path}: header lacks columns {missing}; expected the '
                       f'NarrativeQA qaps.csv columns {list(GOLD_COLUMNS)}')
    return [dict(row) for row in reader]


def check_gold(gold: Any, source: str = 'gold') -> None:
  """Validates rows as returned by `load_gold`.

  Args:
    gold: List of row dicts.
    source: Name (e.g. file path) used in error messages.

  Raises:
    ValueError: If `gold` is not a non-empty list of dicts holding every
      column of `GOLD_COLUMNS` as a string (a short CSV row has None there).
  """
  expected = f'expected NarrativeQA qaps.csv rows with {list(GOLD_COLUMNS)}'
  for i, row in common.iter_gold_items(gold, source, expected, item='row'):
    for column in GOLD_COLUMNS:
      if not isinstance(row.get(column), str):
        raise ValueError(f'{source}: row {i} lacks column "{column}" '
                         f'(short or malformed CSV row); {expected}')


def check_predictions(prediction: Any, source: str = 'predictions') -> None:
  """Validates `{"<document_id>: <question>": answer_string}`.

  Args:
    prediction: Parsed predictions JSON.
    source: Name (e.g. file path) used in error messages.

  Raises:
    ValueError: If it is not an object mapping strings to strings.
  """
  common.check_answer_map(
      prediction, source,
      'expected a JSON object {"<document_id>: <question>": answer}')


# ---------------------------------------------------------------- evaluate


def evaluate(predictions: Mapping[str, str],
             gold: List[Mapping[str, str]],
             protocol: str = 'paper',
             meteor: bool = True,
             split: Optional[str] = None,
             meteor_scorer: Optional[Any] = None) -> Dict[str, Any]:
  """Scores NarrativeQA predictions against `qaps.csv` rows.

  Args:
    predictions: `{"<document_id>: <question>": answer}`.
    gold: Rows from `load_gold`.
    protocol: 'paper' or 'raw' (see the module docstring).
    meteor: Whether to run METEOR (needs pycocoevalcap and java).
    split: If given, only rows whose `set` column equals it are scored.
    meteor_scorer: Optional running pycocoevalcap `Meteor` to reuse.

  Returns:
    `rouge_l`, `bleu_1`..`bleu_4`, `meteor` (None when skipped), all 0-1,
    plus `n_gold`, `n_answered`, `n_missing`, `n_ignored` (predictions whose
    key matches no scored row) and `protocol`.

  Raises:
    ValueError: On an unknown protocol or when no gold row is selected.
    MeteorUnavailableError: If `meteor` is True and METEOR cannot run.
  """
  if protocol not in PROTOCOLS:
    raise ValueError(f'unknown protocol {protocol!r}; choose from {PROTOCOLS}')
  rows = [r for r in gold if split is None or r['set'] == split]
  if not rows:
    raise ValueError('no gold questions to score'
                     + (f' in split {split!r} (its sets: '
                        f'{sorted({r["set"] for r in gold})})' if split is not None else ''))
  if meteor and meteor_scorer is None:
    reason = meteor_available()
    if reason is not None:
      raise MeteorUnavailableError(
          f'METEOR cannot run: {reason}; pass meteor=False to skip it')
  hypotheses = []
  references = []
  keys = set()
  n_answered = 0
  for row in rows:
    key = prediction_key(row['document_id'], row['question'])
    keys.add(key)
    answer = predictions.get(key)
    if answer is None:
      answer = ''
    else:
      n_answered += 1
    hypotheses.append(normalize(answer, protocol))
    references.append([normalize(row['answer1'], protocol),
                       normalize(row['answer2'], protocol)])
  rouge_scores = [rouge_l(h, r) for h, r in zip(hypotheses, references)]
  bleus = corpus_bleu(hypotheses, references)
  result: Dict[str, Any] = {
      'rouge_l': sum(rouge_scores) / len(rouge_scores),
      'meteor': (corpus_meteor(hypotheses, references, meteor_scorer)[0]
                 if meteor else None),
      'n_gold': len(rows),
      'n_answered': n_answered,
      'n_missing': len(rows) - n_answered,
      common.IGNORED_KEY: common.count_ignored(predictions, keys),
      'protocol': protocol,
  }
  for n, score in enumerate(bleus, start=1):
    result[f'bleu_{n}'] = score
  return result
