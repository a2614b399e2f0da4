"""The task registry (:mod:`model.tasks`) and the shared parts of :mod:`model.tasks.base`."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest

from model import tasks
from model.evaluation import hotpotqa as hotpotqa_metrics
from model.tasks import base
from schemas import cli
from tests.model.inference.test_decoding import D2A, D2B, _decoder

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_names_in_registration_order_and_get():
  assert tasks.names() == ("hotpotqa", "triviaqa", "narrativeqa", "extractive_qa")
  for name in tasks.names():
    task = tasks.get(name)
    assert isinstance(task, tasks.Task) and task.name == name
    for fn in ("check_predictions", "check_gold", "evaluate"):
      assert callable(getattr(task.metrics, fn)), (name, fn)
  with pytest.raises(tasks.UnknownTaskError) as e:
    tasks.get("squad")
  assert str(e.value) == ("unknown task 'squad'; choose from "
                          "['extractive_qa', 'hotpotqa', 'narrativeqa', 'triviaqa']")
  assert isinstance(e.value, ValueError)


def test_task_of_a_manifest_is_its_task_else_its_job():
  assert tasks.task_name({"job": "hotpotqa"}) == "hotpotqa"
  assert tasks.task_name({"job": "jsonl_qa", "task": "extractive_qa"}) == "extractive_qa"
  assert tasks.task_name({"job": "wikipedia"}) == "wikipedia"  # callers reject it
  assert tasks.task_name({}) is None


def test_a_name_registers_once():
  with pytest.raises(ValueError, match="registered twice"):
    base.register(tasks.get("hotpotqa"))
  assert tasks.names().count("hotpotqa") == 1


def test_tasks_are_frozen():
  with pytest.raises(dataclasses.FrozenInstanceError):
    tasks.get("hotpotqa").best_metric = "em"


def test_best_metrics_and_dev_options():
  assert {n: tasks.get(n).best_metric for n in tasks.names()} == {
      "hotpotqa": "f1", "triviaqa": "f1", "narrativeqa": "rouge_l", "extractive_qa": "f1"}
  assert {n: dict(tasks.get(n).dev_options) for n in tasks.names()} == {
      "hotpotqa": {}, "triviaqa": {}, "narrativeqa": {"meteor": False}, "extractive_qa": {}}


def test_per_document_applies_to_triviaqa_only():
  dec = _decoder()
  assert [n for n in tasks.names() if tasks.get(n).per_document] == ["triviaqa"]
  for name in ("hotpotqa", "narrativeqa", "extractive_qa"):
    with pytest.raises(ValueError, match=f"per_document does not apply to task '{name}' "
                       r"\(only to triviaqa\)"):
      tasks.get(name).predictions(dec, per_document=True)
  assert set(tasks.get("triviaqa").predictions(dec, per_document=True)) >= {D2A, D2B}


def test_per_document_answers_reject_a_document_read_with_two_questions():
  dec = _decoder()
  dec.questions["q9"] = dec.questions["q2"]  # D2A / D2B now also belong to q9
  with pytest.raises(ValueError, match="conflict q2--a.txt q2 q9"):
    base.per_document_answers(dec, lambda d, a, b: f"conflict {d} {a} {b}")


def test_flags():
  parser = cli.Parser("model.evaluate", "test", "python -m model.evaluate --task hotpotqa")
  flags = [base.Flag("plain", "a value", choices=("x", "y")),
           base.Flag("on", "a switch", kind="switch"), base.Flag("both", "a pair", kind="bool")]
  for flag in flags:
    flag.add_to(parser)
  assert [f.display for f in flags] == ["--plain", "--on", "--(no)both"]
  args = parser.parse_args([])
  assert (args.plain, args.on, args.both) == (None, None, None)
  args = parser.parse_args(["--plain", "y", "--on", "--noboth"])
  assert (args.plain, args.on, args.both) == ("y", True, False)
  with pytest.raises(ValueError, match="kind"):
    base.Flag("x", "bad", kind="int")


def test_default_gold_loading_and_metrics_delegate_to_the_module(tmp_path):
  task = tasks.get("hotpotqa")
  gold = [{"_id": "a", "answer": "Paris", "supporting_facts": [["P", 0]]}]
  path = tmp_path / "gold.json"
  path.write_text('[{"_id": "a", "answer": "Paris", "supporting_facts": [["P", 0]]}]')
  assert task.load_gold(str(path)) == gold
  predictions = {"answer": {"a": "paris"}, "sp": {"a": [["P", 0]]}}
  assert task.evaluate(predictions, gold) == hotpotqa_metrics.evaluate(predictions, gold)
  path.write_text("{not json")
  with pytest.raises(ValueError, match=f"gold file {path} is not valid JSON"):
    task.load_gold(str(path))
  with pytest.raises(ValueError, match="cannot read gold file"):
    task.load_gold(str(tmp_path / "absent.json"))


def test_the_registry_imports_neither_tensorflow_nor_numpy():
  code = ("import sys, model.tasks, model.evaluate; "
          "print(sorted(m for m in ('tensorflow', 'numpy') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=120, check=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
  assert out.stdout.strip() == "[]"
