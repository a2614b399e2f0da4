"""Every job's input in its official layout, generated (deterministic for the seeds below), for
the throughput benchmarks (``benchmarks/all.py``): texts drawn from a Zipf-distributed
pseudo-word vocabulary (:class:`synthetic.hotpotqa.ZipfWords`), so that BPE's word cache hits
about as often as on real text.

* :func:`write_hotpotqa`: :mod:`synthetic.hotpotqa` questions (two Zipf sentences per
  paragraph), one JSON list;
* :func:`write_wikipedia`: a :mod:`synthetic.wikipedia` multistream dump with its index;
* :func:`write_books`: Gutenberg-style plain-text books (header, credit, chapters, hard-wrapped
  paragraphs, licence footer), one per file;
* :func:`write_triviaqa`: ``qa/wikipedia-dev.json`` (questions over 1-3 entity pages from a
  shared pool) and ``qa/web-dev.json`` (1-2 entity pages and 2-4 search results each) with
  their ``evidence/`` files; the answers are phrases of the evidence;
* :func:`write_narrativeqa`: ``documents.csv``, ``qaps.csv`` and ``tmp/<id>.content`` with
  Gutenberg-style stories and ``NQA_QUESTIONS_PER_STORY`` questions each whose answers are
  phrases of the story.

``factor`` (<= 1) shortens the documents (the benchmark's ``--scale`` below one document).
"""

from __future__ import annotations

import csv
import json
import os
import random
from typing import Dict, List, Tuple

from synthetic import hotpotqa as synthetic_hotpotqa
from synthetic import wikipedia as synthetic_wikipedia

BOOK_KB = (300, 700)
TRIVIAQA_WIKI_WORDS, TRIVIAQA_WEB_WORDS = (1500, 5000), (1000, 4000)
NQA_WORDS, NQA_QUESTIONS_PER_STORY = (30_000, 70_000), 5
MIN_WORDS = 100  # the shortest generated document, however small ``factor``


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


def write_hotpotqa(root: str, questions: int) -> Tuple[str, List[Dict]]:
  """``root/input.json``: ``questions`` HotpotQA questions (seed 1, two Zipf sentences per
  paragraph); returns the path and the records."""
  os.makedirs(root)
  path = os.path.join(root, "input.json")
  raw = synthetic_hotpotqa.make_questions(questions, seed=1, zipf_sentences=2)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(raw, f)
  return path, raw


def write_wikipedia(root: str, pages: int, words_per_page: int) -> str:
  """A multistream dump of ``pages`` generated pages (seed 1) under ``root``; its path."""
  os.makedirs(root)
  path = os.path.join(root, "synwiki-pages-articles-multistream.xml.bz2")
  synthetic_wikipedia.write_dump(synthetic_wikipedia.generate_pages(
      pages, seed=1, words_per_page=words_per_page), path, multistream=True)
  return path


def write_books(root: str, books: int, factor: float = 1.0) -> List[Tuple[str, bytes]]:
  """``books`` Gutenberg-style books of ``BOOK_KB`` KB (times ``factor``), ``root/<n>.txt``;
  returns (path, bytes) of each, in order."""
  os.makedirs(root)
  prose = Prose(seed=3)
  out = []
  for i in range(books):
    kb = prose.rng.randint(*BOOK_KB) * factor
    words = max(MIN_WORDS, int(kb * 1000 / 7.5))  # ~7.5 bytes per word, spaces and wraps
    data = gutenberg(f"The Tale of {prose.name()}", book_body(prose, words)).encode("utf-8")
    path = os.path.join(root, f"{10000 + i}.txt")
    with open(path, "wb") as f:
      f.write(data)
    out.append((path, data))
  return out


def _answer(prose: Prose, text: str) -> Dict:
  """A TriviaQA ``Answer`` whose value is a two-word phrase of ``text``."""
  ws = text.split()
  k = prose.rng.randrange(max(1, len(ws) - 2))
  value = " ".join(w.strip(",.?!").capitalize() for w in ws[k:k + 2])
  return {"Aliases": [value, value.lower()], "MatchedWikiEntityName": value,
          "NormalizedAliases": [value.lower()], "NormalizedValue": value.lower(),
          "Type": "WikipediaEntity", "Value": value}


def write_triviaqa(root: str, wiki_questions: int, web_questions: int, factor: float = 1.0
                   ) -> Tuple[List[Tuple[str, List[Dict]]], Dict[str, str]]:
  """TriviaQA's layout under ``root`` (``qa/``, ``evidence/wikipedia``, ``evidence/web``);
  returns (path, questions) of each ``qa/`` file and the evidence texts by relative path."""
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
  for i in range(max(1, int(wiki_questions * 1.2))):
    title = f"{prose.name()} {i}"
    filename = title.replace(" ", "_") + ".txt"
    write(f"wikipedia/{filename}", TRIVIAQA_WIKI_WORDS)
    pool.append({"DocSource": "TagMe", "Filename": filename, "Title": title})

  def question(k: int, domain: str) -> Dict:
    return {"Question": "Which " + " ".join(prose.words(rng.randint(6, 14))) + "?",
            "QuestionId": f"{domain}_{k}", "QuestionSource": "http://benchmark"}

  wiki = []
  for k in range(wiki_questions):
    pages = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
    q = question(k, "tc")
    q.update(EntityPages=pages,
             Answer=_answer(prose, texts[f"wikipedia/{pages[0]['Filename']}"]))
    wiki.append(q)
  web = []
  for k in range(web_questions):
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
  files = []
  for name, data in (("wikipedia-dev.json", wiki), ("web-dev.json", web)):
    path = os.path.join(qa, name)
    with open(path, "w", encoding="utf-8") as f:
      json.dump({"Data": data, "Domain": name.split("-")[0].capitalize(), "Split": "dev",
                 "VerifiedEval": False, "Version": 1.0}, f)
    files.append((path, data))
  return files, texts


def write_narrativeqa(root: str, stories: int, factor: float = 1.0
                      ) -> List[Tuple[Dict, bytes, List[Dict]]]:
  """NarrativeQA's layout under ``root`` (``documents.csv``, ``qaps.csv``,
  ``tmp/<id>.content``); returns (``documents.csv`` row, story bytes, ``qaps.csv`` rows) of
  each story, in order."""
  prose = Prose(seed=5)
  rng = prose.rng
  os.makedirs(os.path.join(root, "tmp"))
  rows_of_stories, questions = [], []
  out = []
  for i in range(stories):
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
    rows_of_stories.append(row)
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
    out.append((row, data, rows))
  for name, rows in (("documents.csv", rows_of_stories), ("qaps.csv", questions)):
    with open(os.path.join(root, name), "w", encoding="utf-8", newline="") as f:
      w = csv.DictWriter(f, fieldnames=list(rows[0]))
      w.writeheader()
      w.writerows(rows)
  return out
