"""What ``--estimate`` knows of the narrativeqa job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m benchmarks.job_cost
--reps 3`` measured it (2026-11-30, idle machine; the benchmark prints this entry); each question's
story (or summary), its words per MB (the Time Machine) and its Cloud NL texts (a story is sent
once)."""

from __future__ import annotations

import collections
from typing import Any, Dict, Optional, Tuple

from pipelines.estimate import sizing
from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost
from pipelines.estimate.sizing import Work


def side_inputs(work: Work, options: Any) -> None:
  """Each question's story (``--context summary``: its summary) of ``--split``, per question."""
  from pipelines.beam import read_parquet  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.narrativeqa import reader, stages  # pylint: disable=g-import-not-at-top
  paths = [f.path for f in work.inputs]
  if read_parquet.all_parquet(paths) or len(paths) != 1:
    return  # Hub rows hold each question's story; the run itself refuses several qaps.csv
  where = options.paths(paths[0])
  per_story: "collections.Counter[str]" = collections.Counter()
  for _, row in stages.read_csv(paths[0], reader.QUESTION_COLUMNS):
    if isinstance(row, dict) and row.get("set") == options.split:
      per_story[row["document_id"]] += 1
  if options.context == "summary":
    texts: Dict[str, int] = {}
    for _, row in stages.read_csv(where["summaries"], reader.SUMMARY_COLUMNS):
      if isinstance(row, dict) and row.get("set") == options.split:
        texts[row["document_id"]] = len(row["summary"].encode("utf-8"))
    read = sum(texts.get(k, 0) * n for k, n in per_story.items())
    side = {"files": 1, "path": where["summaries"], "stories": len(per_story),
            "questions": sum(per_story.values()), "bytes": read,
            "missing": sum(n for k, n in per_story.items() if k not in texts),
            "sized": "summaries.csv read"}
    role = "summaries"
  else:
    refs = sizing.allowed(collections.Counter({(where["stories_dir"], f"{k}.content"): n
                                               for k, n in per_story.items()}),
                          work, "document_id's story")
    side = sizing.size_referenced(refs)
    side.update(dir=where["stories_dir"], stories=len(per_story))
    side["questions"] = side.pop("references")
    role = "stories"
  work.add_side(role, side, f"{{n}} questions of --split {options.split} have no "
                f"{options.context} (dead letters in a run)")


def cloud_texts(work: Work) -> Optional[Tuple[float, str, float]]:
  """Every question holds its whole story, but a story is sent to Cloud NL once (the cache
  answers the other questions): the characters of each story once."""
  side = work.side.get("stories")
  if side is None:
    return None
  return (side["stories"], "one per story, each sent once",
          side["files"] / side["questions"] if side["questions"] else 0.0)


COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.37, cpu_s_per_mb=0.0697,
                  slope_spread=(0.0678, 0.0697, 0.0842), cpu_per_wall=1.09,
                  measured_on="0.56 MB work (0.01 MB stored) and "
                              "100.33 MB work (0.04 MB stored), 3 reps",
                  date="2026-11-30", machine=MACHINE, command=COMMAND),
    work=("qaps.csv plus each question's story (--context summary: summary), per "
          "question of --split"),
    side_inputs=side_inputs,
    words_per_mb=173_000,
    cloud_texts=cloud_texts)
