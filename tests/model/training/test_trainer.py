"""The training drivers end to end on tiny records: pretraining (dynamic masking, entity
memories, held-out MLM evaluation), fine-tuning (dev evaluation by the official metrics, best
checkpoint, early stopping), exact resume after a kill, and MirroredStrategy (the 2 logical
CPUs of conftest) against one device."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from model import configs, finetune, pretrain
from model.data import training_data
from model.training import objectives, strategies, trainer
from model.training import pretrain_lib
from tests.model import packs
from tests import REPO_ROOT

REPO = str(REPO_ROOT)


@pytest.fixture(scope="module")
def wiki_records(tmp_path_factory):
  """The Wikipedia job's records of the small synthetic dump: link mentions with ids."""
  from pipelines.datasets.wikipedia import fake_input as synth  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  from tests.pipelines.datasets.wikipedia.test_dataset import SMALL  # pylint: disable=g-import-not-at-top
  tmp = tmp_path_factory.mktemp("wiki")
  dump = str(tmp / "pages-articles.xml.bz2")
  synth.write_dump(synth.generate_pages(24, seed=1, words_per_page=120), dump)
  out = str(tmp / "records")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out] + SMALL) == 0
  return out


def _json_lines(text):
  return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def hotpot_gold(records_dir, path):
  """The official-format gold file of a ``packs.qa_output_dir``: its documents' answers."""
  from model.inference import decoding  # pylint: disable=g-import-not-at-top
  gold = []
  for doc in decoding.load_documents(records_dir).values():
    sp = [[p["title"], 0] for p in doc["paragraphs"] if p["supporting"]]
    gold.append({"_id": doc["question_id"], "answer": doc["answers"][0],
                 "supporting_facts": sp, "question": doc["question"], "context": []})
  with open(path, "w") as f:
    json.dump(gold, f)
  return path


PRETRAIN_TINY = ["--preset", "tiny_e", "--learning_rate", "3e-3", "--optimizer", "adamw",
                 "--log_batches"]


@pytest.mark.slow
def test_pretrain_cli_learns_masked_lm_and_writes_checkpoints(wiki_records, tmp_path, capsys):
  model_dir = str(tmp_path / "m")
  assert pretrain.main(["--records_dir", wiki_records, "--model_dir", model_dir, "--steps", "40",
                        "--checkpoint_every", "20", "--steps_per_loop", "4", "--log_every", "4",
                        "--dev_records_dir", wiki_records] + PRETRAIN_TINY) == 0
  lines = _json_lines(capsys.readouterr().out)
  steps = [x for x in lines if "loss" in x and "step" in x]
  summary = lines[-1]
  assert summary["summary"] and summary["steps"] == 40 and summary["task"] == "pretrain"
  assert [x["step"] for x in steps] == list(range(4, 41, 4))  # one log line per loop of 4
  assert all(len(x["batches"]) == 4 for x in steps)
  assert steps[-1]["mlm"] < 0.7 * steps[0]["mlm"], [x["mlm"] for x in steps]
  assert all(x["coref_pairs"] > 0 and 0 < x["memory_noop_rate"] < 1 for x in steps)
  assert all(x["masked_tokens"] > 0 for x in steps)
  ev = summary["final_eval"]
  assert ev["packs"] >= 2 and ev["masked_entity_tokens"] > 0 and 0 <= ev["mlm_accuracy"] <= 1
  assert sorted(f for f in os.listdir(model_dir) if f.endswith(".index")) == [
      "ckpt-20.index", "ckpt-40.index"]
  with open(os.path.join(model_dir, "metrics.json")) as f:
    assert json.load(f)["steps"] == 40
  mc, tc = configs.load_configs(model_dir)
  assert mc.memory_source == "entity" and tc.optimizer == "adamw" and tc.warmup_steps == 4
  assert os.listdir(os.path.join(model_dir, "tb"))


@pytest.mark.slow
def test_mlm_evaluation_counts_are_a_hand_computation(wiki_records):
  """Held-out metrics equal NumPy over the model's own logits on the same fixed masks."""
  mc = configs.config_from_manifest(training_data.read_manifests([wiki_records])[0], "tiny_e")
  task = objectives.PretrainObjective(mc, objectives.masking_config(
      training_data.read_manifests([wiki_records])[0]))
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  tf.keras.utils.set_random_seed(0)
  model = readtwice.build_model(mc, 64, 8)
  got = pretrain_lib.mlm_evaluation(model, [wiki_records], task)
  ds = training_data.records_dataset([wiki_records], training_data.read_manifests([wiki_records]),
                               shuffle=False, repeat=False, seed=0,
                               max_mentions=task.max_mentions)
  tokens = correct = ent = ent_correct = 0.0
  for f in task.prepare(ds, pretrain_lib.EVAL_SEED):
    logits = model(f, training=False)["mlm_logits"].numpy()
    w = f["masked_weights"].numpy()
    e = w * f["masked_is_entity"].numpy()
    hit = (logits.argmax(-1) == f["masked_ids"].numpy()).astype(float)
    tokens += w.sum()
    correct += (w * hit).sum()
    ent += e.sum()
    ent_correct += (e * hit).sum()
  assert got["masked_tokens"] == tokens and got["masked_entity_tokens"] == ent > 0
  assert got["mlm_accuracy"] == pytest.approx(correct / tokens)
  assert got["mlm_entity_accuracy"] == pytest.approx(ent_correct / ent)
  assert got["mlm_other_accuracy"] == pytest.approx((correct - ent_correct) / (tokens - ent))


@pytest.mark.slow
def test_finetune_cli_evaluates_keeps_best_and_stops_early(tmp_path, capsys):
  records = packs.qa_output_dir(str(tmp_path / "records"), num_packs=2)
  gold = hotpot_gold(records, str(tmp_path / "gold.json"))
  model_dir = str(tmp_path / "m")
  argv = ["--task", "hotpotqa", "--records_dir", records, "--dev_records_dir", records, "--gold", gold,
          "--model_dir", model_dir, "--preset", "tiny", "--steps", "30", "--eval_every", "10",
          "--learning_rate", "3e-3", "--log_every", "5", "--patience", "0"]
  assert finetune.main(argv) == 0
  lines = _json_lines(capsys.readouterr().out)
  summary = lines[-1]
  evals = summary["evaluations"]
  assert [e["step"] for e in evals] == [10, 20, 30] and summary["packs_per_epoch"] == 2
  assert summary["last_loss"] < 0.6 * summary["first_loss"]
  f1 = [e["eval"]["f1"] for e in evals]
  assert summary["best_metric"] == pytest.approx(max(f1) / 1.0)
  # The kept best model, predicted and scored by the CLIs, gives the best dev F1 again.
  from model import predict  # pylint: disable=g-import-not-at-top
  from model.evaluation import evaluate_lib  # pylint: disable=g-import-not-at-top
  best = os.path.join(model_dir, "best")
  out = str(tmp_path / "p.json")
  assert predict.main(["--records_dir", records, "--model_dir", best, "--output", out]) == 0
  assert evaluate_lib.run("hotpotqa", out, gold)["f1"] == pytest.approx(max(f1))


@pytest.mark.slow
def test_finetune_early_stopping(tmp_path, capsys):
  records = packs.qa_output_dir(str(tmp_path / "records"), num_packs=2)
  gold = hotpot_gold(records, str(tmp_path / "gold.json"))
  # A zero learning rate never improves on the first evaluation: stop after `patience` more.
  argv = ["--task", "hotpotqa", "--records_dir", records, "--dev_records_dir", records, "--gold", gold,
          "--model_dir", str(tmp_path / "m"), "--preset", "tiny", "--steps", "50",
          "--eval_every", "5", "--learning_rate", "1e-12", "--patience", "2"]
  assert finetune.main(argv) == 0
  summary = _json_lines(capsys.readouterr().out)[-1]
  assert summary["stopped_early"] and summary["steps"] == 15
  assert [e["step"] for e in summary["evaluations"]] == [5, 10, 15]


@pytest.mark.slow
def test_finetune_on_hotpotqa_pipeline_output(tmp_path, capsys):
  """The user's path: official-format files -> the HotpotQA job -> model.finetune with dev
  evaluation against the official dev file -> model.predict on the best model."""
  from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  dirs = {}
  for split, n, seed in (("train", 24, 0), ("dev", 8, 1)):
    path = str(tmp_path / f"{split}.json")
    with open(path, "w") as f:
      json.dump(synthetic_hotpotqa.make_questions(n, seed=seed), f)
    dirs[split] = str(tmp_path / f"records_{split}")
    assert runner.dataset_main("hotpotqa", ["--input", path, "--output_dir", dirs[split],
                                            "--seq_length", "128", "--overlap", "32",
                                            "--max_question_tokens", "32", "--segments_per_pack",
                                            "8", "--max_segments_per_document", "8"]) == 0
  capsys.readouterr()
  model_dir = str(tmp_path / "m")
  assert finetune.main(["--task", "hotpotqa", "--records_dir", dirs["train"], "--dev_records_dir",
                        dirs["dev"], "--gold", str(tmp_path / "dev.json"), "--model_dir",
                        model_dir, "--preset", "tiny_e", "--epochs", "3", "--learning_rate",
                        "2e-3", "--log_every", "2"]) == 0
  summary = _json_lines(capsys.readouterr().out)[-1]
  epoch = summary["packs_per_epoch"]
  assert epoch >= 2 and summary["steps"] == 3 * epoch
  assert [e["step"] for e in summary["evaluations"]] == [epoch, 2 * epoch, 3 * epoch]
  assert all({"em", "f1", "sp_f1", "joint_f1"} <= set(e["eval"]) for e in summary["evaluations"])
  assert summary["last_loss"] < summary["first_loss"]
  assert tf.train.latest_checkpoint(os.path.join(model_dir, "best"))


@pytest.mark.parametrize("argv, message", [
    (["--task", "squad"], "invalid choice"),
    (["--task", "hotpotqa", "--strategy", "gpu"], "invalid choice"),
    (["--task", "hotpotqa", "--dev_records_dir", "x"], "--dev_records_dir and --gold go together"),
    (["--task", "hotpotqa", "--tpu", "t"], "--tpu needs --strategy tpu"),
    (["--task", "hotpotqa", "--warmup_fraction", "2"], "--warmup_fraction must be in [0, 1]"),
    (["--task", "hotpotqa", "--init_checkpoint", "a", "--init_roberta", "b"], "alternatives"),
])
def test_finetune_usage_errors(tmp_path, capsys, argv, message):
  with pytest.raises(SystemExit) as e:
    finetune.main(argv + ["--records_dir", str(tmp_path / "r"), "--model_dir",
                          str(tmp_path / "m")])
  assert e.value.code == 2 and message in capsys.readouterr().err


def test_unusable_records_are_one_line(tmp_path, capsys):
  code = pretrain.main(["--records_dir", str(tmp_path / "nope"), "--model_dir",
                        str(tmp_path / "m")])
  err = capsys.readouterr().err.strip().splitlines()
  assert code == 1 and len(err) == 1 and err[0].startswith("python -m model.pretrain: error:")


def _pretrain_argv(records, model_dir, steps):
  return ["--records_dir", records, "--model_dir", model_dir, "--steps", str(steps),
          "--checkpoint_every", "5", "--log_every", "1"] + PRETRAIN_TINY


def _batches_by_step(lines):
  return {x["step"]: x["batches"] for x in lines if "batches" in x}


@pytest.mark.slow
def test_killed_run_resumes_with_the_same_batches(wiki_records, tmp_path, capsys):
  steps = 30  # the kill lands within a few steps of the first checkpoint (step 5)
  ref_dir = str(tmp_path / "ref")
  assert pretrain.main(_pretrain_argv(wiki_records, ref_dir, steps)) == 0
  ref = _json_lines(capsys.readouterr().out)
  ref_batches = _batches_by_step(ref)
  # Kill a second run (SIGKILL: no clean-up) once it has written a checkpoint.
  run_dir = str(tmp_path / "run")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.Popen([sys.executable, "-m", "model.pretrain"]
                          + _pretrain_argv(wiki_records, run_dir, steps), cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  deadline = time.time() + 240
  # The manager's state file, written after the checkpoint's files, names it: poll that (an
  # index file alone may belong to a checkpoint being written).
  while tf.train.latest_checkpoint(run_dir) is None:
    assert proc.poll() is None and time.time() < deadline, "run ended before a checkpoint"
    time.sleep(0.02)
  os.kill(proc.pid, signal.SIGKILL)
  killed_out, _ = proc.communicate()
  killed = _batches_by_step(_json_lines(killed_out))
  assert proc.returncode == -signal.SIGKILL and max(killed) < steps, "killed too late"
  assert all(killed[s] == ref_batches[s] for s in killed)  # same order from the start
  resume_at = int(os.path.basename(tf.train.latest_checkpoint(run_dir)).split("-")[1])
  # Resume: the same command.
  assert pretrain.main(_pretrain_argv(wiki_records, run_dir, steps)) == 0
  resumed = _json_lines(capsys.readouterr().out)
  summary = resumed[-1]
  assert summary["steps"] == steps and summary["resumed_from_step"] == resume_at
  after = _batches_by_step(resumed)
  assert sorted(after) == list(range(resume_at + 1, steps + 1))
  assert all(after[s] == ref_batches[s] for s in after)
  np.testing.assert_allclose(summary["last_loss"], ref[-1]["last_loss"], rtol=1e-4)


def _mirrored_vs_one_device(kind, records, work_dir):
  """The logs of the same run on one device and on 2 replicas (the body of the test below)."""
  manifest = training_data.read_manifests([records])[0]
  mc = configs.config_from_manifest(manifest, "tiny_e" if kind == "pretrain" else "tiny")
  tc = configs.TrainConfig(learning_rate=3e-3, steps=4, seed=3, clipnorm=0.05)  # clipping on
  task = (objectives.PretrainObjective(mc, objectives.masking_config(manifest)) if kind == "pretrain"
          else objectives.FinetuneObjective(mc))
  logs = {}
  for name in ("cpu", "mirrored"):
    logged = []
    t = trainer.Trainer(task, [records], os.path.join(work_dir, name), mc, tc,
                        strategy=strategies.make_strategy(name), log_fn=logged.append,
                        log_batches=True)
    t.run()
    logs[name] = {"replicas": t.strategy.num_replicas_in_sync, "logs": logged}
  return {"loss_keys": task.loss_keys, **logs}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pretrain", "finetune"])
def test_mirrored_matches_one_device(wiki_records, tmp_path, kind):
  """2 replicas (logical CPUs), each with half of every pack, log the losses of one device.

  In a fresh process: MirroredStrategy objects created by other tests in this process would
  number their collectives like ours (TF aborts on the shape mismatch).
  """
  records = (wiki_records if kind == "pretrain"
             else packs.qa_output_dir(str(tmp_path / "qa"), num_packs=2))
  out = subprocess.run([sys.executable, "-m", "tests.model.training.test_trainer", kind, records,
                        str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  cpu, mirrored = result["cpu"], result["mirrored"]
  assert cpu["replicas"] == 1 and mirrored["replicas"] == 2
  assert [x["batches"] for x in cpu["logs"]] == [x["batches"] for x in mirrored["logs"]]
  for key in result["loss_keys"]:
    name = key if key != "total" else "loss"
    got = [x[name] for x in mirrored["logs"]]
    want = [x[name] for x in cpu["logs"]]
    # Step 1 is the same computation summed in another order.  Later steps follow updates
    # in which Adam turns gradient components that are ~0 (float noise, e.g. of a bias the
    # softmax ignores) into steps of the learning rate's size, so those drift a little.
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-4, err_msg=key)


if __name__ == "__main__":  # the subprocess of test_mirrored_matches_one_device
  _cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  print(json.dumps(_mirrored_vs_one_device(*sys.argv[1:4])))
