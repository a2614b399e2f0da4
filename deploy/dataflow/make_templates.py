"""Writes the Flex Template metadata of every deployed pipeline (``pipelines.JOBS``, the registry's
deployed datasets), generated from the job's real command-line parser so that the parameters
cannot drift from the flags.  Nothing is committed: the build generates them
(deploy/dataflow/cloudbuild.yaml, docs/dataflow.md).

  python deploy/dataflow/make_templates.py --out_dir DIR   # DIR/<job>.json and DIR/jobs.txt

``DIR/jobs.txt`` names the jobs, one a line (``deploy/dataflow/register_templates.sh DIR ...``
registers one template per line with ``gcloud dataflow flex-template build --metadata-file
DIR/<job>.json``).

The parser is the one ``python -m pipelines <job>`` builds (``pipelines.runner.dataset_main``,
through ``job_main``: the shared flags plus the job's own), taken just before it parses
anything.  Each visible flag is one
parameter (``--noname`` spellings are the same parameter's ``false``); Beam's pipeline options
are not parameters: Dataflow passes them itself (``gcloud dataflow flex-template run
--parameters sdk_container_image=...,resource_hints=...`` also reaches them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

JOBS_FILE = "jobs.txt"  # in --out_dir: the jobs, one a line

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


def write_templates(out_dir: str) -> List[str]:
  """Writes ``out_dir/<job>.json`` for every job of ``pipelines.JOBS`` and ``out_dir/jobs.txt``
  (the jobs, one a line, in registry order); returns the jobs."""
  from pipelines import JOBS  # pylint: disable=g-import-not-at-top
  jobs = list(JOBS)
  texts = {job: render(job) for job in jobs}  # every parser first: no partial folder on error
  os.makedirs(out_dir, exist_ok=True)
  for job, text in texts.items():
    with open(os.path.join(out_dir, f"{job}.json"), "w", encoding="utf-8") as f:
      f.write(text)
  with open(os.path.join(out_dir, JOBS_FILE), "w", encoding="utf-8") as f:
    f.write("".join(f"{job}\n" for job in jobs))
  return jobs


def main(argv: Optional[Sequence[str]] = None) -> int:
  ap = argparse.ArgumentParser(prog="make_templates.py",
                               description=__doc__.split("\n\n")[0])
  ap.add_argument("--out_dir", required=True,
                  help="folder to write <job>.json (one per job of pipelines.JOBS) and "
                       f"{JOBS_FILE} into (created if missing)")
  argv = sys.argv[1:] if argv is None else list(argv)
  if "--check" in argv:  # the committed folder it compared is gone
    ap.error("--check is gone: the templates are generated at build time, not committed "
             "(--out_dir DIR writes them)")
  args = ap.parse_args(argv)
  if importlib.util.find_spec("pipelines") is None:
    ap.error("the readtwice package is not importable here: pip install -e '.[pipeline]' "
             "first (deploy/dataflow/cloudbuild.yaml runs this in the worker image)")
  jobs = write_templates(args.out_dir)
  print(f"wrote {len(jobs)} templates to {args.out_dir}: {' '.join(jobs)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
