"""Writes ``deploy/dataflow/templates/<job>.json``: the Flex Template metadata of every pipeline,
generated from the job's real command-line parser so that the parameters cannot drift from the
flags.

  python deploy/dataflow/make_templates.py           # (re)write the files, one per job
  python deploy/dataflow/make_templates.py --check   # exit 1 naming each file that differs

The parser is the one ``python -m pipelines <job>`` builds (``pipelines.runner.dataset_main``,
through ``job_main``: the shared flags plus the job's own), taken just before it parses
anything.  Each visible flag is one
parameter (``--noname`` spellings are the same parameter's ``false``); Beam's pipeline options
are not parameters: Dataflow passes them itself (``gcloud dataflow flex-template run
--parameters sdk_container_image=...,resource_hints=...`` also reaches them).  ``gcloud dataflow
flex-template build --metadata-file`` reads these files.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(HERE, "templates")

# Flags naming files or folders: on Dataflow they must be Cloud Storage paths (the launcher VM
# and the workers share nothing else).
PATH_FLAGS = frozenset({"input", "output_dir", "vocab_file", "merges_file", "entities_dir",
                        "nl_cache_dir", "evidence_dir", "index", "documents", "summaries",
                        "stories_dir"})
GCS_REGEX = r"^gs://[^\n\r]+$"
INT_REGEX = r"^-?[0-9]+$"
FLOAT_REGEX = r"^-?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+)?$"
BOOL_REGEX = r"^(true|false)$"
# Flags that argparse leaves optional but the job refuses to run without (it says so in one
# line); the template marks them required.
REQUIRED = {"triviaqa": frozenset({"evidence_dir"})}


class _Captured(Exception):
  pass


def job_parser(job: str) -> argparse.ArgumentParser:
  """The parser ``python -m pipelines <job>`` builds (``pipelines.runner.dataset_main``), taken
  when it is about to parse."""
  if REPO not in sys.path:
    sys.path.insert(0, REPO)
  from pipelines import flags, runner  # pylint: disable=g-import-not-at-top

  captured: Dict[str, argparse.ArgumentParser] = {}

  def parse(parser, argv=None):
    del argv
    captured["parser"] = parser
    raise _Captured()

  real = flags.parse
  flags.parse = parse
  try:
    runner.dataset_main(job, [])
  except _Captured:
    pass
  finally:
    flags.parse = real
  if "parser" not in captured:
    raise RuntimeError(f"python -m pipelines {job} did not build its parser through "
                       f"pipelines.flags")
  return captured["parser"]


def flag_actions(parser: argparse.ArgumentParser) -> List[argparse.Action]:
  """The parser's visible flags, in order (``--help`` and hidden spellings left out)."""
  return [a for a in parser._actions  # pylint: disable=protected-access
          if a.option_strings and a.help != argparse.SUPPRESS
          and not isinstance(a, argparse._HelpAction)]  # pylint: disable=protected-access


def flag_name(action: argparse.Action) -> str:
  long = [s for s in action.option_strings if s.startswith("--")]
  return long[0][2:]


def is_bool(action: argparse.Action) -> bool:
  return action.nargs == 0 and isinstance(action.const, bool)


def help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
  """The flag's ``--help`` text (``%(default)s`` and the like filled in) on one line."""
  params: Dict[str, Any] = dict(vars(action), prog=parser.prog)
  if action.choices is not None:
    params["choices"] = ", ".join(map(str, action.choices))
  text = (action.help or "") % params
  return re.sub(r"\s+", " ", text).strip()


def _value(value: Any) -> str:
  return ("true" if value else "false") if isinstance(value, bool) else str(value)


def parameter(parser: argparse.ArgumentParser, action: argparse.Action,
              required: frozenset = frozenset()) -> Dict[str, Any]:
  """One Flex Template parameter (Dataflow's ParameterMetadata) for one flag; ``required``:
  names to mark required although argparse does not."""
  name = flag_name(action)
  p: Dict[str, Any] = {"name": name, "label": name.replace("_", " ").capitalize(),
                       "helpText": help_text(parser, action),
                       "isOptional": not (action.required or name in required)}
  if is_bool(action):
    p["paramType"] = "BOOLEAN"
    p["regexes"] = [BOOL_REGEX]
  elif action.choices is not None:
    p["paramType"] = "ENUM"
    p["enumOptions"] = [{"value": str(c), "label": str(c)} for c in action.choices]
    p["regexes"] = ["^(" + "|".join(re.escape(str(c)) for c in action.choices) + ")$"]
  else:
    p["paramType"] = "TEXT"
    regex = {int: INT_REGEX, float: FLOAT_REGEX}.get(action.type)
    if regex is None and name in PATH_FLAGS:
      regex = GCS_REGEX
    if regex is not None:
      p["regexes"] = [regex]
  if action.default is not None and not action.required:
    p["defaultValue"] = _value(action.default)
  return p


def metadata(job: str) -> Dict[str, Any]:
  """The Flex Template metadata of ``python -m pipelines <job>``."""
  parser = job_parser(job)
  summary = re.sub(r"\s+", " ", parser.description or job).strip()  # the dataset's description
  return {"name": f"readtwice-{job}",
          "description": f"{summary} (readtwice: python -m pipelines {job})",
          "parameters": [parameter(parser, a, REQUIRED.get(job, frozenset()))
                         for a in flag_actions(parser)]}


def render(job: str) -> str:
  return json.dumps(metadata(job), indent=2, ensure_ascii=False) + "\n"


def template_path(job: str) -> str:
  return os.path.join(TEMPLATES, f"{job}.json")


def main(argv: Optional[Sequence[str]] = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--check", action="store_true",
                  help="write nothing; exit 1 if a committed template differs")
  args = ap.parse_args(argv)
  if REPO not in sys.path:
    sys.path.insert(0, REPO)
  from pipelines import JOBS  # pylint: disable=g-import-not-at-top
  stale = []
  for job in JOBS:
    text, path = render(job), template_path(job)
    try:
      with open(path, encoding="utf-8") as f:
        current: Optional[str] = f.read()
    except FileNotFoundError:
      current = None
    if current == text:
      continue
    stale.append(os.path.relpath(path, REPO))
    if not args.check:
      os.makedirs(TEMPLATES, exist_ok=True)
      with open(path, "w", encoding="utf-8") as f:
        f.write(text)
  if args.check and stale:
    print("out of date (run python deploy/dataflow/make_templates.py): " + ", ".join(stale),
          file=sys.stderr)
    return 1
  print(("wrote " + ", ".join(stale)) if stale and not args.check else "templates up to date")
  return 0


if __name__ == "__main__":
  sys.exit(main())
