"""Flex Template entry point of every readtwice pipeline (FLEX_TEMPLATE_PYTHON_PY_FILE of the
launcher images; see deploy/dataflow/Dockerfile and flex_launcher.py).

The job is the one ``$READTWICE_JOB`` names: the launcher image built with
``--build-arg JOB=<name>`` sets it to that deployed dataset (``pipelines.JOBS``), and this runs
:func:`flex_launcher.main` on it.  A missing or unknown job is one ``launch.py: error: ...`` line
on stderr and exit status 2.
"""

import os
import sys
from typing import Optional, Sequence

import flex_launcher

JOB_ENV = "READTWICE_JOB"
PROG = "launch.py"
EXIT_USAGE = 2


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the job ``$READTWICE_JOB`` names as a Flex Template launch; returns the exit status."""
  job = os.environ.get(JOB_ENV, "").strip()
  if not job:
    print(f"{PROG}: error: ${JOB_ENV} names no job (the launcher image sets it from "
          f"--build-arg JOB=<name>)", file=sys.stderr)
    return EXIT_USAGE
  try:
    flex_launcher.check_job(job)
  except ValueError as e:
    print(f"{PROG}: error: ${JOB_ENV}: {e}", file=sys.stderr)
    return EXIT_USAGE
  return flex_launcher.main(job, argv)


if __name__ == "__main__":
  sys.exit(main())
