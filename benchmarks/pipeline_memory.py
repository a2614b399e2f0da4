r"""Peak memory of the whole HotpotQA job (``python -m pipelines hotpotqa``) by input size.

  python -m benchmarks.pipeline_memory [--questions 9000,90447] [--modes in_memory,multi_processing]
                                       [--seed 0] [--tmp_dir DIR] [--keep] [--interval 0.2]

For each size, generates a HotpotQA-format JSON list with
``pipelines.datasets.hotpotqa.fake_input.make_questions(n, seed, zipf_sentences=2)`` (~5.9 KB of
JSON per question, like real HotpotQA train's ~5.8 KB: 90,447 questions are ~540 MB), in a separate
interpreter so that the generator's memory is returned before anything is measured.  Files are
cached in ``--tmp_dir`` by (questions, seed): a file already there is reused.  The default
``--tmp_dir`` is a fresh temporary directory, deleted at the end; with ``--tmp_dir`` given, the
files this run generated are deleted at the end; ``--keep`` keeps them (and the directory).

Then, for each (size, mode), runs the job as the user would,

  python -m pipelines hotpotqa --input F --output_dir D --log_level WARNING [mode flags]

(``in_memory``: the default local FnApiRunner, one process; ``multi_processing``:
``--direct_running_mode=multi_processing --direct_num_workers=2``, SDK workers in child
processes) and every ``--interval`` seconds sums VmRSS over the whole process tree (the job and
all its descendants, found through /proc/<pid>/stat parent ids), keeping the maximum: the "peak
tree RSS".  The sum of PSS (/proc/<pid>/smaps_rollup; shared pages split between the processes
that map them, so not double-counted) is tracked alike.  As a cross-check, the job's own
``ru_maxrss`` from ``os.wait4`` (the kernel's exact peak of the largest single process of the
tree, not a sum) is reported too, and the peak tree RSS is at least it (the sampled sum can
miss a spike shorter than the interval; ``sampled_peak_tree_rss_gb`` is the sampled figure).  The
job's output directory is deleted after each run; a failed job prints its stderr tail and the
benchmark exits non-zero.

Prints one line per run (wall seconds, questions, JSON MB, peak tree RSS GB, bytes per
question), then per mode the ratio peak(largest) / peak(smallest) and the slope (bytes per
extra question).  The last line is the JSON figure: peak tree RSS in GB at the largest size in
``in_memory`` mode (the first mode given if that is not among them); target <= 4 at 90,447
questions (HotpotQA train).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, NamedTuple, Optional

if not __package__:  # run as a file: the benchmarks are a package of the checkout
  print("error: run it from the repository root as: python -m benchmarks "
        "pipeline_memory", file=sys.stderr)
  sys.exit(2)

from benchmarks import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODES = {
    "in_memory": [],
    "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
}
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# ---------------------------------------------------------------------------------------------
# Input generation (in a child interpreter: ``--generate N SEED PATH``).

def generate(n: int, seed: int, path: str) -> None:
  """Writes ``make_questions(n, seed, zipf_sentences=2)`` as one JSON list, item by item."""
  from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa  # pylint: disable=g-import-not-at-top
  questions = synthetic_hotpotqa.make_questions(n, seed=seed, zipf_sentences=2)
  with open(path, "w", encoding="utf-8") as f:
    f.write("[")
    for i, q in enumerate(questions):
      if i:
        f.write(", ")
      f.write(json.dumps(q))
    f.write("]")


def input_file(tmp: str, n: int, seed: int, created: List[str]) -> str:
  """The cached input for ``n`` questions under ``tmp``, generated if missing."""
  path = os.path.join(tmp, f"hotpotqa_synthetic_n{n}_seed{seed}_zipf2.json")
  if os.path.exists(path):
    print(f"reusing {path} ({os.path.getsize(path) / 1e6:,.1f} MB)", flush=True)
    return path
  part = path + ".part"
  t0 = time.perf_counter()
  proc = subprocess.run([sys.executable, "-m", "benchmarks.pipeline_memory", "--generate", str(n),
                         str(seed), part], cwd=ROOT, capture_output=True, text=True,
                        check=False)
  if proc.returncode:
    sys.stderr.write(proc.stderr[-4000:])
    raise SystemExit(f"generating {n} questions failed ({proc.returncode})")
  os.replace(part, path)
  created.append(path)
  print(f"generated {path}: {n:,d} questions, {os.path.getsize(path) / 1e6:,.1f} MB in "
        f"{time.perf_counter() - t0:.1f} s", flush=True)
  return path


# ---------------------------------------------------------------------------------------------
# Process-tree memory sampling.

def _children_map() -> Dict[int, List[int]]:
  """Parent pid -> child pids, for every process in /proc."""
  children: Dict[int, List[int]] = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat", "rb") as f:
        stat = f.read()
    except OSError:
      continue
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2:].split()
    children.setdefault(int(fields[1]), []).append(int(name))
  return children


def tree(pid: int) -> List[int]:
  """``pid`` and all its descendants."""
  children = _children_map()
  out, todo = [], [pid]
  while todo:
    p = todo.pop()
    out.append(p)
    todo.extend(children.get(p, ()))
  return out


def _status_kb(pid: int, key: bytes) -> int:
  try:
    with open(f"/proc/{pid}/status", "rb") as f:
      for line in f:
        if line.startswith(key):
          return int(line.split()[1])
  except (OSError, ValueError, IndexError):
    pass
  return 0


def _pss_kb(pid: int) -> int:
  try:
    with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
      for line in f:
        if line.startswith(b"Pss:"):
          return int(line.split()[1])
  except (OSError, ValueError, IndexError):
    pass
  return 0


class TreeSampler:
  """Maximum over samples of the summed RSS (and PSS) of a process tree."""

  def __init__(self, pid: int):
    self.pid = pid
    self.peak_rss = 0  # bytes
    self.peak_pss = 0
    self.peak_processes = 0
    self.samples = 0

  def sample(self) -> None:
    pids = tree(self.pid)
    rss = sum(_status_kb(p, b"VmRSS:") for p in pids) * 1024
    pss = sum(_pss_kb(p) for p in pids) * 1024
    self.peak_rss = max(self.peak_rss, rss)
    self.peak_pss = max(self.peak_pss, pss)
    self.peak_processes = max(self.peak_processes, len(pids))
    self.samples += 1


def run_sampled(cmd: List[str], out_dir: str, interval: float):
  """Runs ``cmd`` in ROOT, sampling its process tree every ``interval`` s; deletes
  ``out_dir`` afterwards.  (exit status, stdout, stderr, wall seconds, its rusage from
  ``os.wait4`` (its own and its reaped descendants' CPU; ru_maxrss: its largest process'
  exact peak), the TreeSampler)."""
  log_out, log_err = out_dir + ".stdout", out_dir + ".stderr"
  try:
    with open(log_out, "wb") as fo, open(log_err, "wb") as fe:
      t0 = time.perf_counter()
      proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fo, stderr=fe)
      sampler = TreeSampler(proc.pid)
      while True:
        # WNOHANG: (0, 0, ...) while running; reaping it ourselves gives its rusage.
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
          break
        sampler.sample()
        time.sleep(interval)
      seconds = time.perf_counter() - t0
    with open(log_out, encoding="utf-8", errors="replace") as f:
      stdout = f.read()
    with open(log_err, encoding="utf-8", errors="replace") as f:
      stderr = f.read()
  finally:
    for p in (log_out, log_err):
      if os.path.exists(p):
        os.remove(p)
    shutil.rmtree(out_dir, ignore_errors=True)
  return os.waitstatus_to_exitcode(status), stdout, stderr, seconds, usage, sampler


class JobRun(NamedTuple):
  """One sampled run of ``python -m pipelines <job>`` (see :func:`run_job`)."""
  cmd: List[str]
  returncode: int
  summary: Optional[Dict]  # the JSON summary its last stdout line holds (None on failure)
  stdout: str
  stderr: str
  seconds: float
  usage: Any  # os.wait4's rusage
  sampler: TreeSampler

  def fail(self, message: str) -> None:
    """Prints the command, its exit status and output tails; exits with ``message``."""
    sys.stderr.write(f"--- {' '.join(self.cmd)}\n--- exit status {self.returncode}; stdout "
                     f"tail:\n{self.stdout[-2000:]}\n--- stderr tail:\n{self.stderr[-4000:]}\n")
    raise SystemExit(message)


def run_job(job: str, path: str, mode: str, out_dir: str, interval: float) -> JobRun:
  """Runs ``python -m pipelines <job> --input path --output_dir out_dir`` in ``mode`` (a key of
  :data:`MODES`) as a user would, sampling its process tree (:func:`run_sampled`)."""
  cmd = [sys.executable, "-m", "pipelines", job, "--input", path, "--output_dir", out_dir,
         "--log_level", "WARNING"] + MODES[mode]
  returncode, stdout, stderr, seconds, usage, sampler = run_sampled(cmd, out_dir, interval)
  summary = None
  if returncode == 0:
    try:
      summary = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
      summary = None
  return JobRun(cmd, returncode, summary, stdout, stderr, seconds, usage, sampler)


def measure(path: str, n: int, mode: str, out_dir: str, interval: float) -> Dict:
  """Runs the job on ``path`` once, sampling its process tree; its figures."""
  run = run_job("hotpotqa", path, mode, out_dir, interval)
  summary, usage, sampler, seconds = run.summary, run.usage, run.sampler, run.seconds
  if summary is None or summary["counts"]["written"] != n:
    run.fail(f"the job failed on {n} questions in {mode} mode"
             + (f": wrote {summary['counts']}" if summary else ""))
  maxrss = usage.ru_maxrss * 1024
  # The tree's sum can never have been below its largest process' exact peak: a sample that
  # missed that moment is corrected by it.
  return {"seconds": round(seconds, 1), "peak_tree_rss_bytes": max(sampler.peak_rss, maxrss),
          "sampled_peak_tree_rss_bytes": sampler.peak_rss,
          "peak_tree_pss_bytes": sampler.peak_pss,
          "ru_maxrss_bytes": maxrss, "processes": sampler.peak_processes,
          "samples": sampler.samples, "segments": summary["examples"].get("segments"),
          "packs": summary["examples"].get("packs")}


def main(argv: Optional[List[str]] = None) -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.pipeline_memory",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--questions", default="9000,90447", help="comma-separated question counts")
  ap.add_argument("--modes", default="in_memory",
                  help=f"comma-separated, of: {', '.join(MODES)}")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--tmp_dir", default=None,
                  help="where inputs are generated (and reused if already there) and jobs "
                       "write; default: a fresh temporary directory")
  ap.add_argument("--keep", action="store_true",
                  help="keep the generated inputs (and the temporary directory)")
  ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
  ap.add_argument("--generate", nargs=3, default=None, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.generate:
    generate(int(args.generate[0]), int(args.generate[1]), args.generate[2])
    return
  sizes = sorted({int(s) for s in args.questions.split(",") if s.strip()})
  modes = [m.strip() for m in args.modes.split(",") if m.strip()]
  unknown = [m for m in modes if m not in MODES]
  if unknown or not modes or not sizes or min(sizes) < 1:
    ap.error(f"--modes must be among {', '.join(MODES)} and --questions positive integers")
  if not os.path.isdir("/proc/self/task"):
    raise SystemExit("needs /proc (Linux) to sample the process tree")

  tmp = args.tmp_dir or tempfile.mkdtemp(prefix="pipeline_memory_")
  os.makedirs(tmp, exist_ok=True)
  created: List[str] = []
  runs: Dict = {}
  try:
    files = {n: input_file(tmp, n, args.seed, created) for n in sizes}
    for n in sizes:
      path = files[n]
      json_mb = os.path.getsize(path) / 1e6
      for mode in modes:
        r = measure(path, n, mode, os.path.join(tmp, f"out_{n}_{mode}"), args.interval)
        r.update(questions=n, json_mb=round(json_mb, 1))
        runs[(mode, n)] = r
        print(f"{mode:16s} questions {n:7,d}  JSON {json_mb:7.1f} MB  wall {r['seconds']:7.1f} s"
              f"  peak tree RSS {r['peak_tree_rss_bytes'] / 1e9:6.2f} GB "
              f"(PSS {r['peak_tree_pss_bytes'] / 1e9:5.2f} GB, {r['processes']} process(es))"
              f"  ru_maxrss {r['ru_maxrss_bytes'] / 1e9:6.2f} GB"
              f"  {r['peak_tree_rss_bytes'] / n / 1e3:8.1f} KB/question"
              f"  ({r['segments']:,} segments, {r['packs']:,} packs)", flush=True)
  finally:
    common.clean_up_inputs(tmp, args.keep, args.tmp_dir is not None, created)

  figure_mode = "in_memory" if "in_memory" in modes else modes[0]
  per_mode = {}
  for mode in modes:
    lo, hi = runs[(mode, sizes[0])], runs[(mode, sizes[-1])]
    ratio = hi["peak_tree_rss_bytes"] / lo["peak_tree_rss_bytes"]
    slope = ((hi["peak_tree_rss_bytes"] - lo["peak_tree_rss_bytes"]) / (sizes[-1] - sizes[0])
             if len(sizes) > 1 else None)
    print(f"{mode}: peak tree RSS {sizes[-1]:,d} / {sizes[0]:,d} questions = {ratio:.2f}x"
          + (f"; slope {slope / 1e3:,.1f} KB per extra question "
             f"(-> {(lo['peak_tree_rss_bytes'] + slope * (90447 - sizes[0])) / 1e9:.2f} GB "
             f"extrapolated to 90,447)" if slope is not None else ""))
    per_mode[mode] = {
        "ratio_largest_over_smallest": round(ratio, 3),
        "slope_bytes_per_question": round(slope) if slope is not None else None,
        "by_questions": {str(n): {
            "peak_tree_rss_gb": round(runs[(mode, n)]["peak_tree_rss_bytes"] / 1e9, 3),
            "sampled_peak_tree_rss_gb": round(
                runs[(mode, n)]["sampled_peak_tree_rss_bytes"] / 1e9, 3),
            "peak_tree_pss_gb": round(runs[(mode, n)]["peak_tree_pss_bytes"] / 1e9, 3),
            "ru_maxrss_gb": round(runs[(mode, n)]["ru_maxrss_bytes"] / 1e9, 3),
            "seconds": runs[(mode, n)]["seconds"], "json_mb": runs[(mode, n)]["json_mb"],
            "processes": runs[(mode, n)]["processes"]} for n in sizes}}
  print(json.dumps({"metric": "pipeline_peak_rss_gb_90k",
                    "value": round(runs[(figure_mode, sizes[-1])]["peak_tree_rss_bytes"] / 1e9,
                                   3),
                    "target": 4, "unit": "GB", "mode": figure_mode, "questions": sizes[-1],
                    "modes": per_mode}))


if __name__ == "__main__":
  main()
