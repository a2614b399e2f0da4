r"""Every pipeline's throughput relative to bare tokenisation, side by side, in interleaved pairs.

  python benchmarks/all.py [--pairs 3] [--scale 1.0] [--only hotpotqa,books,...]

The jobs: HotpotQA, Wikipedia, books, TriviaQA and NarrativeQA (``pipelines/<name>.py``).  Each
gets a generated input in its official layout, its texts drawn from a Zipf-distributed
pseudo-word vocabulary (``demo.synthetic_hotpotqa.ZipfWords``, as in ``hotpotqa_throughput``),
so that BPE's word cache hits about as often as on real text:

* hotpotqa: ``demo.synthetic_hotpotqa`` questions (two Zipf sentences per paragraph), one JSON
  list;
* wikipedia: a ``demo.synthetic_wikipedia`` multistream dump with its index (links, redirects,
  templates, tables, refs, ...);
* books: Gutenberg-style plain-text books of 300-700 KB (header, credit, chapters, hard-wrapped
  paragraphs, licence footer), one per file;
* triviaqa: ``qa/wikipedia-dev.json`` (questions over 1-3 entity pages from a shared pool) and
  ``qa/web-dev.json`` (1-2 entity pages and 2-4 search results each: one document per page)
  with their ``evidence/`` files of 1,000-5,000 words; the answers are phrases of the
  evidence;
* narrativeqa: the official layout (``documents.csv``, ``qaps.csv``, ``tmp/<id>.content``) with
  Gutenberg-style stories of 30k-70k words and ``NQA_QUESTIONS_PER_STORY`` questions each whose
  answers are phrases of the story (real NarrativeQA has ~30 per story: every question
  repeats the story's segments in the records, while the story is tokenised once).

Each pair times, for every pipeline one right after the other (bare, then the pipeline, so
drift of a shared machine hits both sides alike; pair k runs every pipeline before pair k+1):

* bare: HF ``tokenizers`` ``encode_batch`` (no special tokens) on a freshly built tokenizer
  (word cache cold, like a new pipeline worker's) over exactly the texts the pipeline
  tokenises, got from the job's own reader functions (HotpotQA's ``parse_record``, the
  Wikipedia page's clean text from ``convert_page`` -- not the raw wikitext --, the parsed
  book, the TriviaQA document built from its evidence, the NarrativeQA story cut and
  joined), in the calls ``TokenizeAndSegmentFn`` makes: chunks of
  ``min(CHUNK, batch_size)`` documents (a chunk is not cut between documents that read one
  text), each call the distinct texts of its documents and then of their questions.  Only the
  ``encode_batch`` calls are timed: reading, parsing, cleaning, labelling, segmenting, packing
  and writing are the pipeline's overhead;
* pipeline: the real job, ``pipelines.<name>.run(...)`` with the default ``RecordsConfig`` on
  the local FnApiRunner (in-memory, one process: what ``python -m pipelines.<name>`` runs
  without Beam flags), end to end, in a fresh interpreter (``common.child_run``); the time is
  that of ``run()`` alone, the process' wall time (interpreter start and imports included) is
  reported apart.  The run must write every document and reject none (clean input), else this
  exits non-zero.

Ratio per pair = bare seconds / pipeline seconds (the same texts, so = pipeline tokens/s over
bare tokens/s).  Printed: a line per pair and pipeline, then a table of each pipeline's input,
tokens, median rates and paired ratios (min / median / max); the last line is one JSON object
whose value is the worst pipeline's median paired ratio (target >= 0.5, with >= 3 pairs).

``--scale`` multiplies every generated input (document counts; below one document of a kind,
the documents' lengths): at 1.0 each pipeline run takes roughly 10-30 s on a 2-core machine,
so throughput, not the fixed ~1-2 s of start-up (Beam graph, runner, tokenizer, manifest),
decides the figure; the whole run, 3 pairs, takes about 8-10 minutes (one pair: ~3).  ``--scale 0.01`` is a
smoke test (start-up dominates: its ratios mean nothing).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import common  # noqa: E402
from benchmarks.hotpotqa_throughput import docs_per_encode_call  # noqa: E402

from demo import synthetic_hotpotqa  # noqa: E402
from pipelines import JOBS  # noqa: E402
from pipelines.beam.config import RecordsConfig  # noqa: E402
from pipelines.text.tokenizer import Tokenizer  # noqa: E402

MIN_PAIRS = 3
# Input sizes at --scale 1.0 (each pipeline run ~10-30 s on 2 cores).
HOTPOTQA_QUESTIONS = 8000
WIKIPEDIA_PAGES, WIKIPEDIA_WORDS_PER_PAGE = 3000, 700
BOOKS, BOOK_KB = 32, (300, 700)
TRIVIAQA_WIKI_QUESTIONS, TRIVIAQA_WEB_QUESTIONS = 240, 150
TRIVIAQA_WIKI_WORDS, TRIVIAQA_WEB_WORDS = (1500, 5000), (1000, 4000)
NQA_STORIES, NQA_WORDS, NQA_QUESTIONS_PER_STORY = 40, (30_000, 70_000), 5
MIN_WORDS = 100  # the shortest generated document, however small --scale


class Job(NamedTuple):
  """One pipeline's generated input: what its run needs and what the bare side encodes."""
  name: str
  input_pattern: str
  evidence_dir: str  # TriviaQA's evidence/ folder; "-" for the others
  input_bytes: int  # the files the job reads, as stored (the Wikipedia dump: bz2)
  documents: int  # documents the job must write
  calls: List[List[str]]  # the texts of the pipeline's encode_batch calls, in order

  @property
  def text_bytes(self) -> int:
    return sum(len(t.encode("utf-8")) for call in self.calls for t in call)


def scaled(n: int, scale: float) -> Tuple[int, float]:
  """(count, length factor): ``n * scale`` documents, at least one; when that floors the count,
  the documents are shortened by the factor instead, so the input stays ``scale`` times its
  size."""
  count = max(1, round(n * scale))
  return count, min(1.0, n * scale / count)


def encode_calls(docs, per_call: int) -> List[List[str]]:
  """The texts of ``TokenizeAndSegmentFn``'s ``encode_batch`` calls over ``docs`` (in order): a
  chunk goes when it holds ``per_call`` documents and a document with another text comes; a
  call encodes the chunk's distinct texts, its documents' then their questions'."""
  calls, waiting = [], []

  def submit():
    texts = [d.text for d in waiting] + [d.question.text for d in waiting if d.question]
    calls.append(list(dict.fromkeys(texts)))

  for doc in docs:
    if len(waiting) >= per_call and doc.text is not waiting[-1].text:
      submit()
      waiting = []
    waiting.append(doc)
  if waiting:
    submit()
  return calls


def dir_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# ---------------------------------------------------------------------- generated text


class Prose:
  """Sentences and paragraphs of Zipf-distributed pseudo-words (capitalised sentences, commas,
  . ? ! and the odd name), deterministic for a seed."""

  def __init__(self, seed: int):
    self._zipf = synthetic_hotpotqa.ZipfWords(random.Random(seed + 1000))
    self.rng = random.Random(seed)

  def words(self, n: int) -> List[str]:
    return self.rng.choices(self._zipf.words, cum_weights=self._zipf.cum, k=n)

  def name(self) -> str:
    return " ".join(w.capitalize() for w in self.words(2))

  def paragraph(self, n: int) -> str:
    rng = self.rng
    ws = self.words(n)
    out, i = [], 0
    while i < len(ws):
      s = ws[i:i + rng.randint(6, 24)]
      i += len(s)
      if len(s) > 8 and rng.random() < 0.5:
        s[rng.randrange(2, len(s) - 2)] += ","
      if len(s) > 1 and rng.random() < 0.3:
        s[rng.randrange(1, len(s))] = self.name()
      out.append(" ".join(s).capitalize() + rng.choice(".....?!"))
    return " ".join(out)

  def paragraphs(self, words: int) -> List[str]:
    """Paragraphs of 40-160 words, ``words`` in all."""
    out = []
    while words > 0:
      n = min(words, self.rng.randint(40, 160))
      out.append(self.paragraph(n))
      words -= n
    return out


def wrap(text: str, width: int = 70) -> str:
  """Hard-wrapped lines, as in Gutenberg files."""
  lines, line, size = [], [], 0
  for w in text.split(" "):
    if line and size + len(w) > width:
      lines.append(" ".join(line))
      line, size = [], 0
    line.append(w)
    size += len(w) + 1
  if line:
    lines.append(" ".join(line))
  return "\n".join(lines)


def gutenberg(title: str, body: str, end: str = "") -> str:
  """A Project Gutenberg file around ``body``: header, start marker, credit, footer, licence."""
  upper = title.upper()
  return (f"The Project Gutenberg EBook of {title}, by A. Benchmark\r\n\r\nThis eBook is for "
          f"the use of anyone anywhere at no cost.\r\n\r\n*** START OF THIS PROJECT GUTENBERG "
          f"EBOOK {upper} ***\r\n\r\nProduced by The Benchmark Press\r\n\r\n"
          + body.replace("\n", "\r\n") + end
          + f"\r\n\r\nEnd of the Project Gutenberg EBook of {title}\r\n\r\n*** END OF THIS "
          f"PROJECT GUTENBERG EBOOK {upper} ***\r\n\r\nLicence text, some lines of it.\r\n")


def book_body(prose: Prose, words: int) -> str:
  chapters = []
  per_chapter = max(MIN_WORDS, words // max(1, words // 4000))
  k = 0
  while words > 0:
    k += 1
    n = min(words, per_chapter)
    chapters.append(f"CHAPTER {k}.\n\n" + "\n\n".join(wrap(p) for p in prose.paragraphs(n)))
    words -= n
  return "\n\n\n".join(chapters)


# ---------------------------------------------------------------------- inputs per job
# Each returns a Job; the documents for the bare side come from the job's reader functions.


def make_hotpotqa(root: str, scale: float, per_call: int) -> Job:
  from pipelines.readers import hotpotqa as reader  # pylint: disable=g-import-not-at-top
  n, _ = scaled(HOTPOTQA_QUESTIONS, scale)
  os.makedirs(root)
  path = os.path.join(root, "input.json")
  raw = synthetic_hotpotqa.make_questions(n, seed=1, zipf_sentences=2)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(raw, f)
  docs = [reader.parse_record(r, f"{path}#{i}")[0] for i, r in enumerate(raw)]
  return Job("hotpotqa", path, "-", os.path.getsize(path), len(docs),
             encode_calls(docs, per_call))


def make_wikipedia(root: str, scale: float, per_call: int) -> Job:
  from demo import synthetic_wikipedia  # pylint: disable=g-import-not-at-top
  from pipelines.readers import wikipedia as dump_reader  # pylint: disable=g-import-not-at-top
  from pipelines.readers import wikipedia_pages as pages_lib  # pylint: disable=g-import-not-at-top
  n, factor = scaled(WIKIPEDIA_PAGES, scale)
  os.makedirs(root)
  path = os.path.join(root, "synwiki-pages-articles-multistream.xml.bz2")
  synthetic_wikipedia.write_dump(synthetic_wikipedia.generate_pages(
      n, seed=1, words_per_page=max(MIN_WORDS, int(WIKIPEDIA_WORDS_PER_PAGE * factor))),
      path, multistream=True)
  with open(path, "rb") as f:
    namespaces = pages_lib.namespaces_of(dump_reader.read_siteinfo(f, path))
  docs = []
  with open(path, "rb") as f:
    for page in dump_reader.iter_pages(f, path):
      kind, value = pages_lib.convert_page(page, namespaces, pages_lib.PageRules())
      if kind == pages_lib.DOCUMENT:
        docs.append(value[0])
  return Job("wikipedia", path, "-", os.path.getsize(path), len(docs),
             encode_calls(docs, per_call))


def make_books(root: str, scale: float, per_call: int) -> Job:
  from pipelines.readers import books as reader  # pylint: disable=g-import-not-at-top
  n, factor = scaled(BOOKS, scale)
  os.makedirs(root)
  prose = Prose(seed=3)
  docs = []
  for i in range(n):
    kb = prose.rng.randint(*BOOK_KB) * factor
    words = max(MIN_WORDS, int(kb * 1000 / 7.5))  # ~7.5 bytes per word, spaces and wraps
    data = gutenberg(f"The Tale of {prose.name()}", book_body(prose, words)).encode("utf-8")
    path = os.path.join(root, f"{10000 + i}.txt")
    with open(path, "wb") as f:
      f.write(data)
    docs.append(reader.parse_book(data, path))
  return Job("books", os.path.join(root, "*.txt"), "-", dir_bytes(root), len(docs),
             encode_calls(docs, per_call))


def _answer(prose: Prose, text: str) -> Dict:
  """A TriviaQA ``Answer`` whose value is a two-word phrase of ``text``."""
  ws = text.split()
  k = prose.rng.randrange(max(1, len(ws) - 2))
  value = " ".join(w.strip(",.?!").capitalize() for w in ws[k:k + 2])
  return {"Aliases": [value, value.lower()], "MatchedWikiEntityName": value,
          "NormalizedAliases": [value.lower()], "NormalizedValue": value.lower(),
          "Type": "WikipediaEntity", "Value": value}


def make_triviaqa(root: str, scale: float, per_call: int) -> Job:
  from pipelines.readers import triviaqa as reader  # pylint: disable=g-import-not-at-top
  n_wiki, factor = scaled(TRIVIAQA_WIKI_QUESTIONS, scale)
  n_web, _ = scaled(TRIVIAQA_WEB_QUESTIONS, scale)
  prose = Prose(seed=4)
  rng = prose.rng
  evidence = os.path.join(root, "evidence")
  qa = os.path.join(root, "qa")
  for d in ("wikipedia", "web"):
    os.makedirs(os.path.join(evidence, d))
  os.makedirs(qa)
  texts: Dict[str, str] = {}  # relative path -> text

  def write(rel: str, words: Tuple[int, int]) -> str:
    n = max(MIN_WORDS, int(rng.randint(*words) * factor))
    text = "\n\n".join(prose.paragraphs(n)) + "\n"
    with open(os.path.join(evidence, rel), "w", encoding="utf-8") as f:
      f.write(text)
    texts[rel] = text
    return text

  pool = []  # entity pages, shared by questions as in TriviaQA
  for i in range(max(1, int(n_wiki * 1.2))):
    title = f"{prose.name()} {i}"
    filename = title.replace(" ", "_") + ".txt"
    write(f"wikipedia/{filename}", TRIVIAQA_WIKI_WORDS)
    pool.append({"DocSource": "TagMe", "Filename": filename, "Title": title})

  def question(k: int, domain: str) -> Dict:
    return {"Question": "Which " + " ".join(prose.words(rng.randint(6, 14))) + "?",
            "QuestionId": f"{domain}_{k}", "QuestionSource": "http://benchmark"}

  wiki = []
  for k in range(n_wiki):
    pages = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
    q = question(k, "tc")
    q.update(EntityPages=pages,
             Answer=_answer(prose, texts[f"wikipedia/{pages[0]['Filename']}"]))
    wiki.append(q)
  web = []
  for k in range(n_web):
    results = []
    for r in range(rng.randint(2, 4)):
      filename = f"{k}/{k}_{r}.txt"
      os.makedirs(os.path.join(evidence, "web", str(k)), exist_ok=True)
      text = write(f"web/{filename}", TRIVIAQA_WEB_WORDS)
      results.append({"Description": "...", "Filename": filename, "Rank": r,
                      "Title": f"Result {r}", "Url": f"http://example.com/{k}/{r}"})
    q = question(k, "qw")
    q.update(EntityPages=rng.sample(pool, min(len(pool), rng.randint(1, 2))),
             SearchResults=results, Answer=_answer(prose, text))
    web.append(q)
  docs = []
  for name, data in (("wikipedia-dev.json", wiki), ("web-dev.json", web)):
    path = os.path.join(qa, name)
    with open(path, "w", encoding="utf-8") as f:
      json.dump({"Data": data, "Domain": name.split("-")[0].capitalize(), "Split": "dev",
                 "VerifiedEval": False, "Version": 1.0}, f)
    for i, datum in enumerate(data):
      for source_id, unit in reader.split_question(f"{path}#{i}", datum):
        plan, _ = reader.parse_record(unit, source_id)
        docs.append(reader.build_document(plan, [
            reader.decode_evidence(texts[p.relative_path].encode("utf-8"))[0]
            for p in plan.pages]))
  return Job("triviaqa", os.path.join(qa, "*-dev.json"), evidence, dir_bytes(root), len(docs),
             encode_calls(docs, per_call))


def make_narrativeqa(root: str, scale: float, per_call: int) -> Job:
  from pipelines.readers import narrativeqa as reader  # pylint: disable=g-import-not-at-top
  n, factor = scaled(NQA_STORIES, scale)
  prose = Prose(seed=5)
  rng = prose.rng
  os.makedirs(os.path.join(root, "tmp"))
  stories, questions = [], []
  docs = []
  for i in range(n):
    story_id = f"{i:04d}bench{rng.randrange(16**8):08x}"
    words = max(MIN_WORDS, int(rng.randint(*NQA_WORDS) * factor))
    body = book_body(prose, words)
    data = gutenberg(f"A Story {i}", body, "\n\nTHE END").encode("utf-8")
    with open(os.path.join(root, "tmp", f"{story_id}.content"), "wb") as f:
      f.write(data)
    row = {"document_id": story_id, "set": "test", "kind": "gutenberg", "story_url": "u",
           "story_file_size": len(data), "wiki_url": "w", "wiki_title": f"A Story {i}",
           "story_word_count": words, "story_start": "Produced by The Benchmark Press",
           "story_end": "THE END"}
    stories.append(row)
    ws = body.split()
    rows = []
    for _ in range(NQA_QUESTIONS_PER_STORY):
      k = rng.randrange(max(1, len(ws) - 8))
      phrase = [w.strip(",.?!") for w in ws[k:k + rng.randint(3, 7)]]
      changed = [w if rng.random() < 0.7 else "something" for w in phrase]
      rows.append({"document_id": story_id, "set": "test",
                   "question": "Who " + " ".join(prose.words(rng.randint(5, 12))) + "?",
                   "answer1": " ".join(phrase), "answer2": " ".join(changed),
                   "question_tokenized": "", "answer1_tokenized": "", "answer2_tokenized": ""})
    questions += rows
    text, paragraphs, _ = reader.story_text(data, "gutenberg", row["story_start"],
                                            row["story_end"])
    docs += reader.question_documents(
        story_id, text, paragraphs,
        [(f"qaps#{k}", reader.make_question(r, story_id, k)) for k, r in enumerate(rows)])
  for name, rows in (("documents.csv", stories), ("qaps.csv", questions)):
    with open(os.path.join(root, name), "w", encoding="utf-8", newline="") as f:
      w = csv.DictWriter(f, fieldnames=list(rows[0]))
      w.writeheader()
      w.writerows(rows)
  return Job("narrativeqa", os.path.join(root, "qaps.csv"), "-", dir_bytes(root), len(docs),
             encode_calls(docs, per_call))


MAKERS = {"hotpotqa": make_hotpotqa, "wikipedia": make_wikipedia, "books": make_books,
          "triviaqa": make_triviaqa, "narrativeqa": make_narrativeqa}


# ---------------------------------------------------------------------- the two sides


def bare_encode(calls: Sequence[Sequence[str]]) -> Tuple[float, int]:
  """One cold-tokenizer pass: (seconds in encode_batch, tokens)."""
  backend = Tokenizer(RecordsConfig().tokenizer).backend
  seconds, tokens = 0.0, 0
  for texts in calls:
    t0 = time.perf_counter()
    encoded = backend.encode_batch(list(texts), add_special_tokens=False)
    seconds += time.perf_counter() - t0
    tokens += sum(len(e.ids) for e in encoded)
  return seconds, tokens


def pipeline_child(name: str, input_pattern: str, out_dir: str, evidence_dir: str) -> None:
  """The measured pipeline run (in a fresh interpreter); prints its figures as JSON."""
  import importlib  # pylint: disable=g-import-not-at-top
  job = importlib.import_module(f"pipelines.{name}")
  kwargs = {}
  if name == "triviaqa":
    kwargs["options"] = job.TriviaQAOptions(evidence_dir=evidence_dir)
  t0 = time.perf_counter()
  m = job.run(input_pattern, out_dir, RecordsConfig(), **kwargs)
  seconds = time.perf_counter() - t0
  segment = (m.get("stages") or {}).get("segment") or {}
  print(json.dumps({"seconds": seconds, "counts": m["counts"], "examples": m["examples"],
                    "texts_tokenised": segment.get("texts_tokenised"),
                    "rejected_by_reason": m.get("rejected_by_reason")}))


def pipeline_run(job: Job, out_dir: str) -> Dict:
  """Runs :func:`pipeline_child` in a fresh interpreter; checks what it wrote."""
  r = common.child_run(__file__, [job.name, job.input_pattern, out_dir, job.evidence_dir],
                       out_dir, ROOT)
  counts = r["counts"]
  if counts["written"] != job.documents or counts["rejected"]:
    raise SystemExit(f"{job.name}: the pipeline wrote {counts['written']} of {job.documents} "
                     f"documents and rejected {counts['rejected']} "
                     f"({r.get('rejected_by_reason')}) on clean input: {counts}")
  # The chunks' edges depend on the order documents reach the stage, so a text read by
  # documents of two chunks (a question's pages in TriviaQA) may be encoded once more or less;
  # more than that means the two sides encode different work (e.g. a story once per question).
  texts = sum(len(c) for c in job.calls)
  if r.get("texts_tokenised") is not None and abs(r["texts_tokenised"] - texts) > 0.01 * texts:
    print(f"warning: {job.name}: the pipeline tokenised {r['texts_tokenised']:,} texts, the "
          f"bare pass {texts:,}", file=sys.stderr)
  return r


def parse_only(ap: argparse.ArgumentParser, only: str) -> List[str]:
  names = [n.strip() for n in only.split(",") if n.strip()]
  unknown = [n for n in names if n not in JOBS]
  if unknown or not names:
    ap.error(f"--only: unknown pipeline(s) {', '.join(unknown) or repr(only)}; choose from "
             f"{', '.join(JOBS)}")
  return [n for n in JOBS if n in names]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--pairs", type=int, default=MIN_PAIRS,
                  help=f"interleaved (bare, pipeline) pairs per pipeline; fewer than {MIN_PAIRS} "
                       "is only for smoke tests (default: %(default)s)")
  ap.add_argument("--scale", type=float, default=1.0,
                  help="multiplies every generated input's size (default: %(default)s)")
  ap.add_argument("--only", default=",".join(JOBS),
                  help="comma-separated pipelines to run (default: all: %(default)s)")
  ap.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    pipeline_child(*args.child)
    return
  common.check_pairs(ap, args.pairs, MIN_PAIRS)
  if not args.scale > 0:
    ap.error("--scale must be > 0")
  names = parse_only(ap, args.only)
  per_call = docs_per_encode_call(RecordsConfig())
  start = time.perf_counter()
  with tempfile.TemporaryDirectory(prefix="all_throughput_") as tmp:
    jobs = []
    for name in names:
      t0 = time.perf_counter()
      job = MAKERS[name](os.path.join(tmp, name), args.scale, per_call)
      jobs.append(job)
      print(f"{name}: {job.input_bytes / 1e6:.1f} MB input, {job.documents:,} documents, "
            f"{job.text_bytes / 1e6:.1f} MB of text in {len(job.calls)} encode_batch calls "
            f"(generated in {time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"bare: encode_batch calls of up to {per_call} documents (their distinct texts, then "
          f"their questions'); {args.pairs} pair(s), interleaved", flush=True)
    pairs: Dict[str, List[Dict]] = {name: [] for name in names}
    tokens: Dict[str, int] = {}
    for k in range(args.pairs):
      for job in jobs:
        bare_s, tokens[job.name] = bare_encode(job.calls)
        r = pipeline_run(job, os.path.join(tmp, f"out_{job.name}_{k}"))
        n = tokens[job.name]
        pair = {"bare_s": bare_s, "pipeline_s": r["seconds"], "wall_s": r["wall"],
                "bare_rate": n / bare_s, "pipeline_rate": n / r["seconds"],
                "ratio": bare_s / r["seconds"]}
        pairs[job.name].append(pair)
        print(f"pair {k + 1} {job.name:11s}: bare {bare_s:6.2f} s ({pair['bare_rate']:10,.0f} "
              f"tokens/s)  pipeline {r['seconds']:6.2f} s ({pair['pipeline_rate']:10,.0f} "
              f"tokens/s; process wall {r['wall']:6.2f} s)  ratio {pair['ratio']:.3f}",
              flush=True)
  header = (f"{'pipeline':11s} | {'input MB':>8s} | {'docs':>7s} | {'text MB':>7s} | "
            f"{'tokens':>11s} | {'bare tok/s':>10s} | {'pipe tok/s':>10s} | {'pipe s':>6s} | "
            f"paired ratio min / median / max")
  print(header)
  print("-" * len(header))
  ratios = {}
  for job in jobs:
    ps = pairs[job.name]
    r = [p["ratio"] for p in ps]
    ratios[job.name] = {"min": round(min(r), 3), "median": round(statistics.median(r), 3),
                        "max": round(max(r), 3)}
    print(f"{job.name:11s} | {job.input_bytes / 1e6:8.1f} | {job.documents:7,d} | "
          f"{job.text_bytes / 1e6:7.1f} | {tokens[job.name]:11,d} | "
          f"{statistics.median(p['bare_rate'] for p in ps):10,.0f} | "
          f"{statistics.median(p['pipeline_rate'] for p in ps):10,.0f} | "
          f"{statistics.median(p['pipeline_s'] for p in ps):6.1f} | "
          f"{min(r):.3f} / {statistics.median(r):.3f} / {max(r):.3f}")
  worst = min(ratios, key=lambda n: ratios[n]["median"])
  print(f"worst: {worst} (median paired ratio {ratios[worst]['median']:.3f}, target >= 0.5); "
        f"process start and imports add ~"
        f"{statistics.median(p['wall_s'] - p['pipeline_s'] for ps in pairs.values() for p in ps):.1f}"
        f" s per run (not counted); total {time.perf_counter() - start:.0f} s")
  print(json.dumps({"metric": "worst_pipeline_tokens_per_s_over_bare_encode_batch",
                    "value": ratios[worst]["median"], "target": 0.5, "unit": "ratio",
                    "worst": worst, "pairs": args.pairs, "ratios": ratios}))


if __name__ == "__main__":
  main()
