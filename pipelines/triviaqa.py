"""``python -m pipelines.triviaqa``: the generic job (:mod:`pipelines.runner`) on the TriviaQA
dataset (:mod:`pipelines.datasets.triviaqa`), as ``python -m pipelines triviaqa`` runs it;
``run`` runs it from Python."""

from __future__ import annotations

import sys
from typing import Dict, Optional, Sequence

from pipelines import runner
from pipelines.beam.config import RecordsConfig
from pipelines.datasets.triviaqa.dataset import TriviaQAOptions, check_evidence_dir_for


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        options: TriviaQAOptions = TriviaQAOptions(),
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.runner.run_job`)."""
  try:
    check_evidence_dir_for(options.evidence_dir, input_pattern)
  except ValueError as e:
    raise FileNotFoundError(str(e)) from e
  return runner.run_dataset("triviaqa", input_pattern, output_dir, config, options,
                            beam_args, overwrite)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return runner.dataset_main("triviaqa", argv, prog="python -m pipelines.triviaqa")


if __name__ == "__main__":
  sys.exit(main())
