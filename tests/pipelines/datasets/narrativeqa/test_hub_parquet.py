"""NarrativeQA from the Hugging Face Hub's Parquet layout (``deepmind/narrativeqa``): rows made
from an official layout as the Hub's loading script makes them (the whole ``.content`` file as
Latin-1 text) give byte-identical records, and the same documents, as the CSV path."""

from __future__ import annotations

import csv
import json
import os
from typing import Dict, List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import runner
from pipelines.datasets.narrativeqa import hub
from pipelines.errors import UserError
from pipelines.datasets.narrativeqa.dataset import NarrativeQAOptions
from tests.pipelines.datasets.narrativeqa.test_dataset import FLAGS, make_layout
from tests.pipelines.helpers import SMALL

_S = pa.string()
_TEXT = pa.struct([("text", _S), ("tokens", pa.list_(_S))])
HUB_SCHEMA = pa.schema([
    ("document", pa.struct([
        ("id", _S), ("kind", _S), ("url", _S), ("file_size", pa.int32()),
        ("word_count", pa.int32()), ("start", _S), ("end", _S),
        ("summary", pa.struct([("text", _S), ("tokens", pa.list_(_S)), ("url", _S),
                               ("title", _S)])),
        ("text", _S)])),
    ("question", _TEXT),
    ("answers", pa.list_(_TEXT)),
])


def _rows(path) -> List[Dict[str, str]]:
  with open(path, encoding="utf-8-sig", newline="") as f:
    return list(csv.DictReader(f))


def hub_rows(root: str, split: str) -> List[Dict]:
  """The Hub's rows of an official layout (narrativeqa.py's _generate_examples); questions of
  stories without a file or summary are left out, as the script cannot make them."""
  documents = {r["document_id"]: r for r in _rows(os.path.join(root, "documents.csv"))
               if r["set"] == split}
  summaries = {r["document_id"]: r for r in _rows(os.path.join(
      root, "third_party", "wikipedia", "summaries.csv")) if r["set"] == split}
  out = []
  for q in _rows(os.path.join(root, "qaps.csv")):
    d = documents.get(q["document_id"])
    story = os.path.join(root, "tmp", q["document_id"] + ".content")
    if q["set"] != split or d is None or not os.path.exists(story):
      continue
    with open(story, encoding="latin-1") as f:
      text = f.read()
    summary = summaries[q["document_id"]]
    out.append({
        "document": {"id": d["document_id"], "kind": d["kind"], "url": d["story_url"],
                     "file_size": int(d["story_file_size"]),
                     "word_count": int(d["story_word_count"]), "start": d["story_start"],
                     "end": d["story_end"],
                     "summary": {"text": summary["summary"],
                                 "tokens": summary["summary_tokenized"].split(),
                                 "url": d["wiki_url"], "title": d["wiki_title"]},
                     "text": text},
        "question": {"text": q["question"], "tokens": q["question_tokenized"].split()},
        "answers": [{"text": q["answer1"], "tokens": []}, {"text": q["answer2"], "tokens": []}]})
  return out


def write_parquet(path, rows: List[Dict], row_group_size: int = 2) -> str:
  pq.write_table(pa.Table.from_pylist(rows, schema=HUB_SCHEMA), str(path),
                 row_group_size=row_group_size)
  return str(path)


def kept_official_questions(root: str, split: str):
  """The official layout less the questions the Hub cannot hold (no story file)."""
  rows = _rows(os.path.join(root, "qaps.csv"))
  keep = [r for r in rows if r["set"] != split or os.path.exists(
      os.path.join(root, "tmp", r["document_id"] + ".content"))]
  with open(os.path.join(root, "qaps.csv"), "w", encoding="utf-8", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(keep)


def records_and_documents(out: str):
  """The record shards' bytes, and the documents side file without its source ids (which
  name the input row: ``qaps.csv:<line>`` or ``<file>.parquet#<index>``)."""
  shards = {}
  docs = []
  for root, _, files in os.walk(out):
    for name in sorted(files):
      path = os.path.join(root, name)
      if name.startswith("records-"):
        with open(path, "rb") as f:
          shards[name] = f.read()
      elif os.path.basename(root) == "documents":
        with open(path, encoding="utf-8") as f:
          for line in f:
            d = json.loads(line)
            d.pop("source_id")
            docs.append(json.dumps(d, sort_keys=True))
  return shards, sorted(docs)


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("nqa_hub") / "nqa")
  qaps = make_layout(root)
  kept_official_questions(root, "test")
  with open(os.path.join(root, "third_party", "wikipedia", "summaries.csv"), "a",
            encoding="utf-8", newline="") as f:  # the Hub's script needs every story's summary
    csv.writer(f, lineterminator="\r\n").writerows(
        [[d, "test", f"The summary of {d}.", ""] for d in ("broken1", "latin1")])
  pq_path = write_parquet(os.path.join(os.path.dirname(root), "test-00000-of-00001.parquet"),
                          hub_rows(root, "test"))
  return qaps, pq_path


@pytest.mark.slow
@pytest.mark.parametrize("context", ["story", "summary"])
def test_parquet_gives_the_records_of_the_official_layout(layout, tmp_path, context):
  qaps, pq_path = layout
  out_a, out_b = str(tmp_path / "csv"), str(tmp_path / "pq")
  # (the hand-made layout's broken stories reject half its questions, on purpose)
  flags = FLAGS + ["--split", "test", "--context", context, "--max_error_fraction", "1"]
  assert runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", out_a] + flags) == 0
  assert runner.dataset_main("narrativeqa", ["--input", pq_path, "--output_dir", out_b]
                             + flags) == 0
  shards_a, docs_a = records_and_documents(out_a)
  shards_b, docs_b = records_and_documents(out_b)
  assert shards_a and shards_a == shards_b
  assert len(docs_a) >= 2 and docs_a == docs_b
  with open(os.path.join(out_a, "manifest.json"), encoding="utf-8") as f:
    a = json.load(f)
  with open(os.path.join(out_b, "manifest.json"), encoding="utf-8") as f:
    b = json.load(f)
  assert a["counts"] == b["counts"]
  a["stages"]["read"].pop("other_split_rows")  # the Hub's file holds the split only
  b["stages"]["read"].pop("other_split_rows")
  # documents.csv lists a story none of whose questions the Hub can hold (no story file)
  a["stages"]["parse"].pop("stories_without_questions", None)
  assert a["stages"] == b["stages"]


def test_story_bytes_round_trip_latin1_and_utf8():
  raw = "\ufeffCaf\u00e9 \u2014 na\u00efve".encode("utf-8")
  assert hub.story_bytes(raw.decode("latin-1")) == raw
  assert hub.story_bytes("\u2014 not latin-1") == "\u2014 not latin-1".encode("utf-8")


def test_the_split_comes_from_the_flag_and_must_match_the_file_name(layout, tmp_path):
  _, pq_path = layout
  assert hub.split_of_file("x/validation-00000-of-00001.parquet") == "valid"
  assert hub.split_of_file("x/train-00003-of-00024.parquet") == "train"
  assert hub.split_of_file("x/mine.parquet") is None
  with pytest.raises(UserError, match="is a test file"):
    runner.run_dataset("narrativeqa", pq_path, str(tmp_path / "out"), SMALL,
                       NarrativeQAOptions(split="train"))


@pytest.mark.slow
def test_a_file_without_the_story_column_is_a_dead_letter(layout, tmp_path):
  _, pq_path = layout
  table = pq.read_table(pq_path).drop_columns(["answers"])
  bad = str(tmp_path / "narrow.parquet")
  pq.write_table(table, bad)
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", ["--input", f"{pq_path},{bad}", "--output_dir", out,
                                             "--split", "test", "--max_error_fraction", "1"]
                             + FLAGS) == 0
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    m = json.load(f)
  assert m["rejected_by_reason"]["read/missing_columns"] == 1
