"""The registry of datasets: each dataset is one folder, ``pipelines/datasets/<name>/``, whose
``dataset`` module declares a :class:`DatasetSpec` named ``spec``; one generic job runs any of
them (``python -m pipelines <name>``, :mod:`pipelines.runner`).

A dataset folder holds its reader (source format -> :class:`pipelines.document.Document`), the
Beam stages and text rules only it needs, its options and flags, and its spec; the stages every
dataset shares live in ``pipelines/beam/`` and ``pipelines/text/``.  Registering a dataset is one
line of :data:`DATASETS`.  The folders are imported lazily, on :func:`get`, so a job imports only
its own dataset's code (and ``python -m pipelines books`` never loads HotpotQA's or TriviaQA's).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Dict, Optional, Tuple

# The registered datasets, in the order ``python -m pipelines --help`` lists them: one line each.
DATASETS = (
    "hotpotqa",
    "wikipedia",
    "books",
    "triviaqa",
    "narrativeqa",
    "jsonl_qa",
)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """What the generic job needs to know of a dataset.

  ``build(p, paths, output_dir, config, header, reshuffle, options)`` adds the dataset's steps
  to the Beam pipeline ``p`` (input paths, output dir, :class:`pipelines.beam.config.
  RecordsConfig`, the manifest header, whether to spread documents over workers, the options
  object) and returns the PCollection holding the manifest.  ``add_flags(group)`` adds the
  dataset's own flags to an argparse group; ``options_from_args(args)`` turns them into the
  options object (a ValueError is a usage error), which is recorded in the manifest's config
  (``describe()``, or its dataclass fields).  ``cost`` is what ``--estimate`` knows of the job
  (the folder's ``cost.py``).
  """
  name: str
  description: str  # --help's description; its first line is the one-line summary
  example: str      # the command line(s) --help shows
  build: Callable[..., Any]
  add_flags: Optional[Callable[[Any], None]] = None
  options_from_args: Optional[Callable[[Any], Any]] = None
  outputs: Tuple[str, ...] = ()  # files the job writes besides the common ones (--overwrite)
  task: str = ""    # the model task its records are for; "" means the dataset's name
  deployed: bool = True  # has a Dataflow Flex Template under deploy/dataflow/
  # What --estimate needs (pipelines.estimate.costs.DatasetCost: the measured cost, what an MB
  # of work is, side inputs, words per MB), from the folder's cost.py; None: the estimate uses
  # the dearest measured dataset's cost and says so.
  cost: Any = None

  @property
  def model_task(self) -> str:
    return self.task or self.name

  @property
  def summary(self) -> str:
    """The description on one line."""
    return " ".join(self.description.split())


def get(name: str) -> DatasetSpec:
  """The spec of the registered dataset ``name`` (its folder is imported now); KeyError if
  there is none."""
  if name not in DATASETS:
    raise KeyError(name)
  spec = importlib.import_module(f"pipelines.datasets.{name}.dataset").spec
  if spec.name != name:
    raise ValueError(f"pipelines/datasets/{name} declares the dataset {spec.name!r}")
  return spec


def specs() -> Dict[str, DatasetSpec]:
  """Every registered dataset's spec, in registration order (imports them all)."""
  return {name: get(name) for name in DATASETS}


def deployed_jobs() -> Tuple[str, ...]:
  """The datasets with a Dataflow Flex Template (``pipelines.JOBS``: what deploy/ builds)."""
  return tuple(name for name, spec in specs().items() if spec.deployed)
