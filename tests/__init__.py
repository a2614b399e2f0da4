"""Tests mirror the packages: tests/pipelines (datasets/, beam/, sources/, text/, entities/,
inspector/), tests/model (tasks/, layers/, evaluation/), tests/schemas, tests/synthetic,
tests/deploy, tests/benchmarks; tests/golden holds the byte-identity check of every job's
outputs, and the files at this level check contracts that cross packages (bad inputs, the
command-line contract)."""

import os
import pathlib
from typing import List

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository's root folder


def files_under(directory) -> List[str]:
  """Every path under ``directory`` (files and folders, hidden ones included), relative,
  sorted."""
  out = []
  for root, dirs, files in os.walk(directory):
    out += [os.path.relpath(os.path.join(root, n), directory) for n in files + dirs]
  return sorted(out)


def tagged_processes(variable: str, tag: str) -> List[int]:
  """The live processes whose environment holds ``<variable>=<tag>`` (a command started with
  it, and its workers)."""
  found = []
  for pid in os.listdir("/proc"):
    if not pid.isdigit():
      continue
    try:
      with open(f"/proc/{pid}/environ", "rb") as f:
        if f"{variable}={tag}".encode() in f.read().split(b"\0"):
          found.append(int(pid))
    except OSError:
      continue
  return found
