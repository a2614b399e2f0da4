"""`python -m model.evaluate`'s warning about missing predictions says what THIS task does.

HotpotQA scores a missing answer / supporting-fact list 0 (and 0 on the joint metrics),
TriviaQA and extractive_qa score a missing key / question 0, NarrativeQA scores a missing
question as an empty answer.  No task's warning mentions another task; complete predictions give
no warning.
"""

import json

import pytest

from model import evaluate
from model.evaluation import evaluate_lib

TRIVIA_GOLD = {"Domain": "Wikipedia", "VerifiedEval": False, "Version": 1.0, "Split": "dev",
               "Data": [{"QuestionId": q, "Question": "?",
                         "Answer": {"NormalizedAliases": ["paris"], "Value": "Paris"},
                         "EntityPages": [{"Filename": "Paris.txt"}], "SearchResults": []}
                        for q in ("q1", "q2", "q3")]}
HOTPOT_GOLD = [{"_id": q, "answer": "paris", "supporting_facts": [["Paris", 0]]}
               for q in ("a", "b", "c")]
NARRATIVE_GOLD = ("document_id,set,question,answer1,answer2,question_tokenized,"
                  "answer1_tokenized,answer2_tokenized\r\n"
                  + "".join(f"d1,test,Who {i}?,The old man.,his father,who {i} ?,"
                            "the old man .,his father\r\n" for i in range(3)))
EXTRACTIVE_GOLD = "".join(json.dumps({"id": q, "question": "Where?", "context": "In Paris.",
                                      "answers": ["Paris"]}) + "\n" for q in ("q1", "q2", "q3"))

# task -> (gold file text, complete predictions, predictions with missing entries, extra flags)
CASES = {
    "hotpotqa": (json.dumps(HOTPOT_GOLD),
                 {"answer": {q: "paris" for q in "abc"}, "sp": {q: [["Paris", 0]] for q in "abc"}},
                 {"answer": {"a": "paris"}, "sp": {"a": [["Paris", 0]], "b": [["Paris", 0]]}},
                 []),
    "triviaqa": (json.dumps(TRIVIA_GOLD), {"q1": "paris", "q2": "paris", "q3": "paris"},
                 {"q1": "paris"}, []),
    "narrativeqa": (NARRATIVE_GOLD, {f"d1: Who {i}?": "the old man" for i in range(3)},
                    {"d1: Who 0?": "the old man"}, ["--nometeor"]),
    "extractive_qa": (EXTRACTIVE_GOLD, {"q1": "paris", "q2": "Paris", "q3": "in paris"},
                      {"q1": "paris"}, []),
}
OTHER_TASK_NAMES = {"hotpotqa": ("NarrativeQA", "TriviaQA"),
                    "triviaqa": ("NarrativeQA", "HotpotQA"),
                    "narrativeqa": ("TriviaQA", "HotpotQA"),
                    "extractive_qa": ("NarrativeQA", "TriviaQA", "HotpotQA")}


def _evaluate(tmp_path, capsys, task, predictions):
  gold_text, _, _, flags = CASES[task]
  gold = tmp_path / ("qaps.csv" if task == "narrativeqa" else "gold.json")
  gold.write_text(gold_text, encoding="utf-8")
  preds = tmp_path / "predictions.json"
  preds.write_text(json.dumps(predictions))
  capsys.readouterr()
  code = evaluate.main(["--task", task, "--predictions", str(preds), "--gold", str(gold)]
                       + flags)
  out, err = capsys.readouterr()
  assert code == 0, err
  return json.loads(out.strip().splitlines()[-1]), err.strip().splitlines()


@pytest.mark.parametrize("task", sorted(CASES))
def test_missing_predictions_warning_is_task_specific(tmp_path, capsys, task):
  complete, err = _evaluate(tmp_path, capsys, task, CASES[task][1])
  assert err == []  # nothing missing, no warning

  metrics, err = _evaluate(tmp_path, capsys, task, CASES[task][2])
  assert len(err) == 1 and err[0].startswith("warning: "), err
  warning = err[0]
  for other in OTHER_TASK_NAMES[task]:
    assert other.lower() not in warning.lower(), warning
  if task == "hotpotqa":
    assert (metrics["n_missing_answer"], metrics["n_missing_sp"]) == (2, 1)
    assert "of 3 gold questions, 2 have no answer prediction and 1 no supporting-fact" in warning
    assert "joint" in warning
  elif task == "triviaqa":
    assert metrics["n_missing"] == 2
    assert warning.startswith("warning: 2 of 3 gold keys have no prediction")
    assert "score 0" in warning
  elif task == "extractive_qa":
    assert metrics["n_missing"] == 2
    assert warning.startswith("warning: 2 of 3 gold questions have no prediction")
    assert "score 0 on exact_match and f1" in warning
  else:
    assert metrics["n_missing"] == 2
    assert warning.startswith("warning: 2 of 3 gold questions have no prediction")
    # NarrativeQA does not score 0 per se: it scores an empty answer.
    assert "empty answer" in warning and "score 0" not in warning
  # The CLI prints exactly what evaluate_lib.missing_warning says.
  assert evaluate_lib.missing_warning(task, complete) is None
  assert evaluate_lib.missing_warning(task, metrics) == warning


def test_hotpotqa_missing_sp_only_is_warned(tmp_path, capsys):
  answers_only = {"answer": {q: "paris" for q in "abc"}, "sp": {}}
  metrics, err = _evaluate(tmp_path, capsys, "hotpotqa", answers_only)
  assert (metrics["n_missing_answer"], metrics["n_missing_sp"]) == (0, 3)
  assert len(err) == 1 and "narrativeqa" not in err[0].lower(), err
  assert "0 have no answer prediction and 3 no supporting-fact (sp) prediction" in err[0]


@pytest.mark.parametrize("task", sorted(CASES))
def test_prediction_ids_not_in_the_gold_are_counted_and_warned(tmp_path, capsys, task):
  predictions = json.loads(json.dumps(CASES[task][1]))
  if task == "hotpotqa":
    predictions["answer"]["zz"] = "paris"
    predictions["sp"]["zz"] = [["Paris", 0]]
  elif task in ("triviaqa", "extractive_qa"):
    predictions["zz"] = "paris"
  else:
    predictions["d9: Who?"] = "the old man"
  complete, _ = _evaluate(tmp_path, capsys, task, CASES[task][1])
  metrics, err = _evaluate(tmp_path, capsys, task, predictions)
  assert metrics["n_ignored"] == 1
  assert err == [f"warning: 1 predictions have ids that are not in the gold file and were not "
                 f"scored (wrong gold file or split for --task {task}?)"]
  # The official metrics are those of the predictions without the unknown id.
  assert {k: v for k, v in metrics.items() if k != "n_ignored"} == {
      k: v for k, v in complete.items() if k != "n_ignored"}
