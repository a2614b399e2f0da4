"""HotpotQA from the Hugging Face Hub's Parquet layout (``hotpotqa/hotpot_qa``): the same
examples as an official JSON file give byte-identical records and documents; bad Parquet files
are dead letters; row groups are read in order."""

from __future__ import annotations

import json
import os
from typing import Dict, List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import runner
from pipelines.datasets.hotpotqa import hub
from tests.pipelines.helpers import PARIS, SMALL, hotpot_record, write_json

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "shared", "samples",
                      "hotpotqa", "hotpot_dev_distractor_v1.head20.json")

# The Hub's features as Arrow types: a Sequence of a dict is a struct of lists.
HUB_SCHEMA = pa.schema([
    ("id", pa.string()), ("question", pa.string()), ("answer", pa.string()),
    ("type", pa.string()), ("level", pa.string()),
    ("supporting_facts", pa.struct([("title", pa.list_(pa.string())),
                                    ("sent_id", pa.list_(pa.int32()))])),
    ("context", pa.struct([("title", pa.list_(pa.string())),
                           ("sentences", pa.list_(pa.list_(pa.string())))])),
])


def hub_row(record: Dict) -> Dict:
  """An official record as the Hub stores it (test rows: answer "" and no facts)."""
  facts = record.get("supporting_facts", [])
  return {"id": record["_id"], "question": record["question"],
          "answer": record.get("answer", ""), "type": record["type"], "level": record["level"],
          "supporting_facts": {"title": [f[0] for f in facts], "sent_id": [f[1] for f in facts]},
          "context": {"title": [c[0] for c in record["context"]],
                      "sentences": [c[1] for c in record["context"]]}}


def write_parquet(path, records: List[Dict], row_group_size: int = 2) -> str:
  table = pa.Table.from_pylist([hub_row(r) for r in records], schema=HUB_SCHEMA)
  pq.write_table(table, str(path), row_group_size=row_group_size)
  return str(path)


def outputs(out: str, inputs: List[str]) -> Dict[str, bytes]:
  """Every output file but the manifest, input paths replaced by a placeholder."""
  found = {}
  for root, _, files in os.walk(out):
    for name in files:
      rel = os.path.relpath(os.path.join(root, name), out)
      if rel == "manifest.json":
        continue
      with open(os.path.join(root, name), "rb") as f:
        data = f.read()
      for i, path in enumerate(inputs):
        data = data.replace(path.encode(), f"<INPUT{i}>".encode())
      found[rel] = data
  return found


def run_both(tmp_path, records: List[Dict]):
  json_path = write_json(tmp_path / "data.json", records)
  pq_path = write_parquet(tmp_path / "data.parquet", records)
  a = runner.run_dataset("hotpotqa", json_path, str(tmp_path / "out_json"), SMALL)
  b = runner.run_dataset("hotpotqa", pq_path, str(tmp_path / "out_parquet"), SMALL)
  return (a, outputs(str(tmp_path / "out_json"), [json_path]),
          b, outputs(str(tmp_path / "out_parquet"), [pq_path]))


def records() -> List[Dict]:
  return [hotpot_record("q1", "Which city hosts the Louvre?", "Paris", PARIS,
                        supporting=[["Paris", 1], ["Lyon", 1]]),
          hotpot_record("q2", "Is Lyon in France?", "yes", PARIS[:2], supporting=[["Lyon", 0]]),
          hotpot_record("q3", "Where is Nice?", None, PARIS[2:]),
          hotpot_record("q4", "Which river?", "Seine", PARIS[1:], supporting=[["Nice", 2]])]


def assert_same(a, out_a, b, out_b):
  assert any(k.startswith("records-") for k in out_a)
  assert any(k.startswith("documents") for k in out_a)
  assert out_a == out_b
  for key in ("counts", "stage_counts", "distributions", "examples"):
    assert a[key] == b[key]
  assert list(a["labels"].values()) == list(b["labels"].values())  # by input path
  for m in (a, b):  # the bytes read differ: JSON text vs compressed columns
    m["stages"]["read"].pop("bytes")
  assert a["stages"] == b["stages"]


@pytest.mark.slow
def test_parquet_gives_the_records_of_the_official_json(tmp_path):
  assert_same(*run_both(tmp_path, records()))


@pytest.mark.slow
def test_the_shared_sample_as_parquet(tmp_path):
  if not os.path.exists(SAMPLE):
    pytest.skip("../shared/samples is absent")
  with open(SAMPLE, encoding="utf-8") as f:
    sample = json.load(f)
  assert_same(*run_both(tmp_path, sample))


def test_to_record_gives_the_official_layout():
  r = records()[0]
  assert hub.to_record(hub_row(r)) == {
      "_id": "q1", "answer": "Paris", "question": r["question"],
      "supporting_facts": [["Paris", 1], ["Lyon", 1]], "context": PARIS,
      "type": "bridge", "level": "hard"}
  unanswered = hub.to_record(hub_row(records()[2]))
  assert "answer" not in unanswered and "supporting_facts" not in unanswered


@pytest.mark.slow
def test_row_groups_are_read_in_order(tmp_path):
  many = [hotpot_record(f"q{i:02d}", f"Question {i}?", "Paris", PARIS) for i in range(7)]
  path = write_parquet(tmp_path / "many.parquet", many, row_group_size=3)
  assert pq.ParquetFile(path).num_row_groups == 3
  m = runner.run_dataset("hotpotqa", path, str(tmp_path / "out"), SMALL)
  assert m["counts"]["input"] == 7 and m["counts"]["written"] == 7
  docs = []
  for name in sorted(os.listdir(tmp_path / "out" / "documents")):
    with open(tmp_path / "out" / "documents" / name, encoding="utf-8") as f:
      docs.extend(json.loads(line) for line in f)
  assert sorted((d["source_id"], d["document_id"]) for d in docs) == [
      (f"{path}#{i}", f"q{i:02d}") for i in range(7)]


def dead_letters(out) -> List[Dict]:
  found = []
  for root, _, files in os.walk(os.path.join(out, "dead_letter")):
    for name in files:
      with open(os.path.join(root, name), encoding="utf-8") as f:
        found.extend(json.loads(line) for line in f if line.strip())
  return found


def run_with_good_file(tmp_path, path: str) -> Dict:
  """The job on ``path`` and a good Parquet file of 4 questions (so that it writes some)."""
  good = write_parquet(tmp_path / "good.parquet", records())
  return runner.run_dataset("hotpotqa", f"{good},{path}", str(tmp_path / "out"), SMALL)


@pytest.mark.slow
def test_a_file_named_parquet_that_is_not_is_one_dead_letter(tmp_path):
  path = write_json(tmp_path / "fake.parquet", records())
  m = run_with_good_file(tmp_path, path)
  assert m["counts"]["input"] == 5 and m["input_count_exact"] is False
  assert m["rejected_by_reason"] == {"labels/missing_answer": 1, "read/invalid_parquet": 1}
  [dead] = [d for d in dead_letters(str(tmp_path / "out")) if d["stage"] == "read"]
  assert (dead["reason"], dead["source_id"]) == ("invalid_parquet", path)
  assert "not a Parquet file" in dead["detail"]


@pytest.mark.slow
def test_missing_columns_are_named(tmp_path):
  table = pa.Table.from_pylist([{"id": "q1", "question": "Q?"}])
  path = str(tmp_path / "narrow.parquet")
  pq.write_table(table, path)
  m = run_with_good_file(tmp_path, path)
  assert m["rejected_by_reason"]["read/missing_columns"] == 1
  [dead] = [d for d in dead_letters(str(tmp_path / "out")) if d["stage"] == "read"]
  assert dead["reason"] == "missing_columns"
  assert "context.title, context.sentences" in dead["detail"]


@pytest.mark.slow
def test_an_empty_parquet_file_has_no_records(tmp_path):
  path = write_parquet(tmp_path / "empty.parquet", [])
  assert pq.ParquetFile(path).metadata.num_rows == 0
  m = run_with_good_file(tmp_path, path)
  assert m["counts"]["input"] == 4 and m["input_count_exact"] is True
  assert m["stages"]["read"]["files"] == 2
