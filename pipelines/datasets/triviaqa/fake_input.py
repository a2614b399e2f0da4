"""The TriviaQA dataset's fake input (its spec's ``fake_input``): ``qa/wikipedia-dev.json``
(questions over 1-3 entity pages from a shared pool) and ``qa/web-dev.json`` (1-2 entity pages
and 2-4 search results each: one document per page) with their ``evidence/`` files of Zipf
prose (:mod:`pipelines.fake_data.prose`); the answers are phrases of the evidence."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Tuple

from pipelines.datasets import FakeInput
from pipelines.fake_data.prose import MIN_WORDS, Prose, scaled

WIKI_QUESTIONS, WEB_QUESTIONS = 240, 150  # at scale 1.0
WIKI_WORDS, WEB_WORDS = (1500, 5000), (1000, 4000)


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
    write(f"wikipedia/{filename}", WIKI_WORDS)
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
      text = write(f"web/{filename}", WEB_WORDS)
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


def write(root: str, scale: float) -> FakeInput:
  """The dataset's fake input under ``root`` (:class:`pipelines.datasets.FakeInput`)."""
  n_wiki, factor = scaled(WIKI_QUESTIONS, scale)
  write_triviaqa(root, n_wiki, scaled(WEB_QUESTIONS, scale)[0], factor)
  evidence = os.path.join(root, "evidence")
  return FakeInput(os.path.join(root, "qa", "*-dev.json"), ("--evidence_dir", evidence))
