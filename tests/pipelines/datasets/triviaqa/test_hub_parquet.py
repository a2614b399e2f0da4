"""TriviaQA from the Hugging Face Hub's Parquet layout (``mandarjoshi/trivia_qa``, config rc):
rows made from official question + evidence files as the Hub's loading script makes them give
byte-identical records and documents, without --evidence_dir."""

from __future__ import annotations

import json
import os
from typing import Dict, List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import runner
from pipelines.datasets.triviaqa import hub
from pipelines.datasets.triviaqa.dataset import TriviaQAOptions
from tests.pipelines.helpers import SMALL

_S = pa.string()
HUB_SCHEMA = pa.schema([
    ("question", _S), ("question_id", _S), ("question_source", _S),
    ("entity_pages", pa.struct([(k, pa.list_(_S)) for k in
                                ("doc_source", "filename", "title", "wiki_context")])),
    ("search_results", pa.struct([("description", pa.list_(_S)), ("filename", pa.list_(_S)),
                                  ("rank", pa.list_(pa.int32())), ("title", pa.list_(_S)),
                                  ("url", pa.list_(_S)), ("search_context", pa.list_(_S))])),
    ("answer", pa.struct([("aliases", pa.list_(_S)), ("normalized_aliases", pa.list_(_S)),
                          ("matched_wiki_entity_name", _S),
                          ("normalized_matched_wiki_entity_name", _S),
                          ("normalized_value", _S), ("type", _S), ("value", _S)])),
])


def answer(value, aliases):
  return {"Aliases": aliases, "MatchedWikiEntityName": value,
          "NormalizedAliases": [a.lower() for a in aliases], "NormalizedValue": value.lower(),
          "Type": "WikipediaEntity", "Value": value}


def page(name):
  return {"DocSource": "TagMe", "Filename": name, "Title": name[:-4].replace("_", " ")}


def result(name, rank):
  return {"Description": "...", "Filename": name, "Rank": rank, "Title": f"Result {rank}",
          "Url": f"http://example.com/{rank}"}


EVIDENCE = {  # no whitespace around the texts: the Hub strips it (hub's docstring)
    "wikipedia/Paris.txt": "Paris is the capital of France.\r\nIt hosts the Louvre.",
    "wikipedia/Lyon.txt": "\ufeffLyon is a city in France, south of Paris.",
    "wikipedia/Mars.txt": "Mars has two moons, Phobos and Deimos.",
    "web/1/1_a.txt": "The Louvre, in Paris, is the world's most visited museum.",
    "web/1/1_b.txt": "Paris France travel guide.",
}
WIKI = [{"Answer": answer("Paris", ["Paris", "Paris, France"]), "QuestionSource": "s",
         "EntityPages": [page("Paris.txt"), page("Lyon.txt")],
         "Question": "Which city hosts the Louvre?", "QuestionId": "q_w1"},
        {"Answer": answer("Phobos", ["Phobos"]), "EntityPages": [page("Mars.txt")],
         "Question": "Name a moon of Mars?", "QuestionId": "q_w2", "QuestionSource": "s"}]
WEB = [{"Answer": answer("Paris", ["Paris"]), "EntityPages": [page("Paris.txt")],
        "SearchResults": [result("1/1_a.txt", 0), result("1/1_b.txt", 1)],
        "Question": "Where is the Louvre?", "QuestionId": "q_x1", "QuestionSource": "s"},
       # A web question without search results (as tc_276 of the official web-dev.json): the
       # official evaluation keys it per page, q_x3--Mars.txt, as any web question.
       {"Answer": answer("Phobos", ["Phobos"]), "EntityPages": [page("Mars.txt")],
        "SearchResults": [], "Question": "A moon of Mars?", "QuestionId": "q_x3",
        "QuestionSource": "s"},
       {"EntityPages": [], "SearchResults": [result("1/1_b.txt", 0)],
        "Question": "Test question?", "QuestionId": "q_x2", "QuestionSource": "s"}]


def read_like_the_hub(path: str) -> str:
  with open(path, encoding="utf-8") as f:  # text mode: universal newlines, BOM kept
    return f.read().strip()


def hub_row(datum: Dict, evidence: str) -> Dict:
  """A datum as the Hub's loading script stores it (trivia_qa.py's parse_example)."""
  if "Answer" in datum:
    a = datum["Answer"]
    ans = {"aliases": a["Aliases"], "normalized_aliases": a["NormalizedAliases"],
           "matched_wiki_entity_name": a["MatchedWikiEntityName"],
           "normalized_matched_wiki_entity_name": a["MatchedWikiEntityName"].lower(),
           "normalized_value": a["NormalizedValue"], "type": a["Type"], "value": a["Value"]}
  else:
    ans = {"aliases": [], "normalized_aliases": [], "matched_wiki_entity_name": "<unk>",
           "normalized_matched_wiki_entity_name": "<unk>", "normalized_value": "<unk>",
           "type": "", "value": "<unk>"}
  pages = datum.get("EntityPages", [])
  results = datum.get("SearchResults", [])
  return {
      "question": datum["Question"], "question_id": datum["QuestionId"],
      "question_source": datum["QuestionSource"], "answer": ans,
      "entity_pages": {
          "doc_source": [p["DocSource"] for p in pages],
          "filename": [p["Filename"] for p in pages], "title": [p["Title"] for p in pages],
          "wiki_context": [read_like_the_hub(os.path.join(evidence, "wikipedia", p["Filename"]))
                           for p in pages]},
      "search_results": {
          "description": [r["Description"] for r in results],
          "filename": [r["Filename"] for r in results], "rank": [r["Rank"] for r in results],
          "title": [r["Title"] for r in results], "url": [r["Url"] for r in results],
          "search_context": [read_like_the_hub(os.path.join(evidence, "web", r["Filename"]))
                             for r in results]}}


def write_parquet(path, rows: List[Dict], row_group_size: int = 1) -> str:
  pq.write_table(pa.Table.from_pylist(rows, schema=HUB_SCHEMA), str(path),
                 row_group_size=row_group_size)
  return str(path)


def outputs(out: str, inputs: List[str]) -> Dict[str, bytes]:
  """Every output file but the manifest, input paths replaced by placeholders."""
  found = {}
  for root, _, files in os.walk(out):
    for name in files:
      rel = os.path.relpath(os.path.join(root, name), out)
      if rel != "manifest.json":
        with open(os.path.join(root, name), "rb") as f:
          data = f.read()
        for i, path in enumerate(inputs):
          data = data.replace(path.encode(), f"<INPUT{i}>".encode())
        found[rel] = data
  return found


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("triviaqa_hub")
  evidence = tmp / "evidence"
  for rel, text in EVIDENCE.items():
    (evidence / rel).parent.mkdir(parents=True, exist_ok=True)
    (evidence / rel).write_bytes(text.encode("utf-8"))
  (tmp / "qa").mkdir()
  (tmp / "hub").mkdir()
  paths = {}
  for name, data in (("web-dev", WEB), ("wikipedia-dev", WIKI)):
    (tmp / "qa" / f"{name}.json").write_text(json.dumps({"Data": data, "Domain": name}))
    paths[name] = (str(tmp / "qa" / f"{name}.json"), write_parquet(
        tmp / "hub" / f"{name}.parquet", [hub_row(d, str(evidence)) for d in data]))
  return tmp, str(evidence), paths


@pytest.mark.slow
@pytest.mark.parametrize("per_document", [False, True])
def test_parquet_gives_the_records_of_the_official_files(layout, tmp_path, per_document):
  tmp, evidence, paths = layout
  json_paths = [j for j, _ in paths.values()]
  pq_paths = [p for _, p in paths.values()]
  a = runner.run_dataset("triviaqa", ",".join(json_paths), str(tmp_path / "json"), SMALL,
                         TriviaQAOptions(evidence_dir=evidence, per_document=per_document))
  b = runner.run_dataset("triviaqa", ",".join(pq_paths), str(tmp_path / "pq"), SMALL,
                         TriviaQAOptions(per_document=per_document))
  out_a = outputs(str(tmp_path / "json"), json_paths)
  out_b = outputs(str(tmp_path / "pq"), pq_paths)
  assert any(k.startswith("records-") for k in out_a)
  assert out_a == out_b
  assert a["counts"] == b["counts"] and a["counts"]["written"] >= 5
  # The Hub's texts were read with universal newlines: CRLF is LF already (fewer bytes).
  assert a["stages"]["evidence"].pop("newlines_normalised") == 2
  assert "newlines_normalised" not in b["stages"]["evidence"]
  assert a["stages"]["evidence"].pop("bytes") == b["stages"]["evidence"].pop("bytes") + 2
  for m in (a, b):
    m["stages"]["read"].pop("bytes")
  assert a["stages"] == b["stages"]
  assert b["stages"]["evidence"]["bom_stripped"] == 1


def test_to_record_reads_test_rows_as_unanswered(layout):
  _, evidence, _ = layout
  datum = hub.to_record(hub_row(WEB[-1], evidence))
  assert "Answer" not in datum
  assert [p["Filename"] for p in datum["SearchResults"]] == ["1/1_b.txt"]
  wiki = hub.to_record(hub_row(WIKI[0], evidence))
  assert "SearchResults" not in wiki  # a Wikipedia question, as in the official file
  assert wiki["EntityPages"][0][hub.TEXT_KEY] == EVIDENCE["wikipedia/Paris.txt"].replace(
      "\r\n", "\n")


@pytest.mark.slow
def test_evidence_dir_is_optional_only_for_parquet(layout, tmp_path, capsys):
  _, _, paths = layout
  code = runner.dataset_main("triviaqa", ["--input", paths["wikipedia-dev"][1], "--output_dir",
                                          str(tmp_path / "out"), "--seq_length", "128", "--overlap",
                                          "8"])
  assert code == 0
  with pytest.raises(SystemExit):
    runner.dataset_main("triviaqa", ["--input", paths["wikipedia-dev"][0], "--output_dir",
                                     str(tmp_path / "out2")])
  assert "--evidence_dir is required" in capsys.readouterr().err


@pytest.mark.slow
def test_nocontext_files_are_a_missing_columns_dead_letter(layout, tmp_path):
  _, _, paths = layout
  table = pq.read_table(paths["web-dev"][1])
  table = table.drop_columns(["entity_pages", "search_results"])
  path = str(tmp_path / "nocontext.parquet")
  pq.write_table(table, path)
  m = runner.run_dataset("triviaqa", f"{paths['web-dev'][1]},{path}", str(tmp_path / "out"), SMALL,
                         TriviaQAOptions())
  assert m["rejected_by_reason"].get("read/missing_columns") == 1


def document_ids(out: str) -> List[str]:
  ids = []
  for root, _, files in os.walk(os.path.join(out, "documents")):
    for name in files:
      with open(os.path.join(root, name), encoding="utf-8") as f:
        ids += [json.loads(line)["document_id"] for line in f if line.strip()]
  return sorted(ids)


@pytest.mark.slow
def test_a_web_question_without_search_results_is_keyed_per_page(layout, tmp_path):
  """The keys of the official evaluation of a web file (every page, EntityPages too:
  QuestionId--Filename) for a web question with no search results, in a file of one domain
  (the config's folder) and in the ``rc`` config's mix (web rows first, as the Hub's loading
  script concatenates the sorted files)."""
  tmp, evidence, paths = layout
  # (q_x2, unanswered among answered questions, is a dead letter: no document)
  expected = sorted(["q_w1", "q_w2", "q_x1--Paris.txt", "q_x1--1/1_a.txt", "q_x1--1/1_b.txt",
                     "q_x3--Mars.txt"])
  runner.run_dataset("triviaqa", f"{paths['web-dev'][0]},{paths['wikipedia-dev'][0]}",
                     str(tmp_path / "json"), SMALL, TriviaQAOptions(evidence_dir=evidence))
  assert document_ids(str(tmp_path / "json")) == expected  # the official files
  rows = [hub_row(d, evidence) for d in WEB + WIKI]
  (tmp_path / "rc").mkdir()
  (tmp_path / "rc.web").mkdir()
  mixed = write_parquet(tmp_path / "rc" / "validation-00000-of-00001.parquet", rows)
  web = write_parquet(tmp_path / "rc.web" / "validation-00000-of-00001.parquet",
                      rows[:len(WEB)])
  runner.run_dataset("triviaqa", mixed, str(tmp_path / "mixed"), SMALL, TriviaQAOptions())
  assert document_ids(str(tmp_path / "mixed")) == expected
  runner.run_dataset("triviaqa", web, str(tmp_path / "web"), SMALL, TriviaQAOptions())
  assert document_ids(str(tmp_path / "web")) == [i for i in expected if i.startswith("q_x")]


def test_the_domain_of_a_hub_file(layout):
  _, evidence, _ = layout
  assert hub.domain_of_file("gs://b/trivia_qa/rc.web/train-00000-of-00003.parquet") == "web"
  assert hub.domain_of_file("hub/rc.wikipedia/validation-00000-of-00001.parquet") == (
      "wikipedia")
  assert hub.domain_of_file("/d/web-dev.parquet") == "web"
  assert hub.domain_of_file("/d/rc/train-00000-of-00007.parquet") is None
  no_results = hub_row(WEB[1], evidence)
  assert "SearchResults" not in hub.to_record(no_results)  # alone: reads as Wikipedia
  assert hub.to_record(no_results, web=True)["SearchResults"] == []
