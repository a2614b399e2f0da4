"""The shared core's small stages, each against an independent expectation: statistics and
distributions, progress lines, keep-first deduplication, label completeness, the manifest's
per-stage reconciliation, and the code revision of an installed package."""

import collections
import logging
import os
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import manifest as manifest_schema
from schemas import records
from pipelines import atomic_files, keys, provenance
from pipelines.beam import manifest, spill, writer
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.dedup import SKIPPED, DeduplicateDocuments, source_order
from pipelines.beam.check_labels import LABELS, CheckLabels, source_file
from pipelines.beam.progress import Progress
from pipelines.beam.stats import STATS, BundleStats, Distribution, SumStats, split_stats
from pipelines.document import Document, Question


# ------------------------------------------------------------------------------ statistics

def test_distribution_matches_a_direct_computation():
  values = [0, 1, 1, 2, 3, 7, 8, 100, 4096]
  d = Distribution.of(values)
  assert (d.count, d.total, d.min, d.max) == (9, sum(values), 0, 4096)
  expected = collections.Counter()
  for v in values:  # bucket: [0,1), [1,2), [2,4), [4,8), ...
    lo = 0 if v == 0 else 1 << (v.bit_length() - 1)
    hi = 1 if v == 0 else lo * 2
    expected[f"{lo}-{hi}"] += 1
  desc = d.describe()
  assert desc["histogram"] == dict(expected)
  assert desc["mean"] == round(sum(values) / 9, 3)
  # Merging two halves equals the distribution of the whole, in either order.
  a, b = Distribution.of(values[:4]), Distribution.of(values[4:])
  assert a.merge(b) == b.merge(a) == d
  assert Distribution().merge(d) == d.merge(Distribution()) == d
  with pytest.raises(ValueError):
    Distribution().add(-1)


def test_distribution_adds_runs_of_a_value_as_one_by_one():
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(2)
  for _ in range(200):
    runs = [(rng.choice([0, 1, 3, 70, 5000]), rng.randrange(0, 4)) for _ in range(rng.randrange(6))]
    bulk = Distribution()
    for v, times in runs:
      bulk.add(v, times)
    assert bulk == Distribution.of([v for v, times in runs for _ in range(times)]), runs


def test_sum_stats_sums_counters_and_merges_distributions_in_a_pipeline():
  parts = [{"a/x": 1, "a/d": Distribution.of([1, 2])}, {"a/x": 2},
           {"b/y": 5, "a/d": Distribution.of([40])}]
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | beam.Create(parts) | beam.CombineGlobally(SumStats())
    assert_that(out, equal_to([{"a/d": Distribution.of([1, 2, 40]), "a/x": 3, "b/y": 5}]))
  counters, dists = split_stats({"a/x": 3, "a/d": Distribution.of([1])})
  assert counters == {"a/x": 3} and list(dists) == ["a/d"]


def test_bundle_stats_emits_one_dict_per_bundle_and_resets():
  s = BundleStats()
  s.count("parse/input")
  s.count("parse/input", 2)
  s.update({"x": 4}, prefix="parse/")
  s.observe("segment/tokens", 10)
  s.observe("segment/tokens", 3)
  (out,) = list(s.emit())
  assert out.tag == STATS
  assert out.value.value == {"parse/input": 3, "parse/x": 4,
                             "segment/tokens": Distribution.of([10, 3])}
  assert list(s.emit()) == []  # reset: nothing left to emit


def test_progress_lines_are_rate_limited(caplog):
  now = [0.0]
  p = Progress("segment", every_s=10, clock=lambda: now[0])
  with caplog.at_level(logging.INFO, logger="pipelines"):
    for t in range(25):
      now[0] = float(t)
      p.update(2)
    p.done(lambda n, e: f"{n} documents in {e:.0f} s")
  lines = [r.getMessage() for r in caplog.records]
  # Due at t=10 and t=20 only, then the final line.
  assert lines == ["segment: 22 done (2/s)", "segment: 42 done (2/s)",
                   "segment: 50 documents in 24 s"]


# ------------------------------------------------------------------------------ dedup

def _doc(doc_id, source_id, answers=("x",)):
  q = Question(doc_id, "Q?", tuple(answers),
               records.ANSWER_TYPE_SPAN if answers else records.ANSWER_TYPE_NONE)
  return Document(id=doc_id, text="x y", source_id=source_id, question=q)


def test_source_order_is_input_order():
  ids = ["f.json#10", "f.json#2", "g.json:1", "f.json#0", "e.json#100"]
  assert sorted(ids, key=source_order) == ["e.json#100", "f.json#0", "f.json#2", "f.json#10",
                                           "g.json:1"]
  assert sorted(ids) != sorted(ids, key=source_order)  # string order was the defect


@pytest.mark.slow
def test_dedup_keeps_the_first_occurrence_and_records_the_skipped_ones():
  docs = [_doc("a", "f#10"), _doc("a", "f#2"), _doc("a", "f#11"), _doc("b", "f#3")]
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | beam.Create(docs) | DeduplicateDocuments()
    assert_that(out.documents | beam.Map(lambda d: (d.id, d.source_id)),
                equal_to([("a", "f#2"), ("b", "f#3")]), label="kept")
    assert_that(out[SKIPPED] | beam.Map(lambda d: (d["stage"], d["reason"], d["source_id"],
                                                   d["document_id"], d["kept_source_id"])),
                equal_to([("dedup", "duplicate_id", "f#10", "a", "f#2"),
                          ("dedup", "duplicate_id", "f#11", "a", "f#2")]), label="skipped")
    assert_that(out[STATS] | beam.CombineGlobally(SumStats()),
                equal_to([{"dedup/input": 4, "dedup/output": 2,
                           "skipped/dedup/duplicate_id": 2}]), label="stats")


# ------------------------------------------------------------------------------ labels

def _entry(doc_id, source_id, labelled=True):
  return spill.Entry(doc_id, source_id, doc_id if labelled is not None else "", labelled, 2, 1,
                     "f", 0, 1, 1, (2,))


def test_unanswered_question_in_a_labelled_file_is_a_dead_letter():
  entries = [_entry("a", "train.json#0"), _entry("b", "train.json#1", labelled=False),
             _entry("c", "test.json#0", labelled=False),
             _entry("d", "test.json#1", labelled=False),
             _entry("e", "books.txt:1", labelled=None)]  # no question: pretraining text
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | beam.Create(entries) | CheckLabels()
    assert_that(out["documents"] | beam.Map(lambda d: d.id), equal_to(["a", "c", "d", "e"]),
                label="kept")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["stage"], d["reason"],
                                                       d["source_id"])),
                equal_to([("labels", "missing_answer", "train.json#1")]), label="dead")
    assert_that(out[LABELS], equal_to([{
        "test.json": {"mode": "unlabelled", "labelled": 0, "unlabelled": 2},
        "train.json": {"mode": "mixed", "labelled": 1, "unlabelled": 1}}]), label="labels")
  assert source_file("gs://b/x#y.json#12") == "gs://b/x#y.json"
  assert source_file("a.jsonl:3") == "a.jsonl"


# ------------------------------------------------------------------------------ manifest

def _header():
  return {"job": "t", "git_revision": "r", "tokenizer": {"name": "n"}, "config": {},
          "inputs": []}


def test_manifest_stage_counts_reconcile_per_stage():
  stats = {"read/records": 9, "parse/input": 9, "parse/output": 7, "segment/input": 7,
           "segment/documents": 6, "segment/segments": 8, "labels/input": 6,
           "labels/output": 5, "dedup/input": 5, "dedup/output": 4,
           "skipped/dedup/duplicate_id": 1,
           "segment/tokens_per_document": Distribution.of([5, 6, 7, 8])}
  reasons = [("read/invalid_json", 1), ("parse/bad_id", 2), ("labels/missing_answer", 1),
             ("segment/empty_context", 1)]
  shards = [{"kind": "records", "path": "r0", "records": 1, "bytes": 9, "packs": 1,
             "segments": 6, "sub_documents": 4, "padding_segments": 2}]
  m = manifest.build_manifest(_header(), 10, stats, reasons, shards, {}, created_at="T")
  assert m["counts"] == {"input": 10, "written": 4, "skipped": 1, "rejected": 5}
  assert [(r["stage"], r["input"], r["output"], r["skipped"], r["rejected"])
          for r in m["stage_counts"]] == [
              ("read", 10, 9, 0, 1), ("parse", 9, 7, 0, 2), ("segment", 7, 6, 0, 1),
              ("labels", 6, 5, 0, 1), ("dedup", 5, 4, 1, 0)]
  assert m["examples"]["documents"] == 4 and m["examples"]["segments"] == 6
  assert m["distributions"]["tokens_per_document"]["sum"] == 26
  assert m["created_at"] == "T" and m["skipped"] == []
  manifest_schema.loads(manifest_schema.dumps(m))


def test_manifest_refuses_a_stage_that_loses_items():
  stats = {"read/records": 3, "parse/input": 3, "parse/output": 3, "segment/input": 2,
           "segment/documents": 2}
  m = manifest.build_manifest(_header(), 3, stats, [], [], {})
  assert m["examples"]["documents"] == 2
  m["counts"] = {"input": 3, "written": 2, "skipped": 0, "rejected": 1}  # totals reconcile...
  m["rejected_by_reason"] = {"parse/x": 1}
  with pytest.raises(manifest_schema.ManifestError, match="stage"):
    manifest_schema.dumps(m)  # ...but parse passed on 3 and segment received 2


def test_writer_shards_on_the_shared_key_group():
  k1, k2 = keys.join_key("doc", "q", "000001"), keys.join_key("doc", "q", "000002")
  assert keys.group_of(k1) == "doc"
  assert {writer.shard_of(k, 97) for k in (k1, k2, "doc")} == {writer.shard_of("doc", 97)}
  assert "skipped/skipped-*-of-*" in writer.OUTPUT_PATTERNS


# ------------------------------------------------------------------------------ provenance

def test_git_revision_of_a_checkout_and_of_an_installed_copy(tmp_path):
  rev = provenance.git_revision()
  head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                        cwd=os.path.dirname(provenance.__file__)).stdout.strip()
  if head:
    assert rev.split("+")[0] == head
  # A copy outside any checkout (as pip installs it) reads the stamp setup.py wrote.
  pkg = tmp_path / "site" / "pipelines"
  pkg.mkdir(parents=True)
  (pkg / "__init__.py").write_text("")
  (pkg / "provenance.py").write_text(open(provenance.__file__).read())
  (pkg / "REVISION").write_text("0123abc\n")
  code = "from pipelines import provenance; print(provenance.git_revision())"
  env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env)
  assert out.stdout.strip() == "0123abc", out.stderr
  (pkg / "REVISION").unlink()
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env)
  assert out.stdout.strip() == "unknown"


def test_spill_round_trip_in_blocks_and_delete(tmp_path):
  directory = str(tmp_path / "_spill")
  writers = [spill.SpillWriter(directory, buffer_bytes=10) for _ in range(2)]
  payloads = [bytes([i]) * (i * 3 + 1) for i in range(20)]
  refs = [writers[i % 2].write(p) for i, p in enumerate(payloads)]
  for w in writers:
    w.close()
  assert len({r.path for r in refs}) == 2  # one file per writer (bundle)
  got = spill.read(reversed(refs))  # any order in, each file read once in offset order
  assert [got[r] for r in refs] == payloads
  value = {"a": [1, 2], "b": "x"}
  assert spill.decode(spill.encode(value)) == value
  entry = spill.Entry("d", "s#0", "q", True, 3, 1, refs[0].path, refs[0].offset, 5, 7, (3,))
  assert entry.records == spill.Ref(refs[0].path, refs[0].offset, 5)
  assert entry.side == spill.Ref(refs[0].path, refs[0].offset + 5, 7)
  assert spill.delete(directory) == 2
  assert not (tmp_path / "_spill").exists()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_write_atomically_writes_behind_in_order_and_fails_loudly(tmp_path, compression):
  import gzip  # pylint: disable=g-import-not-at-top
  chunks = [bytes([i % 256]) * (i * 997 % 5000) for i in range(200)]
  path = str(tmp_path / "out.bin")
  size = writer.write_atomically(path, iter(chunks), compression)
  data = open(path, "rb").read()
  assert size == len(data)
  assert (gzip.decompress(data) if compression == "gzip" else data) == b"".join(chunks)

  def failing():
    yield b"abc"
    raise RuntimeError("encoder broke")

  with pytest.raises(RuntimeError, match="encoder broke"):
    writer.write_atomically(str(tmp_path / "bad.bin"), failing(), compression)
  assert not os.path.exists(tmp_path / "bad.bin")


def test_a_failed_write_behind_is_raised_in_the_caller():
  calls = []

  def write(chunk):
    calls.append(chunk)
    if len(calls) == 2:
      raise OSError("disk full")

  with pytest.raises(OSError, match="disk full"):
    with atomic_files._WriteBehind(write, depth=1) as behind:  # pylint: disable=protected-access
      for i in range(100):
        behind.put(bytes([i]))
  assert calls == [b"\x00", b"\x01"]  # nothing written after the failure


def _segment_all(cfg, docs):
  """(the set-up TokenizeAndSegmentFn, its Segmented outputs for ``docs`` in one bundle, their
  sub-documents as sorted (key, sub-document) pairs)."""
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
  fn = TokenizeAndSegmentFn(cfg)
  fn.setup()
  fn.start_bundle()
  out = [x for d in docs for x in fn.process(d)] + [getattr(x, "value", x)
                                                    for x in fn.finish_bundle()]
  segmented = [x for x in out if hasattr(x, "sub_documents")]
  assert len(segmented) == len(docs)
  subs = sorted(((s.key, s) for x in segmented for s in x.sub_documents), key=lambda kv: kv[0])
  return fn, segmented, subs


@pytest.mark.parametrize("packs_per_read", [1, 2, 1000])
def test_spilled_packs_equal_in_memory_packs_whatever_the_read_chunk(tmp_path, packs_per_read):
  # Documents of several sub-documents (max 3 segments each) in packs of 4 segments: packs
  # planned from the entries alone and read back a few at a time must equal PackEncoder's
  # packs of the in-memory sub-documents, byte for byte.
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  from pipelines.beam.packing import PackEncoder, SpilledPackEncoder  # pylint: disable=g-import-not-at-top
  from pipelines.beam.segment import _SpillFn  # pylint: disable=g-import-not-at-top
  from pipelines.text.segmenter import SegmenterConfig  # pylint: disable=g-import-not-at-top
  cfg = RecordsConfig(segmenter=SegmenterConfig(seq_length=24, overlap=4,
                                                max_segments_per_document=3,
                                                max_question_tokens=6),
                      segments_per_pack=4, batch_size=3)
  docs = [Document(f"d{i}", " ".join(f"word{i}x{j}" for j in range(7 + 23 * i)), f"f#{i}",
                   question=Question(f"q{i}", "which word?") if i % 2 else None)
          for i in range(7)]
  fn, segmented, subs = _segment_all(cfg, docs)
  assert max(s.sub_document_index for _, s in subs) >= 2
  spill_fn = _SpillFn(str(tmp_path / "spill"))
  spill_fn.setup()
  spill_fn.start_bundle()
  entries = [e for x in reversed(segmented) for e in spill_fn.process(x)]
  spill_fn.finish_bundle()
  pad = fn._tokenizer.pad_id  # pylint: disable=protected-access
  want, want_stats = PackEncoder(4, 24, pad)(3, subs)
  got, got_stats = SpilledPackEncoder(4, 24, pad, packs_per_read=packs_per_read)(
      3, sorted(((e.id, e) for e in entries), key=lambda kv: kv[0]))
  want = list(want)
  assert len(want) > 3
  assert list(got) == want
  assert got_stats == want_stats


@pytest.mark.parametrize("pickled", [False, True])
def test_questions_over_one_story_spill_its_tokens_once_and_pack_the_same(tmp_path, pickled):
  # Three questions of different lengths (so different windows and sub-document ranges) per
  # story, as NarrativeQA's documents: the spill writes each story's tokens once and the
  # questions' sub-documents without them; the packs read back equal PackEncoder's packs of the
  # in-memory sub-documents.  Pickled between the stages (an unfused runner), the tokens
  # travel inline as before.
  import pickle  # pylint: disable=g-import-not-at-top
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  from pipelines.beam.packing import PackEncoder, SpilledPackEncoder  # pylint: disable=g-import-not-at-top
  from pipelines.beam.segment import _SpillFn  # pylint: disable=g-import-not-at-top
  from pipelines.text.segmenter import SegmenterConfig  # pylint: disable=g-import-not-at-top
  cfg = RecordsConfig(segmenter=SegmenterConfig(seq_length=24, overlap=4,
                                                max_segments_per_document=3,
                                                max_question_tokens=8),
                      segments_per_pack=4, batch_size=64)
  stories = [" ".join(f"story{i}w{j}" for j in range(200 + 30 * i)) for i in range(3)]
  docs = [Document(f"s{i}:{k}", story, f"qaps#{i * 3 + k}",
                   question=Question(f"s{i}:{k}", " ".join(["why"] * (1 + 3 * k))),
                   source_document_id=f"s{i}")
          for i, story in enumerate(stories) for k in range(3)]
  docs.append(Document("alone", "a text no other document reads " * 30, "other#0"))
  fn, segmented, subs = _segment_all(cfg, docs)
  assert len({tuple(s.windows.reshape(-1)) for _, s in subs}) > len(stories)  # windows differ
  spill_fn = _SpillFn(str(tmp_path / "spill"))
  spill_fn.setup()
  spill_fn.start_bundle()
  entries = [e for x in segmented
             for e in spill_fn.process(pickle.loads(pickle.dumps(x)) if pickled else x)]
  spill_fn.finish_bundle()
  if pickled:
    assert {e.context for e in entries} == {None}
  else:
    shared = [e for e in entries if e.id != "alone"]
    assert len({e.context for e in shared}) == len(stories)
    assert all(e.context.offset < e.offset for e in shared)
    assert [e.context for e in entries if e.id == "alone"] == [None]  # read by one: inline
  pad = fn._tokenizer.pad_id  # pylint: disable=protected-access
  want = list(PackEncoder(4, 24, pad)(3, subs)[0])
  got, _ = SpilledPackEncoder(4, 24, pad, packs_per_read=2)(
      3, sorted(((e.id, e) for e in entries), key=lambda kv: kv[0]))
  assert len(want) > 3
  assert list(got) == want
  data = spill.read(e.records for e in entries)
  spilled = [sub for e in entries for sub in spill.decode(data[e.records])]
  assert all(bool(sub.context) == (pickled or sub.document_id == "alone")
             for sub in spilled)  # the tokens: inline or apart
  assert sorted(sub.context_begin for sub in spilled) == sorted(s.context_begin for _, s in subs)


def test_long_texts_are_tokenised_in_chunks_of_chars_never_cut_inside_a_story(monkeypatch):
  # Books and stories: a chunk goes once its distinct texts reach CHUNK_CHARS (not only at
  # CHUNK documents), never between two questions reading one story; the segments are the
  # same whatever the chunks.
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
  texts = [" ".join(f"t{i}w{j}" for j in range(50 + 20 * i)) for i in range(6)]
  docs = [Document(f"s{i}:{k}", text, f"q#{i}.{k}", question=Question(f"s{i}:{k}", f"q {k}?"))
          for i, text in enumerate(texts) for k in range(1 + i % 3)]

  def run(chunk_chars):
    monkeypatch.setattr(TokenizeAndSegmentFn, "CHUNK_CHARS", chunk_chars)
    fn = TokenizeAndSegmentFn(RecordsConfig(batch_size=1000))
    fn.setup()
    calls = []
    real = fn._tokenizer.encode_raw  # pylint: disable=protected-access
    monkeypatch.setattr(fn._tokenizer, "encode_raw",  # pylint: disable=protected-access
                        lambda batch: calls.append(list(batch)) or real(batch))
    fn.start_bundle()
    out = [x for d in docs for x in fn.process(d)] + [getattr(x, "value", x)
                                                      for x in fn.finish_bundle()]
    fn.teardown()
    segs = {x.id: [s.tokens["token_ids"].tolist() for s in x.sub_documents]
            for x in out if hasattr(x, "sub_documents")}
    return calls, segs

  one_call, want = run(1 << 30)
  assert len(one_call) == 1
  calls, got = run(2 * len(texts[2]))
  assert got == want
  stories = [[t for t in call if t in texts] for call in calls]
  assert [t for call in stories for t in call] == texts  # each story in exactly one call
  assert [len(c) for c in stories] == [3, 2, 1]
  assert all(sum(map(len, c[:-1])) < 2 * len(texts[2]) for c in stories)


def test_entity_keys_of_mentions_resolve_to_ids_when_the_records_are_written():
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  from pipelines.beam.packing import PackEncoder  # pylint: disable=g-import-not-at-top
  from pipelines.beam.segment import TokenizeAndSegmentFn  # pylint: disable=g-import-not-at-top
  from pipelines.document import Mention  # pylint: disable=g-import-not-at-top
  from schemas import example_proto  # pylint: disable=g-import-not-at-top
  text = "Alpha met Beta and Alpha again."
  doc = Document("d", text, "f#0", mentions=(
      Mention(0, 5, entity="Alpha"), Mention(10, 14, entity="Beta"),
      Mention(19, 24, entity="Alpha"), Mention(25, 30, entity_id=7)))
  fn = TokenizeAndSegmentFn(RecordsConfig())
  fn.setup()
  fn.start_bundle()
  out = list(fn.process(doc)) + [x.value for x in fn.finish_bundle()
                                 if not isinstance(x, beam.pvalue.TaggedOutput)]
  (seg,) = [x for x in out if hasattr(x, "sub_documents")]
  (sub,) = seg.sub_documents
  assert sub.entity_keys == ("Alpha", "Beta", "\x007")
  encoder = PackEncoder(128, 512, fn._tokenizer.pad_id)  # pylint: disable=protected-access
  rec = example_proto.decode_example(encoder.encode(0, 0, [sub], {"Alpha": 3, "Gamma": 9}))
  assert rec["mention_entity_id"] == [3, 0, 3, 7]  # Beta is not in the table: unknown (0)
  spans = [text[rec["char_begin"][b]:rec["char_end"][e]]
           for b, e in zip(rec["mention_begin"], rec["mention_end"])]
  assert spans == ["Alpha", "Beta", "Alpha", "again"]
  with pytest.raises(ValueError, match="no entity table"):
    encoder.encode(0, 0, [sub])
