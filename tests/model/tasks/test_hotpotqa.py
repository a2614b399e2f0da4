"""The HotpotQA task: prediction layout, yes / no answers, official checks, warning."""

from __future__ import annotations

from model import tasks
from model.evaluation import hotpotqa as official
from tests.model.inference.test_decoding import _decoder

TASK = tasks.get("hotpotqa")


def test_predictions_layout_and_yes_no():
  dec = _decoder("sum")
  hp = TASK.predictions(dec)
  assert set(hp) == {"answer", "sp"}
  assert list(hp["answer"]) == list(hp["sp"]) == ["q1", "q2", "q3", "q4"]
  # q4: the answer-type head says "yes"; the others are spans.
  assert hp["answer"] == {"q1": "Paris", "q2": "Theta Iota", "q3": "東京 café", "q4": "yes"}
  assert hp["sp"]["q1"] == [["A", 0], ["B", 0], ["B", 1]]
  official.check_predictions(hp)
  assert TASK.count(hp) == 4


def test_official_evaluation_accepts_predictions():
  hp = TASK.predictions(_decoder("max"))
  gold = [{"_id": "q1", "answer": "London", "supporting_facts": [["A", 0], ["B", 0], ["B", 1]]}]
  metrics = TASK.evaluate(hp, gold)
  assert metrics["em"] == 1.0 and metrics["sp_em"] == 1.0


def test_missing_warning():
  assert TASK.missing_warning({"n_gold": 3, "n_missing_answer": 0, "n_missing_sp": 0}) is None
  assert TASK.missing_warning({"n_gold": 3, "n_missing_answer": 2, "n_missing_sp": 1}) == (
      "warning: of 3 gold questions, 2 have no answer prediction and 1 no supporting-fact (sp) "
      "prediction; a missing answer scores 0 on the answer and joint metrics, a missing sp 0 "
      "on the sp and joint metrics")


def test_no_flags_no_per_document_keys():
  assert TASK.flags == () and not TASK.per_document
  assert not TASK.records_per_document({"job": "hotpotqa", "config": {"per_document": True}},
                                       {"d": {"question_id": "q"}})
  assert TASK.score_options(TASK.predictions(_decoder())) == {}
