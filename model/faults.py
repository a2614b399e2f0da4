"""How the model commands end on a signal or a full disk: one line, nothing half-done.

:func:`command` wraps a command's ``main``:

* SIGTERM raises :class:`Terminated` in the main thread (``finally`` blocks run as for Ctrl-C)
  and ends the command with exit status 143; Ctrl-C (SIGINT) with 130;
* a full disk (``ENOSPC`` / ``EDQUOT``, as Python's ``OSError`` or TensorFlow's
  ``ResourceExhaustedError`` / ``UnknownError`` text "No space left on device") is one line
  naming the path being written (exit 1);
* in each case, and on any other failure, the cleanups registered with :func:`on_failure`
  run first: the trainer removes its half-written checkpoint (``ckpt-*_temp`` dirs and the
  files of a checkpoint newer than the ``checkpoint`` state) with
  :func:`remove_checkpoint_temp`, ``model.predict`` / ``model.export`` their partial output.

A later run is unaffected: the trainer also calls :func:`remove_checkpoint_temp` before it
builds, and resumes from the last complete checkpoint.

Test-only fault hook (:mod:`schemas.fault_hook`, shared with the pipelines):
``READTWICE_FAULT_AT=<phase>:<action>`` with action ``SIGTERM``, ``SIGINT`` (sent to this
process once) or ``ENOSPC`` (raised); phases, where :func:`fault_point` is called: ``build``
(model, data and checkpoint built, before the first step), ``train`` (after a train loop,
before its log and checkpoint), ``checkpoint`` (a checkpoint's files written, the
``checkpoint`` state not yet updated), ``predict`` (the predictions' temporary file written, not
yet renamed), ``export`` (the SavedModel written, ``export.json`` not yet).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import signal
import sys
import threading
from typing import Callable, Iterator, List, Optional

from schemas import cli
from schemas import fault_hook

EXIT_SIGINT = 130
EXIT_SIGTERM = 143

_FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXT = re.compile(r"(?:(\S+?)[;:] )?(No space left on device|Disk quota exceeded)")

# Cleanups of the running command (most recent first when run); registered only while a
# :func:`command` runs (the Python API leaves its failures to its caller).
_CLEANUPS: List[Callable[[], None]] = []
_ACTIVE = [0]
_STARTING = [False]  # inside starting(): the command loads its libraries, writes nothing


class Terminated(BaseException):
  """SIGTERM, raised in the main thread."""


FAULT_ENV = fault_hook.ENV
fault_point = fault_hook.fault_point  # the one hook (schemas/fault_hook.py)


@contextlib.contextmanager
def starting() -> Iterator[None]:
  """Wraps a command's import of its libraries (TensorFlow: seconds): a stop signal there is
  ``<prog>: error: terminated (SIGTERM) while starting; nothing was written``."""
  _STARTING[0] = True
  yield  # (a stop signal raised here leaves the flag set, for the command's message)
  _STARTING[0] = False


def on_failure(cleanup: Callable[[], None]) -> Callable[[], None]:
  """Registers ``cleanup`` to run if the command fails (signal, full disk, any error); returns
  it (pass it to :func:`done` once what it cleans up is complete)."""
  if _ACTIVE[0]:
    _CLEANUPS.append(cleanup)
  return cleanup


def done(cleanup: Callable[[], None]) -> None:
  """Unregisters ``cleanup`` (its output is complete)."""
  if cleanup in _CLEANUPS:
    _CLEANUPS.remove(cleanup)


def _run_cleanups() -> None:
  while _CLEANUPS:
    cleanup = _CLEANUPS.pop()
    try:
      cleanup()
    except Exception:  # pylint: disable=broad-except  (best effort; the first error is reported)
      pass


def _is_tf_error(e: BaseException) -> bool:
  tf = sys.modules.get("tensorflow")  # loaded by the command's work, not by this module
  return tf is not None and isinstance(e, tf.errors.OpError)


def full_disk_path(error: BaseException) -> Optional[str]:
  """``""`` or the path for an error (or one in its chain) that is a full disk, else None."""
  seen = set()
  e: Optional[BaseException] = error
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, OSError) and e.errno in _FULL:
      return e.filename or ""
    if isinstance(e, OSError) or _is_tf_error(e):
      m = _FULL_TEXT.search(str(getattr(e, "message", e)))
      if m:
        return m.group(1) or ""
    e = e.__cause__ or e.__context__
  return None


def _shown_path(path: str) -> str:
  """A temporary file shown as what the user knows: the checkpoint, output file or SavedModel
  dir being written."""
  for pattern in (r"(.*/ckpt-\d+)_temp(?:/.*)?$", r"(.*)\.tmp-\d+$",
                  r"(.*)/variables/variables_temp(?:/.*)?$"):
    m = re.match(pattern, path)
    if m:
      return m.group(1)
  return path


def remove_checkpoint_temp(model_dir: str) -> List[str]:
  """Deletes the half-written checkpoint state of ``model_dir`` (and of its ``best/``): the
  ``ckpt-*_temp*`` dirs and files TensorFlow writes a checkpoint into, and the files of a
  checkpoint newer than the one the ``checkpoint`` state names (written, never committed).
  Returns what it deleted."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (the commands' parsers are TF-free)
  removed = []
  for d in (model_dir, os.path.join(model_dir, "best")):
    if not tf.io.gfile.isdir(d):
      continue
    for path in tf.io.gfile.glob(os.path.join(d, "ckpt-*_temp*")):
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
      else:
        tf.io.gfile.remove(path)
      removed.append(path)
    latest = tf.train.latest_checkpoint(d)
    last = int(latest.rsplit("-", 1)[1]) if latest else 0
    for path in tf.io.gfile.glob(os.path.join(d, "ckpt-*.*")):
      m = re.match(r"ckpt-(\d+)\.(index|data-\d+-of-\d+)$", os.path.basename(path))
      if m and int(m.group(1)) > last:
        tf.io.gfile.remove(path)
        removed.append(path)
  return removed


def _fail(prog: str, message: str, status: int) -> int:
  print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
  return status


def _stop_while_starting(prog: str, what: str, status: int) -> int:
  """The one line of a stop signal while the command loads its libraries; its status.  In the
  command's own process (``python -m model.<command>``) the process exits with it at once
  (nothing has been written, the cleanups have run): CPython keeps one process-wide "unhandled
  KeyboardInterrupt" flag, set by any ``PyRun_*`` evaluation that a KeyboardInterrupt ends
  (also one an extension module runs while TensorFlow loads; see python/cpython gh-128130),
  and ends a process whose flag is set by killing itself with SIGINT, although the interrupt
  was handled here: a test saw status -2 after this line once in ~10 whole runs, under load."""
  _fail(prog, f"{what} while starting; nothing was written", status)
  if cli.module_command("model") == prog:
    sys.stdout.flush()
    os._exit(status)  # pylint: disable=protected-access
  return status


def command(module: str, trains: bool = False) -> Callable:
  """Decorates the ``main(argv=None) -> int`` of ``python -m <module>`` (see the module
  docstring); ``trains``: a rerun resumes from the last checkpoint (said in the messages)."""
  prog = cli.prog_of(module)
  rerun = ("; a rerun resumes from the last checkpoint" if trains else "")

  def wrap(main: Callable[..., int]) -> Callable[..., int]:
    @functools.wraps(main)
    def guarded(*args, **kwargs) -> int:
      previous = previous_int = None
      if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):
          del signum, frame
          raise Terminated()
        previous = signal.signal(signal.SIGTERM, handler)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # Ctrl-C: KeyboardInterrupt
          previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
      _CLEANUPS.clear()
      _ACTIVE[0] += 1
      _STARTING[0] = False
      try:
        status = main(*args, **kwargs)
        if status:
          _run_cleanups()
        return status
      except KeyboardInterrupt:
        _run_cleanups()
        if _STARTING[0]:
          return _stop_while_starting(prog, "interrupted (SIGINT)", EXIT_SIGINT)
        return _fail(prog, f"interrupted (Ctrl-C); partial outputs were removed{rerun}",
                     EXIT_SIGINT)
      except Terminated:
        _run_cleanups()
        if _STARTING[0]:
          return _stop_while_starting(prog, "terminated (SIGTERM)", EXIT_SIGTERM)
        return _fail(prog, f"terminated (SIGTERM); partial outputs were removed{rerun}",
                     EXIT_SIGTERM)
      except SystemExit:
        _run_cleanups()
        raise
      except BrokenPipeError:  # the output's reader went away (``| head -1``): quiet, exit 1
        _run_cleanups()
        if not cli.output_closed():  # another pipe's: an error, as before
          raise
        return cli.closed_pipe()
      except Exception as e:  # pylint: disable=broad-except
        _run_cleanups()
        path = full_disk_path(e)
        if path is None:
          raise
        where = f" writing {_shown_path(path)}" if path else ""
        return _fail(prog, f"no space left on device{where}; partial outputs were removed: "
                     f"free space and run the command again{rerun}", 1)
      finally:
        _ACTIVE[0] -= 1
        _CLEANUPS.clear()
        if previous is not None:
          signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
          signal.signal(signal.SIGINT, previous_int)
    return guarded
  return wrap
