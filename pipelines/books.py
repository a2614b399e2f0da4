"""``python -m pipelines.books``: the generic job (:mod:`pipelines.runner`) on the books
dataset (:mod:`pipelines.datasets.books`), as ``python -m pipelines books`` runs it;
``run`` runs it from Python."""

from __future__ import annotations

import sys
from typing import Dict, Optional, Sequence

from pipelines import runner
from pipelines.beam.config import RecordsConfig
from pipelines.beam.annotate import AnnotationConfig


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        options: AnnotationConfig = AnnotationConfig(),
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.runner.run_job`)."""
  return runner.run_dataset("books", input_pattern, output_dir, config, options,
                            beam_args, overwrite)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return runner.dataset_main("books", argv, prog="python -m pipelines.books")


if __name__ == "__main__":
  sys.exit(main())
