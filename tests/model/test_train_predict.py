"""Decoding on hand-made logits, a few training steps, checkpoints and the prediction CLI."""

import pytest
import json
import os

import numpy as np

from model import configs
from model.inference import decoding, spans
from model.training import train_lib
from model.inference import predict_lib
from model.tasks import hotpotqa as hotpotqa_task
from schemas import records

S, Q, C, P = (records.TOKEN_KIND_SPECIAL, records.TOKEN_KIND_QUESTION,
              records.TOKEN_KIND_CONTEXT, records.TOKEN_KIND_PAD)


def test_best_span_constraints():
  kinds = np.array([S, Q, S, C, C, C, C, S, P])
  begin = np.array([99, 98, 0, -20, 5, 0, 0, 97, 0], np.float32)
  end = np.array([99, 98, 0, 9, 0, 1, 3, 97, 0], np.float32)
  # Best unconstrained context pair would be begin 4 / end 3 (end < begin): not allowed.
  assert spans.best_span(begin, end, kinds) == (5.0 + 3.0, 4, 6)
  assert spans.best_span(begin, end, kinds, max_answer_tokens=2) == (5.0 + 1.0, 4, 5)
  assert spans.best_span(begin, end, np.full(9, S)) is None


def _features(question_ids, doc_ids, kinds, cb, ce, ccb, cce):
  n = len(question_ids)
  return {"segment_mask": np.ones(n, np.int32), "document_index": np.arange(n),
          "question_id": [q.encode() for q in question_ids],
          "document_id": [d.encode() for d in doc_ids], "token_kind": np.array(kinds),
          "char_begin": np.array(cb), "char_end": np.array(ce),
          "context_char_begin": np.array(ccb), "context_char_end": np.array(cce)}


def test_decoder_maps_offsets_and_answer_types():
  text = "Alpha beta. Gamma delta epsilon."
  docs = {
      "d1": {"document_id": "d1", "text": text, "paragraphs": [
          {"title": "A", "begin": 0, "end": 11, "sentences": [[0, 11]]},
          {"title": "G", "begin": 12, "end": 32, "sentences": [[12, 23], [24, 32]]}]},
      "d2": {"document_id": "d2", "text": "yes text", "paragraphs": []},
  }
  kinds = [[S, C, C, S], [S, C, C, C], [S, C, S, P]]
  cb = [[-1, 0, 6, -1], [-1, 12, 18, 24], [-1, 0, -1, -1]]
  ce = [[-1, 5, 11, -1], [-1, 17, 23, 32], [-1, 3, -1, -1]]
  f = _features(["q1", "q1", "q2"], ["d1", "d1", "d2"], kinds, cb, ce, [0, 12, 0], [11, 32, 3])
  begin = np.array([[0, 1, 0, 0], [0, 4, 2, 0], [0, 9, 0, 0]], np.float32)
  end = np.array([[0, 0, 1, 0], [0, 0, 4, 3], [0, 9, 0, 0]], np.float32)
  out = {"begin_logits": begin, "end_logits": end,
         "answer_type_logits": np.array([[2, 0, 0], [1, 0, 0], [0, 0, 5.0]]),
         "supporting_logits": np.array([-3.0, 2.0, 0.0])}
  dec = decoding.Decoder(docs)
  dec.add_pack(f, out)
  preds = hotpotqa_task.TASK.predictions(dec)
  # Best span: segment 1, begin token 1 (4) + end token 2 (4) -> chars 12..23.
  assert preds["answer"]["q1"] == "Gamma delta" == text[12:23]
  assert preds["answer"]["q2"] == "no"
  assert preds["sp"]["q1"] == [["G", 0], ["G", 1]]
  assert preds["sp"]["q2"] == []


@pytest.mark.slow
def test_train_reduces_loss_and_predict(tmp_path, capsys):
  from tests.model import packs
  from model import predict
  records_dir = packs.qa_output_dir(str(tmp_path / "records"), num_packs=2)
  model_dir = str(tmp_path / "model")
  mc = train_lib.config_from_manifest(records_dir, "tiny")
  tc = configs.TrainConfig(learning_rate=3e-3, steps=25, seed=0, checkpoint_every=10)
  logged = []
  summary = train_lib.train(records_dir, model_dir, mc, tc, log_fn=logged.append)
  assert summary["steps"] == 25 and len(logged) == 25
  assert summary["last_loss"] < 0.6 * summary["first_loss"], summary
  assert all(np.isfinite(summary["losses"]))
  assert os.path.exists(os.path.join(model_dir, "config.json"))
  assert os.path.exists(summary["checkpoint"] + ".index")
  assert os.listdir(os.path.join(model_dir, "tb"))
  assert configs.load_configs(model_dir) == (mc, tc)

  out_path = str(tmp_path / "predictions.json")
  assert predict.main(["--records_dir", records_dir, "--model_dir", model_dir,
                       "--output", out_path]) == 0
  preds = json.load(open(out_path))
  assert sorted(preds["answer"]) == ["q0_0", "q0_1", "q1_0", "q1_1"]
  assert sorted(preds["sp"]) == sorted(preds["answer"])
  texts = {d["document_id"]: d["text"] for d in
           decoding.load_documents(records_dir).values()}
  for qid, ans in preds["answer"].items():
    k, d = qid[1:].split("_")
    assert ans in ("yes", "no") or ans in texts[f"doc{k}_{d}"]

  # --gold scores with the same code as `python -m model.evaluate`: gold = these answers.
  gold_path = tmp_path / "gold.json"
  gold_path.write_text(json.dumps([
      {"_id": q, "answer": a, "supporting_facts": [list(f) for f in preds["sp"][q]]}
      for q, a in preds["answer"].items()]))
  capsys.readouterr()
  assert predict.main(["--records_dir", records_dir, "--model_dir", model_dir,
                       "--output", out_path, "--gold", str(gold_path)]) == 0
  metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert (metrics["em"], metrics["sp_em"], metrics["n_gold"]) == (1.0, 1.0, 4)

  # Other tasks' formats and the sum reduction, through the CLI and the Python API.
  # The task follows the records' manifest (the job that wrote them); --task only checks it.
  nqa_path = str(tmp_path / "narrativeqa.json")
  nqa_records = packs.as_job(records_dir, "narrativeqa", str(tmp_path / "nqa_records"))
  assert predict.main(["--records_dir", nqa_records, "--model_dir", model_dir,
                       "--output", nqa_path, "--reduction", "sum"]) == 0
  nqa = json.load(open(nqa_path))
  assert sorted(nqa) == sorted(f"doc{q[1:]}: what is gold" for q in preds["answer"])
  # TriviaQA records of one document per (question, page) -- here every document id differs
  # from its question id -- are keyed per document, without any flag.
  tqa_records = packs.as_job(records_dir, "triviaqa", str(tmp_path / "tqa_records"))
  tqa = predict_lib.predict(tqa_records, model_dir, None)
  assert sorted(tqa) == sorted(f"doc{q[1:]}" for q in preds["answer"])
  assert all(a in texts[d] for d, a in tqa.items())
  capsys.readouterr()
  assert predict.main(["--records_dir", records_dir, "--model_dir", model_dir, "--output",
                       nqa_path, "--task", "triviaqa"]) == 1
  assert capsys.readouterr().err.splitlines() == [
      f"python -m model.predict: error: --task triviaqa contradicts the records: {records_dir} "
      "was written by python -m pipelines hotpotqa; leave --task out"]
  assert predict.main(["--records_dir", tqa_records, "--model_dir", model_dir, "--output",
                       nqa_path, "--noper_document"]) == 1
  assert "--noper_document contradicts the records" in capsys.readouterr().err

  # Resuming continues from the checkpoint instead of starting over (2 more steps: a changed
  # schedule, which must be asked for).
  tc2 = configs.TrainConfig(learning_rate=3e-3, steps=27, seed=0)
  summary2 = train_lib.train(records_dir, model_dir, mc, tc2, log_fn=lambda d: None,
                         allow_schedule_change=True)
  assert summary2["steps"] == 27 and len(summary2["losses"]) == 2
