"""Fine-tuning's dev metrics are `python -m model.evaluate`'s on the same predictions and gold.

For every registered task, `model.training.finetune_lib.dev_evaluation` (the callback the trainer
calls each evaluation: its numbers go to the log, metrics.json, TensorBoard and pick
`<model_dir>/best`) is run on fixed predictions -- with wrong, partial and missing answers, ids the
gold file does not know and, for NarrativeQA, rows of other sets in `qaps.csv` -- and compared with
`model.evaluation.evaluate_lib.run` on the same files with the flags a user gives `model.evaluate`
(parsed by its own parser): the numbers must be equal.  The model's forward pass is replaced by the
fixed predictions (`model.inference.predict_lib.predict_with_model`); the records dirs are real
(their manifest names the task and, for NarrativeQA, the split).
"""

import json
import os

import pytest

from model import evaluate
from model.evaluation import evaluate_lib
from model.inference import predict_lib
from model.training import finetune_lib
from model import predict
from model import tasks
from model.evaluation import narrativeqa as nqa_official
from schemas import manifest as manifest_lib
from tests.model import packs

HOTPOT_GOLD = [{"_id": q, "answer": a, "supporting_facts": [[t, 0]]}
               for q, a, t in (("a", "paris", "Paris"), ("b", "yes", "Oui"),
                               ("c", "the old lighthouse", "Light"), ("d", "1999", "Year"))]
HOTPOT_PREDICTIONS = {"answer": {"a": "paris", "b": "no", "c": "old lighthouse keeper",
                                 "zz": "unknown id"},
                      "sp": {"a": [["Paris", 0]], "c": [["Light", 0], ["Other", 1]],
                             "zz": [["X", 0]]}}


def _trivia_gold(domain):
  return {"Domain": domain, "VerifiedEval": False, "Version": 1.0, "Split": "dev",
          "Data": [{"QuestionId": q, "Question": "?",
                    "Answer": {"NormalizedAliases": aliases, "Value": aliases[0]},
                    "EntityPages": [{"Filename": f"{q}_a.txt"}, {"Filename": f"{q}_b.txt"}],
                    "SearchResults": []}
                   for q, aliases in (("q1", ["paris"]), ("q2", ["london", "city of london"]),
                                      ("q3", ["the blue river"]), ("q4", ["rome"]))]}


NQA_HEADER = ",".join(nqa_official.GOLD_COLUMNS) + "\r\n"
NQA_ROWS = [  # (document_id, set, question, answer1, answer2)
    ("s1", "train", "Who ran?", "The old man.", "his father"),
    ("s1", "train", "Where?", "In the town", "the town"),
    ("s2", "valid", "Who sang?", "A young girl.", "the girl"),
    ("s2", "valid", "Why did she sing?", "to wake the king", "because the king slept"),
    ("s2", "valid", "When?", "At dawn.", "dawn"),
    ("s3", "test", "What fell?", "The tower", "a stone tower"),
    ("s3", "test", "Who saw it?", "Nobody", "no one"),
]
NQA_GOLD = NQA_HEADER + "".join(
    f'{d},{s},"{q}",{a1},{a2},{q.lower()},{a1.lower()},{a2.lower()}\r\n'
    for d, s, q, a1, a2 in NQA_ROWS)
NQA_PREDICTIONS = {  # two valid rows answered (one in part), one missing; others are ignored
    "s2: Who sang?": "the young girl", "s2: Why did she sing?": "she wanted to wake the king",
    "s3: What fell?": "the tower", "s9: Unknown?": "nothing"}

EXTRACTIVE_GOLD = "".join(json.dumps({"id": q, "question": "Where?", "context": c,
                                      "answers": a}) + "\n"
                          for q, c, a in (("e1", "In Paris.", ["Paris"]),
                                          ("e2", "By the old mill.", ["the old mill"]),
                                          ("e3", "Near Rome.", ["Rome"]),
                                          ("e4", "On Mars.", ["Mars"])))

# case -> (task, manifest changes, gold file name, gold text, predictions, model.evaluate flags)
CASES = {
    "hotpotqa": ("hotpotqa", {"job": "hotpotqa"}, "gold.json", json.dumps(HOTPOT_GOLD),
                 HOTPOT_PREDICTIONS, []),
    "triviaqa_wikipedia": ("triviaqa", {"job": "triviaqa"}, "wikipedia-dev.json",
                           json.dumps(_trivia_gold("Wikipedia")),
                           {"q1": "Paris", "q2": "the city of london", "q3": "blue",
                            "q7": "unknown id"}, []),
    "triviaqa_per_page": ("triviaqa", {"job": "triviaqa", "config": {"per_document": True}},
                          "wikipedia-dev.json", json.dumps(_trivia_gold("Wikipedia")),
                          {"q1--q1_a.txt": "paris", "q1--q1_b.txt": "lyon",
                           "q2--q2_a.txt": "london", "q3--q3_b.txt": "a blue river",
                           "q7--q7_a.txt": "unknown id"}, ["--per_document"]),
    "triviaqa_web": ("triviaqa", {"job": "triviaqa"}, "web-dev.json",
                     json.dumps(_trivia_gold("Web")),
                     {"q1--q1_a.txt": "paris", "q2--q2_b.txt": "london town",
                      "q4--q4_a.txt": "milan", "q7--q7_a.txt": "unknown id"}, []),
    "narrativeqa": ("narrativeqa", {"job": "narrativeqa", "config": {"split": "valid"}},
                    "qaps.csv", NQA_GOLD, NQA_PREDICTIONS, ["--split", "valid", "--nometeor"]),
    "extractive_qa": ("extractive_qa", {"job": "jsonl_qa", "task": "extractive_qa"},
                      "dev.jsonl", EXTRACTIVE_GOLD,
                      {"e1": "paris", "e2": "old mill", "e3": "Milan", "e9": "unknown id"}, []),
}


@pytest.fixture(scope="module")
def base_records(tmp_path_factory):
  return packs.qa_output_dir(str(tmp_path_factory.mktemp("dev") / "records"), num_packs=1)


def _records(base, out_dir, changes):
  """A copy of ``base`` whose manifest has ``changes`` (``config`` entries merged)."""
  packs.as_job(base, changes["job"], out_dir)
  path = os.path.join(out_dir, manifest_lib.MANIFEST_FILE)
  manifest = json.load(open(path))
  for key, value in changes.items():
    if key == "config":
      manifest["config"].update(value)
    else:
      manifest[key] = value
  with open(path, "w") as f:
    f.write(manifest_lib.dumps(manifest))
  return out_dir


def _setup(tmp_path, base, case):
  task, changes, gold_name, gold_text, predictions, flags = CASES[case]
  records_dir = _records(base, str(tmp_path / "records"), changes)
  gold = tmp_path / gold_name
  gold.write_text(gold_text, encoding="utf-8")
  preds = tmp_path / "predictions.json"
  preds.write_text(json.dumps(predictions))
  return task, records_dir, str(gold), str(preds), predictions, flags


def _fixed_predictions(monkeypatch, predictions, records_dir):
  def fake(model, records, **kwargs):
    assert model == "model" and records == records_dir, (model, records)
    return json.loads(json.dumps(predictions))
  monkeypatch.setattr(predict_lib, "predict_with_model", fake)


def _evaluate_cli(task, preds, gold, flags):
  """What `python -m model.evaluate --task T --predictions P --gold G FLAGS` scores."""
  args = evaluate.parse_args(["--task", task, "--predictions", preds, "--gold", gold] + flags)
  return evaluate_lib.run(task, preds, gold, **evaluate.task_options(args))


def test_every_task_has_a_case():
  assert {task for task, *_ in CASES.values()} == set(tasks.names())


@pytest.mark.parametrize("case", sorted(CASES))
def test_dev_metrics_equal_model_evaluate(tmp_path, monkeypatch, capsys, base_records, case):
  task, records_dir, gold, preds, predictions, flags = _setup(tmp_path, base_records, case)
  _fixed_predictions(monkeypatch, predictions, records_dir)
  got = finetune_lib.dev_evaluation(task, records_dir, gold)("model")
  want = _evaluate_cli(task, preds, gold, flags)
  assert got == {k: v for k, v in want.items() if isinstance(v, (int, float))}
  # Not a trivial agreement: something is wrong, something missing, something unknown.
  best = tasks.get(task).best_metric
  assert got[best] > 0 and got[best] not in (1, 100) and got["n_ignored"] >= 1, got
  assert any(v for k, v in got.items() if k.startswith("n_missing")), got
  # The evaluate warnings go to stderr once per kind (a second evaluation adds none).
  finetune_lib.dev_evaluation(task, records_dir, gold)  # construction prints nothing
  fn = finetune_lib.dev_evaluation(task, records_dir, gold)
  capsys.readouterr()
  assert fn("model") == got and fn("model") == got
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 2 and all(x.startswith("warning: ") for x in err), err
  assert all(x.endswith(f"(dev evaluation of {records_dir})") for x in err), err


def test_narrativeqa_scores_only_the_dev_split(tmp_path, monkeypatch, base_records):
  """The bug of issue 41: every row of qaps.csv was scored, train and test rows as missing."""
  task, records_dir, gold, preds, predictions, _ = _setup(tmp_path, base_records, "narrativeqa")
  _fixed_predictions(monkeypatch, predictions, records_dir)
  got = finetune_lib.dev_evaluation(task, records_dir, gold)("model")
  assert (got["n_gold"], got["n_answered"], got["n_missing"], got["n_ignored"]) == (3, 2, 1, 2)
  all_rows = evaluate_lib.run(task, preds, gold, meteor=False)
  assert all_rows["n_gold"] == 7 and all_rows["rouge_l"] < 0.8 * got["rouge_l"]
  assert finetune_lib.dev_options(task, records_dir) == {"split": "valid", "meteor": False}


def test_narrativeqa_dev_records_without_split(tmp_path, base_records):
  records_dir = _records(base_records, str(tmp_path / "records"), {"job": "narrativeqa"})
  gold = tmp_path / "qaps.csv"
  gold.write_text(NQA_GOLD)
  with pytest.raises(evaluate_lib.EvaluationError) as e:
    finetune_lib.dev_evaluation("narrativeqa", records_dir, str(gold))
  message = str(e.value)
  assert "\n" not in message and message.startswith(f"{records_dir}: its manifest.json "
                                                    "records no NarrativeQA split"), message
  assert "python -m pipelines narrativeqa --split" in message


def test_gold_without_the_dev_split_fails_before_training(tmp_path, base_records):
  records_dir = _records(base_records, str(tmp_path / "records"),
                         {"job": "narrativeqa", "config": {"split": "valid"}})
  gold = tmp_path / "qaps.csv"
  gold.write_text(NQA_HEADER + "".join(
      f'{d},{s},"{q}",{a1},{a2},q,a,b\r\n' for d, s, q, a1, a2 in NQA_ROWS if s != "valid"))
  with pytest.raises(evaluate_lib.EvaluationError) as e:
    finetune_lib.dev_evaluation("narrativeqa", records_dir, str(gold))  # no model, no prediction
  assert str(e.value) == (f"gold file {gold}: no gold questions to score in split 'valid' "
                          "(its sets: ['test', 'train'])")


def test_evaluate_split_without_rows_is_one_line(tmp_path, capsys):
  gold = tmp_path / "qaps.csv"
  gold.write_text(NQA_HEADER + 's3,test,"What fell?",The tower,a tower,q,a,b\r\n')
  preds = tmp_path / "p.json"
  preds.write_text(json.dumps({"s3: What fell?": "the tower"}))
  capsys.readouterr()
  assert evaluate.main(["--task", "narrativeqa", "--predictions", str(preds), "--gold",
                        str(gold), "--split", "valid", "--nometeor"]) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.evaluate: error: gold file {gold}: no gold questions to score in "
      "split 'valid' (its sets: ['test'])"]


def test_predict_gold_scores_the_records_split(tmp_path, monkeypatch, capsys, base_records):
  """`model.predict --gold` scores NarrativeQA dev records as `model.evaluate --split` does (its
  forward pass replaced by the fixed predictions; METEOR, which `model.predict` runs and which
  needs Java, by a stand-in, the same for both sides)."""
  task, records_dir, gold, preds, predictions, _ = _setup(tmp_path, base_records, "narrativeqa")
  output = str(tmp_path / "out.json")

  def fake_predict(records, model_dir, out, *args, **kwargs):
    assert records == records_dir
    with open(out, "w") as f:
      json.dump(predictions, f)
    return predictions
  monkeypatch.setattr(predict_lib, "predict", fake_predict)
  monkeypatch.setattr(nqa_official, "meteor_available", lambda: None)
  monkeypatch.setattr(nqa_official, "corpus_meteor", lambda hyps, refs, scorer=None: (
      len(hyps) / 100.0, []))
  capsys.readouterr()
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  assert predict.main(["--records_dir", records_dir, "--model_dir", str(model_dir), "--output",
                       output, "--gold", gold]) == 0
  out, err = capsys.readouterr()
  got = json.loads(out.strip().splitlines()[-1])
  assert got == _evaluate_cli(task, preds, gold, ["--split", "valid"])
  assert (got["n_gold"], got["meteor"]) == (3, 0.03)
  assert len(err.splitlines()) == 2, err  # the missing and unknown warnings
