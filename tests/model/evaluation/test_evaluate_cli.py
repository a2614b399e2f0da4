"""`python -m model.evaluate` for every task: last line is the metrics JSON, options checked."""

import json
import os
import subprocess
import sys
from tests import REPO_ROOT



def _cli(*args):
  env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
  return subprocess.run([sys.executable, "-m", "model.evaluate", *args], cwd=REPO_ROOT, env=env,
                        capture_output=True, text=True, timeout=300, check=False)


def _trivia_gold(domain):
  return {"Domain": domain, "VerifiedEval": False, "Version": 1.0, "Split": "dev", "Data": [
      {"QuestionId": "q1", "Question": "?", "Answer": {
          "NormalizedAliases": ["paris", "city of light"], "Value": "Paris"},
       "EntityPages": [{"Filename": "Paris.txt"}, {"Filename": "France.txt"}],
       "SearchResults": []},
      {"QuestionId": "q2", "Question": "?", "Answer": {"NormalizedAliases": ["blue whale"],
                                                        "Value": "Blue whale"},
       "EntityPages": [{"Filename": "Whale.txt"}], "SearchResults": []}]}


def test_triviaqa_per_question_and_per_document(tmp_path):
  gold = tmp_path / "gold.json"
  gold.write_text(json.dumps(_trivia_gold("Wikipedia")))
  preds = tmp_path / "p.json"
  preds.write_text(json.dumps({"q1": "The City of Light!", "q2": "whale"}))
  out = _cli("--task", "triviaqa", "--predictions", str(preds), "--gold", str(gold))
  assert out.returncode == 0, out.stderr
  m = json.loads(out.stdout.strip().splitlines()[-1])
  assert m["exact_match"] == 50.0
  assert abs(m["f1"] - 100 * (1 + 2 / 3) / 2) < 1e-9  # "whale" vs "blue whale": P=1, R=1/2
  doc_preds = tmp_path / "d.json"
  doc_preds.write_text(json.dumps({"q1--Paris.txt": "paris", "q1--France.txt": "france"}))
  out = _cli("--task", "triviaqa", "--per_document", "--predictions", str(doc_preds),
             "--gold", str(gold))
  m = json.loads(out.stdout.strip().splitlines()[-1])
  assert (m["n_gold"], m["n_missing"], m["exact_match"]) == (3, 1, 100 / 3)


def test_narrativeqa_without_meteor_and_option_checks(tmp_path):
  gold = tmp_path / "qaps.csv"
  gold.write_text("document_id,set,question,answer1,answer2,question_tokenized,"
                  "answer1_tokenized,answer2_tokenized\r\n"
                  "d1,test,Who left?,The old man.,his father,who left ?,the old man .,"
                  "his father\r\n", encoding="utf-8")
  preds = tmp_path / "p.json"
  preds.write_text(json.dumps({"d1: Who left?": "the old man"}))
  out = _cli("--task", "narrativeqa", "--nometeor", "--predictions", str(preds),
             "--gold", str(gold))
  assert out.returncode == 0, out.stderr
  m = json.loads(out.stdout.strip().splitlines()[-1])
  assert m["rouge_l"] == 1.0 and m["meteor"] is None and m["protocol"] == "paper"
  out = _cli("--task", "narrativeqa", "--nometeor", "--protocol", "raw", "--predictions",
             str(preds), "--gold", str(gold))
  assert json.loads(out.stdout.strip().splitlines()[-1])["rouge_l"] < 1.0
  bad = _cli("--task", "hotpotqa", "--protocol", "raw", "--predictions", str(preds),
             "--gold", str(gold))
  assert bad.returncode == 2 and "only applies to --task narrativeqa" in bad.stderr


def test_extractive_qa_from_json_lines(tmp_path):
  (tmp_path / "ctx.txt").write_text("The mill was built by Jonas Hale.", encoding="utf-8")
  gold = tmp_path / "data.jsonl"
  gold.write_text(json.dumps({"id": "a", "question": "Who built the mill?",
                              "context_file": "ctx.txt", "answers": [{"start": 22, "end": 32}]})
                  + "\n", encoding="utf-8")
  preds = tmp_path / "p.json"
  preds.write_text(json.dumps({"a": "Hale"}))
  out = _cli("--task", "extractive_qa", "--predictions", str(preds), "--gold", str(gold))
  assert out.returncode == 0, out.stderr
  m = json.loads(out.stdout.strip().splitlines()[-1])
  # "hale" vs "jonas hale": P = 1, R = 1/2, F1 = 2/3.
  assert (m["exact_match"], m["n_gold"], m["n_missing"]) == (0.0, 1, 0)
  assert abs(m["f1"] - 100 * 2 / 3) < 1e-9
