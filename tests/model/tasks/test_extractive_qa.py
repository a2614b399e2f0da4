"""The generic extractive QA task: predictions per document id, JSON-lines gold, SQuAD metrics,
``python -m model.evaluate --task extractive_qa``."""

from __future__ import annotations

import json

import pytest

from model import evaluate, tasks
from model.training import train_lib
from model.inference import predict_lib
from model.evaluation import squad
from tests.model.inference.test_decoding import D1, D2A, D2B, D3, D4, _decoder

TASK = tasks.get("extractive_qa")
MILL = "Jonas Hale built the mill. Later, Hale sold it to the miller."


def test_predictions_one_per_document_id():
  dec = _decoder("sum")
  preds = TASK.predictions(dec)
  # D1 is read as two sub-documents over two packs: one answer, reduced over both.
  assert preds == {D1: "Paris", D2A: "Gamma Delta", D2B: "Theta Iota", D3: "東京 café",
                   D4: preds[D4]}
  assert preds[D4] != "yes"  # spans only, whatever the answer-type head says
  squad.check_predictions(preds)
  assert TASK.count(preds) == 5
  assert TASK.predictions(_decoder("max"))[D1] == "London"
  dec.questions["q9"] = dec.questions["q2"]
  with pytest.raises(ValueError, match="document id 'q2--a.txt' is read with questions 'q2' "
                     "and 'q9'; the extractive_qa task expects one question per document"):
    TASK.predictions(dec)


def _write_gold(tmp_path, lines):
  path = tmp_path / "data" / "qa.jsonl"
  path.parent.mkdir(exist_ok=True)
  path.write_text("".join(json.dumps(line) + "\n" if isinstance(line, dict) else line
                          for line in lines), encoding="utf-8")
  return str(path)


def test_gold_from_json_lines(tmp_path):
  (tmp_path / "data" / "books").mkdir(parents=True)
  (tmp_path / "data" / "books" / "mill.txt").write_text(MILL, encoding="utf-8")
  path = _write_gold(tmp_path, [
      {"id": "q1", "question": "Who built the mill?", "context": MILL,
       "answers": ["Jonas Hale", {"text": "Hale", "start": 34, "end": 38}]},
      "\n",  # blank lines are skipped
      # A span without text: its text comes from the context file (relative to the JSONL).
      {"id": "q2", "question": "Who?", "context_file": "books/mill.txt",
       "answers": [{"start": 0, "end": 10}, "Hale"]},
      # Text answers only: the context file is never read (it does not exist).
      {"id": "q3", "question": "Who?", "context_file": "books/absent.txt", "answers": ["mill"]},
      {"id": "q4", "question": "Unanswered?", "context": MILL},
  ])
  gold = TASK.load_gold(path)
  assert gold == {"q1": ["Jonas Hale", "Hale"], "q2": ["Jonas Hale", "Hale"], "q3": ["mill"],
                  "q4": []}
  TASK.check_gold(gold)


@pytest.mark.parametrize("lines, error, message", [
    (['{"id": "q1"'], ValueError, r"line 1: not JSON"),
    ([{"id": "q1", "question": "?", "context": MILL}, {"id": "q2", "question": "?"}], ValueError,
     r"line 2: exactly one of 'context' and 'context_file' must be given"),
    ([{"id": "q1", "question": "?", "context": MILL, "answers": [{"start": 0, "end": 99}]}],
     ValueError, r"line 1: answers\[0\] span \[0, 99\) is past the end of the context"),
    ([{"id": "q1", "question": "?", "context": MILL}] * 2, ValueError,
     r"line 2: id 'q1' repeats an earlier line"),
    ([{"id": "q1", "question": "?", "context_file": "absent.txt",
       "answers": [{"start": 0, "end": 5}]}], OSError,
     r"line 1: context file of example 'q1': .*absent.txt"),
])
def test_bad_gold_names_the_line(tmp_path, lines, error, message):
  with pytest.raises(error, match=message):
    TASK.load_gold(_write_gold(tmp_path, lines))


def _cli(capsys, *argv):
  capsys.readouterr()
  code = evaluate.main(list(argv))
  out, err = capsys.readouterr()
  return code, out.strip().splitlines(), err.strip().splitlines()


def test_evaluate_cli(tmp_path, capsys):
  gold = _write_gold(tmp_path, [
      {"id": "q1", "question": "Who built the mill?", "context": MILL, "answers": ["Jonas Hale"]},
      {"id": "q2", "question": "Who sold it?", "context": MILL,
       "answers": [{"start": 34, "end": 38}]},
      {"id": "q3", "question": "To whom?", "context": MILL, "answers": ["the miller"]},
  ])
  preds = tmp_path / "predictions.json"
  preds.write_text(json.dumps({"q1": "Jonas Hale.", "q2": "Hale sold", "zz": "x"}))
  out_path = tmp_path / "metrics.json"
  code, out, err = _cli(capsys, "--task", "extractive_qa", "--predictions", str(preds),
                        "--gold", gold, "--output", str(out_path))
  assert code == 0, err
  metrics = json.loads(out[-1])
  # q1 exact; q2 "hale sold" vs "hale": P 1/2, R 1 -> F1 2/3; q3 missing: 0.
  assert metrics == {"exact_match": 100 / 3, "f1": 100 * (1 + 2 / 3) / 3, "n_gold": 3,
                     "n_answered": 2, "n_missing": 1, "n_no_answer": 0, "n_ignored": 1}
  assert json.loads(out_path.read_text()) == metrics
  assert err == [
      "warning: 1 of 3 gold questions have no prediction; they score 0 on exact_match and f1",
      "warning: 1 predictions have ids that are not in the gold file and were not scored "
      "(wrong gold file or split for --task extractive_qa?)"]
  # Other tasks' flags do not apply; a bad gold line is one error line.
  with pytest.raises(SystemExit):
    evaluate.main(["--task", "extractive_qa", "--per_document", "--predictions", str(preds),
                   "--gold", gold])
  assert "--per_document only applies to --task triviaqa" in capsys.readouterr().err
  bad = _write_gold(tmp_path, ['{"id": "q1"}\n'])
  code, _, err = _cli(capsys, "--task", "extractive_qa", "--predictions", str(preds),
                      "--gold", bad)
  assert code == 1 and err == [f"python -m model.evaluate: error: gold file {bad}: line 1: "
                               "missing field 'question'"]


def test_records_task_of_a_manifest():
  docs = {"a": {"question_id": "a"}}
  assert predict_lib.records_task({"job": "jsonl_qa", "task": "extractive_qa"}, docs) == (
      "extractive_qa", False)
  assert predict_lib.records_task({"job": "triviaqa", "config": {}}, docs) == ("triviaqa", False)
  with pytest.raises(predict_lib.PredictError, match="the records were written by the 'wikipedia' "
                     "job, which has no questions; model.predict reads the output of jobs with "
                     r"a QA task \(hotpotqa, triviaqa, narrativeqa, extractive_qa\)"):
    predict_lib.records_task({"job": "wikipedia"}, docs)
  with pytest.raises(predict_lib.PredictError, match="the records' manifest names the task 'squad2'"):
    predict_lib.records_task({"job": "jsonl_qa", "task": "squad2"}, docs)


@pytest.mark.slow
def test_predict_and_score_extractive_qa_records(tmp_path, capsys):
  """``model.predict`` on records whose manifest names the task (``jsonl_qa`` writes
  ``"task": "extractive_qa"``), with ``--gold`` the JSON-lines file."""
  from model import configs, predict  # pylint: disable=g-import-not-at-top
  from model.inference import decoding  # pylint: disable=g-import-not-at-top
  from schemas import manifest as manifest_lib  # pylint: disable=g-import-not-at-top
  from tests.model import packs  # pylint: disable=g-import-not-at-top
  records = packs.as_job(packs.qa_output_dir(str(tmp_path / "hotpot"), num_packs=1), "jsonl_qa",
                         str(tmp_path / "records"))
  path = tmp_path / "records" / manifest_lib.MANIFEST_FILE
  manifest = json.loads(path.read_text())
  manifest["task"] = "extractive_qa"
  path.write_text(manifest_lib.dumps(manifest))
  model_dir = str(tmp_path / "model")
  train_lib.train(records, model_dir, train_lib.config_from_manifest(records, "tiny"),
              configs.TrainConfig(steps=1, seed=0), log_fn=lambda d: None)
  out = str(tmp_path / "predictions.json")
  capsys.readouterr()
  assert predict.main(["--records_dir", records, "--model_dir", model_dir, "--output", out,
                       "--task", "extractive_qa"]) == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  preds = json.load(open(out))
  texts = {d: doc["text"] for d, doc in decoding.load_documents(records).items()}
  assert sorted(preds) == sorted(texts) and summary["task"] == "extractive_qa"
  assert summary["predictions"] == len(preds)
  assert all(answer in texts[d] for d, answer in preds.items())
  gold = tmp_path / "gold.jsonl"
  gold.write_text("".join(json.dumps({"id": d, "question": "?", "context": texts[d],
                                      "answers": [a or texts[d]]}) + "\n"
                          for d, a in preds.items()))
  assert predict.main(["--records_dir", records, "--model_dir", model_dir, "--output", out,
                       "--gold", str(gold)]) == 0
  metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert (metrics["n_gold"], metrics["n_missing"]) == (len(preds), 0)
  assert metrics["exact_match"] == 100.0 * sum(1 for a in preds.values() if a) / len(preds)
  assert predict.main(["--records_dir", records, "--model_dir", model_dir, "--output", out,
                       "--task", "hotpotqa"]) == 1
  assert capsys.readouterr().err.strip() == (
      f"python -m model.predict: error: --task hotpotqa contradicts the records: {records} was "
      "written by python -m pipelines jsonl_qa (task extractive_qa); leave --task out")
