r"""The data half of the memory-use check: generated biographies whose hyperlinked entities
recur across the segments of each document, written as MediaWiki dumps and turned into
pretraining records by the real ``pipelines.wikipedia`` job, train and held-out.

  python benchmarks/memory_corpus.py --out_dir /tmp/memcorpus [--seed 0] [--train_docs 600]
      [--heldout_docs 100] [--seq_length 128] [--segments_per_pack 16] [--no_samples]

What a later step does with it: pretrain a tiny ReadTwice(E) and its E(SS) ablation (each
segment reads only its own memories) on ``train/`` and compare masked-LM accuracy on the tokens
of masked entity mentions in ``heldout/``.

Design (why the entity tokens are a test of reading OTHER segments' memories):

* Every document is a Wikipedia-style biography of a fictional person (lead, Early life,
  Career, Later life, Legacy; an infobox, refs and categories that the job's cleaning removes).
  Its cast is 5-7 people, 2-3 places and 1-2 organisations, each linked on every mention
  (``[[Full Name]]``, ``[[Full Name|Surname]]``, ``[[Kelbury]]``, the ``[[Dunmore Foundry]]``);
  the subject is mentioned by its full name (a self mention of the page title).
* Names are drawn per document from shared pools (English first names x surnames, place-name
  parts, surname + kind for organisations) and every surface name is used by ONE entity of the
  whole corpus: held-out documents are about new entities (no held-out entity's name is the
  name of a training entity; the first names, surnames and name parts are shared, as they must
  be for a model to produce them), so names cannot be memorised, only read from the document.
* Each entity has three cues that are unique within its document and random across documents:
  a person's relation to the subject ("his mentor"), occupation ("the engraver") and a
  descriptor ("a former sailor"); a place's kind, region and role in the subject's life ("where
  he was born"); an organisation's descriptor, role ("which published his first pamphlet") and
  location (a linked place).  Every mention sentence carries two of the three, so any two
  mentions of an entity share at least one cue, and the cue identifies the entity within its
  document but says nothing about its name (the cue-name pairing is random per document).
* Sentences that mention a cast member pick one not mentioned in the previous three such
  sentences (least mentioned first), so an entity recurs across the document (~3-5 mentions,
  in different segments) but rarely twice in one 128-token segment.

So when every mention of an entity in a segment is masked (whole-entity masking), the segment
itself holds the cue but not the name: E(SS) can only guess from name priors (frequent first
names and surnames, the kind word of an organisation, a gendered first name after "his
wife"), while ReadTwice(E) can match the cue against the memories of the entity's unmasked
mentions in other segments, whose first-read states hold both the cue context and the name.
Nothing is hidden from the real model or given only to E: both read the same records; the
entity ids only drive masking and the coreference loss.  Segments do not overlap (``--overlap
0``): with overlap a mention masked in one segment would sit unmasked in its neighbour.  With
per-mention (not whole-entity) masking SS can copy a second, unmasked mention of the same
entity in the segment: the stats report how often that can happen (``same_segment_repeat``,
~15%, two thirds of it the subject, whose name opens every section).

Outputs under ``--out_dir``: ``dumps/`` (the two dumps and ``cast-<split>.jsonl``, each
document's entities with their cues), ``train/`` and ``heldout/`` (pipeline output dirs), and,
when the shared samples exist, ``real_wikipedia/`` (the real enwiki excerpts, as they are) and
``real_books/`` (the PG-19 samples with ``--ner spacy --linker alias`` against
``real_wikipedia/``'s alias table, offline with ``blank:en``): natural text a trainer may mix
in.  ``corpus.json`` holds what :func:`build` returns; the last stdout line is one JSON object
(build seconds as ``value``, the main counts beside it).
"""

from __future__ import annotations

import argparse
import bz2
import collections
import glob
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from demo import synthetic_wikipedia as synth  # noqa: E402

DEFAULT_SAMPLES = os.path.join(ROOT, "..", "shared", "samples")
SPLITS = ("train", "heldout")
# Page ids: held-out documents 1_000_001..., training documents 1...
_FIRST_PAGE_ID = {"train": 1, "heldout": 1_000_001}

# --- name pools ------------------------------------------------------------------------------

MALE = """James John Robert William Thomas Charles George Henry Edward Arthur Walter Albert
Frederick Harold Samuel Daniel Joseph Peter Richard Francis Hugh Martin Simon Philip Victor Oscar
Felix Julian Leonard Lewis Alfred Ernest Edwin Ralph Roger Gilbert Herbert Howard Stephen Andrew
Matthew Nathan Oliver Isaac Jacob Benjamin Adam David Paul Mark Anthony Vincent Lawrence Edgar
Rupert Cecil Percy Horace Wilfred Ambrose Bernard Clement Conrad Dominic Emil Gordon Ivan Jasper
Magnus Miles Neville Owen Patrick Quentin Rufus Silas Tobias Warren Alan Basil Colin Dennis Eric
Frank Gerald Jack Kenneth""".split()
FEMALE = """Mary Anne Elizabeth Margaret Alice Emily Charlotte Harriet Catherine Eleanor Florence
Grace Helen Isabel Jane Julia Louisa Lucy Martha Matilda Rose Sarah Sophia Victoria Agnes Beatrice
Clara Dorothy Edith Ellen Emma Frances Hannah Ida Irene Laura Lydia Mabel Maud Nora Olive Phoebe
Rachel Ruth Susan Violet Winifred Adelaide Amelia Caroline Cecily Constance Esther Evelyn Hester
Jessie Josephine Leonora Marian Millicent Miriam Rosalind Sybil Theodora Ursula Vera Zoe Ada Bertha
Cora Flora Greta Hazel Iris Lillian Joan Kate Nancy Paula Sylvia""".split()
SURNAMES = """Abbott Ainsworth Aldridge Archer Ashby Atkins Bagley Bailey Barlow Barnes Barrett
Baxter Beckett Bennett Bishop Blackwood Bolton Bowen Bradley Bramley Brewer Briggs Brooks Bryant
Buckley Burgess Burton Butler Calder Carver Chambers Chandler Chapman Clayton Cole Collins Conway
Cooper Corbett Cox Crane Crawford Cross Dalton Davies Dawson Dean Dixon Doyle Drake Dudley Dunmore
Durham Eastman Ellis Elliott Emerson Fairfax Farley Faulkner Fenton Fielding Fisher Fleming Fletcher
Ford Forster Fowler Foster Franklin Fraser Garrett Gibbs Gilbert Goddard Gordon Graham Granger
Greaves Gregory Griffin Hale Hall Hammond Harding Harper Harris Hartley Hastings Hawkins Hayes
Heath Henderson Hewitt Hill Hobbs Holden Holland Holt Hopkins Howell Hudson Hughes Hunt Hurst
Ingram Irving Jarvis Jenkins Jennings Kemp Kendall Kent Kerr Knight Lambert Lane Lawson Leach Lester
Lewis Lindsay Lloyd Lowe Lucas Lyons Mallory Manning Marsh Marshall Mason Matthews Maxwell Mercer
Merritt Miles Mills Milton Mitchell Moore Morgan Morley Morris Morton Murray Nash Neal Newman
Newton Nichols Norris Norton Oakley Osborne Owens Palmer Parker Parsons Payne Pearce Pearson
Pemberton Perkins Phelps Pierce Porter Potter Pratt Preston Price Quinn Radcliffe Ramsey Randall
Rawlings Read Reeves Reynolds Rhodes Richards Rivers Roberts Robinson Rowe Russell Salter Sanders
Saunders Sawyer Sellers Sharp Shaw Shelby Shepherd Sherwood Simmons Slater Spencer Stafford Stanley
Steele Stevens Stone Stratton Sutton Swift Talbot Tanner Taylor Thornton Tucker Turner Underwood
Vaughan Vernon Wade Walker Wallace Walsh Ward Warner Watkins Watson Weaver Webb Webster Wells
Wheeler Whitaker Whitmore Wilkins Willis Winslow Wood Woodward Wright Wyatt Yates Young""".split()
PLACE_HEADS = """Ash Bram Carl Dun Elm Fal Glen Hart Ips Kel Lang Mar Nor Oak Pen Rad Sel Thorn
Ver Wal Yar Ald Brack Cald Dray Fern Gos Hol Kings Lind Mill Ned Ox Pol Rook Stan Tal Wex Wyn Bex
Cor Dart Eg From Grant Hay Ick Lan Mor Nant Ort Pres Rich Shap Tod Ux Wem Amble Bel Clay Dover Ever
Fox Gil Hals Kes Lea Marl New Orm Pad Red Sand Tam Wick Bar Crow Dal Ely Fair Gold Haver Kir Lox
Mal North Pit Rams Silver Strat Tew Whit Wool Ayles Black Chal""".split()
PLACE_TAILS = """ford bury wick ham ton mouth field stead by well brook combe hurst ley dale minster
worth chester port haven bridge gate holm thorpe water moor cliff stow marsh wood borough den ness
wold more fell ridge vale mere""".split()
_SURNAME_SET = frozenset(SURNAMES)
ORG_KINDS = """Academy Foundry Gazette Bank Society Company Observatory Hospital Press Shipyard
Theatre Library College Mill Brewery Museum Orchestra Institute""".split()

# --- cue pools (each value used by at most one entity of a document) --------------------------

RELATIONS = [("mentor", "mentor"), ("rival", "rival"), ("patron", "patron"),
             ("apprentice", "apprentice"), ("business partner", "business partner"),
             ("closest friend", "closest friend"), ("neighbour", "neighbour"),
             ("landlord", "landlady"), ("benefactor", "benefactor"),
             ("correspondent", "correspondent"), ("travelling companion", "travelling companion"),
             ("brother-in-law", "sister-in-law"), ("nephew", "niece"), ("cousin", "cousin"),
             ("godfather", "godmother"), ("guardian", "guardian"), ("employer", "employer"),
             ("creditor", "creditor"), ("biographer", "biographer"), ("husband", "wife"),
             ("former pupil", "former pupil"), ("old schoolfellow", "old schoolfellow")]
OCCUPATIONS = """engraver shipwright cartographer printer bookbinder clockmaker surveyor apothecary
glassblower stonemason architect physician lawyer banker merchant organist painter sculptor botanist
astronomer chemist schoolmaster magistrate editor engineer silversmith weaver brewer locksmith
bookseller photographer translator composer playwright novelist poet carpenter tanner vintner
pharmacist geologist librarian mathematician jeweller auctioneer""".split()
DESCRIPTORS = [
    "a former sailor", "a veteran of the coastal wars", "a devout Quaker", "a notorious gambler",
    "a keen amateur astronomer", "an early supporter of the railway", "a collector of old maps",
    "a native of the eastern provinces", "the youngest of eleven children",
    "a gifted chess player", "an outspoken reformer", "a skilled violinist", "a former soldier",
    "a tireless letter writer", "a lifelong teetotaller", "a convert to Catholicism",
    "a survivor of the great fire", "a member of the town council", "a passionate gardener",
    "a heavy drinker", "a famously poor speller", "a founder of the local choir",
    "an avid angler", "a refugee from the southern wars", "a celebrated wit",
    "a former actor", "a noted beekeeper", "a skilled horse rider", "a friend of the governor",
    "a stern Methodist", "a distant relation of the bishop", "a champion rower",
    "a collector of fossils", "a self-taught linguist", "an amateur boxer",
    "a famously generous host", "a former smuggler", "an expert on old coins",
    "a habitual debtor", "a retired ship's captain"]
PLACE_KINDS = ["harbour town", "market town", "mill town", "cathedral city", "mining village",
               "river port", "garrison town", "spa town", "fishing village", "university town",
               "county town", "wool town", "hill village", "border town", "canal town"]
PLACE_REGIONS = ["on the northern coast", "in the eastern hills", "near the border",
                 "on the southern plain", "in the lake country", "at the mouth of the river",
                 "in the western valleys", "on the edge of the moors", "by the old canal",
                 "beneath the chalk downs", "in the fen country", "on the island's east shore"]
PLACE_ROLES = ["where {he} was born", "where {he} went to school",
               "where {he} opened {his} first workshop", "where {he} spent {his} last years",
               "where {he} was married", "where {his} family had long owned land",
               "where {he} first found work", "where {he} was briefly imprisoned",
               "where {he} is buried", "where {he} gave {his} first lecture"]
ORG_DESCRIPTORS = ["founded by local merchants", "the oldest of its kind in the province",
                   "rebuilt twice after fires", "funded by a wealthy widow",
                   "run for decades by a single family", "famous for its annual prize",
                   "housed in a former monastery", "notorious for its debts",
                   "admired across the country", "set up by a group of exiles"]
ORG_ROLES = ["first employed {him}", "published {his} first pamphlet", "elected {him} to its board",
             "awarded {him} a silver medal", "rejected {his} early application",
             "commissioned {his} most famous work", "paid for {his} journey abroad",
             "dismissed {him} after a quarrel", "trained {him} in {his} youth",
             "bought the rights to {his} designs"]

# --- event and filler pools ------------------------------------------------------------------

PERSON_EVENTS = [
    "lent {him} the money for {his} first workshop", "introduced {him} to the guild",
    "quarrelled with {him} over a debt", "taught {him} to read music",
    "sailed with {him} to the southern islands", "nursed {him} through a long fever",
    "bought several of {his} early works", "wrote to {him} almost every week",
    "persuaded {him} to move to the capital", "witnessed {his} first contract",
    "opposed {his} election to the council", "shared {his} lodgings for three years",
    "accompanied {him} on a survey of the coast", "sued {him} over a broken agreement",
    "helped {him} finish {his} first book", "warned {him} against the new venture",
    "later edited {his} letters", "settled {his} debts without telling {him}",
    "painted a portrait of {him}", "took over {his} business for a time",
    "spread rumours about {his} finances", "found {him} a post at the harbour office",
    "introduced {him} to {his} future publisher", "left {him} a small legacy",
    "travelled with {him} to the northern fairs", "stood by {him} during the trial",
    "drew up the plans for {his} new house", "never forgave {him} for the lawsuit",
    "kept a diary of their years together", "challenged {his} claims in print"]
PLACE_EVENTS = ["was badly damaged by floods in {year}", "grew quickly after the railway arrived",
                "held a large fair every autumn", "lost much of its trade to the capital",
                "suffered an outbreak of cholera in {year}", "was famous for its lace",
                "had a population of a few thousand at the time", "gained a new town hall in {year}",
                "was linked to the capital by a new road in {year}",
                "remained important to {him} throughout {his} life"]
ORG_EVENTS = ["closed for two years after a fire", "moved to larger premises in {year}",
              "was sold to new owners in {year}", "doubled in size within a decade",
              "struggled to pay its workers that winter", "opened a branch in the capital",
              "lost its royal charter in {year}", "was taken over by a rival in {year}"]
SUBJECT_EVENTS = [
    "took on {his} first apprentice", "fell seriously ill and stopped working for a year",
    "travelled abroad for the first time", "published a short treatise on {topic}",
    "was elected to the town council", "lost most of {his} savings in a bank failure",
    "began keeping a detailed diary", "moved into a larger house near the market",
    "gave a series of public lectures on {topic}", "received {his} first major commission",
    "was briefly arrested after a dispute with a customer", "started a small evening school",
    "turned down an offer of a post abroad", "spent several months studying {topic}",
    "won a prize for an essay on {topic}", "was injured in a carriage accident",
    "bought a share in a merchant ship", "began corresponding with scholars abroad"]
TOPICS = ["river navigation", "the measurement of time", "coastal erosion", "the printing of maps",
          "the chemistry of dyes", "church bells", "the drainage of marshes", "local folk songs",
          "the care of orchards", "the history of the guilds", "weights and measures",
          "the design of lighthouses", "the breeding of sheep", "winter storms"]
FILLER = [
    "That year the harvest failed across much of the province.",
    "Trade along the river slowed during the long winter of {year}.",
    "Prices for grain and timber rose sharply after {year}.",
    "The old wooden bridge was rebuilt in stone around this time.",
    "Few of {his} letters from this period survive.",
    "The work was slow, and payment often came months late.",
    "Contemporary reports describe {him} as quiet but stubborn.",
    "By {year} {he} was well known in the district.",
    "Little is known about {his} life in these years.",
    "The country was then in the middle of a long economic depression.",
    "{He} worked long hours and rarely took a day of rest.",
    "A new road made travel between the towns much easier.",
    "The winter of {year} was remembered as one of the coldest of the century.",
    "{His} income during these years was modest but steady.",
    "Several of {his} notebooks from these years are now in a private collection.",
    "The arrival of the telegraph changed the pace of business.",
    "{He} later described this as the happiest time of {his} life.",
    "Storms in {year} wrecked several ships along the coast."]


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
                           avoid=_SURNAME_SET)  # "Dun" + "more" is a surname too
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


# --- pipelines -------------------------------------------------------------------------------

def _record_args(seq_length: int, segments_per_pack: int, overwrite: bool) -> List[str]:
  return ["--seq_length", str(seq_length), "--overlap", "0",
          "--max_segments_per_document", str(segments_per_pack),
          "--segments_per_pack", str(segments_per_pack),
          "--max_question_tokens", str(min(8, seq_length // 4))] + (
              ["--overwrite"] if overwrite else [])


class _Job:
  """One ``python -m pipelines.<job>`` subprocess (output to a log file), started once the jobs
  named in ``after`` have finished."""

  def __init__(self, name: str, module: str, args: Sequence[str], log: str,
               after: Sequence[str] = ()):
    self.name, self.module, self.args, self.log, self.after = name, module, args, log, after
    self.proc: Optional[subprocess.Popen] = None
    self.seconds: Optional[float] = None

  def start(self) -> None:
    self.t0 = time.perf_counter()
    self.f = open(self.log, "w", encoding="utf-8")
    self.proc = subprocess.Popen([sys.executable, "-m", self.module, *self.args], cwd=ROOT,
                                 stdout=self.f, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))

  def poll(self) -> bool:
    """Whether it has finished; raises RuntimeError (with the log's tail) if it failed."""
    rc = self.proc.poll()
    if rc is None:
      return False
    self.seconds = round(time.perf_counter() - self.t0, 2)
    self.f.close()
    if rc:
      with open(self.log, encoding="utf-8") as f:
        tail = f.read()[-3000:]
      raise RuntimeError(f"{self.name}: pipeline exited with {rc}; log {self.log}:\n{tail}")
    return True


def run_jobs(jobs: Sequence[_Job], parallel: int = 2) -> Dict[str, float]:
  """Runs ``jobs`` at most ``parallel`` at a time, each after its ``after`` jobs, in list order;
  returns each job's seconds.  A failure kills the jobs still running and raises."""
  pending, running, done = list(jobs), [], {}
  try:
    while pending or running:
      for job in [j for j in running if j.poll()]:
        running.remove(job)
        done[job.name] = job.seconds
      for job in list(pending):
        if len(running) < parallel and all(a in done for a in job.after):
          pending.remove(job)
          job.start()
          running.append(job)
      time.sleep(0.05)
  finally:
    for job in running:
      if job.proc.poll() is None:
        job.proc.kill()
        job.proc.wait()
      job.f.close()
  return done


def _read_manifest(out: str) -> Dict[str, Any]:
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return json.load(f)


def iter_packs(out: str) -> Iterator[Dict[str, List]]:
  """Every record (pack) of a pipeline output dir, decoded without TensorFlow."""
  from schemas import example_proto, tfrecord_io  # pylint: disable=g-import-not-at-top
  m = _read_manifest(out)
  compression = tfrecord_io.manifest_compression(m)
  for shard in m["shards"]:
    for data in tfrecord_io.read_records(os.path.join(out, shard["path"]), compression):
      yield example_proto.decode_example(data)


def record_stats(out: str) -> Dict[str, Any]:
  """What the records hold for the memory check: mentions per document, entities recurring in
  several segments, the share of context tokens inside mentions, mentions per pack."""
  segs_of = collections.defaultdict(lambda: collections.defaultdict(set))  # doc -> id -> segs
  mentions_doc = collections.Counter()
  pair_count = collections.Counter()  # (doc, segment, entity) -> mentions
  context = mention_tokens = known = total = packs = 0
  max_per_pack = 0
  for r in iter_packs(out):
    packs += 1
    n = len(r["segment_mask"])
    L = len(r["token_ids"]) // n
    kinds = r["token_kind"]
    context += sum(1 for k in kinds if k == 3)
    covered = set()
    max_per_pack = max(max_per_pack, len(r["mention_segment"]))
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc = (r["document_id"][s], r["sub_document_index"][s])
      seg = r["segment_index"][s]
      total += 1
      mentions_doc[doc] += 1
      covered.update(s * L + t for t in range(b, e + 1))
      if ent:
        known += 1
        segs_of[doc][ent].add(seg)
        pair_count[(doc, seg, ent)] += 1
    mention_tokens += len(covered)
  docs = len(mentions_doc)
  multi = sum(1 for d in segs_of.values() if any(len(s) >= 2 for s in d.values()))
  supported = repeat = 0
  for (doc, seg, ent), c in pair_count.items():
    if len(segs_of[doc][ent] - {seg}) > 0:
      supported += c
    if c > 1:
      repeat += c
  return {"packs": packs, "documents_with_mentions": docs, "mentions": total,
          "mentions_with_entity_id": known,
          "mentions_per_document": round(total / max(docs, 1), 2),
          "max_mentions_per_pack": max_per_pack,
          "mention_token_fraction": round(mention_tokens / max(context, 1), 4),
          "documents_with_entity_in_2plus_segments": round(multi / max(docs, 1), 4),
          "cross_segment_support": round(supported / max(known, 1), 4),
          "same_segment_repeat": round(repeat / max(known, 1), 4),
          "mean_segments_per_entity": round(
              sum(len(s) for d in segs_of.values() for s in d.values())
              / max(sum(len(d) for d in segs_of.values()), 1), 3)}


def split_stats(out: str) -> Dict[str, Any]:
  """Counts from a pipeline output dir's manifest plus :func:`record_stats`."""
  m = _read_manifest(out)
  c, seg = m["counts"], m["stages"]["segment"]
  spd = m["distributions"]["segments_per_document"]
  stats = {"output_dir": out, "counts": c,
           "reconciles": c["input"] == c["written"] + c["skipped"] + c["rejected"],
           "documents": c["written"], "segments": m["examples"]["segments"],
           "sub_documents": m["examples"]["sub_documents"],
           "segments_per_document": {k: spd[k] for k in ("min", "mean", "max")},
           "context_tokens": seg["context_tokens"], "mentions_parsed": m["stages"]["parse"].get(
               "mentions", 0), "mentions_placed": seg["mentions_labels"],
           "mentions_lost": seg["mentions_lost"], "mentions_cut": seg["mentions_cut"],
           "entity_vocabulary": m["stages"].get("entities", {}).get("vocabulary")}
  stats.update(record_stats(out))
  return stats


def _samples(samples_dir: Optional[str]) -> Tuple[List[str], List[str]]:
  if not samples_dir or not os.path.isdir(samples_dir):
    return [], []
  wiki = sorted(glob.glob(os.path.join(samples_dir, "wikipedia", "*.xml.bz2")))
  books = sorted(glob.glob(os.path.join(samples_dir, "books", "pg19", "*", "*.txt")))
  return wiki, books


def build(out_dir: str, seed: int = 0, train_docs: int = 600, heldout_docs: int = 100,
          seq_length: int = 128, segments_per_pack: int = 16, min_words: int = 450,
          max_words: int = 1100, include_samples: bool = True,
          samples_dir: Optional[str] = DEFAULT_SAMPLES, overwrite: bool = False,
          parallel: int = 2) -> Dict[str, Any]:
  """Generates the corpus, writes the dumps and runs the pipelines; returns (and writes to
  ``<out_dir>/corpus.json``) paths, counts and timings.

  ``out_dir`` gets ``dumps/``, ``train/``, ``heldout/`` and, when ``include_samples`` and the
  samples exist under ``samples_dir``, ``real_wikipedia/`` and ``real_books/``.  Segments of
  ``seq_length`` tokens without overlap, packs of ``segments_per_pack`` segments, documents of
  at most ``segments_per_pack`` segments (longer ones become sub-documents).  An ``out_dir``
  holding an earlier build is refused (FileExistsError, nothing written) unless ``overwrite``.  At most
  ``parallel`` pipeline processes run at once (the training one beside the others).  Raises
  RuntimeError (with the log's tail) when a pipeline fails.
  """
  t_start = time.perf_counter()
  earlier = [d for d in SPLITS + ("real_wikipedia", "real_books")
             if os.path.exists(os.path.join(out_dir, d, "manifest.json"))]
  if earlier and not overwrite:
    raise FileExistsError(f"{out_dir} holds an earlier build ({', '.join(earlier)}); pass "
                          "overwrite=True (--overwrite) to replace it")
  dumps = os.path.join(out_dir, "dumps")
  logs = os.path.join(out_dir, "logs")
  os.makedirs(dumps, exist_ok=True)
  os.makedirs(logs, exist_ok=True)
  corpus = generate_corpus(seed, train_docs, heldout_docs, min_words, max_words)
  paths = {}
  for split in SPLITS:
    paths[split] = os.path.join(dumps, f"memcorpus-{split}-pages-articles.xml.bz2")
    write_split(corpus[split], paths[split], os.path.join(dumps, f"cast-{split}.jsonl"))
  t_generated = time.perf_counter()
  rec = _record_args(seq_length, segments_per_pack, overwrite)
  wiki, books = _samples(samples_dir) if include_samples else ([], [])
  # The training job is the long one: it runs on one core, the rest one after another beside it.
  jobs = [_Job(split, "pipelines.wikipedia",
               ["--input", paths[split], "--output_dir", os.path.join(out_dir, split)] + rec,
               os.path.join(logs, f"{split}.log")) for split in SPLITS]
  real: Dict[str, Any] = {"wikipedia": None, "books": None}
  real_wiki = os.path.join(out_dir, "real_wikipedia")
  if wiki:
    jobs.append(_Job("real_wikipedia", "pipelines.wikipedia",
                     ["--input", ",".join(wiki), "--output_dir", real_wiki] + rec,
                     os.path.join(logs, "real_wikipedia.log"), after=["heldout"]))
  if books:
    ner = (["--ner", "spacy", "--linker", "alias", "--entities_dir", real_wiki,
            "--spacy_model", "blank:en", "--linker_min_count", "1"] if wiki else [])
    jobs.append(_Job("real_books", "pipelines.books",
                     ["--input", ",".join(books), "--output_dir",
                      os.path.join(out_dir, "real_books")] + rec + ner,
                     os.path.join(logs, "real_books.log"),
                     after=["real_wikipedia"] if wiki else ["heldout"]))
  timings = {"generate_and_write_dumps": round(t_generated - t_start, 2)}
  t_jobs = time.perf_counter()
  timings.update(run_jobs(jobs, parallel))
  timings["pipelines_wall"] = round(time.perf_counter() - t_jobs, 2)
  for name in ("wikipedia", "books"):
    out = os.path.join(out_dir, f"real_{name}")
    if (wiki if name == "wikipedia" else books):
      m = _read_manifest(out)
      real[name] = {"output_dir": out, "counts": m["counts"],
                    "segments": m["examples"]["segments"],
                    "mentions_placed": m["stages"]["segment"]["mentions_labels"]}
  splits = {}
  for split in SPLITS:
    s = split_stats(os.path.join(out_dir, split))
    s["dump"] = paths[split]
    s["dump_bytes"] = os.path.getsize(paths[split])
    s["cast"] = os.path.join(dumps, f"cast-{split}.jsonl")
    s["generated_documents"] = len(corpus[split])
    splits[split] = s
  titles = {k: {e.title for d in v for e in [d.subject] + d.cast} for k, v in corpus.items()}
  timings["total"] = round(time.perf_counter() - t_start, 2)
  result = {"out_dir": out_dir, "seed": seed,
            "config": {"train_docs": train_docs, "heldout_docs": heldout_docs,
                       "seq_length": seq_length, "segments_per_pack": segments_per_pack,
                       "overlap": 0, "min_words": min_words, "max_words": max_words},
            "splits": splits, "real": real,
            "shared_entity_titles": len(titles["train"] & titles["heldout"]),
            "timings_s": timings}
  with open(os.path.join(out_dir, "corpus.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  return result


def dump_bytes(path: str) -> bytes:
  """The uncompressed XML of a dump (for comparisons)."""
  with bz2.open(path, "rb") as f:
    return f.read()


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--out_dir", required=True)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--train_docs", type=int, default=600)
  p.add_argument("--heldout_docs", type=int, default=100)
  p.add_argument("--seq_length", type=int, default=128)
  p.add_argument("--segments_per_pack", type=int, default=16)
  p.add_argument("--min_words", type=int, default=450)
  p.add_argument("--max_words", type=int, default=1100)
  p.add_argument("--samples_dir", default=DEFAULT_SAMPLES)
  p.add_argument("--no_samples", action="store_true",
                 help="do not run the shared real samples through the pipelines")
  p.add_argument("--overwrite", action="store_true")
  p.add_argument("--parallel", type=int, default=2, help="pipeline processes at once")
  a = p.parse_args(argv)
  try:
    r = build(a.out_dir, seed=a.seed, train_docs=a.train_docs, heldout_docs=a.heldout_docs,
              seq_length=a.seq_length, segments_per_pack=a.segments_per_pack,
              min_words=a.min_words, max_words=a.max_words, include_samples=not a.no_samples,
              samples_dir=a.samples_dir, overwrite=a.overwrite, parallel=max(1, a.parallel))
  except (ValueError, RuntimeError, FileExistsError) as e:
    print(f"memory_corpus: error: {e}", file=sys.stderr)
    return 1
  for split in SPLITS:
    s = r["splits"][split]
    print(f"{split:8s} {s['documents']:5d} docs  {s['segments']:6d} segments  {s['packs']:4d} "
          f"packs  {s['mentions']:6d} mentions ({s['mentions_per_document']:.1f}/doc, "
          f"{100 * s['mention_token_fraction']:.1f}% of tokens)  entity in >=2 segments: "
          f"{100 * s['documents_with_entity_in_2plus_segments']:.0f}% of docs  cross-segment "
          f"support {100 * s['cross_segment_support']:.0f}%  same-segment repeat "
          f"{100 * s['same_segment_repeat']:.0f}%")
  for name, v in r["real"].items():
    print(f"real_{name}: " + (f"{v['counts']['written']} docs, {v['segments']} segments, "
                              f"{v['mentions_placed']} mentions" if v else "skipped (no samples)"))
  print("timings (s): " + ", ".join(f"{k} {v}" for k, v in r["timings_s"].items()))
  figure = {"metric": "memory_corpus_build_seconds", "value": r["timings_s"]["total"],
            "target": 60, "unit": "s",
            **{f"{k}_{f}": r["splits"][k][f] for k in SPLITS
               for f in ("documents", "segments", "packs", "mentions",
                         "mentions_per_document", "mention_token_fraction",
                         "documents_with_entity_in_2plus_segments", "cross_segment_support")},
            "out_dir": a.out_dir}
  print(json.dumps(figure, sort_keys=True))
  return 0


if __name__ == "__main__":
  sys.exit(main())
