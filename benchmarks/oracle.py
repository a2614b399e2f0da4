r"""NarrativeQA extractive ROUGE-L oracle: the fast search against the exhaustive reference.

  python -m benchmarks.oracle [--words 30000] [--questions 30] [--repeats 3] [--seed 0]
                              [--ref_every K] [--ref_repeats N]
  python -m benchmarks.oracle --words 400000     # the real-size check (a long NarrativeQA book)

The default (30k words) takes about a minute, nearly all of it in the reference; the 400k-word
run a little over one minute (on a 2-core container).

Generates a deterministic book (seeded): a Zipf-like vocabulary of pseudo-words plus frequent
English stop words and capitalised names, sentences of 4-28 words with commas, quotes and
question marks, paragraphs of 2-8 sentences separated by blank lines.  Then ``--questions``
questions with two reference answers each (as in NarrativeQA), cycling through three kinds:

* ``verbatim``: answer 1 is a span of the book copied as it stands (case and punctuation
  changed), answer 2 a paraphrase of it;
* ``paraphrase``: both answers are paraphrases of a book span (words dropped, two swapped, one
  replaced by a random vocabulary word, sometimes "the" prepended);
* ``absent``: mostly invented words that are not in the book, with a few stop words.

Answers have 1-12 words (mean about 5, as in NarrativeQA); every fifteenth question (q14, q29,
...) has long answers of about 20 words.

Two algorithms, both given a once-per-story preparation that is timed separately:

* fast: ``pipelines.text.oracle.oracle_spans`` on a ``StoryIndex`` (bit-parallel LCS over all
  starts at once, bounded by the clipped answer-word count);
* reference (``reference_oracle`` below): every window of up to ``2|a| + 5`` words starting at
  each story word that occurs in the answer, ROUGE-L computed from scratch per window
  (``oracle.rouge_l_f1``), the same normalisation (``oracle.normalize_words``) and the same
  selection rule (``oracle.select_windows``).

Timing is interleaved: in each of ``--repeats`` passes every question runs with both
algorithms one after the other (which one goes first alternates).  The reference is slow on a
long book (a 20-word answer takes over a minute at 400k words), so it runs on every ``--ref_every``-th
question (q0, qK, q2K, ...): by default every question up to 100k words, every fifth above
(q0, q5, ..., q25: all three kinds, short answers only -- the long-answer questions q14 and q29,
where the reference is slowest and the ratio highest, are left out, so the figure is
conservative); ``--ref_repeats`` (default ``--repeats``) passes.  The speed ratio compares
per-question times on exactly those questions; the output says so.  The fast oracle is timed on
every question.

Printed per algorithm: per-question time (min / median / max of the per-question medians), the
time of a whole pass, mean best ROUGE-L; then whether fast best >= reference best for every
compared question (the search is exact, so they are equal) and whether the selected spans are
identical; the StoryIndex build time, its array bytes and the peak RSS of the process.

The last line is a JSON object: the median over the compared questions of (reference time /
fast time) (target >= 20).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
import tracemalloc
from typing import Dict, List, Sequence, Tuple

import numpy as np

from pipelines.text import oracle  # pylint: disable=g-import-not-at-top

STOP_WORDS = (
    "the of and to a in he was that it his her she had with as for i you at on is but not "
    "him be they said by from all this so which were an have one there would me my what we "
    "when no been their who if out could then them into up more will upon now some about do "
    "did very like little after before over only its than your any little down old man"
).split()
SYLLABLES = ("ka ro mi tu sel an dor el ri ven ta lo gar is eth um bra no fi wen "
             "sha dun ple or ith cal mar tes vo ick").split()
KINDS = ("verbatim", "paraphrase", "absent")
# Answer lengths in words: NarrativeQA answers average about 4.7 words, with a long tail.
LENGTHS = np.arange(1, 13)
LENGTH_WEIGHTS = np.array([6, 10, 12, 12, 11, 9, 7, 5, 4, 3, 2, 2], dtype=np.float64)
LENGTH_WEIGHTS /= LENGTH_WEIGHTS.sum()
LONG_ANSWER = 20  # questions 14, 29, ... (every fifteenth)


# ------------------------------------------------------------- reference


class ReferenceStory:
  """The reference's once-per-story preparation: the normalised words and their offsets."""

  def __init__(self, text: str):
    tokens = oracle.normalize_words(text)
    self.words = [w for w, _, _ in tokens]
    self.begins = [b for _, b, _ in tokens]
    self.ends = [e for _, _, e in tokens]


def reference_oracle(story: ReferenceStory, answers: Sequence[str],
                     config: oracle.OracleConfig = oracle.OracleConfig()
                     ) -> Tuple[List[Tuple[int, int, float]], float]:
  """Exhaustive oracle: ``([(char_begin, char_end, score)], best)``.

  For each answer ``a``: every window of 1 .. ``2|a| + extra_words`` words starting at each
  story word that occurs in ``a``, scored with ``rouge_l_f1`` from scratch.  Windows scoring at
  least ``min_score`` are kept as candidates (nothing below it can be selected); the selection
  rule is ``oracle.select_windows``.
  """
  words = story.words
  n = len(words)
  best = 0.0
  firsts, lasts, scores = [], [], []
  seen = set()
  for answer in answers:
    a = [w for w, _, _ in oracle.normalize_words(answer)]
    if not a or tuple(a) in seen:
      continue
    seen.add(tuple(a))
    vocabulary = set(a)
    width = config.max_window(len(a))
    for i in range(n):
      if words[i] not in vocabulary:
        continue
      for length in range(1, min(width, n - i) + 1):
        score = oracle.rouge_l_f1(words[i:i + length], a)
        if score > best:
          best = score
        if score >= config.min_score and score > 0:
          firsts.append(i)
          lasts.append(i + length - 1)
          scores.append(score)
  spans = [(story.begins[f], story.ends[l], s)
           for f, l, s in oracle.select_windows(np.array(firsts, dtype=np.int64),
                                                np.array(lasts, dtype=np.int64),
                                                np.array(scores, dtype=np.float64),
                                                best, config)]
  return spans, best


# ---------------------------------------------------------------- the book


def _pseudo_words(rng: np.random.Generator, count: int, avoid: set) -> List[str]:
  words: List[str] = []
  seen = set(avoid)
  while len(words) < count:
    w = "".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 4))))
    if w not in seen:
      seen.add(w)
      words.append(w)
  return words


def make_book(n_words: int, seed: int = 0) -> Tuple[str, List[str]]:
  """(book text, content vocabulary): ``n_words`` whitespace words, deterministic in ``seed``."""
  rng = np.random.default_rng(seed)
  content = _pseudo_words(rng, 12000, set(STOP_WORDS))
  names = {w: w.capitalize() for w in content[:300:3]}  # every third frequent word is a name
  vocab = STOP_WORDS + content
  ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
  probs = 1.0 / (ranks + 2.7) ** 1.07
  probs[:len(STOP_WORDS)] *= 3.0  # function words: ~45% of the running text
  probs /= probs.sum()
  draws = rng.choice(len(vocab), size=n_words, p=probs)
  sentence_lengths = rng.integers(4, 29, size=n_words // 4 + 2)
  paragraph_lengths = rng.integers(2, 9, size=n_words // 8 + 2)
  commas = rng.random(n_words) < 0.06
  extras = rng.random(n_words // 4 + 2)
  out: List[str] = []
  i = s = p = 0
  in_paragraph = 0
  while i < n_words:
    length = min(int(sentence_lengths[s]), n_words - i)
    sentence = [names.get(vocab[k], vocab[k]) for k in draws[i:i + length].tolist()]
    for j in range(length - 1):
      if commas[i + j]:
        sentence[j] += ","
    sentence[0] = sentence[0][:1].upper() + sentence[0][1:]
    x = extras[s]
    sentence[-1] += "?" if x < 0.08 else ("!" if x < 0.11 else ".")
    if 0.11 <= x < 0.25:  # dialogue
      sentence[0] = "\u201c" + sentence[0]
      sentence[-1] += "\u201d"
    if 0.25 <= x < 0.27:  # a dash standing alone (normalises to nothing)
      sentence.insert(length // 2, "--")
    out.append(" ".join(sentence))
    i += length
    s += 1
    in_paragraph += 1
    if in_paragraph >= paragraph_lengths[p] and i < n_words:
      out.append("\n\n")
      in_paragraph = 0
      p += 1
    elif i < n_words:
      out.append(" ")
  return "".join(out), content


def _paraphrase(rng: np.random.Generator, words: List[str], vocab: List[str]) -> List[str]:
  out = [w for w in words if rng.random() >= 0.2] or list(words[:1])
  if len(out) >= 2:
    j = int(rng.integers(0, len(out) - 1))
    out[j], out[j + 1] = out[j + 1], out[j]
  if len(out) >= 3:
    out[int(rng.integers(0, len(out)))] = vocab[int(rng.integers(0, len(vocab)))]
  if rng.random() < 0.3:
    out.insert(0, "the")
  return out


def make_questions(text: str, content: List[str], count: int, seed: int = 0
                   ) -> List[Tuple[str, Tuple[str, str]]]:
  """``[(kind, (answer1, answer2))]``, deterministic in ``seed``."""
  rng = np.random.default_rng(seed + 1)
  raw = text.split()
  invented = _pseudo_words(rng, 400, set(STOP_WORDS) | set(content))  # not in the book
  questions = []
  for q in range(count):
    kind = KINDS[q % len(KINDS)]
    length = LONG_ANSWER if q % 15 == 14 else int(rng.choice(LENGTHS, p=LENGTH_WEIGHTS))
    start = int(rng.integers(0, max(1, len(raw) - length)))
    span = raw[start:start + length]
    if kind == "verbatim":
      first = " ".join(span)
      first = first.capitalize() if rng.random() < 0.5 else first.lower()
      if not first.endswith("."):
        first += "."
      second = " ".join(_paraphrase(rng, span, content))
    elif kind == "paraphrase":
      first = " ".join(_paraphrase(rng, span, content))
      second = " ".join(_paraphrase(rng, span, content))
    else:
      def absent() -> str:
        words = [invented[int(rng.integers(0, len(invented)))] for _ in range(length)]
        for _ in range(max(1, length // 4)):
          words[int(rng.integers(0, length))] = STOP_WORDS[int(rng.integers(0, 12))]
        return " ".join(words)
      first, second = absent(), absent()
    questions.append((kind, (first, second)))
  return questions


# --------------------------------------------------------------- measuring


def peak_rss_mb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def spread(values: Sequence[float], scale: float = 1e3, fmt: str = ".2f") -> str:
  return (f"min {format(min(values) * scale, fmt)}  median "
          f"{format(statistics.median(values) * scale, fmt)}  max {format(max(values) * scale, fmt)}")


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.oracle",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--words", type=int, default=30000,
                  help="book length in words (400000: a long NarrativeQA book)")
  ap.add_argument("--questions", type=int, default=30)
  ap.add_argument("--repeats", type=int, default=3, help="interleaved timing passes (>= 3)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--ref_every", type=int, default=None,
                  help="the reference runs on every K-th question (default: 1 up to 100k "
                  "words, else 5)")
  ap.add_argument("--ref_repeats", type=int, default=None,
                  help="passes of the reference (default: --repeats)")
  args = ap.parse_args()
  if args.words < 100 or args.questions < 1 or args.repeats < 1:
    ap.error("need --words >= 100, --questions >= 1, --repeats >= 1")
  ref_every = args.ref_every if args.ref_every is not None else (
      5 if args.words > 100_000 else 1)
  ref_repeats = args.ref_repeats if args.ref_repeats is not None else args.repeats
  if ref_every < 1 or ref_repeats < 1:
    ap.error("need --ref_every >= 1 and --ref_repeats >= 1")
  ref_repeats = min(ref_repeats, args.repeats)
  config = oracle.OracleConfig()

  t0 = time.perf_counter()
  text, content = make_book(args.words, args.seed)
  questions = make_questions(text, content, args.questions, args.seed)
  print(f"book: {args.words} words, {len(text)} chars, {text.count(chr(10) * 2) + 1} "
        f"paragraphs, generated in {time.perf_counter() - t0:.2f} s; {len(questions)} questions "
        f"({', '.join(f'{sum(k == kind for k, _ in questions)} {kind}' for kind in KINDS)})")
  rss_book = peak_rss_mb()

  # The first build runs before anything else big, so the peak RSS after it is its own.
  t0 = time.perf_counter()
  index = oracle.StoryIndex(text)
  build_times = [time.perf_counter() - t0]
  rss_index = peak_rss_mb()
  tracemalloc.start()
  oracle.StoryIndex(text)
  build_peak = tracemalloc.get_traced_memory()[1] / 2**20
  tracemalloc.stop()
  ref_prep_times = []
  story = None
  for r in range(max(3, args.repeats)):
    for name in (("ref", "index") if r % 2 == 0 else ("index", "ref")):
      t0 = time.perf_counter()
      if name == "index":
        if r:
          index = oracle.StoryIndex(text)
          build_times.append(time.perf_counter() - t0)
      else:
        story = ReferenceStory(text)
        ref_prep_times.append(time.perf_counter() - t0)
  assert story is not None
  assert index.normalized() == story.words, "StoryIndex and normalize_words disagree"
  print(f"StoryIndex build: {spread(build_times, 1, '.3f')} s ({len(index)} kept words, "
        f"{len(index.vocab)} forms); holds {index.nbytes() / 2**20:.1f} MiB of arrays besides "
        f"the text; peak allocation while building {build_peak:.0f} MiB (tracemalloc)")
  print(f"reference preparation (normalize_words): {spread(ref_prep_times, 1, '.3f')} s")
  print(f"peak RSS: {rss_book:.0f} MiB after generating the book, {rss_index:.0f} MiB after "
        f"building the first StoryIndex, {peak_rss_mb():.0f} MiB after the reference's "
        f"preparation")

  compared = list(range(0, args.questions, ref_every))
  if len(compared) < args.questions or ref_repeats < args.repeats:
    print(f"NOTE: the reference is too slow for every question at {args.words} words: it runs "
          f"on {len(compared)} of {args.questions} questions {compared} (every {ref_every}th) "
          f"with {ref_repeats} pass(es); the fast oracle on all questions with {args.repeats}; "
          f"the speed ratio and the mean best ROUGE-L compare those {len(compared)} questions "
          f"only")

  fast_times: Dict[int, List[float]] = {q: [] for q in range(len(questions))}
  ref_times: Dict[int, List[float]] = {q: [] for q in compared}
  fast_results: Dict[int, Tuple] = {}
  ref_results: Dict[int, Tuple] = {}
  for rep in range(args.repeats):
    for q, (_, answers) in enumerate(questions):
      order = ("fast", "ref") if (rep + q) % 2 == 0 else ("ref", "fast")
      for name in order:
        if name == "fast":
          t0 = time.perf_counter()
          spans, stats = oracle.oracle_spans(index, answers, config)
          fast_times[q].append(time.perf_counter() - t0)
          fast_results[q] = (spans, stats)
        elif q in ref_times and rep < ref_repeats:
          t0 = time.perf_counter()
          ref_results[q] = reference_oracle(story, answers, config)
          ref_times[q].append(time.perf_counter() - t0)
    print(f"pass {rep + 1}: fast {sum(fast_times[q][-1] for q in fast_times) * 1e3:.1f} ms for "
          f"{len(questions)} questions" + (
              f"; reference {sum(ref_times[q][-1] for q in ref_times):.2f} s for "
              f"{len(ref_times)} questions" if rep < ref_repeats else ""))

  print("per question:")
  for q, (kind, answers) in enumerate(questions):
    spans, stats = fast_results[q]
    line = (f"  q{q:02d} {kind:10s} |a|={stats['answer_words']} best {stats['best']:.3f} "
            f"spans {len(spans):3d} starts {stats['starts']:6d} scored {stats['starts_scored']:6d}"
            f" fast {statistics.median(fast_times[q]) * 1e3:7.2f} ms")
    if q in ref_results:
      line += (f"  ref best {ref_results[q][1]:.3f} "
               f"{statistics.median(ref_times[q]) * 1e3:9.1f} ms")
    print(line)

  fast_med = {q: statistics.median(v) for q, v in fast_times.items()}
  ref_med = {q: statistics.median(v) for q, v in ref_times.items()}
  ratios = [ref_med[q] / fast_med[q] for q in compared]
  fast_best = {q: fast_results[q][1]["best"] for q in fast_results}
  ref_best = {q: ref_results[q][1] for q in compared}
  not_worse = [q for q in compared if fast_best[q] >= ref_best[q]]
  same_spans = [q for q in compared if fast_results[q][0] == ref_results[q][0]]
  mean_fast = statistics.fmean(fast_best[q] for q in compared)
  mean_ref = statistics.fmean(ref_best[q] for q in compared)
  print(f"fast oracle, {len(fast_med)} questions x {args.repeats} passes: per question "
        f"{spread(list(fast_med.values()))} ms; on the {len(compared)} compared: "
        f"{spread([fast_med[q] for q in compared])} ms; mean best ROUGE-L "
        f"{statistics.fmean(fast_best.values()):.4f} (all), {mean_fast:.4f} (compared)")
  print(f"reference, {len(compared)} questions x {ref_repeats} pass(es): per question "
        f"{spread(list(ref_med.values()))} ms; mean best ROUGE-L {mean_ref:.4f}")
  print(f"speed ratio reference/fast per compared question: {spread(ratios, 1, '.0f')} x; "
        f"total {sum(ref_med.values()) / sum(fast_med[q] for q in compared):.0f} x; including "
        f"the per-story preparation amortised over these questions "
        f"{(sum(ref_med.values()) + statistics.median(ref_prep_times)) / (sum(fast_med[q] for q in compared) + statistics.median(build_times)):.0f} x")
  print(f"fast best >= reference best: {len(not_worse)}/{len(compared)} questions"
        f"{'' if len(not_worse) == len(compared) else ' -- MISMATCH ' + str(sorted(set(compared) - set(not_worse)))}"
        f"; identical best: {sum(fast_best[q] == ref_best[q] for q in compared)}/{len(compared)}"
        f"; identical selected spans: {len(same_spans)}/{len(compared)}")
  print(f"peak RSS of the process: {peak_rss_mb():.0f} MiB")
  print(json.dumps({
      "metric": "oracle_speedup_vs_exhaustive",
      "value": round(statistics.median(ratios), 1),
      "target": 20,
      "unit": "x",
      "mean_best_rouge_fast": round(mean_fast, 4),
      "mean_best_rouge_reference": round(mean_ref, 4),
      "words": args.words,
      "questions": args.questions,
      "compared_questions": len(compared),
      "fast_not_worse": len(not_worse) == len(compared),
  }))
  if len(not_worse) != len(compared):
    sys.exit(1)


if __name__ == "__main__":
  main()
