r"""Long-range QA documents (issue 16): a question that only information from ANOTHER segment
can answer, written as official HotpotQA JSON and turned into records by the real jobs.

  python -m demo.long_range_qa --out_dir /tmp/lrqa [--train_docs 600] [--dev_docs 150]
      [--seed 0] [--segments 6] [--distances 1,2,3,4] [--distractors 3] [--seq_length 128]

What a later step does with it: finetune tiny ReadTwice(E), its E(SS) ablation (each segment
reads only its own memories) and a plain encoder on ``records_train/`` and compare dev EM/F1
(``python -m model.evaluate --task hotpotqa --gold dev.json``) with the chance level.

Design.  A document holds M = distractors + 1 triples (book, author, birth city) of generated
names, each told by two facts of fixed form::

  <Book> was written by <Author>.        <Author> was born in <City>.

The question is ``Where was the author of <Book> born?`` for one triple (the target), answer
its city.  The HotpotQA job prefixes the question to every segment, so:

* a segment holding the target's birth fact sees ``<Author> was born in <City>`` beside other
  birth facts of the same form, and nothing in it says which author wrote the asked-about book:
  every author has a book fact and a birth fact, and the target's book fact lies in another
  segment, ``distance`` segments away (before or after, at random);
* the four kinds of local shortcut are closed: (1) no segment holds both a book fact and a
  birth fact, so a segment can never rule a birth fact out (had the target's book fact a
  distractor's birth fact beside it, or a distractor's book fact its own birth fact, that
  segment would know the city is wrong); (2) all triples are placed by the same random scheme
  (each with a distance drawn from ``distances`` and a random direction), the target being
  just the first, so the target's birth fact has the same distribution of segment, position in
  the segment and neighbours as any distractor's; (3) the answer string occurs exactly once in
  the context (in the target's birth fact), never in the question; (4) names are pseudo-words
  of syllables, each used by one entity of the whole corpus, train and dev names disjoint (by a
  hash of the name, whatever the seeds), so nothing can be memorised, only read.

So a reader that sees one segment at a time can only pick one of the M birth cities at random:
the chance level (EM = 1/M; F1 = the mean official token F1 of the M candidates, above 1/M
where multi-word cities share a word such as "Port").  Reading the target's book fact in one
segment and carrying "the author is X" to the segment of X's birth fact (ReadTwice's memories
of the mentions of X) answers it.

The rest of each segment is neutral filler: Zipf-distributed pseudo-words (each containing a
letter that names never use, so no filler word is a name) and English function words, in
paragraphs with neutral titles.  Facts are placed with the project's own tokenizer and
segmenter, not an estimate: each segment's context budget (``seq_length`` minus the question
prefix) is filled sentence by sentence, every fact wholly inside its intended window (and in
no other), and every document is checked with the real reader, tokenizer, answer labeller and
segmenter (:func:`fact_segments`) and rebuilt when a fact is cut or lands elsewhere.

Entity ids come from the real annotation stage: a MediaWiki dump holds one page per entity
(book, author, city) whose text links the other entities of its document by name
(``[[Nevo Thanmar]]``) without stating any relation (the dump must not leak the facts), so
``pipelines.wikipedia`` yields an entity vocabulary and alias table covering every name, and
the HotpotQA job with ``--ner spacy --spacy_model blank:en --linker alias`` labels each
mention in the records with its entity id.

Outputs under ``--out_dir``: ``train.json``, ``dev.json`` (official layout; ``dev.json`` is the
``--gold`` of ``model.evaluate``), ``docs-<split>.jsonl`` (per document: id, distance, fact
segments, candidates), ``chance.json``, ``wiki/`` (the dump), ``entities/`` (the Wikipedia
job's output), ``records_train/`` and ``records_dev/`` (the HotpotQA jobs' outputs), ``logs/``
and ``build.json`` (what :func:`build` returns).  The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import dataclasses
import json
import os
import random
import subprocess
import sys
import time
import zlib
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from model.evaluation import hotpotqa as hotpot_eval  # noqa: E402  (TF-free)
from pipelines.readers import hotpotqa as hotpot_reader  # noqa: E402
from pipelines.text import answers as answers_lib  # noqa: E402
from pipelines.text import segmenter as segmenter_lib  # noqa: E402
from pipelines.text.tokenizer import shared_tokenizer  # noqa: E402

SPLITS = ("train", "dev")
BOOK_FACT = "{book} was written by {author}."
BIRTH_FACT = "{author} was born in {city}."
QUESTION = "Where was the author of {book} born?"
DUMP_NAME = "lrqawiki-20240101-pages-articles.xml.bz2"

# --- names -----------------------------------------------------------------------------------

# Name syllables: onset + vowel + optional coda, from letters that filler words never use alone
# (every filler word holds one of _MARKERS, which no name holds).
_ONSETS = "b d f g k l m n p r s t v z".split()
_VOWELS = "a e i o u".split()
_CODAS = ["", "", "n", "r", "l", "s"]
_NAME_SYLLABLES = sorted({o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS})
_MARKERS = frozenset("chjwxyq")
# City forms: a bare name, or a name with a common word (so that F1 gives partial credit).
_CITY_FORMS = ["{}"] * 6 + ["Port {}", "{} Falls", "New {}", "{} Harbour", "Upper {}"]
_BOOK_FORMS = ["The {} {}"] * 3 + ["{} of {}"] * 2
_FUNCTION_WORDS = ("the of and a to is that for it with as on at from this which or an had "
                   "were its their these one also most").split()
_RESERVED = frozenset(w.lower() for w in _FUNCTION_WORDS + [
    "port", "falls", "new", "harbour", "upper", "the", "of", "was", "written", "by", "born",
    "in", "where", "author", "related", "entries", "novel", "writer", "town", "and"])
_SPLIT_SLOTS = {"train": 0, "dev": 1, "test": 2}
_NUM_SLOTS = 4


def split_slot(split: str) -> int:
  """The quarter of the name space a split draws from: a name core ``w`` belongs to the split
  whose slot is ``crc32(w) % 4`` (train 0, dev 1, test 2, any other split 3), so different
  splits never share a name whatever their seeds."""
  return _SPLIT_SLOTS.get(split, 3)


def name_slot(core: str) -> int:
  return zlib.crc32(core.lower().encode("utf-8")) % _NUM_SLOTS


class NamePool:
  """Unique capitalised pseudo-word name cores of one split (each handed out once)."""

  def __init__(self, split: str):
    self.slot = split_slot(split)
    self.used = set(_RESERVED)

  def core(self, rng: random.Random, syllables: Sequence[int] = (2, 2, 3)) -> str:
    while True:
      word = "".join(rng.choice(_NAME_SYLLABLES) for _ in range(rng.choice(syllables)))
      if word not in self.used and name_slot(word) == self.slot:
        self.used.add(word)
        return word.capitalize()

  def triple(self, rng: random.Random) -> Tuple[str, str, str]:
    book = rng.choice(_BOOK_FORMS).format(self.core(rng), self.core(rng))
    author = f"{self.core(rng, (2, 2, 3))} {self.core(rng, (2, 3, 3))}"
    city = rng.choice(_CITY_FORMS).format(self.core(rng))
    return book, author, city


def name_cores(name: str) -> List[str]:
  """The generated words of a name (without "The", "of", "Port", ...)."""
  return [w for w in name.split() if w.lower() not in _RESERVED]


# --- filler ----------------------------------------------------------------------------------

class Filler:
  """Neutral sentences: Zipf-distributed pseudo-words, each holding a letter of ``chjwxyq``
  (never in a name), mixed with English function words.  The vocabulary is fixed (the same for
  every split and seed)."""

  def __init__(self, vocab_size: int = 3000, exponent: float = 1.1, seed: int = 1601):
    g = random.Random(seed)
    marked = [o + v + c for o in ["c", "ch", "j", "w", "wh", "y", "x", "qu", "h", "sh"]
              for v in _VOWELS for c in ["", "n", "x", "ck", "w", "th"]]
    plain = _NAME_SYLLABLES
    words = set()
    while len(words) < vocab_size:
      parts = [g.choice(marked)] + [g.choice(plain) for _ in range(g.choice((0, 0, 1, 1, 2)))]
      g.shuffle(parts)
      w = "".join(parts)
      if w not in _RESERVED and _MARKERS & set(w):
        words.add(w)
    self.words = sorted(words)
    g.shuffle(self.words)
    weights = [1.0 / (r + 1) ** exponent for r in range(vocab_size)]
    total, acc = sum(weights), 0.0
    self.cum = []
    for w in weights:
      acc += w / total
      self.cum.append(acc)

  def word(self, rng: random.Random) -> str:
    if rng.random() < 0.3:
      return rng.choice(_FUNCTION_WORDS)
    i = bisect.bisect_left(self.cum, rng.random())
    return self.words[min(i, len(self.words) - 1)]

  def words_(self, rng: random.Random, n: int) -> List[str]:
    out = [self.word(rng) for _ in range(n)]
    out[0] = self.words[min(bisect.bisect_left(self.cum, rng.random()), len(self.words) - 1)]
    return out

  def title(self, rng: random.Random) -> str:
    return " ".join(w.capitalize() for w in self.words_(rng, rng.choice((1, 2, 2))))


# --- parameters and documents ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Params:
  """What shapes the generated documents.

  ``segments``: segments per document (exactly); ``distances``: the target's book and birth
  facts lie this many segments apart (one drawn per document; distractor triples draw theirs
  from the same list); ``distractors``: triples besides the target (M = distractors + 1
  candidate cities); ``seq_length`` / ``overlap`` / ``max_question_tokens``: the HotpotQA job's
  flags the documents are laid out for; ``max_facts_per_segment``: facts one segment holds at
  most; ``edge_margin``: tokens kept free of facts before a window's planned end (the real
  cut, at a word start, is then verified).
  """
  segments: int = 6
  distances: Tuple[int, ...] = (1, 2, 3, 4)
  distractors: int = 3
  seq_length: int = 128
  overlap: int = 0
  max_question_tokens: int = 64
  max_facts_per_segment: int = 3
  edge_margin: int = 8

  def __post_init__(self):
    object.__setattr__(self, "distances", tuple(int(d) for d in self.distances))
    if self.segments < 2:
      raise ValueError(f"segments must be >= 2 (facts in different segments), got "
                       f"{self.segments}")
    if not self.distances or not all(1 <= d < self.segments for d in self.distances):
      raise ValueError(f"distances must be in [1, segments - 1 = {self.segments - 1}], got "
                       f"{self.distances}")
    if self.distractors < 0:
      raise ValueError(f"distractors must be >= 0, got {self.distractors}")
    if self.overlap < 0 or self.max_facts_per_segment < 1 or self.edge_margin < 0:
      raise ValueError("overlap and edge_margin must be >= 0, max_facts_per_segment >= 1")
    segmenter_lib.SegmenterConfig(seq_length=self.seq_length, overlap=self.overlap,
                                  max_question_tokens=self.max_question_tokens)  # validates
    # Book facts and birth facts never share a segment: each kind needs its own segments.
    per_kind = -(-(self.distractors + 1) // self.max_facts_per_segment)
    if 2 * per_kind > self.segments:
      raise ValueError(f"{self.distractors + 1} book facts and as many birth facts, in separate "
                       f"segments of at most {self.max_facts_per_segment} facts, need "
                       f"{2 * per_kind} segments; got {self.segments}")

  @property
  def candidates(self) -> int:
    return self.distractors + 1

  def describe(self) -> Dict[str, Any]:
    d = dataclasses.asdict(self)
    d["distances"] = list(self.distances)
    return d


@dataclasses.dataclass
class Fact:
  kind: str  # "book" or "birth"
  triple: int  # index into the document's triples; 0 is the target
  text: str
  segment: int  # the segment it was placed in
  title: str = ""  # its paragraph's title and sentence index (set when laid out)
  sentence: int = -1

  def names(self, triples: Sequence[Tuple[str, str, str]]) -> Tuple[str, str]:
    book, author, city = triples[self.triple]
    return (book, author) if self.kind == "book" else (author, city)


@dataclasses.dataclass
class LongRangeDoc:
  """One generated document: the HotpotQA ``record`` and what the tests and the benchmark need
  (``book_segment`` / ``birth_segment``: the target's facts, ``distance`` = |difference|)."""
  id: str
  split: str
  question: str
  answer: str
  distance: int
  book_segment: int
  birth_segment: int
  candidates: List[str]  # the M birth cities, in document order of their birth facts
  triples: List[Tuple[str, str, str]]  # (book, author, city); 0 is the target
  facts: List[Fact]
  num_segments: int
  record: Dict[str, Any]

  @property
  def names(self) -> List[str]:
    return [n for t in self.triples for n in t]

  def meta(self) -> Dict[str, Any]:
    """The ``docs-<split>.jsonl`` line."""
    return {"id": self.id, "split": self.split, "question": self.question,
            "answer": self.answer, "distance": self.distance,
            "book_segment": self.book_segment, "birth_segment": self.birth_segment,
            "direction": "forward" if self.birth_segment > self.book_segment else "backward",
            "num_segments": self.num_segments, "candidates": self.candidates,
            "triples": [list(t) for t in self.triples],
            "facts": [{"kind": f.kind, "triple": f.triple, "segment": f.segment,
                       "title": f.title, "sentence": f.sentence, "text": f.text.strip()}
                      for f in self.facts]}


# --- the real segmentation -------------------------------------------------------------------

def _tokenizer():
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  return shared_tokenizer(RecordsConfig().tokenizer)


def _strip_span(text: str, b: int, e: int) -> Tuple[int, int]:
  while b < e and text[b].isspace():
    b += 1
  while e > b and text[e - 1].isspace():
    e -= 1
  return b, e


def fact_segments(record: Mapping[str, Any], seq_length: int = 128, overlap: int = 0,
                  max_question_tokens: int = 64, max_segments_per_document: int = 128,
                  tokenizer=None) -> Dict[str, Any]:
  """Where the sentences and answers of a HotpotQA ``record`` land, by the pipeline's own code:
  the reader's document (:func:`pipelines.readers.hotpotqa.parse_record`), the job's default
  tokenizer, the answer labeller (:func:`pipelines.text.answers.find_answer_spans`) and
  :func:`pipelines.text.segmenter.segment_document` (a sentence's span, without its surrounding
  spaces, is placed like an entity mention: in every segment that contains it entirely).

  Returns ``num_segments`` and ``num_sub_documents``, ``question_tokens`` and
  ``question_truncated``, ``sentences`` (per context paragraph, per sentence: the sorted
  document-wide indices of the segments that hold it wholly; ``[]`` when cut), the
  ``supporting_facts`` as ``[title, sentence, segments]``, ``answer_segments`` (segments with an
  answer label) and ``answer_spans`` (occurrences of the answer in the context).
  """
  tok = tokenizer or _tokenizer()
  doc, _ = hotpot_reader.parse_record(dict(record), "fact_segments")
  ctx, q_enc = tok.encode_batch([doc.text, doc.question.text])
  spans, where = [], []
  for p, para in enumerate(doc.paragraphs):
    for i, (b, e) in enumerate(para.sentences):
      b, e = _strip_span(doc.text, b, e)
      spans.append((b, e, len(spans)))
      where.append((p, i))
  answer_spans = []
  if doc.question.answers:
    answer_spans, _ = answers_lib.find_answer_spans(doc.text, doc.question.answers)
  config = segmenter_lib.SegmenterConfig(
      seq_length=seq_length, overlap=overlap, max_question_tokens=max_question_tokens,
      max_segments_per_document=max_segments_per_document)
  subs, stats = segmenter_lib.segment_document(
      doc.id, doc.id, ctx, q_enc, tok.special_ids, config, answer_char_spans=answer_spans,
      mentions=spans, answer_type=doc.question.answer_type)
  sentences: List[List[List[int]]] = [[[] for _ in p.sentences] for p in doc.paragraphs]
  answer_segments = set()
  first = 0
  for sub in subs:
    for seg, _, _, idx in sub.mentions.tolist():
      p, i = where[idx]
      sentences[p][i].append(first + seg)
    answer_segments.update(first + int(s) for s in sub.answers[:, 0].tolist())
    first += sub.num_segments
  for para in sentences:
    for segs in para:
      segs.sort()
  index = {(p.title, i): (k, i) for k, p in enumerate(doc.paragraphs)
           for i in range(len(p.sentences))}
  supporting = []
  for title, i in record.get("supporting_facts", []):
    k = index.get((title, i))
    supporting.append([title, i, sentences[k[0]][k[1]] if k else []])
  return {"num_segments": first, "num_sub_documents": len(subs),
          "question_tokens": len(q_enc), "question_truncated": bool(stats["questions_truncated"]),
          "sentences": sentences, "supporting_facts": supporting,
          "answer_segments": sorted(answer_segments), "answer_spans": len(answer_spans)}


# --- layout ----------------------------------------------------------------------------------

def place_triples(rng: random.Random, params: Params, distance: int,
                  attempts: int = 100_000) -> List[Tuple[int, int]]:
  """(book segment, birth segment) of each triple, the target's (index 0) ``distance`` apart
  and every other's a distance drawn from ``params.distances``, each in a random direction;
  no segment holds both a book and a birth fact, none more than ``max_facts_per_segment``."""
  S, M = params.segments, params.candidates
  for _ in range(attempts):
    pairs = []
    for k in range(M):
      d = distance if k == 0 else rng.choice(params.distances)
      b = rng.randrange(S - d)
      pairs.append((b, b + d) if rng.random() < 0.5 else (b + d, b))
    books, births = [b for b, _ in pairs], [r for _, r in pairs]
    if set(books) & set(births):
      continue
    if max(collections.Counter(books + births).values()) > params.max_facts_per_segment:
      continue
    return pairs
  raise ValueError(f"no layout of {M} triples in {params.segments} segments with distances "
                   f"{params.distances} after {attempts} attempts")


class _Layout:
  """The document's paragraphs as the reader renders them (``title\\n`` + sentences,
  paragraphs joined by a blank line), grown sentence by sentence, with exact token costs."""

  def __init__(self, tok, filler: Filler, rng: random.Random):
    self.tok, self.filler, self.rng = tok, filler, rng
    self.paragraphs: List[List[Any]] = []  # [title, [sentences]]
    self.titles = set()
    self.length = 0  # characters
    self.para_target = 0
    self._costs: Dict[str, int] = {}

  def snapshot(self):
    return ([[t, list(s)] for t, s in self.paragraphs], set(self.titles), self.length,
            self.para_target)

  def restore(self, snap) -> None:
    paragraphs, titles, self.length, self.para_target = snap
    self.paragraphs = [[t, list(s)] for t, s in paragraphs]
    self.titles = set(titles)

  def text(self) -> str:
    return hotpot_reader.PARAGRAPH_SEPARATOR.join(t + "\n" + "".join(s)
                                                  for t, s in self.paragraphs)

  def cost(self, piece: str) -> int:
    """Tokens of a piece appended to the text.  Pieces start with a space or a newline after
    a sentence's final period, where byte-level BPE's pre-tokenizer always splits, so costs
    add up (checked against the real windows after every segment)."""
    c = self._costs.get(piece)
    if c is None:
      c = self._costs[piece] = len(self.tok.encode(piece))
    return c

  def breaks(self) -> bool:
    """Whether the next sentence opens a new paragraph."""
    return not self.paragraphs or len(self.paragraphs[-1][1]) >= self.para_target

  def _new_title(self) -> str:
    while True:
      t = self.filler.title(self.rng)
      if t not in self.titles:
        self.titles.add(t)
        return t

  def piece(self, sentence: str, new_paragraph: bool, title: str = "") -> str:
    if new_paragraph:
      head = (hotpot_reader.PARAGRAPH_SEPARATOR if self.paragraphs else "") + title + "\n"
      return head + sentence
    return " " + sentence

  def sentence_cost(self, sentence: str, new_paragraph: bool, title: str = "") -> int:
    words = self.piece(sentence, new_paragraph, title).split(" ")
    # per word (with its leading space), the final period apart: all memoised
    total = 0
    for k, w in enumerate(words):
      if not w:
        continue
      lead = " " if k else ""
      if w.endswith("."):
        total += self.cost(lead + w[:-1]) + 1
      else:
        total += self.cost(lead + w)
    return total

  def append(self, sentence: str, new_paragraph: bool, title: str = "") -> Tuple[int, int]:
    """Appends; returns the sentence's char span in the text (without its leading space)."""
    piece = self.piece(sentence, new_paragraph, title)
    if new_paragraph:
      self.paragraphs.append([title, [sentence]])
      self.para_target = self.rng.randint(3, 7)
    else:
      self.paragraphs[-1][1].append(" " + sentence)
    begin = self.length + len(piece) - len(sentence)
    self.length += len(piece)
    return begin, self.length

  def add(self, sentence: str, room: Optional[int] = None) -> Optional[Tuple[int, int, int]]:
    """Appends ``sentence`` (opening a paragraph when due and it fits ``room`` tokens);
    returns (begin, end, cost), or None (nothing appended) when it does not fit ``room``."""
    if self.breaks():
      title = self._new_title()
      c = self.sentence_cost(sentence, True, title)
      if room is None or c <= room:
        b, e = self.append(sentence, True, title)
        return b, e, c
      self.titles.discard(title)
      if not self.paragraphs:  # the first sentence must open a paragraph
        return None
    c = self.sentence_cost(sentence, False)
    if room is not None and c > room:
      return None
    b, e = self.append(sentence, False)
    return b, e, c

  def add_filler(self, room: int, words: Optional[int] = None) -> int:
    """Appends one filler sentence of at most ``room`` tokens; returns its cost (0: none)."""
    rng = self.rng
    n = words or rng.randint(4, 16)
    ws = self.filler.words_(rng, n)
    while len(ws) >= 2:
      s = " ".join([ws[0].capitalize()] + ws[1:]) + "."
      got = self.add(s, room)
      if got is not None:
        return got[2]
      ws = ws[:-1]
    return 0


def _windows(tok, text: str, budget: int, overlap: int):
  enc = tok.encode(text)
  if not len(enc):
    return enc, []
  stats: collections.Counter = collections.Counter()
  return enc, segmenter_lib.context_windows(
      enc.word_start, budget, overlap, stats,
      segmenter_lib.character_starts(enc.begins, enc.ends))


def _exclusive_window(enc, windows, span: Tuple[int, int]) -> Optional[int]:
  """The window holding ``span`` entirely, if exactly one does (and no other touches it)."""
  tb, te = segmenter_lib.char_spans_to_tokens(enc, [span])[0].tolist()
  if tb < 0:
    return None
  inside = [k for k, (s, e) in enumerate(windows) if s <= tb and te < e]
  touching = [k for k, (s, e) in enumerate(windows) if s <= te and tb < e]
  return inside[0] if len(inside) == 1 and touching == inside else None


def _lay_out(tok, filler: Filler, rng: random.Random, params: Params, budget: int,
             facts: List[Fact], attempts: int = 20) -> Optional[Tuple[_Layout, Dict[int, Tuple]]]:
  """Fills the segments one after the other; returns the layout and each fact's char span
  (None when a segment cannot be laid out in ``attempts`` tries)."""
  S, overlap = params.segments, params.overlap
  limit = budget - overlap - params.edge_margin  # facts end before this (window-relative)
  layout = _Layout(tok, filler, rng)
  spans: Dict[int, Tuple[int, int]] = {}
  by_segment = collections.defaultdict(list)
  for i, f in enumerate(facts):
    by_segment[f.segment].append(i)
  for k in range(S):
    snap = layout.snapshot()
    for _ in range(attempts):
      layout.restore(snap)
      if k == 0:
        start, n = 0, 0
      else:
        enc, ws = _windows(tok, layout.text(), budget, overlap)
        if len(ws) != k + 1:
          return None
        start, n = ws[k][0], len(enc)
      pos = n - start
      mine = list(by_segment[k])
      rng.shuffle(mine)
      plain = [layout.sentence_cost(facts[i].text, False) for i in mine]
      ok = True
      for j, i in enumerate(mine):
        rest = sum(plain[j + 1:])
        latest = limit - rest - plain[j] - 6  # 6: a paragraph title the fact may open
        if latest < pos:
          ok = False
          break
        target = rng.randint(pos, latest)
        while target - pos >= 5:
          c = layout.add_filler(target - pos, rng.randint(3, 16))
          if not c:
            break
          pos += c
        got = layout.add(facts[i].text, limit - rest - pos)
        if got is None:
          ok = False
          break
        spans[i] = got[:2]
        pos += got[2]
      if not ok:
        continue
      if k < S - 1:
        while pos <= budget:  # close the window: the text must run past its last token
          pos += layout.add_filler(10 ** 6)
      else:
        while budget - pos >= 5:
          c = layout.add_filler(budget - pos)
          if not c:
            break
          pos += c
      enc, ws = _windows(tok, layout.text(), budget, overlap)
      if len(ws) != (k + 2 if k < S - 1 else S):
        continue
      if all(_exclusive_window(enc, ws, spans[i]) == k for i in mine):
        break
    else:
      return None
  return layout, spans


def _make_doc(tok, filler: Filler, names: NamePool, rng: random.Random, params: Params,
              split: str, doc_id: str, attempts: int = 50) -> LongRangeDoc:
  M = params.candidates
  triples = [names.triple(rng) for _ in range(M)]
  question = QUESTION.format(book=triples[0][0])
  q_tokens = len(tok.encode(question))
  budget = params.seq_length - min(q_tokens, params.max_question_tokens) - 3
  distance = rng.choice(params.distances)  # drawn once: retries keep it (no bias)
  for _ in range(attempts):
    pairs = place_triples(rng, params, distance)
    facts = []
    for t, ((book, author, city), (b_seg, r_seg)) in enumerate(zip(triples, pairs)):
      facts.append(Fact("book", t, BOOK_FACT.format(book=book, author=author), b_seg))
      facts.append(Fact("birth", t, BIRTH_FACT.format(author=author, city=city), r_seg))
    laid = _lay_out(tok, filler, rng, params, budget, facts)
    if laid is None:
      continue
    layout, spans = laid
    # Where each fact went: its paragraph title and sentence index.
    starts = []
    pos = 0
    for p, (title, sents) in enumerate(layout.paragraphs):
      if p:
        pos += len(hotpot_reader.PARAGRAPH_SEPARATOR)
      pos += len(title) + 1
      for i, s in enumerate(sents):
        starts.append((pos + (len(s) - len(s.lstrip(" "))), title, i))
        pos += len(s)
    where = {b: (title, i) for b, title, i in starts}
    for i, f in enumerate(facts):
      f.title, f.sentence = where[spans[i][0]]
    target_book, target_birth = facts[0], facts[1]
    record = {"_id": doc_id, "answer": triples[0][2], "question": question,
              "supporting_facts": [[target_book.title, target_book.sentence],
                                   [target_birth.title, target_birth.sentence]],
              "context": [[t, list(s)] for t, s in layout.paragraphs],
              "type": "bridge", "level": "hard"}
    births = sorted((spans[i][0], facts[i].triple) for i in range(len(facts))
                    if facts[i].kind == "birth")
    doc = LongRangeDoc(
        id=doc_id, split=split, question=question, answer=triples[0][2], distance=distance,
        book_segment=target_book.segment, birth_segment=target_birth.segment,
        candidates=[triples[t][2] for _, t in births], triples=triples, facts=facts,
        num_segments=params.segments, record=record)
    if not check_doc(doc, params, tok)[0]:
      continue
    return doc
  raise RuntimeError(f"{doc_id}: could not lay out a document for {params} in {attempts} "
                     "attempts")


def check_doc(doc: LongRangeDoc, params: Params, tokenizer=None) -> Tuple[bool, List[str]]:
  """Checks a document with the real code path (:func:`fact_segments`); returns (ok, problems):
  the segment count, every fact wholly in its segment only, the target's facts ``distance``
  apart, the answer once in the context (in the target's birth fact) and not in the question,
  the answer labelled in that segment only."""
  r = fact_segments(doc.record, params.seq_length, params.overlap, params.max_question_tokens,
                    tokenizer=tokenizer)
  problems = []
  if r["num_segments"] != params.segments or r["num_sub_documents"] != 1:
    problems.append(f"{r['num_segments']} segments, {r['num_sub_documents']} sub-documents")
  if r["question_truncated"]:
    problems.append("question truncated")
  titles = {t: k for k, (t, _) in enumerate(doc.record["context"])}
  for f in doc.facts:
    got = r["sentences"][titles[f.title]][f.sentence]
    if got != [f.segment]:
      problems.append(f"{f.kind} fact of triple {f.triple} in segments {got}, not "
                      f"[{f.segment}]")
  if abs(doc.book_segment - doc.birth_segment) != doc.distance or doc.distance < 1:
    problems.append("target facts not at the distance")
  if r["answer_spans"] != 1 or r["answer_segments"] != [doc.birth_segment]:
    problems.append(f"answer found {r['answer_spans']} times, labelled in segments "
                    f"{r['answer_segments']}")
  if doc.answer.lower() in doc.question.lower():
    problems.append("answer in the question")
  return not problems, problems


def generate(split: str, num_docs: int, seed: int = 0, params: Params = Params(),
             names: Optional[NamePool] = None) -> List[LongRangeDoc]:
  """``num_docs`` documents of ``split``, deterministic for (split, seed, params); names are
  unique within the split (``names``: a pool to continue) and disjoint from other splits'."""
  tok = _tokenizer()
  filler = Filler()
  names = names or NamePool(split)
  rng = random.Random(f"long_range_qa:{split}:{seed}")
  return [_make_doc(tok, filler, names, rng, params, split, f"lrqa-{split}-s{seed}-{i:06d}")
          for i in range(num_docs)]


# --- chance level ----------------------------------------------------------------------------

def _field(doc: Any, key: str) -> Any:
  return doc[key] if isinstance(doc, Mapping) else getattr(doc, key)


def chance_level(docs: Iterable[Any]) -> Dict[str, float]:
  """EM and F1 of a reader that knows the answer is one of a document's candidate cities and
  picks one uniformly: per document, the mean over its candidates of the official HotpotQA
  EM / token F1 (:mod:`model.evaluation.hotpotqa`) against the gold, averaged over documents.
  ``docs``: :class:`LongRangeDoc` or mappings with ``answer`` and ``candidates``."""
  em = f1 = 0.0
  n = 0
  for d in docs:
    gold, cands = _field(d, "answer"), list(_field(d, "candidates"))
    if not cands:
      raise ValueError("a document without candidates")
    em += sum(float(hotpot_eval.exact_match_score(c, gold)) for c in cands) / len(cands)
    f1 += sum(hotpot_eval.f1_score(c, gold)[0] for c in cands) / len(cands)
    n += 1
  if not n:
    raise ValueError("no documents")
  return {"em": em / n, "f1": f1 / n, "documents": n}


def chance_report(docs: Sequence[LongRangeDoc]) -> Dict[str, Any]:
  """:func:`chance_level` overall and per distance."""
  by = collections.defaultdict(list)
  for d in docs:
    by[d.distance].append(d)
  return {"all": chance_level(docs),
          "by_distance": {str(k): chance_level(v) for k, v in sorted(by.items())}}


# --- files -----------------------------------------------------------------------------------

def wiki_pages(docs: Iterable[LongRangeDoc], rng: random.Random, filler: Filler):
  """One page per entity: its name in bold, its kind, a filler sentence and links to every
  other entity of its document by name, in random order (no relation is stated)."""
  from demo import synthetic_wikipedia as synth  # pylint: disable=g-import-not-at-top
  for d in docs:
    entities = [(n, kind) for t in d.triples for n, kind in zip(t, ("novel", "writer", "town"))]
    for name, kind in entities:
      others = [n for n, _ in entities if n != name]
      rng.shuffle(others)
      links = ", ".join(f"[[{n}]]" for n in others[:-1]) + f" and [[{others[-1]}]]"
      words = filler.words_(rng, rng.randint(6, 12))
      text = (f"'''{name}''' is a {kind}. {' '.join([words[0].capitalize()] + words[1:])}."
              f"\n\nRelated entries: {links}.\n")
      yield synth.PageSpec(name, text)


def write(out_dir: str, train: Sequence[LongRangeDoc], dev: Sequence[LongRangeDoc],
          params: Params = Params(), seed: int = 0) -> Dict[str, str]:
  """Writes ``train.json``, ``dev.json`` (official HotpotQA layout), ``docs-<split>.jsonl``,
  ``chance.json`` and ``wiki/<dump>`` (one page per entity of both splits); returns the paths."""
  from demo import synthetic_wikipedia as synth  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.join(out_dir, "wiki"), exist_ok=True)
  paths = {}
  for split, docs in zip(SPLITS, (train, dev)):
    paths[split] = os.path.join(out_dir, f"{split}.json")
    with open(paths[split], "w", encoding="utf-8") as f:
      json.dump([d.record for d in docs], f, ensure_ascii=False)
    paths[f"docs_{split}"] = os.path.join(out_dir, f"docs-{split}.jsonl")
    with open(paths[f"docs_{split}"], "w", encoding="utf-8") as f:
      for d in docs:
        f.write(json.dumps(d.meta(), ensure_ascii=False, sort_keys=True) + "\n")
  paths["chance"] = os.path.join(out_dir, "chance.json")
  chance = {split: chance_report(docs) for split, docs in zip(SPLITS, (train, dev)) if docs}
  chance["params"] = params.describe()
  with open(paths["chance"], "w", encoding="utf-8") as f:
    json.dump(chance, f, indent=1, sort_keys=True)
  paths["dump"] = os.path.join(out_dir, "wiki", DUMP_NAME)
  synth.write_dump(wiki_pages(list(train) + list(dev), random.Random(f"wiki:{seed}"),
                              Filler()), paths["dump"])
  return paths


# --- the jobs --------------------------------------------------------------------------------

def _run_jobs(jobs: Sequence[Tuple[str, List[str], str]], parallel: int) -> Dict[str, float]:
  """Runs ``(name, argv, log)`` subprocesses, at most ``parallel`` at once; returns seconds per
  job; a failure kills the others and raises RuntimeError with the log's tail."""
  pending, running, done = list(jobs), [], {}
  try:
    while pending or running:
      while pending and len(running) < parallel:
        name, argv, log = pending.pop(0)
        f = open(log, "w", encoding="utf-8")
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        running.append((name, proc, f, log, time.perf_counter()))
      for job in list(running):
        name, proc, f, log, t0 = job
        rc = proc.poll()
        if rc is None:
          continue
        running.remove(job)
        f.close()
        done[name] = round(time.perf_counter() - t0, 2)
        if rc:
          with open(log, encoding="utf-8") as fh:
            tail = fh.read()[-3000:]
          raise RuntimeError(f"{name}: exited with {rc}; log {log}:\n{tail}")
      time.sleep(0.05)
  finally:
    for _, proc, f, _, _ in running:
      if proc.poll() is None:
        proc.kill()
        proc.wait()
      f.close()
  return done


def _manifest(out: str) -> Dict[str, Any]:
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return json.load(f)


def iter_packs(out: str):
  """Every record (pack) of a job's output dir, decoded without TensorFlow."""
  from schemas import example_proto, tfrecord_io  # pylint: disable=g-import-not-at-top
  m = _manifest(out)
  compression = tfrecord_io.manifest_compression(m)
  for shard in m["shards"]:
    for data in tfrecord_io.read_records(os.path.join(out, shard["path"]), compression):
      yield example_proto.decode_example(data)


def record_stats(out: str, docs: Sequence[LongRangeDoc], entities_dir: str) -> Dict[str, Any]:
  """What the records of ``out`` hold for ``docs``: per fact, whether each of its two names is
  a mention with that name's entity id in the fact's segment; answer labels per segment;
  mentions that are not a fact's name."""
  from schemas import documents as documents_schema  # pylint: disable=g-import-not-at-top
  from schemas import entities as entities_schema  # pylint: disable=g-import-not-at-top
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  vocab = entities_schema.titles_by_id(tables.read_vocabulary(entities_dir))
  texts = {k: v["text"] for k, v in documents_schema.load(out).items()}
  found = collections.defaultdict(set)  # doc -> {(segment, surface, title)}
  answers = collections.defaultdict(set)  # doc -> segments
  segments = collections.Counter()
  mentions = linked = 0
  for r in iter_packs(out):
    n = len(r["segment_mask"])
    L = len(r["token_ids"]) // n
    for s in range(n):
      if r["segment_mask"][s]:
        segments[r["document_id"][s].decode()] += 1
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc = r["document_id"][s].decode()
      surface = texts[doc][r["char_begin"][s * L + b]:r["char_end"][s * L + e]]
      found[doc].add((r["segment_index"][s], surface, vocab.get(ent)))
      mentions += 1
      linked += bool(ent)
    for s in r["answer_segment"]:
      answers[r["document_id"][s].decode()].add(r["segment_index"][s])
  expected = hit = target_hit = target_expected = answers_ok = 0
  extra = 0
  by_distance = collections.defaultdict(lambda: [0, 0])
  for d in docs:
    want = set()
    for f in d.facts:
      for name in f.names(d.triples):
        want.add((f.segment, name, name))
        expected += 1
        ok = (f.segment, name, name) in found[d.id]
        hit += ok
        if f.triple == 0:
          target_expected += 1
          target_hit += ok
    extra += len(found[d.id] - want)
    good = answers[d.id] == {d.birth_segment}
    answers_ok += good
    by_distance[d.distance][0] += 1
    by_distance[d.distance][1] += good
  return {"documents": len(segments), "segments": sum(segments.values()),
          "segments_per_document": sorted(set(segments.values())),
          "mentions": mentions, "mentions_with_entity_id": linked,
          "fact_name_mentions_expected": expected, "fact_name_mentions_linked": hit,
          "fact_name_mentions_linked_fraction": round(hit / max(expected, 1), 4),
          "target_fact_mentions_linked_fraction": round(target_hit / max(target_expected, 1), 4),
          "other_mentions": extra,
          "answers_in_intended_segment_only": answers_ok,
          "answers_in_intended_segment_only_fraction": round(answers_ok / max(len(docs), 1), 4),
          "documents_by_distance": {str(k): v[0] for k, v in sorted(by_distance.items())}}


def _check_manifest(out: str, docs: int) -> Dict[str, Any]:
  m = _manifest(out)
  c = m["counts"]
  seg = m["stages"].get("segment", {})
  problems = []
  if c.get("input") != docs or c.get("written") != docs:
    problems.append(f"input {c.get('input')}, written {c.get('written')} of {docs}")
  for key in ("rejected", "skipped"):
    if c.get(key):
      problems.append(f"{key} {c[key]}")
  for key in ("answer_spans_cut", "answer_spans_lost", "mentions_cut", "mentions_lost",
              "questions_truncated", "documents_split"):
    if seg.get(key):
      problems.append(f"segment/{key} {seg[key]}")
  if problems:
    raise RuntimeError(f"{out}: unexpected manifest counts: {'; '.join(problems)}")
  return {"counts": c, "segments": m["examples"]["segments"],
          "annotate": {k: v for k, v in m["stages"].get("annotate", {}).items()
                       if k in ("input", "output", "mentions", "linked")}}


def build(out_dir: str, train_docs: Union[int, Sequence[LongRangeDoc]] = 600,
          dev_docs: Union[int, Sequence[LongRangeDoc]] = 150, seed: int = 0,
          params: Params = Params(), segments_per_pack: Optional[int] = None,
          parallel: int = 2, overwrite: bool = False) -> Dict[str, Any]:
  """Generates (``train_docs`` / ``dev_docs``: counts, or documents already generated) with
  seeds ``seed`` (train) and ``seed + 1`` (dev), writes the files (:func:`write`) and runs the
  real jobs as subprocesses: ``pipelines.wikipedia`` on the dump (-> ``entities/``), then
  ``pipelines.hotpotqa`` on each split with the annotation flags (-> ``records_<split>/``),
  at most ``parallel`` at once.  Checks the manifests (every document written, nothing
  rejected, cut or truncated) and the records (:func:`record_stats`); returns (and writes to
  ``build.json``) paths, stats and timings.  An ``out_dir`` holding an earlier build is refused
  unless ``overwrite``."""
  t0 = time.perf_counter()
  if os.path.exists(os.path.join(out_dir, "build.json")) and not overwrite:
    raise FileExistsError(f"{out_dir} holds an earlier build; pass overwrite=True "
                          "(--overwrite) to replace it")
  os.makedirs(out_dir, exist_ok=True)
  logs = os.path.join(out_dir, "logs")
  os.makedirs(logs, exist_ok=True)
  train = (generate("train", train_docs, seed, params) if isinstance(train_docs, int)
           else list(train_docs))
  dev = (generate("dev", dev_docs, seed + 1, params) if isinstance(dev_docs, int)
         else list(dev_docs))
  t_gen = time.perf_counter()
  paths = write(out_dir, train, dev, params, seed)
  t_write = time.perf_counter()
  pack = segments_per_pack or params.segments
  py = sys.executable
  ents = os.path.join(out_dir, "entities")
  timings = {"generate": round(t_gen - t0, 2), "write": round(t_write - t_gen, 2)}
  timings.update(_run_jobs([("wikipedia", [
      py, "-m", "pipelines.wikipedia", "--input", paths["dump"], "--output_dir", ents,
      "--seq_length", str(params.seq_length), "--overlap", "0", "--overwrite"],
      os.path.join(logs, "wikipedia.log"))], 1))
  names = sum(len(d.names) for d in train + dev)
  ann = ["--ner", "spacy", "--spacy_model", "blank:en", "--linker", "alias",
         "--entities_dir", ents, "--linker_min_count", "1",
         "--ruler_patterns", str(max(100_000, 2 * names))]
  jobs = []
  for split, docs in zip(SPLITS, (train, dev)):
    paths[f"records_{split}"] = os.path.join(out_dir, f"records_{split}")
    if docs:
      jobs.append((f"hotpotqa_{split}", [
          py, "-m", "pipelines.hotpotqa", "--input", paths[split], "--output_dir",
          paths[f"records_{split}"], "--seq_length", str(params.seq_length),
          "--overlap", str(params.overlap), "--max_question_tokens",
          str(params.max_question_tokens), "--segments_per_pack", str(pack),
          "--max_segments_per_document", str(pack), *ann, "--overwrite"],
          os.path.join(logs, f"hotpotqa_{split}.log")))
  t_jobs = time.perf_counter()
  timings.update(_run_jobs(jobs, max(1, parallel)))
  timings["hotpotqa_wall"] = round(time.perf_counter() - t_jobs, 2)
  paths["entities"] = ents
  splits = {}
  for split, docs in zip(SPLITS, (train, dev)):
    if not docs:
      continue
    s = _check_manifest(paths[f"records_{split}"], len(docs))
    s.update(record_stats(paths[f"records_{split}"], docs, ents))
    s["chance"] = chance_level(docs)
    splits[split] = s
  wiki = _manifest(ents)
  timings["total"] = round(time.perf_counter() - t0, 2)
  result = {"out_dir": out_dir, "seed": seed, "params": params.describe(),
            "segments_per_pack": pack, "paths": paths, "splits": splits,
            "entity_vocabulary": wiki["stages"].get("entities", {}).get("vocabulary"),
            "names": names,
            "shared_names": len({n for d in train for n in d.names}
                                & {n for d in dev for n in d.names}),
            "timings_s": timings}
  with open(os.path.join(out_dir, "build.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  return result


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  d = Params()
  p.add_argument("--out_dir", required=True)
  p.add_argument("--train_docs", type=int, default=600)
  p.add_argument("--dev_docs", type=int, default=150)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--segments", type=int, default=d.segments)
  p.add_argument("--distances", default=",".join(map(str, d.distances)),
                 help="comma-separated distances between the target's two facts")
  p.add_argument("--distractors", type=int, default=d.distractors)
  p.add_argument("--seq_length", type=int, default=d.seq_length)
  p.add_argument("--overlap", type=int, default=d.overlap)
  p.add_argument("--max_question_tokens", type=int, default=d.max_question_tokens)
  p.add_argument("--max_facts_per_segment", type=int, default=d.max_facts_per_segment)
  p.add_argument("--segments_per_pack", type=int, default=0,
                 help="segments per record (and per document at most); 0: --segments")
  p.add_argument("--parallel", type=int, default=2, help="HotpotQA jobs at once")
  p.add_argument("--overwrite", action="store_true")
  a = p.parse_args(argv)
  try:
    params = Params(segments=a.segments,
                    distances=tuple(int(x) for x in a.distances.split(",") if x.strip()),
                    distractors=a.distractors, seq_length=a.seq_length, overlap=a.overlap,
                    max_question_tokens=a.max_question_tokens,
                    max_facts_per_segment=a.max_facts_per_segment)
    r = build(a.out_dir, a.train_docs, a.dev_docs, a.seed, params,
              segments_per_pack=a.segments_per_pack or None, parallel=a.parallel,
              overwrite=a.overwrite)
  except (ValueError, RuntimeError, FileExistsError) as e:
    print(f"long_range_qa: error: {e}", file=sys.stderr)
    return 1
  for split, s in r["splits"].items():
    print(f"{split:5s} {s['documents']:5d} docs  {s['segments']:6d} segments  "
          f"{s['mentions']:6d} mentions  fact names linked "
          f"{100 * s['fact_name_mentions_linked_fraction']:.1f}%  answers in the intended "
          f"segment only {100 * s['answers_in_intended_segment_only_fraction']:.1f}%  chance "
          f"EM {s['chance']['em']:.4f} F1 {s['chance']['f1']:.4f}")
  print("timings (s): " + ", ".join(f"{k} {v}" for k, v in r["timings_s"].items()))
  summary = {"metric": "long_range_qa_build_seconds", "value": r["timings_s"]["total"],
             "unit": "s", "out_dir": r["out_dir"], "shared_names": r["shared_names"],
             **{f"{k}_{f}": r["splits"][k][f] for k in r["splits"]
                for f in ("documents", "segments", "mentions",
                          "fact_name_mentions_linked_fraction",
                          "answers_in_intended_segment_only_fraction")},
             **{f"{k}_chance_{m}": round(r["splits"][k]["chance"][m], 4) for k in r["splits"]
                for m in ("em", "f1")}}
  print(json.dumps(summary, sort_keys=True))
  return 0


if __name__ == "__main__":
  sys.exit(main())
