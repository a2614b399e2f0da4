"""TF-free Beam pipelines that turn corpora into ReadTwice TFRecords.

The datasets are registered in :mod:`pipelines.datasets`; ``python -m pipelines <dataset>`` runs
one (:mod:`pipelines.runner`), from Python ``runner.dataset_main`` and ``runner.run_dataset``.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
  # ``JOBS``: the datasets deployed as Dataflow Flex Templates (what deploy/dataflow, its checks
  # and the benchmarks iterate over), read from the registry when first asked for.
  if name == "JOBS":
    from pipelines import datasets  # pylint: disable=g-import-not-at-top
    return datasets.deployed_jobs()
  raise AttributeError(f"module 'pipelines' has no attribute {name!r}")
