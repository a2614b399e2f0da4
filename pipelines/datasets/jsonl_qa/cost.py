"""What ``--estimate`` knows of the jsonl_qa job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m benchmarks.job_cost
--reps 3`` measured it (2026-11-30, idle machine; the benchmark prints this entry); each line's
context_file and its words per MB (the shipped sample)."""

from __future__ import annotations

import collections
from typing import Any, Tuple

from pipelines.estimate import sizing
from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost
from pipelines.estimate.sizing import Work


def side_inputs(work: Work, options: Any) -> None:
  """The context files the lines name (per line), as a run would read them."""
  del options
  from schemas import jsonl_qa  # pylint: disable=g-import-not-at-top
  named: "collections.Counter[Tuple[str, str]]" = collections.Counter()
  for f in work.inputs:
    for obj in sizing.json_items(f.path):
      name = obj.get("context_file") if isinstance(obj, dict) else None
      if isinstance(name, str) and name.strip():
        named[(jsonl_qa.context_root(f.path), name)] += 1
  refs = sizing.allowed(named, work, "context_file")
  if refs:
    work.add_side("context_files", sizing.size_referenced(refs),
                  "{n} lines name a missing context_file (dead letters missing_context_file in "
                  "a run)")


COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.10, cpu_s_per_mb=0.4045,
                  slope_spread=(0.3910, 0.4045, 0.4237), cpu_per_wall=1.30,
                  measured_on="0.07 MB work (0.05 MB stored) and "
                              "14.21 MB work (10.77 MB stored), 3 reps",
                  date="2026-11-30", machine=MACHINE, command=COMMAND),
    work="JSONL files plus each line's context_file, per line",
    side_inputs=side_inputs,
    words_per_mb=183_000)
