"""The NarrativeQA dataset's fake input (its spec's ``fake_input``): the official layout
(``documents.csv``, ``qaps.csv``, ``tmp/<id>.content``) with Gutenberg-style stories of
``STORY_WORDS`` words of Zipf prose (:mod:`pipelines.fake_data.prose`) and
``QUESTIONS_PER_STORY`` questions each whose answers are phrases of the story: 30, the real
set's mean (46,765 questions over 1,572 stories), since every question is a document that
repeats its story's segments in the records while the story is tokenised once, so the job's
cost follows the questions per story (``--estimate``'s unit of work is a story per question)."""

from __future__ import annotations

import csv
import os
from typing import Dict, List, Tuple

from pipelines.datasets import FakeInput
from pipelines.fake_data.prose import MIN_WORDS, Prose, book_body, gutenberg, scaled

STORIES = 8  # at scale 1.0
STORY_WORDS, QUESTIONS_PER_STORY = (30_000, 70_000), 30


def write_narrativeqa(root: str, stories: int, factor: float = 1.0,
                      questions_per_story: int = QUESTIONS_PER_STORY
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
    words = max(MIN_WORDS, int(rng.randint(*STORY_WORDS) * factor))
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
    for _ in range(questions_per_story):
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


def write(root: str, scale: float) -> FakeInput:
  """The dataset's fake input under ``root`` (:class:`pipelines.datasets.FakeInput`): the
  ``test`` split."""
  write_narrativeqa(root, *scaled(STORIES, scale))
  return FakeInput(os.path.join(root, "qaps.csv"), ("--split", "test"))
