"""The test-only fault hook of every command (pipeline jobs and model commands; TF-free): ``READTWICE_FAULT_AT=<phase>:<action>[:group]`` makes a job fault at
one phase, so that tests hit each phase of a run reliably (read in this one place; unset, every
call is one dictionary lookup and does nothing).

Phases (where :func:`fault_point` is called):

* ``start``: in the launcher, after the output dir is claimed and prepared, before the
  pipeline runs;
* ``read``: on a worker, while an input file is read (the JSON read stage);
* ``shards``: on a worker, while a record shard is written (its temporary file open, part of
  it written, not yet renamed); ``side``: the same for a side file (documents, dead letters,
  skipped);
* ``manifest``: while ``manifest.json`` is written (its temporary file written, not renamed);
* ``completed``: after ``manifest.json`` is in place, before ``COMPLETED`` is written;
* model commands (:mod:`model.faults`): ``build`` (model, data and checkpoint built, before the
  first step), ``train`` (after a train loop, before its log and checkpoint), ``checkpoint`` (a
  checkpoint's files written, its ``checkpoint`` state not yet), ``predict`` (the predictions'
  temporary file written, not renamed), ``export`` (the SavedModel written, ``export.json``
  not yet).

Actions: ``SIGTERM`` / ``SIGINT`` send that signal to the launcher (the process that ran
:func:`arm`; with ``:group``, to its process group, as a terminal's Ctrl-C does, workers
included), then, on a worker, wait up to 30 s for the launcher to stop it; ``ENOSPC`` raises
``OSError(ENOSPC)`` there (every time, as a full disk would).  A signal is sent once per
process.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from typing import Optional

ENV = "READTWICE_FAULT_AT"
_PID_ENV = "READTWICE_FAULT_PID"  # the launcher's pid, inherited by local worker processes
# Pipeline jobs: start, read, shards, side, manifest, completed; model commands: build, train,
# checkpoint, predict, export.
PHASES = ("start", "read", "shards", "side", "manifest", "completed",
          "build", "train", "checkpoint", "predict", "export")
_fired = False


def arm() -> None:
  """In the launcher, before the pipeline starts: records its pid for the workers' signals."""
  if os.environ.get(ENV) and not os.environ.get(_PID_ENV):
    os.environ[_PID_ENV] = str(os.getpid())


def fault_point(phase: str, path: Optional[str] = None) -> None:
  """Faults here if ``READTWICE_FAULT_AT`` names ``phase`` (see the module doc)."""
  spec = os.environ.get(ENV)
  if not spec:
    return
  want, _, rest = spec.partition(":")
  if want != phase:
    return
  action, _, scope = rest.partition(":")
  if action == "ENOSPC":
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
  global _fired
  if _fired:
    return
  _fired = True
  signum = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}[action]
  launcher = int(os.environ.get(_PID_ENV) or os.getpid())
  if scope == "group":
    os.killpg(os.getpgid(launcher), signum)
  else:
    os.kill(launcher, signum)
  if launcher != os.getpid():  # a worker: stay in the phase until the launcher stops us
    time.sleep(30)
  else:  # the launcher's handler raises at the next instruction; give it one
    time.sleep(0.01)
