r"""Does reading twice work?  ReadTwice(E) against its E(SS) ablation and a plain encoder on a
generated long-range QA task that only cross-segment memory can solve.

  python -m benchmarks memory_gap [--out_dir DIR] [--models e,e_ss,plain] [--seeds 3] [--size tiny]
      [--steps 1500] [--learning_rate 1e-3] [--train_docs 1600] [--dev_docs 200] [--segments 6]
      [--distances 1,2,3,4] [--distractors 3] [--seq_length 128] [--segments_per_pack 24]
      [--parallel 2] [--reuse_data] [--sub_document_segments S]

The data (``synthetic.long_range_qa``): each document holds M = distractors + 1 (book, author,
birth city) triples told by "<Book> was written by <Author>." and "<Author> was born in
<City>." in different segments; the question "Where was the author of <Book> born?" is
prefixed to every segment.  The segment with the answer cannot tell which birth fact is asked
for without the book fact ``distance`` segments away, so a reader of single segments is at
chance (EM 1/M).  It goes through the real jobs (``python -m pipelines wikipedia`` for the
entity vocabulary, ``python -m pipelines hotpotqa`` with spaCy + alias linking for the entity
mentions).

Then, for every model and seed, the user's commands (their ``main(argv)``, as ``python -m``
runs them), one (model, seed) run after another in each of ``--parallel`` worker processes, so
TensorFlow loads once per worker, not once per command:

  python -m model.finetune --task hotpotqa --preset tiny_<model> --records_dir records_train \
      --model_dir M --steps N --learning_rate LR --seed S --optimizer adamw
  python -m model.predict --records_dir records_dev --model_dir M --output predictions.json
  python -m model.evaluate --task hotpotqa --predictions predictions.json --gold dev.json

Models: ``e`` = tiny ReadTwice(E) (entity-mention memories of all segments of a document),
``e_ss`` = the same with each segment reading only its own memories, ``plain`` = the encoder
and heads without memory (``tiny_roberta``), ``cls`` = ReadTwice(CLS) (one memory per
segment), ``e_book`` = ReadTwice(E) fine-tuned and predicting with ``--memory_scope book``.
A seed fixes the initial weights and the batch order, so E and E(SS) of one seed start from
the same weights and see the same batches: the gap is paired per seed.

Whole-book memory (``--sub_document_segments S``, ``make demo-memory-book``): the job cuts
every document into explicit sub-documents of S segments and every triple's two facts lie in
different sub-documents, so only ``e_book`` (memories across sub-documents) can join them;
``e`` (the default ``sub_document`` scope) and ``e_ss`` read one sub-document and must stay at
chance.  Models default to ``e_book,e,e_ss`` there, and the last line's figure is the
``e_book - e`` dev F1 gap per seed.

Printed: the build's figures, a line per run (dev EM/F1, final training loss, memory no-op
rate, seconds; for E also ``benchmarks.experiments.memory_probe``: how much attention the answer
segment's author mention puts on that author's memory from the book fact's segment, against
the uniform share; and the dev F1 of E's weights with the other segments' memories blocked), then a table: per model dev EM and F1 (mean, sd, min/median/max over seeds),
F1 by fact distance, beside the chance level; the learning curves (training loss every
``--log_every`` steps, mean over seeds); and the E - E(SS) F1 gap per seed.  ``--parallel 2``
runs two models at once with one TensorFlow thread each (tiny models use a second thread
poorly, so two single-threaded runs finish sooner than two two-threaded ones in turn).

Last line: one JSON object, the mean E - E(SS) dev F1 gap over seeds with its per-seed spread.
Expected: E well above E(SS), E(SS) and the plain encoder near chance.  If that does not happen
it is reported as it is: the table shows what was measured.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "memory_gap", file=sys.stderr)
  sys.exit(2)

from benchmarks.common import CommandFailed, run_main
from model.evaluation import hotpotqa as hotpot_eval
from schemas import records_dir
from synthetic.long_range_qa import build as long_range_qa
from synthetic.long_range_qa.documents import Params as LongRangeParams

PRESETS = {"e": "tiny_e", "e_ss": "tiny_e_ss", "plain": "tiny_roberta", "cls": "tiny_cls",
           "e_book": "tiny_e"}
# ``--memory_scope`` of the models that read across sub-documents (model.network.book_memory).
SCOPES = {"e_book": "book"}
# ``--size``: overrides of the tiny presets (hidden 64, 2 heads, 1 + 1 layers).  ``small`` gives
# the first read two layers (a mention can then carry what its neighbours matched against the
# question: one layer to compare, one to pass it on) and twice the width.
SIZES = {"tiny": {},
         "small": dict(hidden_size=128, num_heads=4, intermediate_size=256, num_layers_first=2,
                       num_layers_second=1)}
LABELS = {"e": "ReadTwice(E)", "e_ss": "E(SS)", "plain": "plain encoder",
          "cls": "ReadTwice(CLS)", "e_book": "E, book scope"}


def _init_worker(threads: int) -> None:
  """A run's worker process: TensorFlow's thread pools (set before it loads) and its logs."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
  if threads:
    os.environ.update(TF_NUM_INTRAOP_THREADS=str(threads),
                      TF_NUM_INTEROP_THREADS=str(threads))


def _json_lines(lines: Sequence[str]) -> List[Dict]:
  out = []
  for line in lines:
    if line.startswith("{"):
      try:
        out.append(json.loads(line))
      except ValueError:
        pass
  return out


def answer_scores(predictions: Dict, docs_meta: Sequence[Dict]) -> Dict[str, float]:
  """Official HotpotQA answer EM / F1 over ``docs_meta``'s questions."""
  answers = predictions.get("answer", {})
  em = sum(float(hotpot_eval.exact_match_score(answers.get(m["id"], ""), m["answer"]))
           for m in docs_meta)
  f1 = sum(hotpot_eval.f1_score(answers.get(m["id"], ""), m["answer"])[0] for m in docs_meta)
  return {"em": em / len(docs_meta), "f1": f1 / len(docs_meta)}


def scores_by_distance(predictions: Dict, docs_meta: Sequence[Dict]) -> Dict[int, Dict]:
  """Dev EM / F1 per fact distance, with the official HotpotQA answer metrics."""
  groups: Dict[int, List[Dict]] = {}
  for meta in docs_meta:
    groups.setdefault(int(meta["distance"]), []).append(meta)
  return {distance: dict(n=len(metas), **answer_scores(predictions, metas))
          for distance, metas in sorted(groups.items())}


def model_config_file(out_dir: str, model: str, size: str, data: Dict) -> str:
  """The ModelConfig JSON of ``model`` at ``size``, fitted to the records' vocabulary and
  segment length (what ``--preset`` does, plus the size's overrides)."""
  from model import configs  # pylint: disable=g-import-not-at-top
  manifest = records_dir.read_manifest(data["paths"]["records_train"])
  config = configs.config_from_manifest(manifest, PRESETS[model], **SIZES[size])
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, f"{model}_{size}.json")
  with open(path, "w", encoding="utf-8") as f:
    f.write(config.to_json())
  return path


def candidate_choice(predictions: Dict, docs_meta: Sequence[Dict]) -> Dict[str, float]:
  """How often the answer is exactly one of the document's M candidate cities (the skill any
  reader can learn), and how often that candidate is the right one (1/M without the other
  segment's fact)."""
  answers = predictions.get("answer", {})
  norm = hotpot_eval.normalize_answer
  picked = right = 0
  for m in docs_meta:
    pred = norm(answers.get(m["id"], ""))
    if pred in {norm(c) for c in m["candidates"]}:
      picked += 1
      right += pred == norm(m["answer"])
  return {"candidate": picked / len(docs_meta), "right_of_candidate": right / max(picked, 1)}


def own_segment_view(model_dir: str, view_dir: str) -> str:
  """A model dir with ``model_dir``'s checkpoint (linked) whose config lets each segment read
  only its own memories: the same weights with the other segments' memories blocked."""
  os.makedirs(view_dir, exist_ok=True)
  for name in os.listdir(model_dir):
    if name == "checkpoint" or name.startswith("ckpt-"):
      os.symlink(os.path.abspath(os.path.join(model_dir, name)), os.path.join(view_dir, name))
  with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  config["model"]["same_segment_only"] = True
  with open(os.path.join(view_dir, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f, indent=1)
  return view_dir


def train_and_score(model: str, seed: int, data: Dict, args, run_dir: str,
                    docs_meta: Sequence[Dict], config_path: str) -> Dict:
  """finetune -> predict -> evaluate for one (model, seed); its figures."""
  t0 = time.perf_counter()
  shutil.rmtree(run_dir, ignore_errors=True)  # train from scratch, never resume an old run
  os.makedirs(run_dir, exist_ok=True)
  log = os.path.join(run_dir, "commands.log")
  model_dir = os.path.join(run_dir, "model")
  paths = data["paths"]
  scope = ["--memory_scope", SCOPES[model]] if model in SCOPES else []
  lines = run_main(["-m", "model.finetune", *scope, "--task", "hotpotqa",
                    "--model_config", config_path,
                    "--records_dir", paths["records_train"], "--model_dir", model_dir,
                    "--steps", str(args.steps), "--learning_rate", str(args.learning_rate),
                    "--warmup_fraction", "0.1", "--optimizer", "adamw", "--seed", str(seed),
                    "--log_every", str(args.log_every), "--steps_per_loop", str(args.log_every),
                    "--checkpoint_every", str(args.steps)], log)
  logged = _json_lines(lines)
  steps = [d for d in logged if "step" in d and "loss" in d and not d.get("summary")]
  preds = os.path.join(run_dir, "predictions.json")
  run_main(["-m", "model.predict", "--records_dir", paths["records_dev"],
            "--model_dir", model_dir, "--output", preds, *scope], log)
  metrics = json.loads(run_main(["-m", "model.evaluate", "--task", "hotpotqa", "--predictions",
                                 preds, "--gold", paths["dev"]], log)[-1])
  with open(preds, encoding="utf-8") as f:
    predictions = json.load(f)
  by_distance = scores_by_distance(predictions, docs_meta)
  choice = candidate_choice(predictions, docs_meta)
  noop = [d["memory_noop_rate"] for d in steps if "memory_noop_rate" in d]
  blocked = None
  if model in ("e", "cls", "e_book"):  # do the other segments' memories change the answers?
    view = own_segment_view(model_dir, os.path.join(run_dir, "own_segment_view"))
    blocked_preds = os.path.join(run_dir, "predictions_own_segment_only.json")
    run_main(["-m", "model.predict", "--records_dir", paths["records_dev"], "--model_dir", view,
              "--output", blocked_preds, *scope], log)
    with open(preds, encoding="utf-8") as f, open(blocked_preds, encoding="utf-8") as g:
      full, own = json.load(f)["answer"], json.load(g)
    blocked = answer_scores(own, docs_meta)
    blocked["changed"] = statistics.fmean(
        float(full.get(m["id"]) != own["answer"].get(m["id"])) for m in docs_meta)
  probe = None
  # Does the answer segment's author mention read its book-fact memory?  (In one sub-document:
  # the probe reads each sub-document alone.)
  if model == "e" and not data["params"].get("sub_document_segments"):
    probe = json.loads(run_main(["-m", "benchmarks.experiments.memory_probe", "--model_dir",
                                 model_dir, "--data_dir", data["out_dir"]], log)[-1])
  return {"probe": probe, "blocked": blocked, "choice": choice, "model": model, "seed": seed, "em": metrics["em"], "f1": metrics["f1"],
          "by_distance": by_distance,
          "curve": [(d["step"], d["loss"]) for d in steps],
          "final_loss": steps[-1]["loss"] if steps else None,
          "noop_rate": statistics.fmean(noop[-3:]) if noop else None,
          "seconds": time.perf_counter() - t0}


def _stats(values: Sequence[float]) -> str:
  sd = statistics.stdev(values) if len(values) > 1 else 0.0
  return (f"{statistics.fmean(values):.3f} ± {sd:.3f} (min {min(values):.3f}, median "
          f"{statistics.median(values):.3f}, max {max(values):.3f})")


def parse_args(argv: Optional[Sequence[str]] = None):
  """``(args, models, params)`` of the command line (usage errors exit 2)."""
  d = LongRangeParams()
  ap = argparse.ArgumentParser(prog="python -m benchmarks memory_gap",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--out_dir", default=None,
                  help="data, models and logs go here (default: a temporary directory, "
                       "deleted at the end)")
  ap.add_argument("--models", default=None,
                  help=f"comma-separated, of: {', '.join(PRESETS)} (default: e,e_ss,plain; "
                       "with --sub_document_segments e_book,e,e_ss)")
  ap.add_argument("--size", default="tiny", choices=sorted(SIZES),
                  help="model size: tiny presets or their 'small' overrides (default: %(default)s)")
  ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per model")
  ap.add_argument("--steps", type=int, default=1500, help="training steps per run (packs)")
  ap.add_argument("--learning_rate", type=float, default=1e-3)
  ap.add_argument("--log_every", type=int, default=250,
                  help="log (and run in one tf.function call) this many steps")
  ap.add_argument("--train_docs", type=int, default=1600)
  ap.add_argument("--dev_docs", type=int, default=200)
  ap.add_argument("--data_seed", type=int, default=0)
  ap.add_argument("--segments", type=int, default=d.segments)
  ap.add_argument("--distances", default=",".join(map(str, d.distances)))
  ap.add_argument("--distractors", type=int, default=d.distractors)
  ap.add_argument("--seq_length", type=int, default=d.seq_length)
  ap.add_argument("--segments_per_pack", type=int, default=24,
                  help="segments per training record (several documents)")
  ap.add_argument("--parallel", type=int, default=2, help="runs at once")
  ap.add_argument("--threads", type=int, default=None,
                  help="TensorFlow threads per run (default: 1 with --parallel > 1, else all)")
  ap.add_argument("--reuse_data", action="store_true",
                  help="reuse the data already built under --out_dir")
  ap.add_argument("--sub_document_segments", type=int, default=0,
                  help="whole-book memory check: documents in sub-documents of this many "
                       "segments, each triple's facts in different ones (0: off)")
  args = ap.parse_args(argv)
  if args.models is None:
    args.models = "e_book,e,e_ss" if args.sub_document_segments else "e,e_ss,plain"
  models = [m.strip() for m in args.models.split(",") if m.strip()]
  if not models or any(m not in PRESETS for m in models):
    ap.error(f"--models must be among {', '.join(PRESETS)}, got {args.models!r}")
  if args.seeds < 1 or args.steps < 1 or args.parallel < 1:
    ap.error("--seeds, --steps and --parallel must be >= 1")
  if args.threads is None:
    args.threads = 1 if args.parallel > 1 else 0
  try:
    params = LongRangeParams(
        segments=args.segments, distractors=args.distractors, seq_length=args.seq_length,
        distances=tuple(int(x) for x in args.distances.split(",") if x.strip()),
        sub_document_segments=args.sub_document_segments)
  except ValueError as e:
    ap.error(str(e))
  if args.segments_per_pack < args.segments:
    ap.error(f"--segments_per_pack must be >= --segments ({args.segments})")
  return args, models, params


def main(argv: Optional[Sequence[str]] = None) -> int:
  args, models, params = parse_args(argv)
  t0 = time.perf_counter()
  tmp = None
  out = args.out_dir
  if out is None:
    tmp = tempfile.TemporaryDirectory(prefix="memory_gap_")
    out = tmp.name
  data_dir = os.path.join(out, "data")
  built = os.path.join(data_dir, "build.json")
  if args.reuse_data and os.path.exists(built):
    with open(built, encoding="utf-8") as f:
      data = json.load(f)
    print(f"reusing the data in {data_dir}", flush=True)
  else:
    data = long_range_qa.build(data_dir, args.train_docs, args.dev_docs, args.data_seed,
                               params, segments_per_pack=args.segments_per_pack,
                               overwrite=True)
  dev = data["splits"]["dev"]
  chance = dev["chance"]
  print(f"data: {data['splits']['train']['documents']} train / {dev['documents']} dev documents "
        f"of {args.segments} segments"
        + (f" in sub-documents of {args.sub_document_segments} (each triple's facts in "
           "different ones)" if args.sub_document_segments else "")
        + f", {params.candidates} candidate cities each (chance EM "
        f"{chance['em']:.3f}, F1 {chance['f1']:.3f}); fact names linked to their entity: "
        f"{100 * dev['fact_name_mentions_linked_fraction']:.1f}%; built in "
        f"{data['timings_s']['total']:.0f} s", flush=True)
  with open(os.path.join(data_dir, "docs-dev.jsonl"), encoding="utf-8") as f:
    docs_meta = [json.loads(line) for line in f if line.strip()]

  config_paths = {m: model_config_file(os.path.join(out, "configs"), m, args.size, data)
                  for m in models}
  jobs = [(m, s) for s in range(args.seeds) for m in models]
  results: Dict[str, List[Dict]] = {m: [] for m in models}
  # Worker processes (spawned: a fresh interpreter, not a fork of this one), each running
  # its share of the (model, seed) runs one after another.
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=min(args.parallel, len(jobs)), initializer=_init_worker,
      initargs=(args.threads,), mp_context=multiprocessing.get_context("spawn")) as pool:
    futures = {pool.submit(train_and_score, m, s, data, args,
                           os.path.join(out, "runs", f"{m}_seed{s}"), docs_meta,
                           config_paths[m]): (m, s)
               for m, s in jobs}
    for fut in concurrent.futures.as_completed(futures):
      try:
        r = fut.result()
      except CommandFailed as e:
        for other in futures:
          other.cancel()
        sys.stderr.write(f"{e}\n")
        raise SystemExit(f"memory_gap: {futures[fut][0]} seed {futures[fut][1]}: a command "
                         "failed (above)") from None
      results[r["model"]].append(r)
      noop = "" if r["noop_rate"] is None else f"  no-op {r['noop_rate']:.3f}"
      if r["blocked"]:
        noop += (f"  (other segments' memories blocked: F1 {r['blocked']['f1']:.3f}, "
                 f"{100 * r['blocked']['changed']:.0f}% of answers change)")
      if r["probe"]:
        noop += (f"  bridge memory attention {r['probe']['bridge']:.3f} vs uniform "
                 f"{r['probe']['uniform']:.3f}")
      print(f"{LABELS[r['model']]:15s} seed {r['seed']}: dev EM {r['em']:.3f} F1 {r['f1']:.3f}  "
            f"answers a candidate city {100 * r['choice']['candidate']:.0f}%, the right one "
            f"{100 * r['choice']['right_of_candidate']:.0f}% of those  "
            f"final loss {r['final_loss']:.3f}{noop}  ({r['seconds']:.0f} s)", flush=True)
  for m in models:
    results[m].sort(key=lambda r: r["seed"])

  distances = sorted({int(x["distance"]) for x in docs_meta})
  print(f"\ndev, {dev['documents']} documents, {args.seeds} seed(s), {args.steps} steps each "
        f"(mean ± sd, min / median / max over seeds)")
  print(f"{'model':15s} {'EM':44s} {'F1':44s} F1 by distance "
        + " ".join(f"{x:>5d}" for x in distances))
  print(f"{'chance':15s} {chance['em']:<44.3f} {chance['f1']:<44.3f} "
        + " " * 15 + " ".join(f"{chance['f1']:5.3f}" for _ in distances))
  for m in models:
    rs = results[m]
    per_d = [statistics.fmean(r["by_distance"][x]["f1"] for r in rs) for x in distances]
    print(f"{LABELS[m]:15s} {_stats([r['em'] for r in rs]):44s} "
          f"{_stats([r['f1'] for r in rs]):44s} " + " " * 15
          + " ".join(f"{v:5.3f}" for v in per_d))
  print(f"\n{'':15s} answers a candidate city / right among those (chance "
        f"{1 / params.candidates:.3f}):")
  for m in models:
    rs = results[m]
    print(f"{LABELS[m]:15s} {_stats([r['choice']['candidate'] for r in rs]):44s} "
          f"{_stats([r['choice']['right_of_candidate'] for r in rs])}")
  print("\ntraining loss (mean over seeds) by step:")
  for m in models:
    curves = [r["curve"] for r in results[m] if r["curve"]]
    if curves:
      n = min(len(c) for c in curves)
      print(f"  {LABELS[m]:15s} " + "  ".join(
          f"{curves[0][i][0]}: {statistics.fmean(c[i][1] for c in curves):.3f}"
          for i in range(n)))
    noops = [r["noop_rate"] for r in results[m] if r["noop_rate"] is not None]
    if noops:
      print(f"  {'':15s} memory no-op rate at the end: {_stats(noops)}")
    probes = [r["probe"] for r in results[m] if r["probe"]]
    if probes:
      print(f"  {'':15s} attention of the answer segment's author mention on its memory from "
            f"the book fact's segment, over the uniform share (1: no preference): "
            f"{_stats([p['value'] for p in probes])}")
    blocked = [r["blocked"] for r in results[m] if r["blocked"]]
    if blocked:
      print(f"  {'':15s} the same weights with other segments' memories blocked: dev F1 "
            f"{_stats([b['f1'] for b in blocked])}; answers that change: "
            f"{_stats([b['changed'] for b in blocked])}")

  # The gap that says whether memory works: E over E(SS), or with sub-documents the book scope
  # over the sub-document scope.
  better, worse = ("e_book", "e") if args.sub_document_segments else ("e", "e_ss")
  metric = ("readtwice_e_book_minus_sub_document_dev_f1" if args.sub_document_segments
            else "readtwice_e_minus_e_ss_dev_f1")
  figure = {"metric": metric, "target": 0.1, "unit": "F1",
            "chance": {"em": round(chance["em"], 4), "f1": round(chance["f1"], 4)},
            "models": {m: {"em_mean": round(statistics.fmean(r["em"] for r in results[m]), 4),
                           "f1_mean": round(statistics.fmean(r["f1"] for r in results[m]), 4),
                           "f1": [round(r["f1"], 4) for r in results[m]],
                           "right_of_candidate": [round(r["choice"]["right_of_candidate"], 4)
                                                  for r in results[m]],
                           "noop_rate": [r["noop_rate"] and round(r["noop_rate"], 4)
                                         for r in results[m]],
                           "bridge_attention_over_uniform": [
                               r["probe"]["value"] for r in results[m] if r["probe"]],
                           "f1_other_segments_blocked": [
                               round(r["blocked"]["f1"], 4) for r in results[m]
                               if r["blocked"]]} for m in models},
            "seeds": args.seeds, "steps": args.steps, "size": args.size,
            "sub_document_segments": args.sub_document_segments,
            "seconds": round(time.perf_counter() - t0, 1)}
  if better in results and worse in results:
    gaps = [a["f1"] - b["f1"] for a, b in zip(results[better], results[worse])]
    per_d = {str(x): round(statistics.fmean(
        a["by_distance"][x]["f1"] - b["by_distance"][x]["f1"]
        for a, b in zip(results[better], results[worse])), 4) for x in distances}
    print(f"\n{LABELS[better]} - {LABELS[worse]} dev F1 per seed: "
          f"{', '.join(f'{g:+.3f}' for g in gaps)}; by distance: "
          + ", ".join(f"{k}: {v:+.3f}" for k, v in per_d.items()))
    figure.update(value=round(statistics.fmean(gaps), 4),
                  min=round(min(gaps), 4), median=round(statistics.median(gaps), 4),
                  max=round(max(gaps), 4),
                  sd=round(statistics.stdev(gaps), 4) if len(gaps) > 1 else 0.0,
                  gap_by_distance=per_d)
  else:
    figure["value"] = None
    figure["note"] = f"--models lacks {better} or {worse}: no gap"
  print(f"total {time.perf_counter() - t0:.0f} s", flush=True)
  print(json.dumps(figure))
  if tmp is not None:
    tmp.cleanup()
  return 0


if __name__ == "__main__":
  sys.exit(main())
