"""The QA tasks, by name: :func:`get`, :func:`names`, and the task of a records dir.

One module per task, each defining one :class:`model.tasks.base.Task` that it registers on
import; registering a task is one import line below.  ``model.inference.decoding`` /
``model.predict`` (prediction formats), ``model.evaluate`` (official metrics, flags, gold files) and
``model.finetune`` (best-checkpoint metric, dev options) look tasks up here instead of naming
them.  Pure Python: importing the registry imports no TensorFlow and no NumPy.
"""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

from model.tasks import base
from model.tasks import hotpotqa  # noqa: F401  (registers the task)
from model.tasks import triviaqa  # noqa: F401
from model.tasks import narrativeqa  # noqa: F401
from model.tasks import extractive_qa  # noqa: F401

Task = base.Task


class UnknownTaskError(ValueError):
  """A task name that is not registered."""


def names() -> Tuple[str, ...]:
  """The registered task names, in registration order."""
  return tuple(t.name for t in base.registered())


def get(name: str) -> Task:
  """The task registered as ``name``; UnknownTaskError (one line) otherwise."""
  task = base.lookup(name)
  if task is None:
    raise UnknownTaskError(f"unknown task {name!r}; choose from {sorted(names())}")
  return task


def task_name(manifest: Mapping) -> Optional[str]:
  """The task of a records dir: its manifest's ``task``, else the ``job`` that wrote it (the
  pipelines name a ``task`` only where the model task differs from the job's name)."""
  return manifest.get("task") or manifest.get("job")
