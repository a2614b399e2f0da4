"""Flex Template entry point of `python -m pipelines.books` (FLEX_TEMPLATE_PYTHON_PY_FILE of the
launcher image built with `--build-arg JOB=books`; see flex_launcher.py)."""

import sys

import flex_launcher

if __name__ == "__main__":
  sys.exit(flex_launcher.main("books"))
