"""User errors: bad flags, inputs or outputs, reported as one line instead of a traceback.

A ``UserError`` raised on the launcher is caught by the job's ``main``.  One raised inside the
pipeline (on a worker) reaches the launcher wrapped by the runner; its message carries
:data:`MARKER` so that :func:`user_error_message` can still find the one line to show.
"""

from __future__ import annotations

import errno
import re
import sys
from typing import Optional

from schemas import cli as schema_cli

MARKER = "[readtwice user error] "
_BEAM_SUFFIX = re.compile(r"( \[while running '[^']*'\])+$")  # Beam appends the step name


class UserError(Exception):
  """The user's flags, inputs or outputs are unusable; ``str()`` starts with MARKER."""

  def __init__(self, message: str):
    # A runner may re-create the exception from its text (Beam appends "[while running ...]"):
    # keep one marker, and the message without it.
    message = message[len(MARKER):] if message.startswith(MARKER) else message
    message = _BEAM_SUFFIX.sub("", message)
    super().__init__(MARKER + message)
    self.message = message


def user_error_message(exc: BaseException) -> Optional[str]:
  """The one-line message of a UserError in ``exc``, its causes, or its text (for errors that
  a runner re-raised as another type); None if there is none."""
  seen = set()
  e: Optional[BaseException] = exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, UserError):
      return e.message
    text = str(e)
    i = text.find(MARKER)
    if i >= 0:
      rest = text[i + len(MARKER):]
      return _BEAM_SUFFIX.sub("", rest.splitlines()[0].rstrip(" '\"\\")) if rest else ""
    e = e.__cause__ or e.__context__
  return None


def disk_full_message(path: str) -> str:
  return f"no space left on device writing {path}; free space and rerun"


def is_disk_full(exc: BaseException) -> bool:
  """Whether ``exc`` (its causes, a Beam ``BeamIOError``'s per-file exceptions, or its text,
  for an error a runner re-raised as another type) is a full disk (ENOSPC, or EDQUOT: a
  quota)."""
  seen = set()
  todo = [exc]
  while todo:
    e = todo.pop()
    if e is None or id(e) in seen:
      continue
    seen.add(id(e))
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
      return True
    if "[Errno 28]" in str(e) or "No space left on device" in str(e):
      return True
    details = getattr(e, "exception_details", None)
    if isinstance(details, dict):
      todo += [d for d in details.values() if isinstance(d, BaseException)]
    todo += [e.__cause__, e.__context__]
  return False


def exit_quietly_on_stop_signals(prog: str) -> None:
  """Until a job's own handlers take over (:func:`pipelines.runner.run_main`): Ctrl-C or
  SIGTERM while Python imports Beam and parses the flags is one line (exit 130 / 143)."""
  schema_cli.exit_quietly_on_stop_signals(prog, "before the job started")


def _released_twice(text: str) -> bool:
  """Whether ``text`` is the traceback of Beam's worker releasing a bundle processor that was
  already discarded (``KeyError: 'bundle_<n>'`` from ``bundle_processor_cache.release``): seen
  when a job with several local worker processes fails on a user error and its bundles are torn
  down; the instruction's failure reaches the job, which reports the job's own error."""
  last = text.rstrip().rsplit("\n", 1)[-1]
  return ("bundle_processor_cache.release" in text
          and re.fullmatch(r"KeyError: 'bundle_\d+'", last) is not None)


class _WorkerStderr:
  """``sys.stderr`` of a Beam SDK worker process: drops the traceback the worker prints for a
  user error (``print(traceback, file=sys.stderr)`` in Beam's ``sdk_worker``, unconditionally),
  since the job prints that error as one line (and the worker still logs it), and the one of a
  bundle torn down twice after it (:func:`_released_twice`); everything else passes through."""

  def __init__(self, stream):
    self._stream = stream
    self._dropped = False

  def write(self, text: str) -> int:
    if text.startswith("Traceback (most recent call last)") and (
        MARKER in text or _released_twice(text)):
      self._dropped = True  # and the newline print() writes after it
      return len(text)
    if self._dropped and text == "\n":
      self._dropped = False
      return len(text)
    self._dropped = False
    return self._stream.write(text)

  def __getattr__(self, name):
    return getattr(self._stream, name)


def _quiet_user_errors_in_sdk_worker() -> None:
  """Installs :class:`_WorkerStderr` when this module is imported in a Beam SDK worker process
  (``python -m apache_beam.runners.worker.sdk_worker_main``, as the local multi_processing
  runner and Dataflow start them): it is imported there with the job's DoFns."""
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  if (getattr(spec, "name", None) == "apache_beam.runners.worker.sdk_worker_main"
      and not isinstance(sys.stderr, _WorkerStderr)):
    sys.stderr = _WorkerStderr(sys.stderr)


_quiet_user_errors_in_sdk_worker()
