r"""Generates HotpotQA-format questions about fictional people, towns and countries.

The records follow the official distractor format (``_id, answer, question, supporting_facts,
context, type, level``): each question has two gold paragraphs (a bridge: person -> town ->
country, or a comparison of two people) and eight distractor paragraphs, ~1,000-1,500 BPE tokens
in all, like the real dev set.  Deterministic for a given seed.

  python -m pipelines.datasets.hotpotqa.fake_input --num_questions 200 --seed 0 --output data.json

:func:`write` is the dataset's fake input (its spec's ``fake_input``): ``QUESTIONS`` questions
(times the scale) with two Zipf sentences per paragraph, one JSON list.
"""

from __future__ import annotations

import json
import os
import random
from typing import Dict, List, Optional, Tuple

from schemas import cli

from pipelines.datasets import FakeInput
from pipelines.fake_data.prose import SYLLABLES, ZipfWords, scaled

QUESTIONS = 8000  # at scale 1.0

_JOBS = ["painter", "engineer", "composer", "botanist", "novelist", "architect", "cartographer",
         "astronomer", "sculptor", "historian"]
_FILLER = [
    "The {x} archives describe a long tradition of trade along the river.",
    "Local records mention a festival held every spring in {x}.",
    "Several museums in {x} hold collections of maps and instruments.",
    "A railway line connects {x} with the coast, built in the {n}s.",
    "The climate around {x} is mild, with frequent rain in autumn.",
    "Historians still debate the origin of the name {x}.",
    "The population of {x} grew quickly after the harbour opened.",
]


def _name(rng: random.Random, parts: int) -> str:
  return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def _person_paragraph(rng, person, year, town, job) -> List[str]:
  article = "an" if job[0] in "aeiou" else "a"
  sents = [f"{person} (born {year}) is {article} {job} from {town}.",
           f" {person} studied in {town} before travelling widely."]
  sents += [" " + rng.choice(_FILLER).format(x=town, n=rng.randint(180, 199) * 10)
            for _ in range(rng.randint(3, 6))]
  return sents


def _town_paragraph(rng, town, country) -> List[str]:
  sents = [f"{town} is a town in {country}.",
           f" It lies in the northern part of {country}, near the hills."]
  sents += [" " + rng.choice(_FILLER).format(x=town, n=rng.randint(180, 199) * 10)
            for _ in range(rng.randint(3, 6))]
  return sents


def make_questions(num_questions: int, seed: int = 0, zipf_sentences: int = 0) -> List[Dict]:
  """``zipf_sentences`` > 0 appends that many pseudo-word sentences to every paragraph."""
  rng = random.Random(seed)
  zipf = ZipfWords(random.Random(seed + 1000)) if zipf_sentences else None
  countries = [_name(rng, 3) + "ia" for _ in range(12)]
  out = []
  for i in range(num_questions):
    towns = [_name(rng, 2) + "burg" for _ in range(4)]
    people = [f"{_name(rng, 2)} {_name(rng, 3)}" for _ in range(4)]
    years = [rng.randint(1700, 1990) for _ in range(4)]
    jobs = [rng.choice(_JOBS) for _ in range(4)]
    nations = [rng.choice(countries) for _ in range(4)]
    paras = {p: _person_paragraph(rng, p, y, t, j)
             for p, y, t, j in zip(people, years, towns, jobs)}
    paras.update({t: _town_paragraph(rng, t, c) for t, c in zip(towns, nations)})
    kind = rng.choice(["bridge", "bridge", "comparison", "yesno"])
    if kind == "bridge":
      q = f"In which country is the town where {people[0]} was born?"
      answer, sp, qtype = nations[0], [[people[0], 0], [towns[0], 0]], "bridge"
    elif kind == "comparison":
      q = f"Who was born first, {people[0]} or {people[1]}?"
      answer = people[0] if years[0] <= years[1] else people[1]
      sp, qtype = [[people[0], 0], [people[1], 0]], "comparison"
    else:
      q = f"Are {people[0]} and {people[1]} both {jobs[0]}s?"
      answer = "yes" if jobs[0] == jobs[1] else "no"
      sp, qtype = [[people[0], 0], [people[1], 0]], "comparison"
    if zipf:
      for t in paras:
        paras[t] = paras[t] + [zipf.sentence(rng, rng.randint(8, 25))
                               for _ in range(zipf_sentences)]
    gold = [t for t, _ in sp]
    titles = gold + [t for t in paras if t not in gold]
    rng.shuffle(titles)
    context = [[t, paras[t]] for t in titles]
    out.append({"_id": f"synth{seed:02d}{i:06d}", "answer": answer, "question": q,
                "supporting_facts": sp, "context": context, "type": qtype, "level": "medium"})
  return out


def write_questions(root: str, questions: int) -> Tuple[str, List[Dict]]:
  """``root/input.json``: ``questions`` questions (seed 1, two Zipf sentences per paragraph);
  returns the path and the records."""
  os.makedirs(root)
  path = os.path.join(root, "input.json")
  raw = make_questions(questions, seed=1, zipf_sentences=2)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(raw, f)
  return path, raw


def write(root: str, scale: float) -> FakeInput:
  """The dataset's fake input under ``root`` (:class:`pipelines.datasets.FakeInput`)."""
  path, _ = write_questions(root, scaled(QUESTIONS, scale)[0])
  return FakeInput(path)


def main(argv: Optional[List[str]] = None) -> None:
  ap = cli.Parser("pipelines.datasets.hotpotqa.fake_input", __doc__.split("\n")[0],
                  "python -m pipelines.datasets.hotpotqa.fake_input --num_questions 200 "
                  "--output data.json")
  ap.add_argument("--num_questions", type=int, default=200, help="questions to write")
  ap.add_argument("--seed", type=int, default=0, help="the generator's seed")
  ap.add_argument("--output", required=True, io=cli.WRITES, help="the JSON file to write")
  args, _ = ap.parse(argv)
  with open(args.output, "w", encoding="utf-8") as f:
    json.dump(make_questions(args.num_questions, args.seed), f)
  print(args.output)


if __name__ == "__main__":
  main()
