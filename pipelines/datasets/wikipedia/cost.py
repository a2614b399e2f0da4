"""What ``--estimate`` knows of the wikipedia job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m benchmarks.job_cost
--reps 3`` measured it (2026-11-30, idle machine; the benchmark prints this entry); the multistream
index beside a dump, sized but not in the work."""

from __future__ import annotations

from typing import Any

from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost
from pipelines.estimate.sizing import Work


def side_inputs(work: Work, options: Any) -> None:
  """The multistream index beside each dump (or ``--index``): sized, not in the work."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia.dump import index_path_for  # pylint: disable=g-import-not-at-top
  index = getattr(options, "index", None)
  found = [index] if index else [p for p in (index_path_for(f.path) for f in work.inputs) if p]
  sizes = [m.size_in_bytes for p in found for m in FileSystems.match([p])[0].metadata_list]
  work.side["multistream_index"] = {"files": len(found), "bytes": int(sum(sizes)),
                                    "in_work": False}


COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.87, cpu_s_per_mb=0.5997,
                  slope_spread=(0.5606, 0.5997, 0.6161), cpu_per_wall=1.22,
                  measured_on="0.07 MB work (0.02 MB stored) and "
                              "16.07 MB work (3.25 MB stored), 3 reps",
                  date="2026-11-30", machine=MACHINE, command=COMMAND),
    work="dump XML, uncompressed (the bz2 ratio sampled from each dump)",
    side_inputs=side_inputs,
    measured_on_kind="bz2")
