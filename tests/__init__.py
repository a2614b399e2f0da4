"""Tests mirror the packages: tests/pipelines (datasets/, beam/, sources/, text/, entities/,
inspector/), tests/model (tasks/, layers/, evaluation/), tests/schemas, tests/synthetic,
tests/deploy, tests/benchmarks; tests/golden holds the byte-identity check of every job's
outputs, and the files at this level check contracts that cross packages (bad inputs, the
command-line contract)."""

import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository's root folder
