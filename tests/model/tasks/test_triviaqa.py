"""The TriviaQA task: per-question and per-(question, page) keys, the records' keying."""

from __future__ import annotations

import pytest

from model import tasks
from model.evaluation import triviaqa as official
from tests.model.inference.test_decoding import D1, D2A, D2B, D3, D4, TEXT4, _decoder

TASK = tasks.get("triviaqa")


def test_per_question_keys():
  assert TASK.predictions(_decoder("max"))["q1"] == "London"
  tq = TASK.predictions(_decoder("sum"))
  assert tq == {"q1": "Paris", "q2": "Theta Iota", "q3": "東京 café", "q4": tq["q4"]}
  assert tq["q4"] in TEXT4  # no yes / no: always a span
  official.check_predictions(tq)
  assert TASK.score_options(tq) == {}


def test_per_document_keys():
  dec = _decoder("sum")
  tq = TASK.predictions(dec)
  tq_doc = TASK.predictions(dec, per_document=True)
  assert set(tq_doc) == {D1, D2A, D2B, D3, D4}
  assert all(k.split("--")[0] in tq for k in tq_doc)  # "<QuestionId>--<Filename>"
  assert tq_doc[D2A] == "Gamma Delta" and tq_doc[D2B] == "Theta Iota" and tq_doc[D1] == "Paris"
  official.check_predictions(tq_doc)
  assert TASK.score_options(tq_doc) == {"per_document": True}
  dec.questions["q9"] = dec.questions["q2"]
  with pytest.raises(ValueError, match="TriviaQA document id 'q2--a.txt' is read with "
                     "questions 'q2' and 'q9'"):
    TASK.predictions(dec, per_document=True)


def test_records_per_document():
  per_question = {"q1": {"question_id": "q1"}}
  per_page = {"q1--Paris.txt": {"question_id": "q1"}}
  assert not TASK.records_per_document({"job": "triviaqa", "config": {}}, per_question)
  assert TASK.records_per_document({"job": "triviaqa", "config": {}}, per_page)
  assert TASK.records_per_document({"job": "triviaqa", "config": {"per_document": True}},
                                   per_question)


def test_flag_and_missing_warning():
  assert [(f.dest, f.kind) for f in TASK.flags] == [("per_document", "switch")]
  assert TASK.missing_warning({"n_gold": 3, "n_missing": 0}) is None
  assert TASK.missing_warning({"n_gold": 3, "n_missing": 2}) == (
      "warning: 2 of 3 gold keys have no prediction; they score 0 on exact_match and f1")
