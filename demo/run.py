r"""End-to-end demo: HotpotQA-format JSON -> TFRecords -> ReadTwice -> predictions -> EM/F1.

  python -m demo.run [--output_dir demo_output] [--train_questions 160] [--dev_questions 40]
                     [--steps 120]

Every step runs the project's own command in a subprocess, exactly as a user would (the Beam
jobs and the inspector are TF-free processes; training/prediction/evaluation import TF):

  1. generate synthetic HotpotQA-format train/dev files (plus two malformed records, to show
     dead-lettering);
  2. ``python -m pipelines hotpotqa`` on each -> records, manifest, dead letters;
  3. ``python -m pipelines.inspector`` -> an HTML page of what the model reads;
  4. ``python -m model.train`` (tiny config) on the train records;
  5. ``python -m model.predict`` on the dev records -> official HotpotQA prediction JSON;
  6. ``python -m model.evaluate --task hotpotqa`` -> EM/F1 against the dev gold;
and ends with a summary.  The last line printed is the summary as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List

from schemas import records_dir as records_dir_lib
from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(step: str, args: List[str]) -> List[str]:
  """Runs ``python -m ...``; streams nothing, returns stdout lines; fails loudly."""
  t0 = time.time()
  print(f"[demo] {step}: {' '.join(['python'] + args)}", flush=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
  proc = subprocess.run([sys.executable] + args, cwd=ROOT, env=env, capture_output=True,
                        text=True)
  if proc.returncode != 0:
    sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
    raise SystemExit(f"[demo] step '{step}' failed with exit code {proc.returncode}")
  print(f"[demo]   done in {time.time() - t0:.1f} s", flush=True)
  return proc.stdout.strip().splitlines()


def train_flags(records_dir: str, model_dir: str, steps: int) -> List[str]:
  """The demo's ``python -m model.train`` flags (warm-up: 10 steps, at most ``steps``)."""
  return ["--records_dir", records_dir, "--model_dir", model_dir, "--preset", "tiny",
          "--steps", str(steps), "--learning_rate", "2e-3",
          "--warmup_fraction", f"{min(10, steps) / steps:.6g}"]


def _last_json(lines: List[str]) -> Dict:
  return json.loads(lines[-1])


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--output_dir", default=os.path.join(ROOT, "demo_output"))
  ap.add_argument("--train_questions", type=int, default=160)
  ap.add_argument("--dev_questions", type=int, default=40)
  ap.add_argument("--steps", type=int, default=120)
  ap.add_argument("--segments_per_pack", type=int, default=16)
  args = ap.parse_args()
  start = time.time()
  out = os.path.abspath(args.output_dir)
  data = os.path.join(out, "data")
  os.makedirs(data, exist_ok=True)

  train = synthetic_hotpotqa.make_questions(args.train_questions, seed=0)
  train += [{"_id": "broken-1", "context": []},  # no question, empty context
            {"_id": "broken-2", "question": "Where?", "answer": "x",
             "context": [["Title without sentences"]]}]
  dev = synthetic_hotpotqa.make_questions(args.dev_questions, seed=1)
  paths = {"train": os.path.join(data, "train.json"), "dev": os.path.join(data, "dev.json")}
  for split, recs in (("train", train), ("dev", dev)):
    with open(paths[split], "w", encoding="utf-8") as f:
      json.dump(recs, f)
  print(f"[demo] wrote {len(train)} train records (2 malformed) and {len(dev)} dev records "
        f"under {data}", flush=True)

  manifests = {}
  for split in ("train", "dev"):
    summary = _last_json(_run(f"pipeline ({split})", [
        "-m", "pipelines", "hotpotqa", "--input", paths[split],
        "--output_dir", os.path.join(out, f"records_{split}"),
        "--segments_per_pack", str(args.segments_per_pack),
        "--max_segments_per_document", str(args.segments_per_pack), "--overwrite"]))
    manifests[split] = records_dir_lib.read_manifest(os.path.join(out, f"records_{split}"))
    print(f"[demo]   {split}: {json.dumps(summary['counts'])} "
          f"rejected={json.dumps(summary['rejected_by_reason'])}", flush=True)

  html = os.path.join(out, "inspect_dev.html")
  _run("inspector", ["-m", "pipelines.inspector", "--records_dir",
                     os.path.join(out, "records_dev"), "--html", html,
                     "--max_records", "2"])
  print(f"[demo]   what the model reads: {html}", flush=True)

  model_dir = os.path.join(out, "model")
  shutil.rmtree(model_dir, ignore_errors=True)  # train from scratch, not resume an old run
  lines = _run("train", ["-m", "model.train"]
               + train_flags(os.path.join(out, "records_train"), model_dir, args.steps))
  logged = [json.loads(l) for l in lines if l.startswith("{")]
  steps = [d for d in logged if "step" in d and "loss" in d and not d.get("summary")]
  train_summary = _last_json(lines)
  k = max(1, len(steps) // 5)
  early = sum(s["loss"] for s in steps[:k]) / k
  late = sum(s["loss"] for s in steps[-k:]) / k
  for s in steps[::max(1, len(steps) // 6)]:
    print(f"[demo]   step {s['step']:4d}  loss {s['loss']:.4f}", flush=True)

  preds = os.path.join(out, "dev_predictions.json")
  _run("predict", ["-m", "model.predict", "--records_dir", os.path.join(out, "records_dev"),
                   "--model_dir", model_dir, "--output", preds])
  metrics = _last_json(_run("evaluate", ["-m", "model.evaluate", "--task", "hotpotqa",
                                         "--predictions", preds, "--gold", paths["dev"],
                                         "--output", os.path.join(out, "dev_metrics.json")]))

  summary = {
      "pipeline": {split: {"counts": m["counts"], "rejected_by_reason": m["rejected_by_reason"],
                           "segments_per_document": m["examples"]["segments_per_document"],
                           "segments": m["examples"]["segments"], "packs": m["examples"]["packs"]}
                   for split, m in manifests.items()},
      "train": {"steps": len(steps), "first_loss": round(steps[0]["loss"], 4),
                "last_loss": round(steps[-1]["loss"], 4),
                f"mean_loss_first_{k}_steps": round(early, 4),
                f"mean_loss_last_{k}_steps": round(late, 4),
                "loss_went_down": late < early, "seconds": train_summary.get("seconds")},
      "dev": {k2: round(metrics[k2], 4) for k2 in ("em", "f1", "sp_em", "sp_f1", "joint_em",
                                                  "joint_f1")},
      "outputs": {"records": os.path.join(out, "records_train"), "inspector_html": html,
                  "predictions": preds},
      "wall_seconds": round(time.time() - start, 1),
  }
  print("[demo] summary:")
  for split, p in summary["pipeline"].items():
    c = p["counts"]
    print(f"[demo]   {split}: records in {c['input']}, written {c['written']}, skipped "
          f"{c['skipped']}, rejected {c['rejected']} {p['rejected_by_reason'] or ''}; "
          f"{p['segments_per_document']} segments/document, {p['packs']} packs")
  t = summary["train"]
  print(f"[demo]   train: loss {t[f'mean_loss_first_{k}_steps']} (first {k} steps) -> "
        f"{t[f'mean_loss_last_{k}_steps']} (last {k} steps)")
  d = summary["dev"]
  print(f"[demo]   dev: EM {d['em']:.3f}  F1 {d['f1']:.3f}  (sp F1 {d['sp_f1']:.3f}, "
        f"joint F1 {d['joint_f1']:.3f})")
  print(f"[demo]   wall time {summary['wall_seconds']} s")
  print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
  main()
