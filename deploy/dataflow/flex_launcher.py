"""Flex Template entry point of the readtwice pipelines (``launch.py`` calls :func:`main` with
the job ``$READTWICE_JOB`` names).

The Flex Template launcher runs ``python /template/launch.py --name=value ...`` with the
template's parameters (the job's own flags, as ``make_templates.py`` writes them into the
template's metadata) and Dataflow's pipeline options (``--runner``, ``--project``,
``--region``, ``--temp_location``, ...).  This runs the job's real command line
(``pipelines.runner.dataset_main``, as ``python -m pipelines <job>`` does: the same flags, checks,
logging and one-line errors) with three differences that a launch from a template needs:

* Boolean flags arrive as ``--overwrite=true`` / ``--overwrite=false`` (a template parameter
  always has a value); they become ``--overwrite`` / ``--nooverwrite``.  Any other value is a
  usage error (exit 2) naming the flag.
* Nothing waits for the job: in a launcher image ``--nowait`` is added (the jobs' own flag:
  ``pipelines.runner.run_job(wait=False)``), so on a remote runner the pipeline is built and
  submitted and the launcher exits, printing ``{"submitted": true, ...}`` as the last stdout line
  (Dataflow's documentation: a Flex Template program must exit after ``run()``, without
  ``wait_until_finish``).  The job writes ``manifest.json`` and ``COMPLETED`` when it succeeds;
  locally (no runner, DirectRunner) the job runs to completion as ``python -m pipelines <job>``
  does.
* Without ``--sdk_container_image`` the image named by ``$READTWICE_SDK_CONTAINER_IMAGE`` (set
  when the launcher image is built, see ``deploy/dataflow/Dockerfile``) runs the workers, so a
  launch cannot pick workers without the package by mistake; in a launcher image a missing
  ``--runner`` means ``DataflowRunner``.

Everything else is the job's own command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Iterator

SDK_IMAGE_ENV = "READTWICE_SDK_CONTAINER_IMAGE"
TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")
_IMAGE_OPTIONS = ("--sdk_container_image", "--worker_harness_container_image")

LOGGER = logging.getLogger("pipelines")


@dataclasses.dataclass(frozen=True)
class _BoolOption:
  dest: str
  sets: bool  # the value this option string gives ``dest``
  on: Optional[str]  # the option string that sets ``dest`` to True (None: there is none)
  off: Optional[str]  # ... to False
  default: Any


def bool_options(parser) -> Dict[str, _BoolOption]:
  """``{option string: _BoolOption}`` for every store_true / store_false flag of ``parser``
  (the jobs' ``--name`` / ``--noname`` pairs of ``pipelines.flags.bool_flag``)."""
  by_dest: Dict[str, Dict[bool, str]] = {}
  actions = [a for a in parser._actions  # pylint: disable=protected-access
             if a.nargs == 0 and isinstance(a.const, bool) and a.option_strings]
  for a in actions:
    by_dest.setdefault(a.dest, {})[a.const] = a.option_strings[0]
  found = {}
  for a in actions:
    pair = by_dest[a.dest]
    for s in a.option_strings:
      found[s] = _BoolOption(a.dest, a.const, pair.get(True), pair.get(False), a.default)
  return found


def translate_bools(parser, argv: Sequence[str]) -> List[str]:
  """``argv`` with ``--flag=true|false`` (or ``--flag true|false``) of boolean flags turned into
  the flag or its ``--no`` form; a value that is neither is a usage error (``parser.error``)."""
  options = bool_options(parser)
  out: List[str] = []
  i = 0
  while i < len(argv):
    arg = argv[i]
    i += 1
    name, eq, value = arg.partition("=")
    option = options.get(name)
    if option is None:
      out.append(arg)
      continue
    if not eq:
      if i < len(argv) and argv[i].strip().lower() in TRUE + FALSE:
        value = argv[i]
        i += 1
      else:
        out.append(arg)  # the plain flag
        continue
    word = value.strip().lower()
    if word not in TRUE + FALSE:
      parser.error(f"{name} takes true or false, got {value!r}")
    target = option.sets if word in TRUE else not option.sets
    flag = option.on if target else option.off
    if flag is not None:
      out.append(flag)
    elif target != option.default:
      parser.error(f"{name}={value} cannot be expressed: the job has no flag for it")
  return out


def _given(argv: Sequence[str], options: Sequence[str]) -> bool:
  return any(a == o or a.startswith(o + "=") for a in argv for o in options)


def with_defaults(argv: Sequence[str]) -> List[str]:
  """``argv`` plus ``--sdk_container_image=$READTWICE_SDK_CONTAINER_IMAGE`` when that is set
  and ``argv`` names no worker image, and, in a launcher image (``FLEX_TEMPLATE_PYTHON_PY_FILE``
  set), ``--runner=DataflowRunner`` when ``argv`` names no runner: a template launch must never
  run the job on the launcher VM."""
  out = list(argv)
  image = os.environ.get(SDK_IMAGE_ENV, "").strip()
  if image and not _given(out, _IMAGE_OPTIONS):
    out.append(f"--sdk_container_image={image}")
  if os.environ.get("FLEX_TEMPLATE_PYTHON_PY_FILE"):
    if not _given(out, ("--runner",)):
      out.append("--runner=DataflowRunner")
    if not _given(out, ("--wait", "--nowait")):
      out.append("--nowait")  # a Flex Template program must not wait for its job
  return out


@contextlib.contextmanager
def _replaced(module, **attrs) -> Iterator[None]:
  saved = {name: getattr(module, name) for name in attrs}
  for name, value in attrs.items():
    setattr(module, name, value)
  try:
    yield
  finally:
    for name, value in saved.items():
      setattr(module, name, value)


def check_job(job: str) -> None:
  """Raises ValueError (one line naming the deployed jobs) unless ``job`` is one of
  ``pipelines.JOBS``."""
  from pipelines import JOBS  # pylint: disable=g-import-not-at-top
  if job not in JOBS:
    raise ValueError(f"unknown job {job!r}; one of {', '.join(JOBS)}")


def main(job: str, argv: Optional[Sequence[str]] = None) -> int:
  """Runs the job ``python -m pipelines <job>`` (``pipelines.runner.dataset_main``) as a Flex
  Template launch; returns the exit status.  ValueError if ``job`` is not deployed."""
  check_job(job)
  from pipelines import flags, runner  # pylint: disable=g-import-not-at-top
  argv = list(sys.argv[1:] if argv is None else argv)
  real_parse = flags.parse

  def parse(parser, args=None) -> Tuple[Any, List[str]]:
    # The job's own parser is only known here: booleans need it to be translated.
    args = list(sys.argv[1:] if args is None else args)
    return real_parse(parser, with_defaults(translate_bools(parser, args)))

  with _replaced(flags, parse=parse):
    return runner.dataset_main(job, argv)
