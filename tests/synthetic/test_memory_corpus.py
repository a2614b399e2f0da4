"""The memory-use corpus (synthetic/memory_corpus/): deterministic generation, disjoint
train / held-out entities, and records from the real Wikipedia job in which the same entity
recurs across the segments of a document."""

import collections
import json
import os

import pytest

from schemas import documents as documents_schema
from schemas import entities as entities_schema
from schemas import records_dir
from synthetic.memory_corpus import build as mc_build
from synthetic.memory_corpus import corpus as mc

pytestmark = pytest.mark.slow  # whole-job or multi-replica fixtures

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(REPO, "..", "shared", "samples")
TRAIN_DOCS, HELDOUT_DOCS = 24, 8


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """One build (the real jobs run as subprocesses); what ``build()`` wrote to ``corpus.json``,
  which must be what it returned."""
  out = str(tmp_path_factory.mktemp("memcorpus"))
  result = mc_build.build(out, seed=3, train_docs=TRAIN_DOCS, heldout_docs=HELDOUT_DOCS,
                          seq_length=128, segments_per_pack=16, samples_dir=SAMPLES)
  with open(os.path.join(out, "corpus.json"), encoding="utf-8") as f:
    written = json.load(f)
  assert written == json.loads(json.dumps(result))
  return written


def _mentions(out):
  """(document id, segment index, mention text, entity id) of every mention in the records, and
  {document id: its segment indices}."""
  docs = documents_schema.load(out)
  found, segments = [], collections.defaultdict(set)
  for r in records_dir.iter_packs(out):
    L = len(r["token_ids"]) // len(r["segment_mask"])
    for s, real in enumerate(r["segment_mask"]):
      if real:
        segments[r["document_id"][s].decode()].add(r["segment_index"][s])
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc = r["document_id"][s].decode()
      text = docs[doc]["text"][r["char_begin"][s * L + b]:r["char_end"][s * L + e]]
      found.append((doc, r["segment_index"][s], text, ent))
  return found, segments


def test_same_seed_same_dump_bytes_and_other_seed_differs(tmp_path):
  paths = []
  for k, seed in enumerate((5, 5, 6)):
    corpus = mc.generate_corpus(seed, train_docs=6, heldout_docs=3)
    paths.append(str(tmp_path / f"d{k}.xml.bz2"))
    mc.write_split(corpus["train"], paths[-1], str(tmp_path / f"c{k}.jsonl"))
  data = [open(p, "rb").read() for p in paths]
  assert data[0] == data[1]
  assert open(tmp_path / "c0.jsonl", "rb").read() == open(tmp_path / "c1.jsonl", "rb").read()
  assert mc.dump_bytes(paths[0]) != mc.dump_bytes(paths[2])


@pytest.mark.slow
def test_the_built_dumps_are_what_the_generator_writes(built, tmp_path):
  corpus = mc.generate_corpus(3, TRAIN_DOCS, HELDOUT_DOCS)
  for split in mc.SPLITS:
    again = str(tmp_path / f"{split}.xml.bz2")
    mc.write_split(corpus[split], again, str(tmp_path / f"{split}.jsonl"))
    assert open(again, "rb").read() == open(built["splits"][split]["dump"], "rb").read()


def test_heldout_does_not_depend_on_the_training_size():
  a = mc.generate_corpus(1, train_docs=2, heldout_docs=4)["heldout"]
  b = mc.generate_corpus(1, train_docs=30, heldout_docs=4)["heldout"]
  assert [d.wikitext for d in a] == [d.wikitext for d in b]


def test_heldout_entities_are_new():
  corpus = mc.generate_corpus(0, train_docs=60, heldout_docs=15)
  titles = {split: [e.title for d in docs for e in [d.subject] + d.cast]
            for split, docs in corpus.items()}
  for split in mc.SPLITS:  # every surface name names one entity of the corpus
    assert len(titles[split]) == len(set(titles[split]))
  assert not set(titles["train"]) & set(titles["heldout"])
  train_text = "\n".join(d.wikitext for d in corpus["train"])
  people = [t for d in corpus["heldout"] for e in [d.subject] + d.cast if e.kind == "person"
            for t in [e.title]]
  assert people and not [t for t in people if t in train_text]
  ids = {split: {d.page_id for d in docs} for split, docs in corpus.items()}
  assert len(ids["train"]) == 60 and len(ids["heldout"]) == 15
  assert not ids["train"] & ids["heldout"]


def test_cues_are_unique_within_a_document_and_mentions_recur():
  corpus = mc.generate_corpus(2, train_docs=20, heldout_docs=2)
  for d in corpus["train"]:
    for kind in ("person", "place", "org"):
      cast = [e for e in d.cast if e.kind == kind]
      for cue in cast[0].cues if cast else ():
        if cue != "location":
          values = [e.cues[cue] for e in cast]
          assert len(values) == len(set(values)), (d.title, kind, cue)
    assert sum(e.mentions >= 2 for e in d.cast) >= 0.8 * len(d.cast), d.title
    assert d.subject.mentions >= 3


def test_manifests_reconcile_and_every_document_is_written(built):
  for split, docs in (("train", TRAIN_DOCS), ("heldout", HELDOUT_DOCS)):
    s = built["splits"][split]
    c = records_dir.read_manifest(s["output_dir"])["counts"]
    assert c["input"] == c["written"] + c["skipped"] + c["rejected"]
    assert c == {"input": docs, "written": docs, "skipped": 0, "rejected": 0}
    assert s["reconciles"] and s["documents"] == docs
  for name in ("wikipedia", "books"):
    real = built["real"][name]
    if real is None:
      assert not os.path.isdir(os.path.join(SAMPLES, name if name == "wikipedia" else "books"))
      continue
    c = records_dir.read_manifest(real["output_dir"])["counts"]
    assert c["input"] == c["written"] + c["skipped"] + c["rejected"] and c["written"] > 0


def test_train_and_heldout_records_are_disjoint(built):
  docs = {split: set(documents_schema.load(built["splits"][split]["output_dir"]))
          for split in mc.SPLITS}
  assert len(docs["train"]) == TRAIN_DOCS and len(docs["heldout"]) == HELDOUT_DOCS
  assert not docs["train"] & docs["heldout"]
  vocab = {}
  for split in mc.SPLITS:
    table = entities_schema.read_vocabulary(os.path.join(
        built["splits"][split]["output_dir"], "entities", "vocabulary.parquet"))
    vocab[split] = set(entities_schema.titles_by_id(table).values())
  assert vocab["train"] and vocab["heldout"] and not vocab["train"] & vocab["heldout"]


@pytest.mark.parametrize("split", mc.SPLITS)
def test_entities_recur_across_the_segments_of_most_documents(built, split):
  out = built["splits"][split]["output_dir"]
  cast = {}
  with open(built["splits"][split]["cast"], encoding="utf-8") as f:
    for line in f:
      d = json.loads(line)
      cast[str(d["page_id"])] = d
  titles = entities_schema.titles_by_id(entities_schema.read_vocabulary(
      os.path.join(out, "entities", "vocabulary.parquet")))
  by_entity = collections.defaultdict(lambda: collections.defaultdict(set))
  known = collections.Counter()
  mentions, segments = _mentions(out)
  for doc, seg, text, ent in mentions:
    if ent:
      known[doc] += 1
      by_entity[doc][ent].add(seg)
      # The id is the entity whose name (or surname) the mention's text is.
      title = titles[ent]
      names = {e["title"] for e in cast[doc]["entities"]} | {cast[doc]["subject"]["title"]}
      assert title in names, (doc, text, title)
      assert text == title or (text == title.split()[-1] and " " in title), (doc, text, title)
  n = len(cast)
  assert len(segments) == n
  assert sum(known[d] > 0 for d in cast) >= 0.9 * n
  assert sum(1 for _, _, _, ent in mentions if ent) >= 0.95 * len(mentions)
  assert all(len(segments[d]) >= 3 for d in cast)  # several segments of 128 tokens each
  recurring = sum(1 for d in cast if any(len(s) >= 2 for s in by_entity[d].values()))
  assert recurring >= 0.9 * n
  # Most mentions have a mention of the same entity in ANOTHER segment of their document.
  pairs = collections.Counter((doc, seg, ent) for doc, seg, _, ent in mentions if ent)
  supported = sum(c for (doc, seg, ent), c in pairs.items() if by_entity[doc][ent] - {seg})
  assert supported >= 0.9 * sum(pairs.values())
  repeats = sum(c for c in pairs.values() if c > 1)
  assert repeats <= 0.3 * sum(pairs.values())
  s = built["splits"][split]
  assert s["mentions"] == len(mentions) and s["segments"] == sum(map(len, segments.values()))
  assert abs(s["cross_segment_support"] - supported / sum(pairs.values())) < 1e-3
  assert 0.03 < s["mention_token_fraction"] < 0.3


def test_the_trainers_reader_reads_the_heldout_packs(built):
  import tensorflow as tf  # noqa: F401  (the trainer's reader; no `tfrecord` in this process)
  from model.data.pack_reader import dataset_from_output_dir

  s = built["splits"]["heldout"]
  k = s["max_mentions_per_pack"]
  segments = mentions = 0
  for pack in dataset_from_output_dir(s["output_dir"], max_mentions=k):
    assert int(pack["mentions_dropped"]) == 0
    segments += int(pack["segment_mask"].numpy().sum())
    ids = pack["mentions_entity_id"].numpy()[pack["mentions_mask"].numpy() > 0]
    mentions += len(ids)
    assert (ids > 0).all()
  assert segments == s["segments"] and mentions == s["mentions"]


def test_a_second_build_into_the_same_directory_is_refused_before_writing(built):
  out = built["out_dir"]
  before = os.path.getmtime(built["splits"]["train"]["dump"])
  with pytest.raises(FileExistsError, match="earlier build"):
    mc_build.build(out, train_docs=2, heldout_docs=1, include_samples=False)
  assert os.path.getmtime(built["splits"]["train"]["dump"]) == before


def test_missing_samples_are_skipped(tmp_path):
  samples = mc_build._samples  # pylint: disable=protected-access
  assert samples(str(tmp_path / "absent")) == ([], [])
  assert samples(None) == ([], [])
  wiki, books = samples(SAMPLES)
  if os.path.isdir(SAMPLES):
    assert all(p.endswith(".xml.bz2") for p in wiki) and all(p.endswith(".txt") for p in books)
