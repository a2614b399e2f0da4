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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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
class FakeInput:
  """A generated input of a dataset in its official layout, which the spec's
  ``fake_input(root, scale)`` writes under ``root``: the command-line arguments that read it
  (``argv``; :meth:`DatasetSpec.options_for` gives the dataset's options object for them).  Scale
  1.0 is an input that one local run takes ~10-30 s of on 2 cores (``python -m benchmarks all``'s
  default); smaller scales write fewer documents, and below one document shorter ones."""
  input: str                   # --input: the file or glob
  args: Tuple[str, ...] = ()   # the job's other flags that it needs (e.g. --evidence_dir D)

  @property
  def argv(self) -> List[str]:
    return ["--input", self.input, *self.args]


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
  (the folder's ``cost.py``).  ``fake_input(root, scale)`` writes a generated input and returns
  its :class:`FakeInput` (the folder's ``fake_input.py``): what the benchmarks and the estimate's
  calibration run the job on; :meth:`options_for` gives the options of its arguments.
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
  fake_input: Optional[Callable[[str, float], FakeInput]] = None

  @property
  def model_task(self) -> str:
    return self.task or self.name

  def options_for(self, argv: Sequence[str]) -> Any:
    """The options object ``python -m pipelines <name> ARGV`` builds from the dataset's own flags
    in ``argv`` (the others are left alone); None for a dataset without options."""
    if self.options_from_args is None:
      return None
    from schemas import cli  # pylint: disable=g-import-not-at-top
    parser = cli.Parser(f"pipelines {self.name}", self.summary, self.example)
    if self.add_flags is not None:
      self.add_flags(parser.add_argument_group(f"{self.name} settings"))
    args, _ = parser.parse_known_args(list(argv))
    return self.options_from_args(args)

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
