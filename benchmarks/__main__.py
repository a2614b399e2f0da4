"""``python -m benchmarks``: every benchmark and experiment, listed by subject and run by name.

  python -m benchmarks --list               # each case: its subject and what it measures
  python -m benchmarks <case> [flags ...]   # runs it as python -m benchmarks[.experiments].<case>

A case is a module of this package, or of its ``experiments`` folder, with a ``main`` (its flags:
``python -m benchmarks <case> --help``); the last line it prints is its JSON figure.
:data:`SUBJECTS` files each case under one subject (``tests/benchmarks/test_harness.py`` fails
on a module that is not filed, or a filed name that is no module).  The experiments (the memory
studies, ``benchmarks/experiments/``) answer questions about the model rather than holding a
performance target; they are filed under :data:`EXPERIMENTS`.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import runpy
import sys
from typing import Dict, List, Optional, Sequence

PROG = "python -m benchmarks"
HERE = os.path.dirname(os.path.abspath(__file__))
FOLDERS = ("", "experiments")  # where cases live, as sub-packages of this one ("": itself)
NOT_CASES = ("__init__", "__main__", "common")
EXPERIMENTS = "experiments (the memory studies)"

SUBJECTS: Dict[str, List[str]] = {
    "pipeline throughput": ["all", "hotpotqa_throughput", "wikipedia_throughput",
                            "wikitext_parsers", "ner_throughput", "scale_out"],
    "pipeline cost (the estimate's figures)": ["job_cost", "annotation_cost"],
    "pipeline memory": ["pipeline_memory", "read_memory", "narrativeqa_memory"],
    "pipeline quality": ["linker_quality", "oracle", "segment_windows"],
    "model": ["model_step", "input_pipeline", "train_cost", "book_memory"],
    EXPERIMENTS: ["memory_gap", "memory_ladder", "memory_use", "memory_probe", "memory_corpus"],
}


def folder_of(name: str) -> Optional[str]:
  """The folder of :data:`FOLDERS` holding the module ``name`` (None: none does)."""
  if not name.isidentifier() or name in NOT_CASES:
    return None
  return next((f for f in FOLDERS if os.path.isfile(os.path.join(HERE, f, f"{name}.py"))), None)


def module_of(name: str) -> str:
  """The dotted module of the case ``name``."""
  folder = folder_of(name)
  return "benchmarks." + (f"{folder}." if folder else "") + name


def is_case(name: str) -> bool:
  """Whether ``name`` is a module of this package (or of a folder of :data:`FOLDERS`) with a
  top-level ``def main``."""
  if folder_of(name) is None:
    return False
  return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in _tree(name).body)


def cases() -> List[str]:
  """Every case of this package and its folders, sorted."""
  names = set()
  for folder in FOLDERS:
    path = os.path.join(HERE, folder)
    if os.path.isdir(path):
      names.update(os.path.splitext(n)[0] for n in os.listdir(path) if n.endswith(".py"))
  return sorted(n for n in names if is_case(n))


def _tree(case: str) -> ast.Module:
  with open(os.path.join(HERE, folder_of(case) or "", f"{case}.py"), encoding="utf-8") as f:
    return ast.parse(f.read())


def summary(case: str, width: int = 76) -> str:
  """The first sentence of ``case``'s docstring, on one line of at most ``width`` characters,
  without reST markup."""
  doc = " ".join((ast.get_docstring(_tree(case)) or "").split())
  doc = re.sub(r":\w+:`([^`]*)`", r"\1", doc).replace("``", "")
  ends = [i for i in (doc.find(". "), doc.find("? ")) if i >= 0]
  doc = doc[:min(ends) + 1] if ends else doc
  return doc if len(doc) <= width else doc[:width - 3].rsplit(" ", 1)[0] + " ..."


def listing() -> str:
  lines = []
  for subject, names in SUBJECTS.items():
    lines.append(f"{subject}:")
    lines += [f"  {name:<22}{summary(name)}" for name in names]
  lines.append(f"\n{PROG} <case> --help: a case's flags")
  return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if not __package__:  # python benchmarks/__main__.py: the cases are modules of the package
    print(f"{PROG}: error: run it as {PROG} [--list | <case> ...] from the repository",
          file=sys.stderr)
    return 2
  if not argv or argv[0] in ("-h", "--help"):
    print(f"usage: {PROG} [--list | <case> [flags ...]]\n\n" + __doc__.split("\n\n")[1].rstrip()
          + "\n\n" + listing(), file=sys.stdout if argv else sys.stderr)
    return 0 if argv else 2
  if argv[0] == "--list":
    print(listing())
    return 0
  case, rest = argv[0], argv[1:]
  if not is_case(case):  # (only then are all the cases read, for the hint)
    near = difflib.get_close_matches(case, cases(), n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    print(f"{PROG}: error: unknown case {case!r}{hint}; {PROG} --list lists them",
          file=sys.stderr)
    return 2
  saved, sys.argv = sys.argv, [f"{PROG}.{case}"] + rest
  try:
    runpy.run_module(module_of(case), run_name="__main__", alter_sys=True)
  except SystemExit as e:
    return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
  finally:
    sys.argv = saved
  return 0


if __name__ == "__main__":
  sys.exit(main())
