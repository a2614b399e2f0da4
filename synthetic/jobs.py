"""The job harness of the generated corpora: runs the project's real jobs
(``python -m pipelines <dataset>``) as subprocesses on generated input; what they wrote is read with
:mod:`schemas.records_dir`.

Used by :mod:`synthetic.long_range_qa.build` and :mod:`synthetic.memory_corpus.build`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Job:
  """One ``python -m pipelines <dataset> ARGS`` subprocess (run in the repository root, its
  output to the log file ``log``), started once the jobs named in ``after`` have finished."""

  def __init__(self, name: str, dataset: str, args: Sequence[str], log: str,
               after: Sequence[str] = ()):
    self.name, self.dataset, self.args, self.log, self.after = name, dataset, args, log, after
    self.proc: Optional[subprocess.Popen] = None
    self.seconds: Optional[float] = None

  def start(self) -> None:
    self.t0 = time.perf_counter()
    self.f = open(self.log, "w", encoding="utf-8")
    self.proc = subprocess.Popen([sys.executable, "-m", "pipelines", self.dataset, *self.args],
                                 cwd=ROOT, stdout=self.f, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))

  def poll(self) -> bool:
    """Whether it has finished; raises RuntimeError (with the log's tail) if it failed."""
    rc = self.proc.poll()
    if rc is None:
      return False
    self.seconds = round(time.perf_counter() - self.t0, 2)
    self.f.close()
    if rc:
      with open(self.log, encoding="utf-8") as f:
        tail = f.read()[-3000:]
      raise RuntimeError(f"{self.name}: pipeline exited with {rc}; log {self.log}:\n{tail}")
    return True


def run_jobs(jobs: Sequence[Job], parallel: int = 2) -> Dict[str, float]:
  """Runs ``jobs`` at most ``parallel`` at a time, each after its ``after`` jobs, in list order;
  returns each job's seconds.  A failure kills the jobs still running and raises."""
  pending: List[Job] = list(jobs)
  running: List[Job] = []
  done: Dict[str, float] = {}
  try:
    while pending or running:
      for job in [j for j in running if j.poll()]:
        running.remove(job)
        done[job.name] = job.seconds
      for job in list(pending):
        if len(running) < parallel and all(a in done for a in job.after):
          pending.remove(job)
          job.start()
          running.append(job)
      time.sleep(0.05)
  finally:
    for job in running:
      if job.proc.poll() is None:
        job.proc.kill()
        job.proc.wait()
      job.f.close()
  return done

