"""What ``--estimate`` knows of the books job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m benchmarks.job_cost
--reps 3`` measured it (2026-11-30, idle machine; the benchmark prints this entry); its words per MB
(the PG-19 sample) and its Cloud NL texts (one per book file)."""

from __future__ import annotations

from typing import Optional, Tuple

from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost
from pipelines.estimate.sizing import Work


def cloud_texts(work: Work) -> Optional[Tuple[float, str, float]]:
  """One Cloud NL text per book file."""
  return len(work.inputs), "one per book file", 1.0


COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.11, cpu_s_per_mb=0.4013,
                  slope_spread=(0.3850, 0.4013, 0.4208), cpu_per_wall=1.40,
                  measured_on="0.09 MB work (0.09 MB stored) and "
                              "22.01 MB work (22.01 MB stored), 3 reps",
                  date="2026-11-30", machine=MACHINE, command=COMMAND),
    work="book files, uncompressed",
    words_per_mb=178_000,
    cloud_texts=cloud_texts)
