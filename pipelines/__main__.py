"""``python -m pipelines <dataset> --input ... --output_dir ...``: the generic job, for any dataset
registered in :mod:`pipelines.datasets`.

``python -m pipelines --help`` lists the datasets with their descriptions; ``python -m pipelines
<dataset> --help`` shows that dataset's flags.  An unknown dataset name is one stderr line with
the closest registered name, exit status 2.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

from schemas import cli as schema_cli

PROG = "python -m pipelines"


def usage() -> str:
  """The top-level ``--help``: the registered datasets, one line each."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  specs = datasets.specs()
  width = max(len(n) for n in specs)
  lines: List[str] = [f"usage: {PROG} <dataset> --input ... --output_dir ... [flags]", "",
                      "Turns a registered dataset into packed ReadTwice TFRecords.", "",
                      "datasets:"]
  lines += [f"  {name:<{width}}  {spec.summary}" for name, spec in specs.items()]
  lines += ["", f"{PROG} <dataset> --help shows the dataset's flags, with an example."]
  return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
  if argv is None:  # the command line (not a call from a test): Ctrl-C while starting is one line
    from pipelines.errors import exit_quietly_on_stop_signals  # pylint: disable=g-import-not-at-top
    exit_quietly_on_stop_signals(f"{PROG} {sys.argv[1] if len(sys.argv) > 1 else ''}".strip())
  from pipelines import datasets, runner  # pylint: disable=g-import-not-at-top
  argv = list(sys.argv[1:] if argv is None else argv)
  if argv and argv[0] in ("-h", "--help"):
    print(usage())
    return 0
  name = argv[0] if argv else ""
  if not name or name.startswith("-"):
    print(f"{PROG}: error: the first argument names the dataset, one of "
          f"{', '.join(datasets.DATASETS)}; see {PROG} --help", file=sys.stderr)
    return schema_cli.EXIT_USAGE
  if name not in datasets.DATASETS:
    guess = schema_cli.closest(name, list(datasets.DATASETS))
    hint = f" (did you mean {guess}?)" if guess else ""
    print(f"{PROG}: error: unknown dataset {name!r}{hint}; see {PROG} --help",
          file=sys.stderr)
    return schema_cli.EXIT_USAGE
  return runner.dataset_main(name, argv[1:], prog=f"{PROG} {name}")


if __name__ == "__main__":
  sys.exit(main())
