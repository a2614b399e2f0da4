"""``python -m pipelines.narrativeqa``: the generic job (:mod:`pipelines.runner`) on the NarrativeQA
dataset (:mod:`pipelines.datasets.narrativeqa`), as ``python -m pipelines narrativeqa`` runs it;
``run`` runs it from Python."""

from __future__ import annotations

import sys
from typing import Dict, Optional, Sequence

from pipelines import runner
from pipelines.beam.config import RecordsConfig
from pipelines.datasets.narrativeqa.dataset import NarrativeQAOptions


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        options: NarrativeQAOptions = NarrativeQAOptions(),
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.runner.run_job`)."""
  return runner.run_dataset("narrativeqa", input_pattern, output_dir, config, options,
                            beam_args, overwrite)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return runner.dataset_main("narrativeqa", argv, prog="python -m pipelines.narrativeqa")


if __name__ == "__main__":
  sys.exit(main())
