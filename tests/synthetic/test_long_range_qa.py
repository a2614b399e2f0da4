"""The long-range QA generator (synthetic/long_range_qa/, issue 16): the two facts of the target
lie in different segments at the requested distance (by the real tokenizer and segmenter), the
answer occurs only where intended, names are disjoint between splits, the chance level is
computed right, generation is deterministic, and the real jobs turn the documents into records
whose fact names are entity mentions and whose answer is labelled in the intended segment only.

Expectations are computed here independently of the module: fact sentences are found in the
document text by string search and placed by ``segment_document`` directly, the target's facts
are identified from the question's book title, answers are counted with a regex, and the
chance level is checked against hand-computed fractions."""

import bz2
import collections
import json
import os
import re

import pytest

from model.evaluation import hotpotqa as hotpot_eval
from pipelines.datasets.hotpotqa import reader
from pipelines.text import segmenter
from pipelines.text.tokenizer import TokenizerSpec, shared_tokenizer
from schemas import documents as documents_schema
from schemas import entities as entities_schema
from synthetic.long_range_qa.build import build
from synthetic.long_range_qa.chance import chance_level
from synthetic.long_range_qa.documents import Params
from synthetic.long_range_qa.generate import generate
from synthetic.long_range_qa.layout import place_triples
from synthetic.long_range_qa.names import NamePool, name_cores
from synthetic.long_range_qa.segments import fact_segments
from tests.pipelines.helpers import read_records

pytestmark = pytest.mark.slow  # whole-job or multi-replica fixtures

PARAMS = Params()  # 6 segments of 128 tokens, distances 1-4, 3 distractors
TRAIN_SEED, DEV_SEED = 0, 1


@pytest.fixture(scope="module")
def train():
  return generate("train", 12, TRAIN_SEED, PARAMS)


@pytest.fixture(scope="module")
def dev():
  return generate("dev", 6, DEV_SEED, PARAMS)


@pytest.fixture(scope="module")
def tok():
  return shared_tokenizer(TokenizerSpec())


def _sentences(text):
  """Every sentence of the generated context (they all end with a period)."""
  return [s.strip() for s in re.findall(r"[^.\n]+\.", text)]


def _target_facts(record):
  """(book fact, birth fact, author, city) of the question's book, read off the text."""
  book = re.fullmatch(r"Where was the author of (.+) born\?", record["question"]).group(1)
  text = reader.parse_record(record, "t")[0].text
  sents = _sentences(text)
  book_facts = [s for s in sents if s.startswith(book + " was written by ")]
  assert len(book_facts) == 1, book_facts
  author = book_facts[0][len(book + " was written by "):-1]
  birth_facts = [s for s in sents if s.startswith(author + " was born in ")]
  assert len(birth_facts) == 1, birth_facts
  return book_facts[0], birth_facts[0], author, birth_facts[0][len(author + " was born in "):-1]


def _placed(record, tok, sentences=None):
  """Per sentence (found by str.find in the reader's text; None: every sentence, at the
  reader's spans), the segments that hold it wholly, by segment_document with the job's
  tokenizer; and the segmenter's counters."""
  doc = reader.parse_record(record, "t")[0]
  spans = []
  if sentences is None:
    for p in doc.paragraphs:
      for b, e in p.sentences:
        lead = len(doc.text[b:e]) - len(doc.text[b:e].lstrip())
        spans.append((b + lead, e, len(spans)))
  else:
    for k, s in enumerate(sentences):
      b = doc.text.find(s)
      assert b >= 0 and doc.text.find(s, b + 1) < 0, s
      spans.append((b, b + len(s), k))
  ctx, q = tok.encode_batch([doc.text, doc.question.text])
  config = segmenter.SegmenterConfig(seq_length=PARAMS.seq_length, overlap=PARAMS.overlap)
  subs, stats = segmenter.segment_document(doc.id, doc.id, ctx, q, tok.special_ids, config,
                                           mentions=spans)
  assert len(subs) == 1
  where = collections.defaultdict(list)
  for seg, _, _, k in subs[0].mentions.tolist():
    where[k].append(seg)
  return [sorted(where[k]) for k in range(len(spans))], subs[0].num_segments, stats


# --- (1) placement --------------------------------------------------------------------------

def test_target_facts_lie_in_different_segments_at_the_distance(train, dev, tok):
  directions = collections.Counter()
  for d in train + dev:
    book_fact, birth_fact, _, _ = _target_facts(d.record)
    (book_seg, birth_seg), num_segments, _ = _placed(d.record, tok, [book_fact, birth_fact])
    assert num_segments == PARAMS.segments
    assert len(book_seg) == 1 and len(birth_seg) == 1, (book_seg, birth_seg)
    assert d.distance in PARAMS.distances
    assert abs(book_seg[0] - birth_seg[0]) == d.distance >= 1
    assert (d.book_segment, d.birth_segment) == (book_seg[0], birth_seg[0])
    directions[birth_seg[0] > book_seg[0]] += 1
  assert set(directions) == {True, False}  # the direction is no cue


def test_every_fact_lies_wholly_in_one_segment_its_own(train, tok):
  for d in train:
    text = reader.parse_record(d.record, "t")[0].text
    facts = [s for s in _sentences(text) if " was written by " in s or " was born in " in s]
    assert len(facts) == 2 * PARAMS.candidates
    placed, _, stats = _placed(d.record, tok, facts)
    assert stats["mentions_cut"] == 0 and stats["mentions_lost"] == 0
    assert all(len(p) == 1 for p in placed), placed
    expected = {f.text: f.segment for f in d.facts}
    assert {s: p[0] for s, p in zip(facts, placed)} == expected
    # No segment holds both a book fact and a birth fact (nothing local rules a city out),
    # and each triple's two facts are in different segments.
    kinds = collections.defaultdict(set)
    for s, p in zip(facts, placed):
      kinds[p[0]].add("book" if " was written by " in s else "birth")
    assert all(len(k) == 1 for k in kinds.values()), kinds


def test_fact_segments_agrees_with_the_segmenter(train, tok):
  d = train[0]
  got = fact_segments(d.record, PARAMS.seq_length, PARAMS.overlap)
  placed, num_segments, _ = _placed(d.record, tok)
  assert got["num_segments"] == num_segments == PARAMS.segments
  assert [segs for para in got["sentences"] for segs in para] == placed
  assert [sf[2] for sf in got["supporting_facts"]] == [[d.book_segment], [d.birth_segment]]
  assert got["answer_segments"] == [d.birth_segment]


def test_layout_never_mixes_book_and_birth_facts():
  import random
  rng = random.Random(5)
  for _ in range(300):
    distance = rng.choice(PARAMS.distances)
    pairs = place_triples(rng, PARAMS, distance)
    assert abs(pairs[0][0] - pairs[0][1]) == distance
    assert all(b != r for b, r in pairs)
    assert not {b for b, _ in pairs} & {r for _, r in pairs}
    counts = collections.Counter([b for b, _ in pairs] + [r for _, r in pairs])
    assert max(counts.values()) <= PARAMS.max_facts_per_segment


def test_bad_parameters_are_refused():
  with pytest.raises(ValueError):
    Params(segments=4, distances=(4,))
  with pytest.raises(ValueError):
    Params(distances=(0, 1))
  with pytest.raises(ValueError):
    Params(segments=2, distances=(1,), distractors=5)


# --- (2) the answer and the names -----------------------------------------------------------

def _count(name, text):
  return len(re.findall(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, re.IGNORECASE))


def test_answer_occurs_once_in_the_context_only_in_the_target_birth_fact(train, dev):
  for d in train + dev:
    text = reader.parse_record(d.record, "t")[0].text
    _, birth_fact, author, city = _target_facts(d.record)
    assert d.record["answer"] == city == d.answer
    assert _count(city, text) == 1
    b = re.search(r"(?<!\w)" + re.escape(city) + r"(?!\w)", text, re.IGNORECASE).start()
    s = text.find(birth_fact)
    assert s <= b < s + len(birth_fact)
    assert _count(city, d.record["question"]) == 0
    assert _count(author, text) == 2  # its book fact and its birth fact
    # Every name of the document occurs only in its facts: books and cities once, authors
    # twice; and no other word of the text is one of the generated name words.
    for book, auth, town in d.triples:
      assert (_count(book, text), _count(auth, text), _count(town, text)) == (1, 2, 1)
    cores = {w.lower() for t in d.triples for n in t for w in name_cores(n)}
    words = collections.Counter(w.lower() for w in re.findall(r"\w+", text))
    assert sum(words[c] for c in cores) == sum(
        2 if n == t[1] else 1 for t in d.triples for n in t for _ in name_cores(n))
    assert sorted(d.candidates) == sorted(t[2] for t in d.triples)
    assert len(set(d.candidates)) == PARAMS.candidates


def test_names_are_unique_and_disjoint_between_train_and_dev(train, dev):
  def cores(docs):
    out = [w.lower() for d in docs for t in d.triples for n in t for w in name_cores(n)]
    assert len(out) == len(set(out))  # each name word used by one entity of the split
    return set(out)

  assert not cores(train) & cores(dev)
  names = [n for d in train + dev for t in d.triples for n in t]
  assert len(names) == len(set(names))


def test_split_name_spaces_are_disjoint_whatever_the_seeds():
  import random
  seen = {}
  for split in ("train", "dev", "test", "other"):
    pool = NamePool(split)
    rng = random.Random(3)  # the same seed for every split
    for _ in range(300):
      core = pool.core(rng).lower()
      assert seen.setdefault(core, split) == split, (core, seen[core], split)
      assert not set(core) & set("chjwxyq")  # never a filler word


def test_supporting_facts_are_the_two_target_facts(train):
  for d in train:
    book_fact, birth_fact, _, _ = _target_facts(d.record)
    paragraphs = dict((t, s) for t, s in d.record["context"])
    got = [paragraphs[t][i].strip() for t, i in d.record["supporting_facts"]]
    assert got == [book_fact, birth_fact]


# --- (3) chance level -----------------------------------------------------------------------

def test_chance_level_by_hand():
  docs = [
      # EM 1/4; F1: 1 (itself), 1/2 ("port"), 0, 1/2 ("doran") -> 2/4
      {"answer": "Port Doran", "candidates": ["Port Doran", "Port Kelmar", "Vessa",
                                              "Doran Falls"]},
      # EM 1/3; F1: 1, 2/3 ("tessa" of "new tessa": p 1/2, r 1), 0 -> (5/3)/3
      {"answer": "Tessa", "candidates": ["New Tessa", "Tessa", "Kolbur"]},
  ]
  got = chance_level(docs)
  assert got["em"] == pytest.approx((1 / 4 + 1 / 3) / 2)
  assert got["f1"] == pytest.approx((2 / 4 + 5 / 9) / 2)
  assert got["f1"] > got["em"]
  assert got["documents"] == 2


def test_chance_em_is_one_over_the_candidates(train):
  got = chance_level(train)
  assert got["em"] == pytest.approx(1 / PARAMS.candidates)
  # F1 by hand from the official normalisation: token-set overlap of the candidates
  def f1(p, g):
    p, g = p.lower().split(), g.lower().split()
    same = sum((collections.Counter(p) & collections.Counter(g)).values())
    return 0.0 if not same else 2 * same / (len(p) + len(g))

  want = sum(sum(f1(c, d.answer) for c in d.candidates) / len(d.candidates)
             for d in train) / len(train)
  assert got["f1"] == pytest.approx(want)
  assert got["f1"] >= got["em"]


# --- (4) determinism ------------------------------------------------------------------------

def test_same_seed_same_documents_other_seed_other_documents(train):
  again = generate("train", 3, TRAIN_SEED, PARAMS)
  assert (json.dumps([d.record for d in again], sort_keys=True)
          == json.dumps([d.record for d in train[:3]], sort_keys=True))
  assert [d.meta() for d in again] == [d.meta() for d in train[:3]]
  other = generate("train", 3, TRAIN_SEED + 7, PARAMS)
  assert ([d.record["context"] for d in other] != [d.record["context"] for d in train[:3]])
  assert {d.answer for d in other}.isdisjoint({d.answer for d in train[:3]})


# --- (5) through the real jobs --------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory, train, dev):
  out = str(tmp_path_factory.mktemp("lrqa"))
  return build(out, train[:4], dev[:3], seed=TRAIN_SEED, params=PARAMS, parallel=2)


@pytest.mark.slow
def test_build_writes_the_official_files(built, train, dev):
  paths = built["paths"]
  with open(paths["dev"], encoding="utf-8") as f:
    gold = json.load(f)
  hotpot_eval.check_gold(gold, paths["dev"])
  assert [g["_id"] for g in gold] == [d.id for d in dev[:3]]
  assert set(gold[0]) == {"_id", "answer", "question", "supporting_facts", "context", "type",
                          "level"}
  with open(paths["docs_train"], encoding="utf-8") as f:
    meta = [json.loads(line) for line in f]
  assert [(m["id"], m["distance"], m["book_segment"], m["birth_segment"]) for m in meta] == [
      (d.id, d.distance, d.book_segment, d.birth_segment) for d in train[:4]]
  with open(paths["chance"], encoding="utf-8") as f:
    chance = json.load(f)
  assert chance["dev"]["all"]["em"] == pytest.approx(1 / PARAMS.candidates)
  with bz2.open(paths["dump"], "rt", encoding="utf-8") as f:
    dump = f.read()
  assert " was born in " not in dump and " was written by " not in dump  # no fact leaks
  for split, n in (("train", 4), ("dev", 3)):
    c = built["splits"][split]["counts"]
    assert (c["input"], c["written"], c["rejected"], c["skipped"]) == (n, n, 0, 0)
  assert built["shared_names"] == 0


def test_records_hold_linked_fact_names_and_the_answer_in_its_segment_only(built, train, dev):
  ents = built["paths"]["entities"]
  vocab = entities_schema.titles_by_id(entities_schema.read_vocabulary(
      os.path.join(ents, "entities", "vocabulary.parquet")))
  for split, docs in (("train", train[:4]), ("dev", dev[:3])):
    out = built["paths"][f"records_{split}"]
    texts = {k: v["text"] for k, v in documents_schema.load(out).items()}
    mentions = collections.defaultdict(set)
    answers = collections.defaultdict(set)
    segments = collections.Counter()
    for r in read_records(out):
      L = len(r["token_ids"]) // len(r["segment_mask"])
      for s, real in enumerate(r["segment_mask"]):
        segments[r["document_id"][s].decode()] += bool(real)
      for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                              r["mention_entity_id"]):
        doc = r["document_id"][s].decode()
        surface = texts[doc][r["char_begin"][s * L + b]:r["char_end"][s * L + e]]
        mentions[doc].add((r["segment_index"][s], surface, vocab.get(ent)))
      for s in r["answer_segment"]:
        answers[r["document_id"][s].decode()].add(r["segment_index"][s])
    for d in docs:
      assert segments[d.id] == PARAMS.segments
      book_fact, birth_fact, author, city = _target_facts(d.record)
      book = book_fact[:-len(" was written by " + author + ".")]
      want = {(d.book_segment, book, book), (d.book_segment, author, author),
              (d.birth_segment, author, author), (d.birth_segment, city, city)}
      assert want <= mentions[d.id], (want - mentions[d.id], mentions[d.id])
      # every name of every fact, in its fact's segment, with its own entity
      want_all = {(f.segment, n, n) for f in d.facts for n in f.names(d.triples)}
      assert mentions[d.id] == want_all
      assert answers[d.id] == {d.birth_segment}
    s = built["splits"][split]
    assert s["fact_name_mentions_linked_fraction"] == 1.0
    assert s["answers_in_intended_segment_only_fraction"] == 1.0


@pytest.mark.slow
def test_the_target_is_placed_like_any_distractor():
  """No positional cue: over many documents the answer is any of the M birth facts (in document
  order) about equally often, and distractor triples' facts are as far apart as the target's
  (read off the text: every book fact's author, then that author's birth fact)."""
  docs = generate("train", 160, 7, PARAMS)
  ranks = collections.Counter()
  target_gaps, distractor_gaps = collections.Counter(), collections.Counter()
  for doc in docs:
    cities = [m.group(1) for m in re.finditer(r" was born in ([^.]+)\.",
                                              reader.parse_record(doc.record, "t")[0].text)]
    assert len(cities) == PARAMS.candidates
    ranks[cities.index(doc.answer)] += 1
    book_seg = {f.triple: f.segment for f in doc.facts if f.kind == "book"}
    birth_seg = {f.triple: f.segment for f in doc.facts if f.kind == "birth"}
    for triple, seg in book_seg.items():
      (target_gaps if triple == 0 else distractor_gaps)[abs(birth_seg[triple] - seg)] += 1
  # 160 documents, M = 4: each rank 40 expected (sd ~5.5); a fixed place would put 160 on one.
  assert all(20 <= ranks[r] <= 60 for r in range(PARAMS.candidates)), ranks
  assert set(distractor_gaps) == set(target_gaps) == set(PARAMS.distances)
  for d in PARAMS.distances:
    share_t = target_gaps[d] / sum(target_gaps.values())
    share_d = distractor_gaps[d] / sum(distractor_gaps.values())
    assert abs(share_t - share_d) < 0.15, (d, target_gaps, distractor_gaps)


# --- (4) whole-book memory mode: the two facts of a triple in different sub-documents --------

SUB = 3
SUB_PARAMS = Params(sub_document_segments=SUB)


@pytest.fixture(scope="module")
def split_docs():
  return generate("train", 10, TRAIN_SEED, SUB_PARAMS)


def test_sub_document_mode_puts_each_triples_facts_in_different_sub_documents(split_docs, tok):
  for d in split_docs:
    doc = reader.parse_record(d.record, "t")[0]
    sents = _sentences(doc.text)
    books = [re.fullmatch(r"(.+) was written by (.+)\.", s) for s in sents]
    pairs = [(m.group(0), next(s for s in sents if s.startswith(m.group(2) + " was born in ")))
             for m in books if m]
    assert len(pairs) == SUB_PARAMS.candidates
    spans = []
    for k, s in enumerate(x for p in pairs for x in p):
      b = doc.text.find(s)
      spans.append((b, b + len(s), k))
    ctx, q = tok.encode_batch([doc.text, doc.question.text])
    config = segmenter.SegmenterConfig(seq_length=SUB_PARAMS.seq_length, overlap=0,
                                       max_segments_per_document=SUB)
    subs, _ = segmenter.segment_document(doc.id, doc.id, ctx, q, tok.special_ids, config,
                                         mentions=spans)
    assert len(subs) == -(-SUB_PARAMS.segments // SUB)
    sub_of = {}
    for i, sub in enumerate(subs):
      for _, _, _, k in sub.mentions.tolist():
        sub_of.setdefault(k, set()).add(i)
    for t in range(len(pairs)):  # book fact 2t, birth fact 2t + 1: one sub-document each
      assert len(sub_of[2 * t]) == 1 and len(sub_of[2 * t + 1]) == 1
      assert sub_of[2 * t] != sub_of[2 * t + 1], (d.id, t)
    assert abs(d.book_segment - d.birth_segment) == d.distance
  # Every distance still occurs (distance 1 only across the boundary).
  assert {d.distance for d in generate("dev", 30, DEV_SEED, SUB_PARAMS)} == {1, 2, 3, 4}


def test_sub_document_parameters_are_checked():
  with pytest.raises(ValueError, match="sub_document_segments must be"):
    Params(sub_document_segments=6)
  with pytest.raises(ValueError, match="cannot all lie in different sub-documents"):
    Params(sub_document_segments=5)
  with pytest.raises(ValueError, match="overlap 0"):
    Params(sub_document_segments=3, overlap=16)


def test_sub_document_records_keep_facts_and_answer_at_their_global_positions(
    tmp_path_factory, split_docs):
  out = str(tmp_path_factory.mktemp("lrqa_sub"))
  built = build(out, split_docs[:3], split_docs[3:5], seed=TRAIN_SEED, params=SUB_PARAMS,
                segments_per_pack=6, parallel=2)
  for split, docs in (("train", split_docs[:3]), ("dev", split_docs[3:5])):
    subs = collections.defaultdict(set)
    answers = collections.defaultdict(set)
    for r in read_records(built["paths"][f"records_{split}"]):
      for s, real in enumerate(r["segment_mask"]):
        if real:
          subs[r["document_id"][s].decode()].add(
              (r["sub_document_index"][s], r["num_sub_documents"][s]))
      for s in r["answer_segment"]:
        answers[r["document_id"][s].decode()].add(
            (r["sub_document_index"][s], r["segment_index"][s]))
    for d in docs:
      assert subs[d.id] == {(0, 2), (1, 2)}
      assert answers[d.id] == {divmod(d.birth_segment, SUB)}
    s = built["splits"][split]
    assert s["fact_name_mentions_linked_fraction"] == 1.0
    assert s["answers_in_intended_segment_only_fraction"] == 1.0
    assert s["segments_per_document"] == [SUB_PARAMS.segments]
