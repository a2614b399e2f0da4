"""The HotpotQA job end to end on hand-made records: outputs, counters, dead letters, bytes."""

import glob
import json
import os

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import documents as documents_schema
from schemas import example_proto, manifest as manifest_schema, records, tfrecord_io
from pipelines import runner
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.config import RecordsConfig
from pipelines.beam.label_answers import LabelAnswers
from pipelines.beam.parse import ParseRecords
from pipelines.beam.stats import STATS, Distribution, SumStats
from pipelines.errors import user_error_message
from pipelines.document import Document, Paragraph, Question
from pipelines.datasets.hotpotqa import dataset as hotpotqa_dataset
from pipelines.datasets.hotpotqa import reader
from pipelines.text.tokenizer import Tokenizer
from tests.pipelines.helpers import PARIS, SMALL, hotpot_record, write_json

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "shared", "samples",
                      "hotpotqa", "hotpot_dev_distractor_v1.head20.json")



def good_records():
  return [
      hotpot_record("q1", "Which city hosts the Louvre?", "Paris", PARIS,
                    supporting=[["Paris", 1], ["Lyon", 1]]),
      hotpot_record("q2", "Is Lyon in France?", "yes", PARIS[:2], supporting=[["Lyon", 0]]),
  ]


def unlabelled_records():
  """A test-set file: no question has an answer, so all are kept unlabelled."""
  return [hotpot_record("q3", "Where is Nice?", None, PARIS[2:])]


def bad_records():
  return [
      {"_id": "q4", "context": PARIS},  # no question
      ["not", "an", "object"],
      hotpot_record("q5", "Broken?", "x", [["Title only"]]),
      hotpot_record("q1", "Which city hosts the Louvre?", "Paris", PARIS),  # duplicate id
  ]


def read_records(out):
  for path in sorted(glob.glob(os.path.join(out, "records-*.tfrecord"))):
    for payload in tfrecord_io.read_records(path):
      yield example_proto.decode_example(payload)


read_side = documents_schema.load


@pytest.fixture(scope="module")
def job(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("hotpot")
  path = write_json(tmp / "in.json", good_records() + bad_records())
  test_path = write_json(tmp / "test.json", unlabelled_records())
  out = str(tmp / "out")
  m = runner.run_dataset("hotpotqa", f"{path},{test_path}", out, SMALL)
  return path, out, m


@pytest.mark.slow
def test_manifest_counts_reconcile(job):
  path, out, m = job
  assert m["counts"] == {"input": 7, "written": 3, "skipped": 1, "rejected": 3}
  assert [(r["stage"], r["input"], r["output"], r["skipped"], r["rejected"])
          for r in m["stage_counts"]] == [("read", 7, 7, 0, 0), ("parse", 7, 4, 0, 3),
                                          ("answers", 4, 4, 0, 0), ("segment", 4, 4, 0, 0),
                                          ("labels", 4, 4, 0, 0), ("dedup", 4, 3, 1, 0)]
  assert m["stages"]["answers"]["exact"] == 2  # q1 and its duplicate; q2 is a yes answer
  assert m["labels"] == {
      path: {"mode": "labelled", "labelled": 3, "unlabelled": 0},
      path.replace("in.json", "test.json"): {"mode": "unlabelled", "labelled": 0,
                                             "unlabelled": 1}}
  assert m["input_count_exact"] is True
  assert [i["path"] for i in m["inputs"]] == sorted([path, path.replace("in.json", "test.json")])
  assert all(i["bytes"] == os.path.getsize(i["path"]) for i in m["inputs"])
  assert m["created_at"].endswith("+00:00")
  dists = m["distributions"]
  assert set(dists) >= {"tokens_per_document", "segments_per_document", "answers_per_question"}
  # Over the segmented documents (the duplicate q1 included: dedup comes after segmenting).
  assert dists["segments_per_document"]["count"] == 4
  assert dists["segments_per_document"]["sum"] == m["stages"]["segment"]["segments"]
  # Answer occurrences per span question: q1 and its duplicate ("Paris" 3 times; q2 is yes,
  # q3 unlabelled).
  assert dists["answers_per_question"]["count"] == 2
  assert dists["answers_per_question"]["min"] == dists["answers_per_question"]["max"] == 3
  assert m["skipped_by_reason"] == {"dedup/duplicate_id": 1}
  assert m["rejected_by_reason"] == {"parse/bad_context": 1, "parse/missing_question": 1,
                                     "parse/not_an_object": 1}
  assert m["schema_version"] == records.SCHEMA_VERSION
  assert m["tokenizer"]["fingerprint"].startswith("sha256:")
  assert m["config"]["segments_per_pack"] == 8 and m["config"]["seq_length"] == 48
  assert os.path.getsize(os.path.join(out, "COMPLETED")) == 0
  assert m["examples"]["documents"] == 3
  assert sum(s["records"] for s in m["shards"]) == m["examples"]["packs"]
  assert [s["path"] for s in m["shards"]] == ["records-00000-of-00002.tfrecord",
                                             "records-00001-of-00002.tfrecord"]


def test_dead_letters_name_stage_reason_and_source(job):
  path, out, _ = job
  lines = [json.loads(l) for f in glob.glob(os.path.join(out, "dead_letter", "*.jsonl"))
           for l in open(f)]
  got = sorted((d["stage"], d["reason"], d["source_id"]) for d in lines)
  assert got == [("parse", "bad_context", f"{path}#4"), ("parse", "missing_question", f"{path}#2"),
                 ("parse", "not_an_object", f"{path}#3")]
  skipped = [json.loads(l) for f in glob.glob(os.path.join(out, "skipped", "*.jsonl"))
             for l in open(f)]
  assert [(d["stage"], d["reason"], d["source_id"], d["kept_source_id"]) for d in skipped] == [
      ("dedup", "duplicate_id", f"{path}#5", f"{path}#0")]


def test_records_carry_ids_labels_and_exact_answer_spans(job):
  _, out, m = job
  side = read_side(out)
  assert sorted(side) == ["q1", "q2", "q3"]
  N, L = 8, 48
  seen = {}
  for rec in read_records(out):
    records.validate_record(rec, N, L)
    mask = rec["segment_mask"]
    for s in range(N):
      if not mask[s]:
        assert rec["document_index"][s] == -1 and rec["document_id"][s] == b""
        assert set(rec["input_mask"][s * L:(s + 1) * L]) == {0}
        continue
      did = rec["document_id"][s].decode()
      seen.setdefault(did, []).append(rec["segment_index"][s])
      assert rec["question_id"][s].decode() == did
      expected_type = {"q1": records.ANSWER_TYPE_SPAN, "q2": records.ANSWER_TYPE_YES,
                       "q3": records.ANSWER_TYPE_NONE}[did]
      assert rec["answer_type"][s] == expected_type
      if did == "q3":
        assert rec["supporting"][s] == -1
    for seg, b, e in zip(rec["answer_segment"], rec["answer_begin"], rec["answer_end"]):
      did = rec["document_id"][seg].decode()
      text = side[did]["text"]
      cb, ce = rec["char_begin"][seg * L + b], rec["char_end"][seg * L + e]
      assert text[cb:ce] == "Paris"
      assert rec["token_kind"][seg * L + b] == records.TOKEN_KIND_CONTEXT
  # Every segment of every document is written exactly once, whole documents per pack.
  for did, idx in seen.items():
    assert sorted(idx) == list(range(len(idx)))
  assert sum(len(v) for v in seen.values()) == m["examples"]["segments"]
  # q1 labels every "Paris" occurrence: in its title line, twice in sentences.
  q1_text = side["q1"]["text"]
  assert q1_text.count("Paris") == 3


def test_supporting_flag_is_per_segment(job):
  _, out, _ = job
  side = read_side(out)
  paras = {p["title"]: p for p in side["q1"]["paragraphs"]}
  for rec in read_records(out):
    for s, did in enumerate(rec["document_id"]):
      if did != b"q1":
        continue
      b, e = rec["context_char_begin"][s], rec["context_char_end"][s]
      touches = any(p["supporting"] and b < p["end"] and p["begin"] < e for p in paras.values())
      assert rec["supporting"][s] == int(touches)


def test_parse_stage_exact_documents_and_dead_letters():
  rec = hotpot_record("a", "Q?", "no", [["T", ["S1.", " S2."]], ["U", ["X."]]],
                      supporting=[["U", 0]])
  expected = Document(
      id="a", text="T\nS1. S2.\n\nU\nX.", source_id="f#0",
      paragraphs=(Paragraph("T", 0, 9, ((2, 5), (5, 9)), False),
                  Paragraph("U", 11, 15, ((13, 15),), True)),
      question=Question("a", "Q?", ("no",), records.ANSWER_TYPE_NO))
  with TestPipeline(runner=FnApiRunner()) as p:
    out = (p | beam.Create([("f#0", rec), ("f#1", {"_id": 3})])
           | ParseRecords(reader.parse_record, "test"))
    assert_that(out.documents, equal_to([expected]), label="docs")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["stage"], d["reason"], d["source_id"])),
                equal_to([("parse", "bad_id", "f#1")]), label="dead")


@pytest.mark.slow
def test_beam_counters(tmp_path):
  path = write_json(tmp_path / "in.json", good_records() + bad_records())
  p = beam.Pipeline(runner=FnApiRunner())
  header = {"job": "test", "git_revision": "x", "tokenizer": Tokenizer().describe(),
            "config": {}}
  hotpotqa_dataset.build(p, [path], str(tmp_path / "out"), SMALL, header)
  result = p.run()
  result.wait_until_finish()
  counters = {c.key.metric.name: c.committed
              for c in result.metrics().query()["counters"]}
  assert counters["parse_ok"] == 3
  assert counters["parse_rejected_missing_question"] == 1
  assert counters["duplicate_id"] == 1
  assert counters["documents"] == 3  # segmented: q1, q2 and the duplicate q1
  dists = {d.key.metric.name: d.committed for d in result.metrics().query()["distributions"]}
  assert dists["segments_per_document"].count == 3
  assert dists["answers_per_question"].sum == 6  # q1 and its duplicate: 3 Paris each; q2: yes
  assert dists["answers_per_question"].count == 2


@pytest.mark.slow
def test_determinism_across_runner_modes(tmp_path):
  path = write_json(tmp_path / "in.json", good_records() * 1 + [
      hotpot_record(f"x{i}", f"Question {i}?", "Paris", PARIS) for i in range(12)])
  outs = []
  for mode, args in (("a", []), ("b", ["--direct_running_mode=multi_processing",
                                       "--direct_num_workers=2"])):
    cfg = RecordsConfig(segmenter=SMALL.segmenter, segments_per_pack=8, num_shards=3,
                        batch_size=5 if mode == "a" else 64)
    out = str(tmp_path / mode)
    runner.run_dataset("hotpotqa", path, out, cfg, None, args)
    outs.append(out)
  def contents(out):
    files = sorted(glob.glob(os.path.join(out, "**", "*-of-*"), recursive=True))
    return {os.path.relpath(f, out): open(f, "rb").read() for f in files}
  # The distributed-runner layout (documents reshuffled before tokenising) writes the same.
  p = beam.Pipeline(runner=FnApiRunner())
  cfg = RecordsConfig(segmenter=SMALL.segmenter, segments_per_pack=8, num_shards=3)
  header = runner.manifest_header("hotpotqa", cfg, path)
  hotpotqa_dataset.build(p, [path], str(tmp_path / "c"), cfg, header, reshuffle=True)
  p.run().wait_until_finish()
  a, b, c = contents(outs[0]), contents(outs[1]), contents(str(tmp_path / "c"))
  assert sorted(a) == sorted(b) and len(a) == 3 + 3 + 1 + 1
  assert a == b == c
  assert sum(len(v) for k, v in a.items() if k.startswith("records")) > 0
  assert not os.path.exists(os.path.join(outs[0], "_spill"))  # temporary files deleted


@pytest.mark.slow
def test_invalid_json_file_is_dead_lettered_and_missing_input_fails(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text('[{"_id": "a", ')
  good = write_json(tmp_path / "good.json", good_records()[:1])
  m = runner.run_dataset("hotpotqa", f"{bad},{good}", str(tmp_path / "out"), SMALL)
  assert m["counts"] == {"input": 2, "written": 1, "skipped": 0, "rejected": 1}
  assert m["rejected_by_reason"] == {"read/invalid_json": 1}
  # A list that breaks off after a good item: the good item is read, the rest dead-lettered.
  cut = tmp_path / "cut.json"
  cut.write_text(json.dumps(good_records()[:1])[:-1] + ', {"_id": "b", "question": ')
  m = runner.run_dataset("hotpotqa", str(cut), str(tmp_path / "out_cut"), SMALL)
  assert m["counts"] == {"input": 2, "written": 1, "skipped": 0, "rejected": 1}
  dl = [json.loads(l) for f in glob.glob(str(tmp_path / "out_cut" / "dead_letter" / "*"))
        for l in open(f)]
  assert [(d["stage"], d["reason"], d["source_id"]) for d in dl] == [
      ("read", "invalid_json", f"{cut}#1")]
  with pytest.raises(FileNotFoundError, match="matches no file"):
    runner.run_dataset("hotpotqa", str(tmp_path / "nothing-*.json"), str(tmp_path / "o2"), SMALL)


@pytest.mark.slow
def test_existing_output_is_refused_unless_overwrite(tmp_path):
  path = write_json(tmp_path / "in.json", good_records())
  out = tmp_path / "out"
  runner.run_dataset("hotpotqa", path, str(out), RecordsConfig(segmenter=SMALL.segmenter,
                                                               segments_per_pack=8, num_shards=3))
  (out / "notes.txt").write_text("mine")
  with pytest.raises(FileExistsError, match="--overwrite"):
    runner.run_dataset("hotpotqa", path, str(out), SMALL)
  m = runner.run_dataset("hotpotqa", path, str(out), SMALL, overwrite=True)  # 2 shards now, not 3
  assert sorted(p.name for p in out.glob("records-*")) == [s["path"] for s in m["shards"]]
  assert len(list((out / "documents").glob("*"))) == 2
  assert (out / "notes.txt").read_text() == "mine"  # only the job's own files are replaced


@pytest.mark.slow
def test_without_dedup_duplicate_ids_fail_clearly(tmp_path):
  path = write_json(tmp_path / "in.json", good_records() + bad_records())
  cfg = RecordsConfig(segmenter=SMALL.segmenter, segments_per_pack=8, num_shards=2,
                      deduplicate=False)
  with pytest.raises(Exception, match="--nodeduplicate ids must be unique") as e:
    runner.run_dataset("hotpotqa", path, str(tmp_path / "out"), cfg)
  assert user_error_message(e.value).startswith("1 document ids occur more than once")
  assert list((tmp_path / "out").rglob("*")) == []  # nothing written, not even a directory
  m = runner.run_dataset("hotpotqa", write_json(tmp_path / "ok.json", good_records()),
                         str(tmp_path / "ok"), cfg)
  assert m["counts"] == {"input": 2, "written": 2, "skipped": 0, "rejected": 0}


@pytest.mark.slow
def test_jsonl_input_with_a_bad_line(tmp_path):
  path = tmp_path / "in.jsonl"
  path.write_text("\n".join([json.dumps(good_records()[0]), "{oops", json.dumps(
      good_records()[1])]) + "\n")
  m = runner.run_dataset("hotpotqa", str(path), str(tmp_path / "out"), SMALL)
  assert m["counts"] == {"input": 3, "written": 2, "skipped": 0, "rejected": 1}
  dl = [json.loads(l) for f in glob.glob(str(tmp_path / "out" / "dead_letter" / "*"))
        for l in open(f)]
  assert dl[0]["source_id"] == f"{path}:2"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SAMPLE), reason="shared samples not present")
def test_official_dev_sample(tmp_path):
  m = runner.run_dataset("hotpotqa", SAMPLE, str(tmp_path / "out"), RecordsConfig())
  assert m["counts"] == {"input": 20, "written": 20, "skipped": 0, "rejected": 0}
  assert m["examples"]["documents"] == 20
  manifest_schema.loads(open(tmp_path / "out" / "manifest.json").read())
  side = read_side(str(tmp_path / "out"))
  gold = json.load(open(SAMPLE))
  # Every span question of the sample gets at least one labelled answer occurrence.
  labelled = set()
  for rec in read_records(str(tmp_path / "out")):
    labelled.update(rec["document_id"][s].decode() for s in rec["answer_segment"])
  spans = {g["_id"] for g in gold if g["answer"].lower() not in ("yes", "no")}
  assert spans - labelled == set()
  assert set(side) == {g["_id"] for g in gold}


def test_hugging_face_export_layout_parses_like_the_official_one():
  official = hotpot_record("a", "Q?", "Paris", PARIS[:2], supporting=[["Paris", 1], ["Lyon", 0]])
  hf = {"id": "a", "question": "Q?", "answer": "Paris", "type": "bridge", "level": "hard",
        "context": {"title": [t for t, _ in PARIS[:2]], "sentences": [s for _, s in PARIS[:2]]},
        "supporting_facts": {"title": ["Paris", "Lyon"], "sent_id": [1, 0]}}
  assert reader.parse_record(hf, "x") == reader.parse_record(official, "x")
  with pytest.raises(Exception, match="equal length"):
    reader.parse_record(dict(hf, context={"title": ["A"], "sentences": []}), "x")


def _dead_letters(out):
  return sorted((d["stage"], d["reason"], d["source_id"])
                for f in glob.glob(os.path.join(out, "dead_letter", "*.jsonl"))
                for d in map(json.loads, open(f)))


@pytest.mark.slow
def test_corrupt_items_in_the_middle_of_a_list_lose_nothing(tmp_path):
  # Issue 8: the old reader stopped at the first corrupt item (input 3 for a file of 5).
  items = [json.dumps(hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARIS))
           for i in range(5)]
  items[1] = items[1].replace('"question": ', '"question" ', 1)  # missing colon
  items[3] = items[3][:40] + "}"                                   # cut short inside a string
  path = tmp_path / "in.json"
  path.write_text("[" + ",\n".join(items) + "]")
  out = str(tmp_path / "out")
  m = runner.run_dataset("hotpotqa", str(path), out, SMALL)
  assert m["counts"] == {"input": 5, "written": 3, "skipped": 0, "rejected": 2}
  assert _dead_letters(out) == [("read", "invalid_json", f"{path}#1"),
                                ("read", "invalid_json", f"{path}#3")]
  assert sorted(read_side(out)) == ["q0", "q2", "q4"]
  assert m["stage_counts"][0] == {"stage": "read", "input": 5, "output": 3, "skipped": 0,
                                  "rejected": 2}


@pytest.mark.slow
def test_invalid_utf8_in_one_json_line_loses_only_that_line(tmp_path):
  # Issue 8: the old reader dead-lettered the whole file (0 of 5 written).
  lines = [json.dumps(hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARIS),
                      ensure_ascii=False).encode("utf-8") for i in range(5)]
  lines[2] = lines[2].replace(b"Louvre", b"Louvr\xff\xfe")
  path = tmp_path / "in.jsonl"
  path.write_bytes(b"\n".join(lines) + b"\n")
  out = str(tmp_path / "out")
  m = runner.run_dataset("hotpotqa", str(path), out, SMALL)
  assert m["counts"] == {"input": 5, "written": 4, "skipped": 0, "rejected": 1}
  assert _dead_letters(out) == [("read", "invalid_utf8", f"{path}:3")]
  assert sorted(read_side(out)) == ["q0", "q1", "q3", "q4"]
  assert m["input_count_exact"] is True


@pytest.mark.slow
def test_label_stage_sets_answer_spans_exactly():
  rec = hotpot_record("a", "Q?", "Paris", [["T", ["Paris is big.", " I like paris."]]])
  doc, _ = reader.parse_record(rec, "f#0")
  yes, _ = reader.parse_record(hotpot_record("b", "Q?", "yes", PARIS[:1]), "f#1")
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | beam.Create([doc, yes]) | LabelAnswers()
    assert_that(out.documents | beam.Map(lambda d: (d.id, d.question.answer_spans)),
                equal_to([("a", ((2, 7), (23, 28))), ("b", ())]), label="spans")
    assert_that(out[STATS] | beam.CombineGlobally(SumStats()),
                equal_to([{"answers/input": 2, "answers/output": 2, "answers/exact": 1,
                           "answers/answers_per_question": Distribution.of([2])}]),
                label="stats")
  assert doc.text == "T\nParis is big. I like paris."  # so the spans above are (2, 7), (23, 28)
