r"""The CPU cost of every pipeline job per MB of input, measured for ``--estimate``
(each dataset's ``pipelines/datasets/<name>/cost.py``, read by :mod:`pipelines.estimate`).

  python -m benchmarks.job_cost [--reps 5] [--only hotpotqa,wikipedia,...] [--scale 1.0]
                                [--nomultiprocess] [--tmp_dir DIR] [--keep]

Each dataset's job (``python -m pipelines <dataset> --input ... --output_dir ...``, no Beam
flags: the local in-memory runner) runs as a subprocess on two generated inputs in its official
layout (its spec's ``fake_input``, Zipf pseudo-words so that BPE's word cache hits about as
often as on real text): a tiny one and a larger one (a few MB to tens of MB of work).  Per run
the job process' own user + system CPU seconds, its children's included, are read from
``os.wait4`` (CPU time, unlike wall time, hardly moves when other processes load the machine),
with its wall time and peak RSS.  The MB are the job's *work* as ``--estimate`` counts it
(:func:`pipelines.estimate.measure` on the same files: e.g. a bz2 dump's uncompressed XML,
TriviaQA's evidence per reference, NarrativeQA's story per question).  Per repetition (tiny and
larger run back to back):

  slope = (CPU_large - CPU_tiny) / (MB_large - MB_tiny)   -- CPU s per MB of work
  fixed = CPU_tiny - slope * MB_tiny                        -- start-up: interpreter, imports,
                                                               graph, tokenizer, manifest

printed as min / median / max over the repetitions, with the CPU/wall ratio of the larger run
(the largest over the repetitions goes to the table: the run least slowed by other load) and
its peak RSS growth per MB (shown, not used: the in-memory runner's memory is not linear in the
input), and finally as the ``measured=Cost(...)`` of each dataset's
``pipelines/datasets/<name>/cost.py`` (to paste there).

The generated inputs are each dataset's fake input (its folder's ``fake_input.py``) at
``LARGE`` x ``--scale`` and ``TINY`` x that: e.g. a bz2 multistream Wikipedia dump, the form of
the official dumps, so that its slope includes bz2 decompression; NarrativeQA with 30 questions
per story as in the real set (every question is a document holding its whole story, so the
cost follows questions x story size, the work's unit).

It also times decompressing gzip, bz2 and xz text in-process (CPU s per uncompressed MB:
``DECOMPRESS_CPU_S_PER_MB``, added by ``--estimate`` for compressed inputs).

``--multiprocess`` (default) also runs the larger HotpotQA input with
``--direct_running_mode multi_processing --direct_num_workers 2``: its CPU slope over the
in-memory one is the Fn API's cost of moving every element between processes, as Dataflow's
workers do (``MULTIPROCESS_CPU_FACTOR`` of :mod:`pipelines.estimate`).

The last line is the JSON figure: the largest relative difference between a measured median
slope and the slope a dataset's ``cost.py`` holds (target <= 0.25: the table still
describes the code; null for a dataset without one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple, Optional, Sequence

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "job_cost", file=sys.stderr)
  sys.exit(2)

from benchmarks import common
from pipelines import datasets
from pipelines.fake_data.prose import Prose

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 0.25


class Input(NamedTuple):
  """One generated input of a job: its command-line arguments and its MB of work."""
  args: List[str]
  work_mb: float
  stored_mb: float
  describe: str


def _measure(job: str, pattern: str, options=None) -> Dict[str, float]:
  from pipelines import estimate  # pylint: disable=g-import-not-at-top
  from pipelines.beam.inputs import describe_inputs  # pylint: disable=g-import-not-at-top
  inputs = describe_inputs(pattern)
  work = estimate.measure(job, inputs, options)
  return {"work_mb": work.work_bytes / 1e6, "stored_mb": sum(i["bytes"] for i in inputs) / 1e6}


def _input(job: str, pattern: str, extra: Sequence[str] = (), options=None) -> Input:
  m = _measure(job, pattern, options)
  return Input(["--input", pattern, *extra], m["work_mb"], m["stored_mb"],
               f"{m['work_mb']:.2f} MB work ({m['stored_mb']:.2f} MB stored)")


def make_input(job: str, root: str, scale: float) -> Input:
  """The dataset's fake input (its spec's ``fake_input``) at ``scale`` under ``root``, sized as
  ``--estimate`` counts its work (with the options its arguments give)."""
  spec = datasets.get(job)
  fake = spec.fake_input(root, scale)
  return _input(job, fake.input, fake.args, spec.options_for(fake.argv))


LARGE = 0.4  # the larger input's scale (--scale 1.0), as spec.fake_input counts it
TINY = 0.005  # the tiny input's scale, of the larger one's


def decompression_costs(mb: float = 16.0) -> Dict[str, float]:
  """CPU s per uncompressed MB to decompress gzip, bz2 and xz text (Zipf pseudo-words), the
  best of 3 (``DECOMPRESS_CPU_S_PER_MB`` of :mod:`pipelines.estimate`)."""
  import bz2  # pylint: disable=g-import-not-at-top
  import gzip  # pylint: disable=g-import-not-at-top
  import lzma  # pylint: disable=g-import-not-at-top
  prose = Prose(seed=9)
  text = "\n\n".join(prose.paragraphs(int(mb * 1e6 / 7))).encode("utf-8")
  out = {}
  for kind, compress, decompress in (("gz", gzip.compress, gzip.decompress),
                                     ("bz2", bz2.compress, bz2.decompress),
                                     ("xz", lzma.compress, lzma.decompress)):
    data = compress(text)
    best = float("inf")
    for _ in range(3):
      t0 = time.process_time()
      decompress(data)
      best = min(best, time.process_time() - t0)
    out[kind] = best / (len(text) / 1e6)
  return out


class Run(NamedTuple):
  cpu: float
  wall: float
  rss_mb: float


def run_job(job: str, args: Sequence[str], out_dir: str) -> Run:
  """``python -m pipelines JOB ARGS --output_dir OUT`` in a fresh interpreter: its CPU (user +
  system, with its children's), wall seconds and peak RSS; the output is deleted after."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  t0 = time.perf_counter()
  proc = subprocess.Popen([sys.executable, "-m", "pipelines", job, *args, "--output_dir",
                           out_dir, "--log_level", "WARNING"], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  err = proc.stderr.read()
  _, status, usage = os.wait4(proc.pid, 0)
  proc.returncode = os.waitstatus_to_exitcode(status)
  wall = time.perf_counter() - t0
  shutil.rmtree(out_dir, ignore_errors=True)
  if proc.returncode:
    sys.stderr.write(err.decode("utf-8", "replace")[-4000:])
    raise SystemExit(f"{job} failed ({proc.returncode})")
  return Run(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def fit(tiny: Input, large: Input, tiny_run: Run, large_run: Run) -> Dict[str, float]:
  slope = (large_run.cpu - tiny_run.cpu) / (large.work_mb - tiny.work_mb)
  return {"slope": slope, "fixed": tiny_run.cpu - slope * tiny.work_mb,
          "cpu_per_wall": large_run.cpu / large_run.wall,
          "rss_per_mb": (large_run.rss_mb - tiny_run.rss_mb) / (large.work_mb - tiny.work_mb),
          "rss_base": tiny_run.rss_mb}


def cost_entry(job: str, fits: List[Dict[str, float]], tiny: Input, large: Input,
               date: str, reps: int) -> str:
  """The ``measured=Cost(...)`` of pipelines/datasets/<job>/cost.py for these repetitions."""
  med = {k: statistics.median(f[k] for f in fits) for k in fits[0]}
  slopes = sorted(f["slope"] for f in fits)
  return (f'    measured=Cost(fixed_cpu_s={med["fixed"]:.2f}, cpu_s_per_mb={med["slope"]:.4f}, '
          f'slope_spread=({slopes[0]:.4f}, {med["slope"]:.4f}, {slopes[-1]:.4f}), '
          f'cpu_per_wall={max(f["cpu_per_wall"] for f in fits):.2f}, '
          f'measured_on="{tiny.describe} and {large.describe}, {reps} reps", date="{date}", '
          f'machine=MACHINE, command=COMMAND),')


def main(argv: Optional[Sequence[str]] = None) -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.job_cost",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--reps", type=int, default=5,
                  help="repetitions of each (tiny, larger) pair (default: %(default)s)")
  ap.add_argument("--only", default=",".join(datasets.DATASETS),
                  help="comma-separated datasets (default: all)")
  ap.add_argument("--scale", type=float, default=1.0,
                  help="size of the larger inputs (1.0: ~10-20 s of CPU each on 2 cores) and of the "
                       "decompression sample (16 MB x scale, at least 1 MB)")
  ap.add_argument("--multiprocess", dest="multiprocess", action="store_true", default=True,
                  help="measure the multi-process runner's overhead on HotpotQA (default)")
  ap.add_argument("--nomultiprocess", dest="multiprocess", action="store_false")
  ap.add_argument("--tmp_dir", default=None, help="where the inputs are generated")
  ap.add_argument("--keep", action="store_true", help="keep the generated inputs")
  args = ap.parse_args(argv)
  jobs = [j.strip() for j in args.only.split(",") if j.strip()]
  unknown = [j for j in jobs if j not in datasets.DATASETS]
  if unknown or not jobs:
    ap.error(f"--only: unknown dataset(s) {unknown}; choose from "
             f"{', '.join(datasets.DATASETS)}")
  common.check_pairs(ap, args.reps, 3)
  if args.scale <= 0:
    ap.error("--scale must be > 0")
  from pipelines import estimate  # pylint: disable=g-import-not-at-top

  tmp = args.tmp_dir or tempfile.mkdtemp(prefix="job_cost_")
  os.makedirs(tmp, exist_ok=True)
  created: List[str] = []
  date = time.strftime("%Y-%m-%d")
  results: Dict[str, Dict] = {}
  try:
    inputs = {}
    for job in jobs:
      inputs[job] = {}
      for name, scale in (("tiny", TINY * LARGE * args.scale), ("large", LARGE * args.scale)):
        root = os.path.join(tmp, f"{job}-{name}")
        created.append(root)
        inputs[job][name] = make_input(job, root, scale)
      print(f"{job}: tiny {inputs[job]['tiny'].describe}; larger {inputs[job]['large'].describe}",
            flush=True)
    runs: Dict[str, List[Dict[str, float]]] = {j: [] for j in jobs}
    mp_fits: List[Dict[str, float]] = []
    for rep in range(args.reps):  # interleaved: drift of a shared machine hits every job alike
      for job in jobs:
        tiny, large = inputs[job]["tiny"], inputs[job]["large"]
        rt = run_job(job, tiny.args, os.path.join(tmp, "out"))
        rl = run_job(job, large.args, os.path.join(tmp, "out"))
        f = fit(tiny, large, rt, rl)
        runs[job].append(f)
        print(f"rep {rep + 1} {job:<11} tiny {rt.cpu:6.2f} s CPU  larger {rl.cpu:6.2f} s CPU "
              f"({rl.wall:6.2f} s wall, {rl.rss_mb:6.0f} MB RSS)  slope {f['slope']:.4f} s/MB  "
              f"fixed {f['fixed']:.2f} s", flush=True)
        if job == "hotpotqa" and args.multiprocess:
          mp = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]
          mt = run_job(job, tiny.args + mp, os.path.join(tmp, "out"))
          ml = run_job(job, large.args + mp, os.path.join(tmp, "out"))
          mf = fit(tiny, large, mt, ml)
          mf["factor"] = mf["slope"] / f["slope"]
          mp_fits.append(mf)
          print(f"rep {rep + 1} hotpotqa multi_processing x2: slope {mf['slope']:.4f} s/MB "
                f"(x{mf['factor']:.2f} in-memory), fixed {mf['fixed']:.2f} s, "
                f"{ml.wall:.2f} s wall", flush=True)
    print()
    print(f"{'dataset':<12} {'work MB (tiny / larger)':>24}  {'CPU s per MB: min':>18} "
          f"{'median':>7} {'max':>7}  {'fixed s (median)':>16}  {'CPU/wall':>8}  "
          f"{'RSS MB/MB':>9}")
    worst = None
    for job in jobs:
      fits = runs[job]
      slopes = [f["slope"] for f in fits]
      med = statistics.median(slopes)
      tiny, large = inputs[job]["tiny"], inputs[job]["large"]
      print(f"{job:<12} {tiny.work_mb:>11.2f} / {large.work_mb:<10.2f}  {min(slopes):>18.4f} "
            f"{med:>7.4f} {max(slopes):>7.4f}  "
            f"{statistics.median(f['fixed'] for f in fits):>16.2f}  "
            f"{max(f['cpu_per_wall'] for f in fits):>8.2f}  "
            f"{statistics.median(f['rss_per_mb'] for f in fits):>9.2f}")
      table = estimate.measured_costs().get(job)
      drift = abs(med - table.cpu_s_per_mb) / table.cpu_s_per_mb if table else None
      if drift is not None:
        worst = drift if worst is None else max(worst, drift)
      results[job] = {"slope_min": min(slopes), "slope_median": med, "slope_max": max(slopes),
                      "fixed_median": statistics.median(f["fixed"] for f in fits),
                      "table_slope": table.cpu_s_per_mb if table else None, "drift": drift}
    if mp_fits:
      factors = [f["factor"] for f in mp_fits]
      print(f"multi_processing CPU per MB over in-memory (hotpotqa): "
            f"{common.spread(factors, '.2f')}")
      results["multiprocess_cpu_factor"] = statistics.median(factors)
    decompression = decompression_costs(mb=max(1.0, 16.0 * args.scale))  # --scale: all inputs
    results["decompress_cpu_s_per_mb"] = decompression
    print("decompression CPU s per uncompressed MB: "
          + ", ".join(f"{k} {v:.4f}" for k, v in decompression.items()))
    for job in jobs:
      print(f"\npipelines/datasets/{job}/cost.py:")
      print(cost_entry(job, runs[job], inputs[job]["tiny"], inputs[job]["large"], date,
                       args.reps))
  finally:
    common.clean_up_inputs(tmp, args.keep, args.tmp_dir is not None,
                           [p for p in created if os.path.isfile(p)])
    if not args.keep:
      for p in created:
        shutil.rmtree(p, ignore_errors=True)
  print(json.dumps({"metric": "job_cost_worst_slope_drift_from_estimate_table",
                    "value": worst,
                    "target": TARGET, "unit": "fraction (|measured - table| / table)",
                    "reps": args.reps, "jobs": results}))


if __name__ == "__main__":
  main()
