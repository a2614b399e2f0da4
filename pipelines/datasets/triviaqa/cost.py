"""What ``--estimate`` knows of the triviaqa job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m benchmarks.job_cost
--reps 3`` measured it (2026-11-30, idle machine; the benchmark prints this entry); the evidence
files its questions name (per reference) and its Cloud NL texts (one per question)."""

from __future__ import annotations

import collections
from typing import Any, Optional, Tuple

from pipelines.estimate import sizing
from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost
from pipelines.estimate.sizing import Work


def side_inputs(work: Work, options: Any) -> None:
  """The evidence files the questions name under ``--evidence_dir``, per reference."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  evidence_dir = getattr(options, "evidence_dir", "") or ""
  named: "collections.Counter[Tuple[str, str]]" = collections.Counter()
  questions = 0
  for f in work.inputs:
    if f.kind == "parquet":  # Hub rows hold the evidence texts
      continue
    for datum in sizing.json_items(f.path, "Data"):
      if not isinstance(datum, dict):
        continue
      questions += 1
      for key, origin in (("EntityPages", "wikipedia"), ("SearchResults", "web")):
        pages = datum.get(key)
        for page in pages if isinstance(pages, list) else ():
          name = page.get("Filename") if isinstance(page, dict) else None
          if isinstance(name, str) and name and evidence_dir:
            named[(FileSystems.join(evidence_dir, origin), name)] += 1
  refs = sizing.allowed(named, work, "evidence Filename")
  if refs or evidence_dir:
    side = sizing.size_referenced(refs)
    side.update(dir=evidence_dir, questions=questions)
    work.add_side("evidence", side, "{n} evidence references name missing files (dead letters "
                  "missing_evidence in a run)")


def cloud_texts(work: Work) -> Optional[Tuple[float, str, float]]:
  """One Cloud NL text per question."""
  side = work.side.get("evidence")
  return None if side is None else (side["questions"], "one per question", 1.0)


COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.09, cpu_s_per_mb=0.4724,
                  slope_spread=(0.4562, 0.4724, 0.5286), cpu_per_wall=1.39,
                  measured_on="0.01 MB work (0.00 MB stored) and "
                              "16.93 MB work (0.18 MB stored), 3 reps",
                  date="2026-11-30", machine=MACHINE, command=COMMAND),
    work="question files plus the evidence files each question names, per reference",
    side_inputs=side_inputs,
    cloud_texts=cloud_texts)
