"""What ``--estimate`` knows of the books job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m
benchmarks.job_cost --reps 5`` measured it (2026-11-27; the benchmark prints this entry); its words
per MB (the PG-19 sample) and its Cloud NL texts (one per book file)."""

from __future__ import annotations

from typing import Optional, Tuple

from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost
from pipelines.estimate.sizing import Work


def cloud_texts(work: Work) -> Optional[Tuple[float, str, float]]:
  """One Cloud NL text per book file."""
  return len(work.inputs), "one per book file", 1.0


COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.38, cpu_s_per_mb=1.0442,
                  slope_spread=(0.9616, 1.0442, 1.0871), cpu_per_wall=0.72,
                  measured_on="1 book of 0.09 MB and 40 books, 22.01 MB, 5 reps",
                  date="2026-11-27", machine=MACHINE, command=COMMAND),
    work="book files, uncompressed",
    words_per_mb=178_000,
    cloud_texts=cloud_texts)
