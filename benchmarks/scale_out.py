r"""Scale-out on one machine: a job in-memory against ``multi_processing`` with 2 workers, at
three corpus sizes, with peak memory, CPU cost per MB and a Dataflow estimate.

  python -m benchmarks.scale_out [--job wikipedia|hotpotqa] [--sizes_mb 12.5,25,50] [--runs 3]
                                 [--tmp_dir DIR] [--keep] [--interval 0.2]

For each size (MB of input text: HotpotQA JSON, or Wikipedia article wikitext), a generated
corpus (``pipelines.datasets.hotpotqa.fake_input`` questions with Zipf words, ~5.9 KB of JSON per
question like real HotpotQA; or a ``pipelines.datasets.wikipedia.fake_input`` multistream dump),
generated in a separate interpreter and cached in ``--tmp_dir``.  Then ``--runs`` interleaved pairs
of the job as a user runs it,

  python -m pipelines <job> --input F --output_dir D --log_level WARNING              (in_memory)
  ... --direct_running_mode=multi_processing --direct_num_workers=2          (multi_processing)

(the order inside a pair alternates, so drift of a shared machine hits both modes alike).  Each
run's wall time is the whole command's (interpreter start, graph, workers' start and stop
included: what the user waits for), its CPU time is the job's and all its reaped descendants'
user + system time (``os.wait4``), and its peak memory is the summed RSS of the whole process
tree sampled every ``--interval`` s (``benchmarks.pipeline_memory.TreeSampler``; never below the
largest single process' exact peak).

Printed: one line per run; per size and mode, wall time, MB/s, cores kept busy (CPU / wall), CPU
seconds per MB and peak tree RSS (min/median/max); the speed-up per size (median of the paired
in_memory / multi_processing wall times, with min and max); how time grows with size (a
least-squares line: fixed seconds + seconds per MB, per mode); and an estimate for the full
dataset on Dataflow from the measured marginal CPU seconds per MB (the slope of CPU time over
size in multi_processing mode, one SDK worker process per core as on Dataflow) (HotpotQA train for ``--job hotpotqa``,
English Wikipedia for ``--job wikipedia``), as vCPU-hours and as n1-standard-4 workers x hours.
The estimate assumes a Dataflow vCPU does the work of one core here and leaves out Dataflow's
own start-up (~3-5 min) and shuffle service; it is a planning figure, not a quote.

Last line: JSON, the median speed-up at the largest size; target >= 1.3 (the in-memory run
already keeps more than one of the 2 cores busy through the Rust tokenizer's threads, so 2 cores
cannot give 2x).  Where it comes from: the local runner executes one stage at a time, each split
over the workers by its input elements.  A Wikipedia dump is read in splits of
``--streams_per_split`` streams, so every worker reads, cleans and tokenises; a HotpotQA JSON
file is read in byte ranges of ``--json_split_mb`` (default 4 MiB, planned by one pass over the
file on one worker: :mod:`pipelines.sources.json_ranges`), so every worker parses and tokenises
too.  (Before the ranges one worker read, parsed and tokenised the whole file: 0.90 at 50 MB; a
reshuffle of the parsed documents was tried then: 13.2 s against 12.2 s without, the
documents' trip through the runner costing more than the second worker gave.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "scale_out", file=sys.stderr)
  sys.exit(2)

from benchmarks import common
from benchmarks.pipeline_memory import MODES, run_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIN_RUNS = 3
# Real HotpotQA train: 90,447 questions, ~540 MB of JSON (hotpot_train_v1.1.json).
HOTPOTQA_JSON_BYTES_PER_QUESTION = 5900
HOTPOTQA_TRAIN_MB = 540.0
# English Wikipedia pages-articles: ~22 GB bz2, ~90 GB of article wikitext (see
# benchmarks/wikipedia_throughput.py).
ENWIKI_ARTICLE_WIKITEXT_MB = 90_000.0
WIKI_WORDS_PER_PAGE = 700
WORKER_VCPUS = 4  # n1-standard-4, Dataflow's default batch worker type
WORKERS_EXAMPLE = 20
FULL = {"hotpotqa": ("HotpotQA train", HOTPOTQA_TRAIN_MB),
        "wikipedia": ("English Wikipedia", ENWIKI_ARTICLE_WIKITEXT_MB)}


# ---------------------------------------------------------------------------------------------
# Inputs (generated in a child interpreter: ``--generate JOB MB PATH``, which prints the MB of
# input text as JSON).

def generate(job: str, mb: float, path: str) -> Dict:
  """Writes a corpus of about ``mb`` MB of input text for ``job``; returns its size."""
  if job == "hotpotqa":
    from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa  # pylint: disable=g-import-not-at-top
    n = max(1, round(mb * 1e6 / HOTPOTQA_JSON_BYTES_PER_QUESTION))
    questions = synthetic_hotpotqa.make_questions(n, seed=0, zipf_sentences=2)
    with open(path, "w", encoding="utf-8") as f:
      f.write("[")
      for i, q in enumerate(questions):
        f.write((", " if i else "") + json.dumps(q))
      f.write("]")
    return {"documents": n, "text_mb": os.path.getsize(path) / 1e6}
  from pipelines.datasets.wikipedia import fake_input as synthetic_wikipedia  # pylint: disable=g-import-not-at-top
  articles, size = [0], [0]

  def counted(pages):
    for page in pages:
      if page.namespace == 0 and page.redirect is None:
        articles[0] += 1
        size[0] += len(page.text.encode("utf-8"))
      yield page
  # ~5.6 KB of article wikitext per generated page at 700 words (checked by the count above).
  pages = max(1, round(mb * 1e6 / 5600))
  synthetic_wikipedia.write_dump(counted(synthetic_wikipedia.generate_pages(
      pages, seed=1, words_per_page=WIKI_WORDS_PER_PAGE)), path, multistream=True)
  return {"documents": articles[0], "text_mb": size[0] / 1e6}


def input_file(job: str, tmp: str, mb: float, created: List[str]) -> Dict:
  """The cached corpus of ``mb`` MB for ``job`` under ``tmp`` (generated if missing)."""
  name = (f"hotpotqa_{mb:g}mb.json" if job == "hotpotqa"
          else f"synwiki{mb:g}mb-pages-articles-multistream.xml.bz2")
  path, meta_path = os.path.join(tmp, name), os.path.join(tmp, name + ".meta.json")
  if os.path.exists(path) and os.path.exists(meta_path):
    with open(meta_path, encoding="utf-8") as f:
      meta = json.load(f)
    print(f"reusing {path}", flush=True)
    return dict(meta, path=path)
  t0 = time.perf_counter()
  proc = subprocess.run([sys.executable, "-m", "benchmarks.scale_out", "--generate", job,
                         str(mb), path], cwd=ROOT, capture_output=True, text=True, check=False)
  if proc.returncode:
    sys.stderr.write(proc.stderr[-4000:])
    raise SystemExit(f"generating {mb} MB for {job} failed ({proc.returncode})")
  meta = json.loads(proc.stdout.strip().splitlines()[-1])
  with open(meta_path, "w", encoding="utf-8") as f:
    json.dump(meta, f)
  created += [path, meta_path]
  if job == "wikipedia":
    created.append(path[:-len(".xml.bz2")] + "-index.txt.bz2")
  print(f"generated {path}: {meta['documents']:,d} documents, {meta['text_mb']:.1f} MB of text "
        f"({os.path.getsize(path) / 1e6:.1f} MB on disk) in {time.perf_counter() - t0:.1f} s",
        flush=True)
  return dict(meta, path=path)


# ---------------------------------------------------------------------------------------------
# One measured run.

def measure(job: str, path: str, mode: str, out_dir: str, interval: float) -> Dict:
  """Runs ``python -m pipelines <job>`` once in ``mode``; wall, CPU, peak tree RSS, counts."""
  run = run_job(job, path, mode, out_dir, interval)
  summary, usage, sampler, wall = run.summary, run.usage, run.sampler, run.seconds
  if summary is None or summary["counts"]["rejected"] or not summary["counts"]["written"]:
    run.fail(f"the {job} job failed or rejected input in {mode} mode")
  return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
          "peak_rss": max(sampler.peak_rss, usage.ru_maxrss * 1024),
          "processes": sampler.peak_processes, "written": summary["counts"]["written"],
          "segments": summary["examples"].get("segments")}


def fit_line(xs: List[float], ys: List[float]):
  """Least-squares ``y = a + b x``; (a, b)."""
  if len(xs) < 2:
    return 0.0, ys[0] / xs[0]
  mx, my = statistics.fmean(xs), statistics.fmean(ys)
  b = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
       / sum((x - mx) ** 2 for x in xs))
  return my - b * mx, b


def main(argv: Optional[List[str]] = None) -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.scale_out",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--job", default="wikipedia", choices=sorted(FULL),
                  help="wikipedia (default): a multistream dump, read in splits by all workers; "
                       "hotpotqa: one JSON file, read in byte ranges by all workers")
  ap.add_argument("--sizes_mb", default="12.5,25,50",
                  help="comma-separated corpus sizes in MB of input text (default: %(default)s)")
  ap.add_argument("--runs", type=int, default=MIN_RUNS,
                  help=f"interleaved pairs per size; fewer than {MIN_RUNS} is a smoke test")
  ap.add_argument("--tmp_dir", default=None,
                  help="where corpora are generated (reused if there) and jobs write; default: "
                       "a fresh temporary directory")
  ap.add_argument("--keep", action="store_true", help="keep the generated corpora")
  ap.add_argument("--interval", type=float, default=0.2, help="seconds between memory samples")
  ap.add_argument("--generate", nargs=3, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.generate:
    print(json.dumps(generate(args.generate[0], float(args.generate[1]), args.generate[2])))
    return
  try:
    sizes = sorted({float(s) for s in args.sizes_mb.split(",") if s.strip()})
  except ValueError:
    ap.error(f"--sizes_mb must be comma-separated numbers, got {args.sizes_mb!r}")
  if not sizes or min(sizes) <= 0:
    ap.error("--sizes_mb must be positive")
  common.check_pairs(ap, args.runs, MIN_RUNS)
  if not os.path.isdir("/proc/self/task"):
    raise SystemExit("needs /proc (Linux) to sample the process tree")

  tmp = args.tmp_dir or tempfile.mkdtemp(prefix="scale_out_")
  os.makedirs(tmp, exist_ok=True)
  created: List[str] = []
  results: Dict[float, Dict] = {}
  try:
    corpora = {mb: input_file(args.job, tmp, mb, created) for mb in sizes}
    for mb in sizes:
      corpus = corpora[mb]
      runs = {m: [] for m in MODES}
      for k in range(args.runs):
        order = list(MODES) if k % 2 == 0 else list(MODES)[::-1]
        for mode in order:
          r = measure(args.job, corpus["path"], mode, os.path.join(tmp, f"out_{mb:g}_{mode}"),
                      args.interval)
          runs[mode].append(r)
          print(f"{mb:6g} MB  run {k + 1}  {mode:16s} wall {r['wall']:7.1f} s  CPU "
                f"{r['cpu']:7.1f} s ({r['cpu'] / r['wall']:.2f} cores)  peak tree RSS "
                f"{r['peak_rss'] / 1e9:5.2f} GB ({r['processes']} processes)", flush=True)
      written = {r["written"] for m in MODES for r in runs[m]}
      if len(written) != 1:
        raise SystemExit(f"the modes wrote different counts at {mb} MB: {sorted(written)}")
      results[mb] = {"corpus": corpus, "runs": runs,
                     "speedup": [a["wall"] / b["wall"] for a, b in
                                 zip(runs["in_memory"], runs["multi_processing"])]}
  finally:
    common.clean_up_inputs(tmp, args.keep, args.tmp_dir is not None, created)

  print(f"\n{args.job}: {args.runs} interleaved run(s) per mode and size (min / median / max)")
  for mb in sizes:
    res, text_mb = results[mb], results[mb]["corpus"]["text_mb"]
    print(f"{text_mb:.1f} MB ({res['corpus']['documents']:,d} documents, "
          f"{res['runs']['in_memory'][0]['segments']:,} segments):")
    for mode in MODES:
      rs = res["runs"][mode]
      print(f"  {mode:16s} wall s {common.spread([r['wall'] for r in rs], '.1f')}; "
            f"MB/s {common.spread([text_mb / r['wall'] for r in rs], '.2f')}; cores busy "
            f"{statistics.median(r['cpu'] / r['wall'] for r in rs):.2f}; CPU s/MB "
            f"{common.spread([r['cpu'] / text_mb for r in rs], '.2f')}; peak RSS GB "
            f"{common.spread([r['peak_rss'] / 1e9 for r in rs], '.2f')}")
    print(f"  speed-up (in_memory / multi_processing wall): "
          f"{common.spread(res['speedup'], '.2f')}")

  xs = [results[mb]["corpus"]["text_mb"] for mb in sizes]
  growth = {}
  for mode in MODES:
    walls = [statistics.median(r["wall"] for r in results[mb]["runs"][mode]) for mb in sizes]
    cpus = [statistics.median(r["cpu"] for r in results[mb]["runs"][mode]) for mb in sizes]
    (a, b), (ca, cb) = fit_line(xs, walls), fit_line(xs, cpus)
    growth[mode] = {"fixed_s": round(a, 2), "s_per_mb": round(b, 3),
                    "fixed_cpu_s": round(ca, 2), "cpu_s_per_mb": round(cb, 3)}
    print(f"growth, {mode}: wall ~ {a:.1f} s + {b:.3f} s/MB x size, CPU ~ {ca:.1f} s + "
          f"{cb:.3f} s/MB x size (median walls {', '.join(f'{y:.1f} s' for y in walls)} at "
          f"{', '.join(f'{x:.1f}' for x in xs)} MB)")

  largest = results[sizes[-1]]
  # The marginal CPU cost per MB (the line's slope; the fixed start-up is paid once per worker,
  # not per MB), from multi_processing: one SDK worker process per core, as on Dataflow.
  cpu_per_mb = growth["multi_processing"]["cpu_s_per_mb"]
  name, full_mb = FULL[args.job]
  vcpu_hours = full_mb * cpu_per_mb / 3600
  worker_hours = vcpu_hours / WORKER_VCPUS
  size = (f"{worker_hours:,.1f} n1-standard-{WORKER_VCPUS} worker-hours, e.g. {WORKERS_EXAMPLE} "
          f"workers for {worker_hours / WORKERS_EXAMPLE * 60:,.0f} min" if vcpu_hours >= 1 else
          f"{vcpu_hours * 60:,.1f} vCPU-minutes: one worker for minutes, so Dataflow's start-up "
          "would dominate and a local run is cheaper")
  print(f"Dataflow estimate for {name} (~{full_mb:,.0f} MB of input text) at {cpu_per_mb:.2f} "
        f"CPU s per extra MB (multi_processing): ~{vcpu_hours:,.2f} vCPU-hours = {size} "
        "(Dataflow's start-up and shuffle come on top)")
  speedups = largest["speedup"]
  print(json.dumps({
      "metric": f"{args.job}_multi_processing_2_workers_speedup_over_in_memory",
      "value": round(statistics.median(speedups), 3), "min": round(min(speedups), 3),
      "max": round(max(speedups), 3), "target": 1.3, "unit": "ratio", "runs": args.runs,
      "size_mb": round(xs[-1], 1),
      "peak_rss_gb": {m: round(statistics.median(r["peak_rss"] for r in largest["runs"][m]) / 1e9,
                               3) for m in MODES},
      "cpu_s_per_mb": round(cpu_per_mb, 3), "growth": growth,
      "dataflow_vcpu_hours": round(vcpu_hours, 1),
      "by_size": {f"{x:.1f}": {m: round(statistics.median(
          r["wall"] for r in results[mb]["runs"][m]), 2) for m in MODES}
          for x, mb in zip(xs, sizes)}}))


if __name__ == "__main__":
  main()
