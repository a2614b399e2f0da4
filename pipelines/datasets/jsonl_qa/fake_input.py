"""The jsonl_qa dataset's fake input (its spec's ``fake_input``): ``examples.jsonl``, ``LINES``
examples at scale 1.0 over documents of Zipf prose (:mod:`pipelines.fake_data.prose`), each
answer a phrase of its document; three lines in four carry their ``context`` inline, the fourth
names a ``context_file`` under ``contexts/`` (:mod:`schemas.jsonl_qa`)."""

from __future__ import annotations

import json
import os

from pipelines.datasets import FakeInput
from pipelines.fake_data.prose import MIN_WORDS, Prose, scaled

LINES = 6000  # at scale 1.0
CONTEXT_WORDS = (500, 1200)


def write_examples(root: str, lines: int, factor: float = 1.0) -> str:
  """``root/examples.jsonl`` of ``lines`` examples (contexts ``factor`` times as long); its
  path."""
  prose = Prose(seed=6)
  rng = prose.rng
  os.makedirs(os.path.join(root, "contexts"))
  path = os.path.join(root, "examples.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    for i in range(lines):
      context = "\n\n".join(prose.paragraphs(
          max(MIN_WORDS, int(rng.randint(*CONTEXT_WORDS) * factor))))
      words = context.split()
      k = rng.randrange(len(words) - 2)
      answer = " ".join(w.strip(",.?!") for w in words[k:k + 2])
      line = {"id": f"fake-{i}", "question": "Who " + " ".join(prose.words(rng.randint(5, 12)))
              + "?", "answers": [answer], "title": prose.name()}
      if i % 4 == 3:
        name = f"contexts/{i}.txt"
        with open(os.path.join(root, name), "w", encoding="utf-8") as c:
          c.write(context)
        line["context_file"] = name
      else:
        line["context"] = context
      f.write(json.dumps(line) + "\n")
  return path


def write(root: str, scale: float) -> FakeInput:
  """The dataset's fake input under ``root`` (:class:`pipelines.datasets.FakeInput`)."""
  os.makedirs(root)
  return FakeInput(write_examples(root, *scaled(LINES, scale)))
