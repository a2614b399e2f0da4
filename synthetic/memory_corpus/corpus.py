"""The memory corpus' documents: Wikipedia-style biographies of fictional people whose cast
(people, places, organisations) recurs across the document, every surface name used by one
entity of the whole corpus; written as MediaWiki dumps plus a cast file per split."""

from __future__ import annotations

import bz2
import json
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pipelines.datasets.wikipedia import fake_input as synth
from synthetic.memory_corpus.pools import (
    DESCRIPTORS, FEMALE, FILLER, MALE, OCCUPATIONS, ORG_DESCRIPTORS, ORG_EVENTS, ORG_KINDS,
    ORG_ROLES, PERSON_EVENTS, PLACE_EVENTS, PLACE_HEADS, PLACE_KINDS, PLACE_REGIONS, PLACE_ROLES,
    PLACE_TAILS, RELATIONS, SUBJECT_EVENTS, SURNAME_SET, SURNAMES, TOPICS)

SPLITS = ("train", "heldout")
# Page ids: held-out documents 1_000_001..., training documents 1...
_FIRST_PAGE_ID = {"train": 1, "heldout": 1_000_001}


# --- entities and documents ------------------------------------------------------------------

@dataclass
class Entity:
  title: str
  kind: str  # person | place | org
  cues: Dict[str, str]
  surname: str = ""
  female: bool = False
  mentions: int = 0
  location: Optional["Entity"] = None  # org: the place it is in


@dataclass
class Doc:
  page_id: int
  title: str
  wikitext: str
  subject: Entity
  cast: List[Entity] = field(default_factory=list)

  def cast_record(self) -> Dict[str, Any]:
    return {"page_id": self.page_id, "title": self.title,
            "subject": {"title": self.subject.title, "cues": self.subject.cues},
            "entities": [{"title": e.title, "kind": e.kind, "cues": e.cues,
                          "mentions": e.mentions} for e in self.cast]}


class _Names:
  """Surface names used so far in the whole corpus (held-out and train): each names one entity."""

  def __init__(self):
    self.used = set()

  def take(self, rng: random.Random, draw, avoid=()) -> Tuple[str, ...]:
    for _ in range(500):
      parts = draw(rng)
      name = " ".join(parts)
      if name not in self.used and not set(parts) & set(avoid):
        self.used.add(name)
        return parts
    raise ValueError("the name pools are exhausted: ask for fewer documents")


def _article(word: str) -> str:
  return "an" if word[0] in "aeiou" else "a"


class _Writer:
  """One document's wikitext, sentence by sentence."""

  def __init__(self, rng: random.Random, names: _Names, page_id: int):
    self.rng, self.names, self.page_id = rng, names, page_id
    r = rng
    self.female = r.random() < 0.5
    first, last = names.take(r, lambda g: (g.choice(FEMALE if self.female else MALE),
                                           g.choice(SURNAMES)))
    self.pro = ({"he": "she", "He": "She", "him": "her", "his": "her", "His": "Her"}
                if self.female else
                {"he": "he", "He": "He", "him": "him", "his": "his", "His": "His"})
    occupations = r.sample(OCCUPATIONS, 10)
    self.subject = Entity(f"{first} {last}", "person", {"occupation": occupations[0]},
                          surname=last, female=self.female)
    self.born = r.randint(1760, 1870)
    self.died = self.born + r.randint(52, 88)
    self.t, self.step = float(self.born), 1.0  # the narrative's year, and its mean step
    # The cast: people, places, organisations, their cues unique within the document.
    n_people, n_places, n_orgs = r.randint(5, 7), r.randint(2, 3), r.randint(1, 2)
    relations = r.sample(RELATIONS, n_people)
    descriptors = r.sample(DESCRIPTORS, n_people)
    surnames, firsts = {last}, {first}
    self.cast: List[Entity] = []
    for k in range(n_people):
      female = r.random() < 0.5
      pf, pl = names.take(r, lambda g, f=female: (g.choice(FEMALE if f else MALE),
                                                  g.choice(SURNAMES)),
                          avoid=surnames | firsts)
      surnames.add(pl)
      firsts.add(pf)
      self.cast.append(Entity(f"{pf} {pl}", "person", {
          "relation": relations[k][1 if female else 0], "occupation": occupations[k + 1],
          "descriptor": descriptors[k]}, surname=pl, female=female))
    kinds, regions = r.sample(PLACE_KINDS, n_places), r.sample(PLACE_REGIONS, n_places)
    roles = [PLACE_ROLES[0]] + r.sample(PLACE_ROLES[1:], n_places - 1)  # the first: birthplace
    self.places = []
    for k in range(n_places):
      (name,) = names.take(r, lambda g: (g.choice(PLACE_HEADS) + g.choice(PLACE_TAILS),),
                           avoid=SURNAME_SET)  # "Dun" + "more" is a surname too
      self.places.append(Entity(name, "place", {"kind": kinds[k], "region": regions[k],
                                                "role": roles[k].format(**self.pro)}))
    self.cast += self.places
    odesc, oroles = r.sample(ORG_DESCRIPTORS, n_orgs), r.sample(ORG_ROLES, n_orgs)
    for k in range(n_orgs):
      prefix, kind = names.take(r, lambda g: (g.choice(SURNAMES), g.choice(ORG_KINDS)),
                                avoid=surnames)
      org = Entity(f"{prefix} {kind}", "org", {"descriptor": odesc[k],
                                                "role": oroles[k].format(**self.pro)})
      org.location = self.places[k % n_places]
      org.cues["location"] = org.location.title
      self.cast.append(org)
    self.recent: List[Entity] = []

  # -- phrases -------------------------------------------------------------------------------

  def fill(self, text: str) -> str:
    r = self.rng
    return text.format(year=self.year, topic=r.choice(TOPICS), **self.pro)

  @property
  def year(self) -> int:
    return int(self.t)

  def advance(self) -> None:
    self.t = min(float(self.died), self.t + self.step * self.rng.uniform(0.0, 2.0))

  def link(self, e: Entity) -> str:
    e.mentions += 1
    if e.kind == "person" and e.mentions > 1 and self.rng.random() < 0.4:
      return f"[[{e.title}|{e.surname}]]"
    return f"[[{e.title}]]"

  def subject_name(self) -> str:
    self.subject.mentions += 1
    return self.subject.title

  # -- sentences -----------------------------------------------------------------------------

  def pick(self) -> Entity:
    """A cast member not among the last three mentioned, the least mentioned most likely."""
    r = self.rng
    free = [e for e in self.cast if e not in self.recent[-3:]] or self.cast
    weights = [1.0 / (1 + e.mentions) ** 3 for e in free]
    e = r.choices(free, weights=weights, k=1)[0]
    self.recent.append(e)
    return e

  def person_sentence(self, e: Entity) -> str:
    r, c = self.rng, e.cues
    n = self.link(e)
    ev = self.fill(r.choice(PERSON_EVENTS))
    rel, occ, desc = c["relation"], c["occupation"], c["descriptor"]
    a_occ = f"{_article(occ)} {occ}"
    pair = r.choice(("rel_occ", "occ_desc", "rel_desc"))
    his, he, His = self.pro["his"], self.pro["he"], self.pro["His"]
    y = self.year
    options = {
        "rel_occ": [f"In {y} {he} met {his} {rel}, the {occ} {n}, who {ev}.",
                    f"{His} {rel} {n}, {a_occ} by trade, {ev}.",
                    f"It was {his} {rel} {n}, then working as {a_occ}, who {ev}.",
                    f"{n}, {his} {rel} and {a_occ} of some reputation, {ev} in {y}."],
        "occ_desc": [f"The {occ} {n}, {desc}, {ev} in {y}.",
                     f"{n}, {desc} who worked as {a_occ}, {ev}.",
                     f"In {y} {a_occ} named {n}, {desc}, {ev}.",
                     f"Among {his} acquaintances was the {occ} {n}, {desc}, who {ev}."],
        "rel_desc": [f"{His} {rel} {n}, {desc}, {ev}.",
                     f"{self.pro['He']} was close to {his} {rel} {n}, {desc}, who {ev}.",
                     f"According to later accounts, {his} {rel}, {n}, {desc}, {ev}.",
                     f"In {y} {his} {rel} {n} ({desc}) {ev}."]}
    return r.choice(options[pair])

  def place_sentence(self, e: Entity) -> str:
    r, c = self.rng, e.cues
    n = self.link(e)
    kind, region, role = c["kind"], c["region"], c["role"]
    ev = self.fill(r.choice(PLACE_EVENTS))
    he, y = self.pro["he"], self.year
    pair = r.choice(("kind_region", "kind_role", "region_role"))
    options = {
        "kind_region": [f"In {y} {he} went to {n}, {_article(kind)} {kind} {region}.",
                        f"{n}, {_article(kind)} {kind} {region}, {ev}."],
        "kind_role": [f"{n}, the {kind} {role}, {ev}.",
                      f"{self.pro['He']} often wrote about {n}, the {kind} {role}."],
        "region_role": [f"{n} {region}, {role}, {ev}.",
                        f"In {y} {he} was back in {n} {region}, {role}."]}
    return r.choice(options[pair])

  def org_sentence(self, e: Entity) -> str:
    r, c = self.rng, e.cues
    n = self.link(e)
    desc, role = c["descriptor"], c["role"]
    ev = self.fill(r.choice(ORG_EVENTS))
    y = self.year
    pair = r.choice(("desc_role", "desc_loc", "role_loc"))
    if pair == "desc_role":
      return r.choice([f"The {n}, {desc}, {role} in {y}.",
                       f"In {y} the {n}, {desc}, {role}."])
    place = self.link(e.location)
    if pair == "desc_loc":
      return r.choice([f"The {n} in {place}, {desc}, {ev}.",
                       f"{self.pro['He']} visited the {n} in {place}, {desc}, in {y}."])
    return r.choice([f"The {n} in {place} {role} in {y}.",
                     f"In {y} the {n} of {place} {role}."])

  def subject_sentence(self) -> str:
    r = self.rng
    name, occ = self.subject_name(), self.subject.cues["occupation"]
    ev = self.fill(r.choice(SUBJECT_EVENTS))
    return r.choice([f"In {self.year} {name} {ev}.", f"As {_article(occ)} {occ}, {name} {ev}.",
                     f"{name} {ev} around {self.year}."])

  def filler_sentence(self) -> str:
    r = self.rng
    if r.random() < 0.5:
      return self.fill(r.choice(FILLER))
    return self.fill(f"In {{year}} {{he}} {r.choice(SUBJECT_EVENTS)}.")

  def sentence(self, subject: bool = False) -> str:
    """A sentence: about the subject by name if ``subject``, else 55% about a cast member, 6%
    about the subject by name, the rest filler (the subject as "he"/"she", or none)."""
    r = self.rng
    x = r.random()
    if subject or 0.55 <= x < 0.61:
      s = self.subject_sentence()
    elif x < 0.55:
      e = self.pick()
      s = {"person": self.person_sentence, "place": self.place_sentence,
           "org": self.org_sentence}[e.kind](e)
    else:
      s = self.filler_sentence()
    self.advance()
    if r.random() < 0.06:
      s += (f"<ref>{{{{cite book|title={r.choice(TOPICS).capitalize()}|year="
            f"{self.year + r.randint(1, 90)}}}}}</ref>")
    return s[0].upper() + s[1:]

  # -- the page ------------------------------------------------------------------------------

  def page(self, target_words: int) -> Doc:
    r, s = self.rng, self.subject
    occ = s.cues["occupation"]
    birthplace = self.places[0]
    birthplace.mentions += 1
    lead = [f"'''{s.title}''' ({self.born}–{self.died}) was {_article(occ)} {occ} from "
            f"[[{birthplace.title}]]."]
    s.mentions += 1
    parts = [f"{{{{Infobox person\n| name = {s.title}\n| birth_date = {{{{birth date|"
             f"{self.born}|{r.randint(1, 12)}|{r.randint(1, 28)}}}}}\n| birth_place = "
             f"[[{birthplace.title}]]\n| occupation = {occ}\n}}}}"]
    words = len(lead[0].split())
    for _ in range(r.randint(2, 3)):
      self.t = float(r.randint(self.born + 15, self.died))
      lead.append(self.sentence())
    parts.append(" ".join(lead))
    words += sum(len(x.split()) for x in lead[1:])
    sections = [("Early life", 0.2, (self.born, self.born + 20)),
                ("Career", 0.45, (self.born + 20, self.born + 50)),
                ("Later life", 0.25, (self.born + 50, self.died - 2)),
                ("Legacy", 0.1, (self.died - 2, self.died))]
    self.t = float(self.born)
    for name, share, (y0, y1) in sections:
      parts.append(f"== {name} ==")
      budget = max(30, int(target_words * share))
      self.t = float(max(self.year, y0))
      self.step = max(0.0, y1 - self.t) / max(1.0, budget / 14)
      paragraph: List[str] = []
      used = 0
      while used < budget:
        # A section opens on the subject by name (the lead's bold title is not the only one).
        sent = self.sentence(subject=not paragraph and used == 0 and name != "Legacy")
        paragraph.append(sent)
        used += len(sent.split())
        if len(paragraph) >= r.randint(4, 7):
          parts.append(" ".join(paragraph))
          paragraph = []
      if paragraph:
        parts.append(" ".join(paragraph))
      words += used
    parts.append("== References ==\n{{Reflist}}")
    parts.append("\n".join(f"[[Category:{c}]]" for c in (f"{occ.capitalize()}s",
                                                          f"{self.born} births",
                                                          f"{self.died} deaths")))
    return Doc(self.page_id, s.title, "\n\n".join(parts) + "\n", s, self.cast)


def generate(split: str, num_docs: int, seed: int, names: _Names, min_words: int = 450,
             max_words: int = 1100) -> List[Doc]:
  """``num_docs`` biographies of ``split``, deterministic for (seed, split, index) and the names
  ``names`` already holds (which they extend)."""
  docs = []
  for i in range(num_docs):
    rng = random.Random(f"memory-corpus:{seed}:{split}:{i}")
    w = _Writer(rng, names, _FIRST_PAGE_ID[split] + i)
    docs.append(w.page(rng.randint(min_words, max_words)))
  return docs


def generate_corpus(seed: int = 0, train_docs: int = 600, heldout_docs: int = 100,
                    min_words: int = 450, max_words: int = 1100) -> Dict[str, List[Doc]]:
  """Held-out documents first (so they do not depend on ``train_docs``), then training ones;
  no surface name is shared between any two entities of the corpus."""
  if min(train_docs, heldout_docs) < 1:
    raise ValueError("train_docs and heldout_docs must be >= 1")
  if not 50 <= min_words <= max_words:
    raise ValueError(f"need 50 <= min_words <= max_words, got {min_words}, {max_words}")
  names = _Names()
  heldout = generate("heldout", heldout_docs, seed, names, min_words, max_words)
  train = generate("train", train_docs, seed, names, min_words, max_words)
  return {"train": train, "heldout": heldout}


def write_split(docs: Sequence[Doc], dump_path: str, cast_path: str) -> None:
  synth.write_dump((synth.PageSpec(d.title, d.wikitext, page_id=d.page_id) for d in docs),
                   dump_path)
  with open(cast_path, "w", encoding="utf-8") as f:
    for d in docs:
      f.write(json.dumps(d.cast_record(), sort_keys=True) + "\n")


def dump_bytes(path: str) -> bytes:
  """The uncompressed XML of a dump (for comparisons)."""
  with bz2.open(path, "rb") as f:
    return f.read()
