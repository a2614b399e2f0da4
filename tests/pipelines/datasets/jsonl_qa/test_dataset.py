"""The jsonl_qa job end to end (``python -m pipelines jsonl_qa``, in-process): records with exact
labels, dead letters with their reasons, skipped duplicates, counters that reconcile, and the
shipped sample."""

from __future__ import annotations

import glob
import json
import os

import pytest

from schemas import documents as documents_schema
from schemas import example_proto, jsonl_qa, records, tfrecord_io
from pipelines import __main__ as generic

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                      "pipelines", "datasets", "jsonl_qa", "sample")
FLAGS = ["--seq_length", "48", "--overlap", "8", "--max_segments_per_document", "6",
         "--max_question_tokens", "12", "--segments_per_pack", "8", "--num_shards", "2",
         "--log_level", "WARNING"]
CONTEXT = ("The lighthouse at Carrow Point was lit in 1858. Its keeper, Ada Penrose, kept the "
           "lamp burning through the gale of 1859. Ada Penrose saved three ships that night.")


def _lines():
  good = [
      {"id": "keeper", "question": "Who kept the lamp?", "context": CONTEXT,
       "answers": ["Ada Penrose"], "title": "Carrow Point"},
      {"id": "gale", "question": "When was the gale?", "context": CONTEXT,
       "answers": [{"text": "1859", "start": CONTEXT.index("1859")}]},
      {"id": "mill", "question": "Who built the mill?", "context_file": "texts/mill.txt",
       "answers": [{"start": 34, "end": 44}]},
  ]
  bad = [
      '{"id": "broken", "question": ',                                       # invalid_json
      {"id": "noq", "context": CONTEXT},                                     # missing_field
      {"id": "typed", "question": "Q?", "context": CONTEXT, "title": 3},     # bad_field
      {"id": "far", "question": "Q?", "context": CONTEXT,
       "answers": [{"start": 10, "end": 999}]},                               # span_out_of_range
      {"id": "wrong", "question": "Q?", "context": CONTEXT,
       "answers": [{"text": "Grace", "start": 0, "end": 5}]},                 # span_text_mismatch
      {"id": "lost", "question": "Q?", "context_file": "texts/lost.txt",
       "answers": ["x"]},                                                     # missing_context_file
      {"id": "keeper", "question": "Who kept the lamp?", "context": CONTEXT,
       "answers": ["Ada Penrose"]},                                           # duplicate id
  ]
  return good + bad


@pytest.fixture(scope="module")
def job(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("jsonl_qa")
  os.makedirs(tmp / "texts")
  (tmp / "texts" / "mill.txt").write_text("The mill on the Alde was built by Jonas Hale.",
                                          encoding="utf-8")
  path = str(tmp / "qa.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    for line in _lines():
      f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
  out = str(tmp / "out")
  # (its bad lines, one per reason, are more than the default error budget: accepted)
  assert generic.main(["jsonl_qa", "--input", path, "--output_dir", out,
                       "--max_error_fraction", "1"] + FLAGS) == 0
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return path, out, json.load(f)


def _side_lines(out, folder):
  return [json.loads(line) for f in sorted(glob.glob(os.path.join(out, folder, "*.jsonl")))
          for line in open(f, encoding="utf-8")]


def _records(out):
  for path in sorted(glob.glob(os.path.join(out, "records-*.tfrecord"))):
    for payload in tfrecord_io.read_records(path):
      yield example_proto.decode_example(payload)


@pytest.mark.slow
def test_counters_reconcile_and_the_manifest_names_the_task(job):
  _, _, m = job
  assert m["job"] == "jsonl_qa" and m["task"] == "extractive_qa"
  assert m["counts"] == {"input": 10, "written": 3, "skipped": 1, "rejected": 6}
  assert [(r["stage"], r["input"], r["output"], r["skipped"], r["rejected"])
          for r in m["stage_counts"]] == [("read", 10, 9, 0, 1), ("parse", 9, 4, 0, 5),
                                          ("answers", 4, 4, 0, 0), ("segment", 4, 4, 0, 0),
                                          ("labels", 4, 4, 0, 0), ("dedup", 4, 3, 1, 0)]
  assert m["stages"]["parse"]["span_answers"] == 2
  assert m["stages"]["parse"]["string_answers_exact"] == 2  # keeper and its duplicate
  assert m["stages"]["answers"]["labelled"] == 4


def test_each_bad_line_is_a_dead_letter_with_its_reason(job):
  path, out, m = job
  got = sorted((d["stage"], d["reason"], d["source_id"]) for d in _side_lines(out, "dead_letter"))
  assert got == sorted([("read", "invalid_json", f"{path}:4"),
                        ("parse", "missing_field", f"{path}:5"),
                        ("parse", "bad_field", f"{path}:6"),
                        ("parse", "span_out_of_range", f"{path}:7"),
                        ("parse", "span_text_mismatch", f"{path}:8"),
                        ("parse", "missing_context_file", f"{path}:9")])
  assert m["rejected_by_reason"] == {
      "read/invalid_json": 1, "parse/missing_field": 1, "parse/bad_field": 1,
      "parse/span_out_of_range": 1, "parse/span_text_mismatch": 1,
      "parse/missing_context_file": 1}
  skipped = _side_lines(out, "skipped")
  assert [(d["reason"], d["source_id"], d["kept_source_id"]) for d in skipped] == [
      ("duplicate_id", f"{path}:10", f"{path}:1")]


def test_records_label_exactly_the_answers(job):
  _, out, _ = job
  side = documents_schema.load(out)
  assert sorted(side) == ["gale", "keeper", "mill"]
  assert side["keeper"]["paragraphs"][0]["title"] == "Carrow Point"
  assert side["mill"]["text"] == "The mill on the Alde was built by Jonas Hale."
  n, length = 8, 48
  found = {}
  for rec in _records(out):
    records.validate_record(rec, n, length)
    for seg, b, e in zip(rec["answer_segment"], rec["answer_begin"], rec["answer_end"]):
      did = rec["document_id"][seg].decode()
      assert rec["answer_type"][seg] == records.ANSWER_TYPE_SPAN
      cb, ce = rec["char_begin"][seg * length + b], rec["char_end"][seg * length + e]
      found.setdefault(did, set()).add((cb, ce))
  keeper = CONTEXT.index("Ada Penrose")
  assert found["keeper"] == {(keeper, keeper + 11),
                             (CONTEXT.rindex("Ada Penrose"), CONTEXT.rindex("Ada Penrose") + 11)}
  assert found["gale"] == {(CONTEXT.index("1859"), CONTEXT.index("1859") + 4)}
  assert found["mill"] == {(34, 44)}


@pytest.mark.slow
def test_the_sample_runs_and_its_long_document_spans_segments(tmp_path):
  path = os.path.join(SAMPLE, "examples.jsonl")
  out = str(tmp_path / "out")
  assert generic.main(["jsonl_qa", "--input", path, "--output_dir", out] + FLAGS) == 0
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    m = json.load(f)
  assert m["counts"] == {"input": 5, "written": 5, "skipped": 0, "rejected": 0}
  assert m["stages"]["answers"]["labelled"] == 5
  side = documents_schema.load(out)
  with open(path, encoding="utf-8") as f:
    examples = [jsonl_qa.parse_line(line) for line in f]
  for ex in examples:  # the gold answers, as the evaluation reads them, are the side file's
    assert side[ex.id]["answers"] == jsonl_qa.answer_texts(ex, side[ex.id]["text"])
  chronicle = side["aldbridge-bell-inscription"]["text"]
  assert len(chronicle.split()) > 3000
  # A long document becomes sub-documents of --max_segments_per_document segments each.
  assert m["examples"]["sub_documents"] > m["examples"]["documents"]


def test_unknown_dataset_is_one_line_with_the_closest_name(capsys):
  assert generic.main(["jsonl-qa", "--input", "x", "--output_dir", "y"]) == 2
  assert capsys.readouterr().err.splitlines() == [
      "python -m pipelines: error: unknown dataset 'jsonl-qa' (did you mean jsonl_qa?); see "
      "python -m pipelines --help"]
