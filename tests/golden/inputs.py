"""Small, deterministic inputs of the golden-output test (``test_job_outputs``), one builder per
job.  Everything is seeded or fixed: the same bytes on every call, in any directory.

They reuse the generators (``pipelines.datasets.hotpotqa.fake_input``,
``pipelines.datasets.wikipedia.fake_input``) and the hand-made fixtures of ``tests/pipelines`` (edge
cases: missing evidence, bad records, CSV quirks, BOM/CRLF/Latin-1 stories), so a change to one of
those changes the golden fingerprints too: regenerate them then (see the test module's docstring).
"""

from __future__ import annotations

import csv
import io
import os
import random
from typing import List

from pipelines.datasets.hotpotqa import fake_input as synth_hotpot
from pipelines.datasets.wikipedia import fake_input as synth_wiki
from tests.pipelines.datasets.books import test_dataset as books_fixture
from tests.pipelines.datasets.hotpotqa import test_dataset as hotpot_fixture
from tests.pipelines.datasets.narrativeqa import test_dataset as narrative_fixture
from tests.pipelines.datasets.triviaqa import test_dataset as trivia_fixture
from tests.pipelines.helpers import write_json

# The Wikipedia dump: generated pages (articles, redirects, disambiguation, other namespaces)
# plus the hand-made ones with known links (Paris, France, Seine, ...).
WIKI_SEED, WIKI_PAGES = 26, 36


def _write(path: str, data: bytes) -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)
  return path


def hotpotqa(base: str) -> List[str]:
  """Two files: 24 generated labelled questions plus the fixtures' good and bad records (dead
  letters, a duplicate id skipped), and an unlabelled test-style file."""
  os.makedirs(base, exist_ok=True)
  records = (synth_hotpot.make_questions(24, seed=26) + hotpot_fixture.good_records()
             + hotpot_fixture.bad_records())
  labelled = write_json(os.path.join(base, "hotpot-dev.json"), records)
  unlabelled = write_json(os.path.join(base, "hotpot-test.json"),
                          hotpot_fixture.unlabelled_records())
  return ["--input", f"{labelled},{unlabelled}"]


def wiki_pages() -> list:
  return (list(synth_wiki.generate_pages(WIKI_PAGES, seed=WIKI_SEED, words_per_page=90))
          + list(_hand_pages()))


def _hand_pages():
  from tests.pipelines.datasets.wikipedia.test_dataset import PAGES  # pylint: disable=g-import-not-at-top
  # Page ids of the generated pages are 10, 13, 16, ...: move the hand-made ones out of the way.
  for spec in PAGES:
    yield synth_wiki.PageSpec(spec.title, spec.text, namespace=spec.namespace,
                              page_id=spec.page_id + 10000, redirect=spec.redirect)


def wikipedia(base: str) -> List[str]:
  """A multistream dump (index beside it, 8 pages per stream) read as several splits."""
  os.makedirs(base, exist_ok=True)
  dump = os.path.join(base, "golden-pages-articles-multistream.xml.bz2")
  synth_wiki.write_dump(wiki_pages(), dump, multistream=True, pages_per_stream=8)
  return ["--input", dump, "--streams_per_split", "2"]


def _book_body(rng: random.Random, chapters: int, words: int) -> str:
  vocab = [w for q in synth_hotpot.make_questions(3, seed=rng.randint(0, 999))
           for _, sents in q["context"] for s in sents for w in s.split()]
  paras = []
  for c in range(chapters):
    paras.append(f"CHAPTER {c + 1}.")
    paras.append(" ".join(rng.choice(vocab) for _ in range(words)))
  return "\r\n\r\n".join(paras)


def books(base: str) -> List[str]:
  """Ten generated Gutenberg-style books (header, chapters, footer; CRLF), a short Latin-1
  one, a UTF-8 one with a BOM, and an empty one (a dead letter)."""
  rng = random.Random(26)
  src = os.path.join(base, "books")
  for i in range(10):
    body = _book_body(rng, chapters=rng.randint(1, 6), words=rng.randint(20, 160))
    _write(os.path.join(src, f"book{i:02d}.txt"),
           (books_fixture.HEADER + body + books_fixture.FOOTER).encode("utf-8"))
  _write(os.path.join(src, "short.txt"), b"Caf\xe9 society\r\nwas wrapped here.\r\n\r\nThe end.\r\n")
  _write(os.path.join(src, "bom.txt"), b"\xef\xbb\xbfNa\xc3\xafve text, one line.\n")
  _write(os.path.join(src, "empty.txt"),
         (books_fixture.HEADER + books_fixture.FOOTER).encode("utf-8"))
  return ["--input", os.path.join(src, "*.txt")]


def books_annotated_text(base: str) -> List[str]:
  """Books whose text names the hand-made Wikipedia pages' entities, for the spaCy + alias
  linker run (entities from the golden Wikipedia case)."""
  rng = random.Random(27)
  names = ["Paris", "France", "the Seine", "Lutetia", "river Seine", "the city", "Lyon"]
  src = os.path.join(base, "books")
  for i in range(4):
    sents = [f"{rng.choice(names)} is near {rng.choice(names)} and {rng.choice(names)}."
             for _ in range(rng.randint(8, 30))]
    _write(os.path.join(src, f"ann{i}.txt"), " ".join(sents).encode("utf-8"))
  return ["--input", os.path.join(src, "*.txt")]


def triviaqa(base: str) -> List[str]:
  """The fixtures' question files (both domains, a test file; missing, damaged and escaping
  evidence, bad records) plus 20 generated Wikipedia-domain questions whose evidence pages are
  generated paragraphs."""
  evidence = trivia_fixture.write_evidence(os.path.join(base, "evidence"))
  qa = os.path.join(base, "qa")
  os.makedirs(qa)
  generated = []
  for q in synth_hotpot.make_questions(20, seed=27):
    pages = []
    for title, sents in q["context"][:3]:
      name = title.replace(" ", "_") + ".txt"
      path = os.path.join(evidence, "wikipedia", name)
      if not os.path.exists(path):
        _write(path, (" ".join(sents) + "\n").encode("utf-8"))
      pages.append(trivia_fixture.page(name, title))
    ans = q["answer"]
    generated.append({"Answer": trivia_fixture.answer(ans, [ans], [ans.lower()]),
                      "EntityPages": pages, "Question": q["question"],
                      "QuestionId": "g_" + q["_id"]})
  trivia_fixture.write_question_file(os.path.join(qa, "wikipedia-dev.json"),
                                     trivia_fixture.WIKI_DEV + generated, "Wikipedia", "dev")
  trivia_fixture.write_question_file(os.path.join(qa, "web-dev.json"), trivia_fixture.WEB_DEV,
                                     "Web", "dev", data_last=True)
  trivia_fixture.write_question_file(os.path.join(qa, "web-test-without-answers.json"),
                                     trivia_fixture.WEB_TEST, "Web", "test")
  return ["--input", os.path.join(qa, "*.json"), "--evidence_dir", evidence]


def narrativeqa(base: str) -> List[str]:
  """The fixtures' official layout (CSV quirks, BOM/CRLF/Latin-1 stories, an HTML script,
  missing markers and files) plus 12 generated Gutenberg-style test stories with 3 questions
  and a summary each."""
  root = os.path.join(base, "nqa")
  qaps = narrative_fixture.make_layout(root)
  rng = random.Random(28)
  docs, questions, summaries = [], [], []
  for i, q in enumerate(synth_hotpot.make_questions(12, seed=28)):
    doc_id = f"gen{i:02d}"
    story = " ".join(s for _, sents in q["context"] for s in sents)
    text = (f"Header of the file.\r\n\r\nProduced by Someone\r\n\r\n{story}\r\n\r\nTHE END.\r\n"
            "Licence text.\r\n")
    _write(os.path.join(root, "tmp", f"{doc_id}.content"), text.encode("utf-8"))
    docs.append([doc_id, "test", "gutenberg", "u", "1", "w", f"Story {i}", "99",
                 "Produced by Someone", "THE END ."])
    questions.append([doc_id, "test", q["question"], q["answer"], q["answer"].lower(), "", "",
                      ""])
    person = q["context"][rng.randrange(len(q["context"]))]
    questions.append([doc_id, "test", f"Who is {person[0]}?", person[1][0].strip(), "someone",
                      "", "", ""])
    questions.append([doc_id, "test", "What is not there?", "zebra unicorn", "giraffes", "", "",
                      ""])
    summaries.append([doc_id, "test", " ".join(person[1]), ""])
  _append_csv(os.path.join(root, "documents.csv"), docs, "\r\n")
  _append_csv(qaps, questions, "\n")
  _append_csv(os.path.join(root, "third_party", "wikipedia", "summaries.csv"), summaries,
              "\r\n")
  return ["--input", qaps, "--split", "test"]


def _append_csv(path: str, rows, line_end: str) -> None:
  buf = io.StringIO()
  csv.writer(buf, lineterminator=line_end).writerows(rows)
  with open(path, "a", encoding="utf-8", newline="") as f:
    f.write(buf.getvalue())
