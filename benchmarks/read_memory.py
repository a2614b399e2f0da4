r"""Peak memory of the read stage alone, by input size: it should not grow with the file.

  python -m benchmarks.read_memory [--sizes_mb 5,50] [--repeats 1] [--old] [--tmp_dir /tmp]
                                   [--chunk_size 1048576]

For each size, writes a HotpotQA-format JSON list of about that many MB (synthetic questions
from ``pipelines.datasets.hotpotqa.fake_input``, written streaming in batches, ids renumbered so
they stay unique; deleted at the end).  Each measurement runs ``ReadJsonRecords`` into a fused
``Count.Globally`` (nothing else) on the in-process FnApiRunner in a fresh interpreter and
reports that process's peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss`` at its exit) and its RSS
after imports and pipeline construction (the baseline), the records counted and the seconds.
``--repeats`` runs are interleaved over the sizes (size 1, size 2, ..., size 1, ...), so drift
of the machine hits every size alike.  ``--old`` also measures the reader of the last commit
(``git show HEAD:pipelines/beam/read.py``, loaded as a temporary module) side by side.

One line per run, a min / median / max summary per reader and size, then as the last line the
JSON figure for the current reader: median peak RSS of the largest size / median peak RSS of
the smallest (target <= 1.1).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_BATCH = 200  # questions generated per batch (~1.3 MB of JSON)


def write_hotpotqa_list(path: str, size_bytes: int, seed: int = 0) -> int:
  """Writes a JSON list of at least ``size_bytes`` bytes; returns the number of questions.

  A batch of questions is generated once and repeated with renumbered ``_id``s, so the file is
  written in constant memory whatever its size.
  """
  from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa  # pylint: disable=g-import-not-at-top
  batch = synthetic_hotpotqa.make_questions(_BATCH, seed=seed)
  n, written = 0, 0
  with open(path, "w", encoding="utf-8") as f:
    f.write("[")
    written += 1
    while written < size_bytes:
      for q in batch:
        text = json.dumps(dict(q, _id=f"bench{n:09d}"))
        if n:
          text = ", " + text
        f.write(text)
        written += len(text)
        n += 1
        if written >= size_bytes:
          break
    f.write("]")
  return n


def _rss_mb() -> float:
  """Current RSS of this process (MB), from /proc; 0 where there is none."""
  try:
    with open("/proc/self/statm", encoding="ascii") as f:
      return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
  except (OSError, ValueError):
    return 0.0


def child(path: str, chunk_size: int, old_module: str) -> None:
  """The measured process: the read stage and a count, nothing else."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.metrics import Metrics  # pylint: disable=g-import-not-at-top
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=g-import-not-at-top
  from apache_beam.runners.portability.fn_api_runner import FnApiRunner  # pylint: disable=g-import-not-at-top

  if old_module:
    import importlib.util  # pylint: disable=g-import-not-at-top
    spec = importlib.util.spec_from_file_location("old_read", old_module)
    read = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(read)
    reader = read.ReadJsonRecords([path])
  else:
    from pipelines.beam import read  # pylint: disable=g-import-not-at-top
    reader = read.ReadJsonRecords([path], chunk_size=chunk_size)

  p = beam.Pipeline(runner=FnApiRunner())
  raw = p | reader
  _ = (raw.records | beam.combiners.Count.Globally()
       | beam.Map(lambda n: Metrics.counter("benchmark", "counted").inc(n)))
  baseline = _rss_mb()
  t0 = time.perf_counter()
  result = p.run()
  result.wait_until_finish()
  seconds = time.perf_counter() - t0
  found = result.metrics().query(MetricsFilter().with_name("counted"))["counters"]
  counted = [c.committed for c in found]
  print(json.dumps({"records": counted[0] if counted else -1, "seconds": round(seconds, 2),
                    "baseline_rss_mb": round(baseline, 1),
                    "peak_rss_mb": round(
                        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6, 1)}))


def measure(path: str, chunk_size: int, old_module: str = "") -> dict:
  """Runs :func:`child` in a fresh interpreter; its figures."""
  cmd = [sys.executable, "-m", "benchmarks.read_memory", "--child", path, "--chunk_size",
         str(chunk_size)]
  if old_module:
    cmd += ["--old_module", old_module]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
  if proc.returncode:
    sys.stderr.write(proc.stderr[-4000:])
    raise SystemExit(f"the read subprocess failed ({proc.returncode})")
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _old_reader(tmp: str) -> str:
  """The reader of the last commit, written to a file under ``tmp``."""
  source = subprocess.run(["git", "show", "HEAD:pipelines/beam/read.py"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
  path = os.path.join(tmp, "old_read.py")
  with open(path, "w", encoding="utf-8") as f:
    f.write(source)
  return path


def _spread(values) -> str:
  return (f"min {min(values):7.1f}  median {statistics.median(values):7.1f}  "
          f"max {max(values):7.1f}")


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.read_memory",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--sizes_mb", default="5,50", help="comma-separated input sizes in MB")
  ap.add_argument("--repeats", type=int, default=1, help="runs per size (interleaved)")
  ap.add_argument("--old", action="store_true",
                  help="also measure the reader of the last commit (git HEAD)")
  ap.add_argument("--tmp_dir", default=None, help="where the generated inputs are written")
  ap.add_argument("--chunk_size", type=int, default=1 << 20)
  ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
  ap.add_argument("--old_module", default="", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    child(args.child, args.chunk_size, args.old_module)
    return
  sizes = sorted(float(s) for s in args.sizes_mb.split(",") if s.strip())
  with tempfile.TemporaryDirectory(dir=args.tmp_dir) as tmp:
    readers = {"new": ""}
    if args.old:
      readers["old"] = _old_reader(tmp)
    files = {}
    for size in sizes:
      path = os.path.join(tmp, f"hotpot_{size:g}mb.json")
      t0 = time.perf_counter()
      n = write_hotpotqa_list(path, int(size * 1e6))
      files[size] = (path, n, os.path.getsize(path) / 1e6)
      print(f"generated {files[size][2]:,.1f} MB ({n:,d} questions) in "
            f"{time.perf_counter() - t0:.1f} s", flush=True)
    runs = {(name, size): [] for name in readers for size in sizes}
    for rep in range(args.repeats):
      for size in sizes:
        path, n, file_mb = files[size]
        for name, module in readers.items():
          r = measure(path, args.chunk_size, module)
          if r["records"] != n:
            raise SystemExit(f"{name}: read {r['records']} records of {n}")
          runs[(name, size)].append(r)
          print(f"run {rep + 1}  {name:3s}  size {file_mb:7.1f} MB  records {n:8,d}  "
                f"read {r['seconds']:6.1f} s ({file_mb / max(r['seconds'], 1e-9):5.1f} MB/s)  "
                f"baseline RSS {r['baseline_rss_mb']:6.1f} MB  peak RSS {r['peak_rss_mb']:7.1f} MB",
                flush=True)
  print("summary (MB; seconds; 'above baseline': peak RSS less the RSS before the run):")
  for (name, size), rs in runs.items():
    print(f"  {name:3s}  {files[size][2]:7.1f} MB  peak RSS "
          f"{_spread([r['peak_rss_mb'] for r in rs])}  | above baseline "
          f"{_spread([r['peak_rss_mb'] - r['baseline_rss_mb'] for r in rs])}  | seconds "
          f"{_spread([r['seconds'] for r in rs])}")
  median = {key: statistics.median(r["peak_rss_mb"] for r in rs) for key, rs in runs.items()}
  # One JSON figure per reader; the last line is the current reader's.
  for name in sorted(readers, key=lambda k: k == "new"):
    figure = {"metric": "read_peak_rss_ratio_largest_vs_smallest",
              "value": round(median[(name, sizes[-1])] / median[(name, sizes[0])], 3),
              "target": 1.1, "unit": "ratio", "reader": name,
              "sizes_mb": [round(files[s][2], 1) for s in sizes],
              "median_peak_rss_mb": [median[(name, s)] for s in sizes], "repeats": args.repeats}
    print(json.dumps(figure))

if __name__ == "__main__":
  main()
