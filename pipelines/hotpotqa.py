"""``python -m pipelines.hotpotqa``: the generic job (:mod:`pipelines.runner`) on the HotpotQA
dataset (:mod:`pipelines.datasets.hotpotqa`), as ``python -m pipelines hotpotqa`` runs it;
``run`` runs it from Python."""

from __future__ import annotations

import sys
from typing import Dict, Optional, Sequence

from pipelines import runner
from pipelines.beam.config import RecordsConfig


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.runner.run_job`)."""
  return runner.run_dataset("hotpotqa", input_pattern, output_dir, config, None, beam_args,
                            overwrite)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return runner.dataset_main("hotpotqa", argv, prog="python -m pipelines.hotpotqa")


if __name__ == "__main__":
  sys.exit(main())
