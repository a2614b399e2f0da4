"""The NarrativeQA task: ``"<story>: <question>"`` keys, qaps.csv gold, flags, dev options."""

from __future__ import annotations

from model import tasks
from model.evaluation import narrativeqa as official
from tests.model.inference.test_decoding import D1, D2A, D2B, D3, D4, _decoder

TASK = tasks.get("narrativeqa")


def test_keys_are_story_and_question():
  dec = _decoder("sum")
  nq = TASK.predictions(dec)
  assert set(nq) == {f"{D1}: Which city?", f"{D2A}: Which letters?", f"{D2B}: Which letters?",
                     f"{D3}: Wo liegt 東京?", f"{D4}: Is it?"}
  assert nq[official.prediction_key(D3, "Wo liegt 東京?")] == "東京 café"
  # One question read with two documents: one key per document, the question's answer.
  assert nq[f"{D2A}: Which letters?"] == nq[f"{D2B}: Which letters?"] == "Theta Iota"
  official.check_predictions(nq)
  # The story id, when the side file names one, keys the prediction.
  dec.documents[D1]["source_document_id"] = "story7"
  assert "story7: Which city?" in TASK.predictions(dec)


def test_gold_is_qaps_csv(tmp_path):
  path = tmp_path / "qaps.csv"
  path.write_text("document_id,set,question,answer1,answer2,question_tokenized,"
                  "answer1_tokenized,answer2_tokenized\r\nd1,test,Who?,Tom.,Tom,who ?,tom .,"
                  "tom\r\n", encoding="utf-8")
  gold = TASK.load_gold(str(path))
  TASK.check_gold(gold)
  metrics = TASK.evaluate({"d1: Who?": "tom"}, gold, meteor=False)
  assert metrics["rouge_l"] == 1.0 and metrics["n_missing"] == 0


def test_flags_dev_options_and_warning():
  assert [(f.dest, f.kind, f.display) for f in TASK.flags] == [
      ("protocol", "value", "--protocol"), ("meteor", "bool", "--(no)meteor"),
      ("split", "value", "--split")]
  assert TASK.best_metric == "rouge_l" and TASK.dev_options == {"meteor": False}
  assert TASK.unavailable_errors == (official.MeteorUnavailableError,)
  assert TASK.missing_warning({"n_gold": 3, "n_missing": 2}) == (
      "warning: 2 of 3 gold questions have no prediction; they are scored as an empty answer "
      "(0 ROUGE-L and METEOR; reference length but no n-grams for BLEU)")
