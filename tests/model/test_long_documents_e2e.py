"""The long-document datasets end to end: pipeline -> model.train (tiny, 2 steps) ->
model.predict -> model.evaluate, with questions whose documents span several sub-documents."""

import csv
import json
import os

import pytest

from model import configs, evaluate, predict
from model.evaluation import evaluate_lib
from model.training import train_lib
from model.network import book_memory
from model.data import pack_reader as input_lib
from pipelines import runner
from schemas import documents as documents_schema
from tests.pipelines.datasets.narrativeqa.test_dataset import SAMPLES, make_layout

# 48-token segments, one per sub-document: the longer stories span several sub-documents.
FLAGS = ["--seq_length", "48", "--overlap", "8", "--max_segments_per_document", "1",
         "--segments_per_pack", "8", "--max_question_tokens", "12"]


def _chain(records_dir, tmp_path, task, gold, *eval_flags, predict_flags=()):
  model_dir = str(tmp_path / "model")
  train_lib.train(records_dir, model_dir, train_lib.config_from_manifest(records_dir, "tiny"),
              configs.TrainConfig(learning_rate=1e-3, steps=2, seed=0, warmup_steps=0),
              log_fn=lambda d: None)
  preds = str(tmp_path / "predictions.json")
  # No --task: model.predict follows the records (the job and, for TriviaQA, the keying).
  assert predict.main(["--records_dir", records_dir, "--model_dir", model_dir, "--output",
                       preds, *predict_flags]) == 0
  metrics = str(tmp_path / "metrics.json")
  assert evaluate.main(["--task", task, "--predictions", preds, "--gold", gold, "--output",
                        metrics, *eval_flags]) == 0
  with open(preds, encoding="utf-8") as f, open(metrics, encoding="utf-8") as g:
    return json.load(f), json.load(g)


def _sub_documents(out):
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return json.load(f)["examples"]


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["sub_document", "book"])
def test_narrativeqa_chain_on_fixtures(tmp_path, scope):
  qaps = make_layout(str(tmp_path / "nqa"))
  out = str(tmp_path / "out")
  # One segment per pack: a story's sub-documents lie in different packs.
  assert runner.dataset_main(
      "narrativeqa", ["--input", qaps, "--output_dir", out, "--split", "test"] + FLAGS[:6]
      + ["--segments_per_pack", "1", "--max_error_fraction", "1"] + FLAGS[8:]) == 0
  ex = _sub_documents(out)
  assert ex["sub_documents"] > ex["documents"] == 4  # stories over several sub-documents
  assert ex["packs"] == ex["sub_documents"]
  preds, metrics = _chain(out, tmp_path, "narrativeqa", qaps, "--nometeor", "--split", "test",
                          predict_flags=("--memory_scope", scope))
  if scope == "book":  # pass 1 kept the memories of the books that span several packs
    model, _ = train_lib.load_model(str(tmp_path / "model"))
    book = book_memory.BookMemory(
        lambda: ({k: v.numpy() for k, v in f.items()}
                 for f in input_lib.dataset_from_output_dir(out)), 1, model.config.hidden_size)
    book.fill(model)
    # book1's two questions: a document of 2 sub-documents each (6 sub-documents of 4).
    assert len(book.wanted) == 2 and len(book.store) == 4
  # One prediction per written question, keyed "<story id>: <question>" as the official
  # evaluation wants, whatever the number of sub-documents it was read in.
  assert sorted(preds) == ["book1: What did Mr. Ashby keep?", "book1: Who was Clara?",
                           "latin1: Where did Núñez live?", "script1: Where do the logs go?"]
  assert {"bleu_1", "bleu_4", "rouge_l"} <= set(metrics)
  assert metrics["n_answered"] == 4


TIME_MACHINE = "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58"
# Questions of our own about the real NarrativeQA test story (The Time Machine).
TM_QUESTIONS = [
    ("Who are the Eloi afraid of?", "The Morlocks.", "the Morlocks"),
    ("What does the Time Traveller find in his pocket?", "Two strange white flowers.",
     "white flowers"),
    ("Who is Weena?", "A little Eloi woman he saves from drowning.", "an Eloi woman"),
]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="no ../shared/samples")
def test_narrativeqa_chain_on_the_time_machine(tmp_path):
  root = tmp_path / "nqa"
  (root / "tmp").mkdir(parents=True)
  with open(os.path.join(SAMPLES, "documents_full.csv"), encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f))
  with open(root / "documents.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(rows[0])
    w.writerows(r for r in rows[1:] if r and r[0] == TIME_MACHINE)
  with open(os.path.join(SAMPLES, "stories", f"{TIME_MACHINE}.content"), "rb") as f:
    (root / "tmp" / f"{TIME_MACHINE}.content").write_bytes(f.read())
  with open(root / "qaps.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["document_id", "set", "question", "answer1", "answer2", "question_tokenized",
                "answer1_tokenized", "answer2_tokenized"])
    for q, a1, a2 in TM_QUESTIONS:
      w.writerow([TIME_MACHINE, "test", q, a1, a2, "", "", ""])
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", ["--input", str(root / "qaps.csv"), "--output_dir", out,
                                             "--split", "test", "--seq_length", "512",
                                             "--max_segments_per_document", "32"]) == 0
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    m = json.load(f)
  assert m["counts"]["written"] == 3 and m["stages"]["segment"]["texts_tokenised"] == 4
  assert m["stages"]["answers"]["oracle_found"] == 3
  assert m["examples"]["sub_documents"] >= 6  # ~48k tokens: more than 32 segments per question
  docs = documents_schema.load(out)
  assert len(docs[f"{TIME_MACHINE}:0"]["text"].split()) > 30_000
  preds, metrics = _chain(out, tmp_path, "narrativeqa", str(root / "qaps.csv"), "--nometeor",
                          "--split", "test")
  assert sorted(preds) == sorted(f"{TIME_MACHINE}: {q}" for q, _, _ in TM_QUESTIONS)
  assert metrics["n_answered"] == 3


def _triviaqa_chain(tmp_path, question_file, evidence, per_document):
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "out")
  # The fixtures hold questions the pipeline dead-letters on purpose (more than the default
  # 10% error budget): this chain is about what the model reads, so they are accepted.
  assert runner.dataset_main("triviaqa", ["--input", question_file, "--evidence_dir", evidence,
                                          "--output_dir", out, "--max_error_fraction", "1"]
                             + FLAGS) == 0
  flags = ["--per_document"] if per_document else []
  preds, metrics = _chain(out, tmp_path, "triviaqa", question_file, *flags)
  with open(question_file, encoding="utf-8") as f:
    return preds, metrics, json.load(f)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wikipedia-dev", "web-dev"])
def test_triviaqa_chain_on_fixtures(tmp_path, name):
  from model.evaluation import triviaqa as official  # pylint: disable=g-import-not-at-top
  from tests.pipelines.datasets.triviaqa import test_dataset as fx  # pylint: disable=g-import-not-at-top
  evidence = fx.write_evidence(tmp_path / "evidence")
  web = name.startswith("web")
  # The fixtures' questions that the official evaluation accepts (the others test dead
  # letters elsewhere).
  domain = "Web" if web else "Wikipedia"

  def accepted(datum):
    try:
      official.check_gold({"Data": [datum], "Domain": domain, "VerifiedEval": False})
      return True
    except ValueError:
      return False

  data = [d for d in (fx.WEB_DEV if web else fx.WIKI_DEV) if accepted(d)]
  path = fx.write_question_file(tmp_path / f"{name}.json", data,
                                "Web" if web else "Wikipedia", "dev")
  preds, metrics, gold = _triviaqa_chain(tmp_path, path, evidence, per_document=web)
  # The keys round-trip: exactly the official evaluation keys whose evidence exists.
  keys = set(official.key_to_answer(gold, per_document=web))
  assert set(preds) <= keys and metrics["n_answered"] == len(preds) > 0
  assert {"exact_match", "f1"} <= set(metrics)


# (wikipedia-dev on the samples is the README's TriviaQA quick start, which checks the same:
# tests/test_readme_quickstarts.py)
@pytest.mark.skipif(not os.path.isdir(os.path.join(SAMPLES, "..", "triviaqa")),
                    reason="no ../shared/samples")
@pytest.mark.slow
@pytest.mark.parametrize("name", ["web-dev"])
def test_triviaqa_chain_on_samples(tmp_path, name):
  from model.evaluation import triviaqa as official  # pylint: disable=g-import-not-at-top
  base = os.path.join(SAMPLES, "..", "triviaqa")
  web = name.startswith("web")
  preds, metrics, gold = _triviaqa_chain(tmp_path, os.path.join(base, "qa", f"{name}.json"),
                                         os.path.join(base, "evidence"), per_document=web)
  assert set(preds) == set(official.key_to_answer(gold, per_document=web))
  assert metrics["n_missing"] == 0


@pytest.mark.slow
def test_finetune_with_whole_book_memory(tmp_path, capsys):
  """model.finetune --memory_scope book: the store of the books that span several packs is
  filled at the start and refilled every --book_memory_refresh steps; training and the dev
  evaluation (predict with book scope) run; one prediction per question."""
  from model import finetune  # pylint: disable=g-import-not-at-top
  qaps = make_layout(str(tmp_path / "nqa"))
  out = str(tmp_path / "out")
  assert runner.dataset_main(
      "narrativeqa", ["--input", qaps, "--output_dir", out, "--split", "test"] + FLAGS[:6]
      + ["--segments_per_pack", "1", "--max_error_fraction", "1"] + FLAGS[8:]) == 0
  capsys.readouterr()
  model_dir = str(tmp_path / "model")
  assert finetune.main(["--task", "narrativeqa", "--records_dir", out, "--dev_records_dir", out,
                        "--gold", qaps, "--model_dir", model_dir, "--preset", "tiny",
                        "--steps", "5", "--eval_every", "5", "--memory_scope", "book",
                        "--book_memory_refresh", "2", "--log_every", "1"]) == 0
  captured = capsys.readouterr()
  refills = [x for x in captured.err.splitlines() if x.startswith("book memory:")]
  # Filled at steps 0, 2 and 4: 4 sub-documents of the 2 books that span several packs.
  assert [x.split("refilled at step ")[1].split()[0] for x in refills] == ["0", "2", "4"]
  assert all("4 sub-documents of 2 books" in x for x in refills)
  lines = [json.loads(x) for x in captured.out.splitlines() if x.startswith("{")]
  steps = [x for x in lines if "loss" in x and "step" in x]
  assert [x["step"] for x in steps] == [1, 2, 3, 4, 5]
  assert all(x["loss"] == x["loss"] for x in steps)  # finite, not NaN
  final = lines[-1]
  assert final["final_eval"]["n_answered"] == 4
  # The dev metric is model.evaluate's on the same predictions: the test split's 8 rows of
  # qaps.csv (4 without records), not its train row.
  from model import predict  # pylint: disable=g-import-not-at-top
  preds = str(tmp_path / "preds.json")
  assert predict.main(["--records_dir", out, "--model_dir", model_dir, "--output", preds,
                       "--memory_scope", "book"]) == 0
  want = evaluate_lib.run("narrativeqa", preds, qaps, split="test", meteor=False)
  assert want["n_gold"] == 8 and final["final_eval"] == pytest.approx(
      {k: float(v) for k, v in want.items() if isinstance(v, (int, float))}, rel=1e-6)
  with pytest.raises(SystemExit) as exit_info:
    finetune.main(["--task", "narrativeqa", "--records_dir", out, "--model_dir",
                   str(tmp_path / "m2"), "--memory_scope", "book", "--book_memory_refresh", "0"])
  assert exit_info.value.code == 2
  assert "--book_memory_refresh must be >= 1, got 0" in capsys.readouterr().err
