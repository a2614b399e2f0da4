"""The command line every readtwice command shares (``python -m pipelines <dataset>``,
``python -m model.<command>``).

One contract, whatever the command:

* ``usage: python -m <module>``; ``--help`` ends with a real example whose flags parse.
* Flags are spelled out in full (no abbreviations).  An unknown flag is one line naming the
  closest real one (``--learnng_rate`` -> "did you mean --learning_rate?"), found *before* any
  "required" check, so a typo in a required flag is reported as the typo.  A flag that was
  renamed is refused with its new name (:data:`RENAMED`).
* Booleans are ``--x`` / ``--nox`` (:func:`bool_flag`).
* A flag that takes one value given twice is a usage error (the last would silently win);
  flags that take several values say so in their help (``action="append"``, or one
  comma-separated value).
* Outputs never touch inputs: a flag declared ``io=WRITES`` (an output file or dir) that is,
  contains or is inside a path of a flag declared ``io=READS`` / ``READS_GLOB`` (symlinks
  resolved) is refused with one line (exit 1) before anything is read or written
  (:meth:`Parser.check_outputs`).
* Usage errors: one ``<prog>: error: ...`` line on stderr, exit 2.  Unusable inputs or outputs:
  one such line, exit 1 (:func:`run_command`).  A traceback is a bug.
* TensorFlow's start-up banners (absl's "All log messages before absl::InitializeLog()", the
  oneDNN and CPU-feature notes) are not shown (:func:`quiet_tensorflow_banners`); anything else
  TensorFlow prints while loading still is.

TF-free: the pipelines import it too.

Why this module is over 500 lines: it is the command-line contract above in one place; every
command applies all of it, and its parts (parser, output checks, stop signals, stderr filter)
are small.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import importlib.abc
import importlib.util
import glob
import json
import os
import posixpath
import re
import shlex
import stat
import sys
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type

EXIT_USAGE = 2    # bad flags or flag values (argparse's convention)
EXIT_FAILURE = 1  # unusable inputs or outputs

# What a path flag does (``add_argument(..., io=...)``): outputs are checked against inputs.
READS = "reads"            # a file or dir the command reads (a list with action="append")
READS_GLOB = "reads_glob"  # one value: comma-separated paths or globs (``--input``)
WRITES = "writes"          # a file or dir the command writes

# Old spellings of flags -> the one name each concept has now, in every command.
RENAMED: Dict[str, str] = {
    "--train_dir": "--records_dir",
    "--dev_dir": "--dev_records_dir",
    "--eval_records_dir": "--dev_records_dir",
    "--dev_gold": "--gold",
    "--records": "--records_dir",
    "--no_shuffle": "--noshuffle",
    "--warmup_steps": "--warmup_fraction",
    "--no_meteor": "--nometeor",
}


def edit_distance(a: str, b: str) -> int:
  """Levenshtein distance."""
  previous = list(range(len(b) + 1))
  for i, ca in enumerate(a, 1):
    current = [i]
    for j, cb in enumerate(b, 1):
      current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
    previous = current
  return previous[-1]


def closest(name: str, candidates: Sequence[str]) -> Optional[str]:
  """The only candidate that ``name`` abbreviates, else the candidate fewest edits away among
  those difflib finds similar (ties: the earlier candidate, so a command's own flags before
  Beam's)."""
  started = [c for c in candidates if c.startswith(name)]
  if len(started) == 1:
    return started[0]
  found = difflib.get_close_matches(name, candidates, n=5, cutoff=0.6)
  if not found:
    return None
  order = {c: k for k, c in enumerate(candidates)}
  return min(found, key=lambda c: (edit_distance(name, c), order[c]))


def bool_flag(parser, name: str, default: bool, help_text: str) -> None:
  """``--name`` / ``--noname`` (absl style), both setting ``name``: a store_true /
  store_false pair (what ``deploy/dataflow/flex_launcher`` translates ``--name=false`` into).
  The help shows ``--name`` and the default."""
  group = parser.add_mutually_exclusive_group()
  group.add_argument(f"--{name}", dest=name, action="store_true", default=default,
                     help=f"{help_text} (" + ("" if default is None else
                                              f"default: {'--' if default else '--no'}{name}; ")
                          + f"--no{name} turns it off)")
  group.add_argument(f"--no{name}", dest=name, action="store_false", help=argparse.SUPPRESS)


# module -> how the user invoked it, when that is not ``python -m <module>`` (the ``readtwice``
# console command sets ``readtwice finetune`` for ``model.finetune``): usage, errors and the
# example then say what the user typed.
_SHOWN_AS: Dict[str, str] = {}


def show_as(module: str, prog: str) -> None:
  """Makes the command of ``module`` call itself ``prog`` in usage, error lines and its example
  (set before its parser is built)."""
  _SHOWN_AS[module] = prog


def prog_of(module: str) -> str:
  """How the command of ``module`` is shown: ``python -m <module>`` unless :func:`show_as`."""
  return _SHOWN_AS.get(module, f"python -m {module}")


class Parser(argparse.ArgumentParser):
  """argparse with the contract of this module.

  Args:
    module: the command's module (``model.finetune``); the prog is ``python -m <module>``.
    description: first line of ``--help``.
    example: one command line (``python -m <module> ...``) shown by ``--help``; the CLI
      contract test parses it.
    passthrough: returns the flag names that are not this parser's but are accepted anyway
      and returned by :meth:`parse` (Beam's pipeline options); called only when a flag is not
      ours.
    epilog: more text after the example.
  """

  def __init__(self, module: str, description: str, example: str,
               passthrough: Optional[Callable[[], Iterable[str]]] = None,
               epilog: str = ""):
    shown = example if example.startswith(" ") else f"  {example}"
    prog = prog_of(module)
    for spelling in {module, module.replace(" ", ".")}:  # python -m pipelines <name> = .<name>
      shown = shown.replace(f"python -m {spelling}", prog)
    super().__init__(prog=prog, description=description, allow_abbrev=False,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog=f"example:\n{shown.rstrip()}" + (f"\n\n{epilog}" if epilog else ""))
    self.module = module
    self.example = example
    self._passthrough = passthrough

  def error(self, message: str):  # noqa: D401 - argparse API
    self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

  def _print_message(self, message, file=None):  # --help, usage and error lines
    if message:
      file = file or sys.stderr
      try:
        file.write(message)
        file.flush()
      except BrokenPipeError:  # ``--help | head -1``: quiet, exit 1 (see closed_pipe)
        sys.exit(closed_pipe())
      except (AttributeError, OSError):  # as argparse: no usable stream, nothing to show
        pass

  def add_argument(self, *args, **kwargs):  # every flag has help; the default is shown
    return _with_default(super().add_argument, *args, **kwargs)

  def add_argument_group(self, *args, **kwargs):
    group = super().add_argument_group(*args, **kwargs)
    add = group.add_argument
    group.add_argument = lambda *a, **k: _with_default(add, *a, **k)
    return group

  def add_mutually_exclusive_group(self, **kwargs):
    group = super().add_mutually_exclusive_group(**kwargs)
    add = group.add_argument
    group.add_argument = lambda *a, **k: _with_default(add, *a, **k)
    return group

  def example_argv(self) -> List[str]:
    """The example's arguments (after ``python -m <module>``, ``python -m pipelines <name>`` for a
    dataset's job): its first command line, with backslash continuations joined."""
    lines = []
    for line in self.example.strip().splitlines():
      line = line.strip()
      if not line or line.startswith("("):
        break
      lines.append(line[:-1] if line.endswith("\\") else line)
      if not line.endswith("\\"):
        break
    words = shlex.split(" ".join(lines))
    command = ["python", "-m", *self.module.split()]
    if words[:len(command)] != command:
      raise ValueError(f"the example of {self.prog} does not start with {' '.join(command)}: "
                       f"{words[:len(command)]}")
    return words[len(command):]

  def own_flags(self) -> List[str]:
    return [s for s in self._option_string_actions if s.startswith("--")]

  def check_flags(self, argv: Sequence[str]) -> None:
    """Refuses unknown and renamed flags (exit 2, one line), before argparse's own checks."""
    actions = self._option_string_actions
    others: Optional[List[str]] = None
    skip = False
    given: Dict[int, str] = {}  # id(single-valued action) -> the spelling first given
    for token in argv:
      if skip:
        skip = False
        continue
      if token == "--":
        break
      if not token.startswith("--"):
        continue
      name = token.split("=", 1)[0]
      action = actions.get(name)
      if action is not None:
        skip = "=" not in token and action.nargs not in (0, "?", "*")  # its value follows
        if _single_valued(action):
          if id(action) in given:
            several = ("; give several as one comma-separated value"
                       if "comma-separated" in (action.help or "") else "")
            self.error(f"{name} given more than once; it takes one value (the last would "
                       f"silently win){several}")
          given[id(action)] = name
        continue
      if others is None:
        others = list(self._passthrough()) if self._passthrough else []
      if name in others:
        continue
      new = RENAMED.get(name)
      if new is not None and new in actions:
        self.error(f"{name} was renamed {new}; see --help")
      guess = closest(name, self.own_flags() + [f for f in others if f not in actions])
      self.error(f"unknown flag {name}" + (f" (did you mean {guess}?)" if guess else "")
                 + "; see --help")

  def parse_args(self, args=None, namespace=None):
    argv = list(sys.argv[1:] if args is None else args)
    self.check_flags(argv)
    parsed = super().parse_args(argv, namespace)
    self.check_outputs(parsed)
    return parsed

  def parse(self, argv: Optional[Sequence[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
    """``(flags, passthrough args)``: like ``parse_args`` but the arguments that are the
    passthrough flags' (with their values) are returned instead of refused."""
    argv = list(sys.argv[1:] if argv is None else argv)
    self.check_flags(argv)
    parsed, rest = self.parse_known_args(argv)
    self.check_outputs(parsed)
    return parsed, rest

  def io_paths(self, args: argparse.Namespace, role: str) -> List[Tuple[str, str]]:
    """``(flag, path)`` of every given flag declared ``io=role`` (lists flattened; a
    ``READS_GLOB`` value split at commas and expanded: its literal paths and the local files
    its globs match)."""
    found = []
    for action in self._actions:
      if getattr(action, "io", None) != role or not action.option_strings:
        continue
      value = getattr(args, action.dest, None)
      flag = action.option_strings[0]
      for item in (value if isinstance(value, (list, tuple)) else [value]):
        if item is None or not isinstance(item, str) or not item.strip():
          continue
        if role == READS_GLOB:
          found += [(flag, path) for path in _expand(item)]
        else:
          found.append((flag, item))
    return found

  def check_outputs(self, args: argparse.Namespace) -> None:
    """Refuses (one ``error:`` line, exit 1: an unusable output or input, before anything is
    read or written) an output flag's path that is, contains or is inside an input flag's path,
    and an input that is a FIFO, a device or a socket."""
    inputs = self.io_paths(args, READS) + self.io_paths(args, READS_GLOB)
    message = overlap(self.io_paths(args, WRITES), inputs) or not_regular(inputs)
    if message:
      self.exit(EXIT_FAILURE, f"{self.prog}: error: {message}\n")


def _single_valued(action: argparse.Action) -> bool:
  """Whether ``action`` stores one value (a second occurrence would replace the first)."""
  return type(action) is argparse._StoreAction and action.nargs is None  # pylint: disable=protected-access


_WILDCARDS = re.compile(r"[*?\[]")


def _expand(value: str) -> List[str]:
  """The paths a ``READS_GLOB`` value names: each comma-separated literal path, and each
  local file a glob part matches (a remote glob cannot be listed here; its matches are not
  checked)."""
  paths = []
  for part in (p.strip() for p in value.split(",")):
    if not part:
      continue
    if not _WILDCARDS.search(part):
      paths.append(part)
    elif "://" not in part:
      paths += sorted(glob.glob(part, recursive=True))
  return paths


def _where(path: str) -> str:
  """``path`` made comparable: local paths absolute with every symlink resolved; remote ones
  (``gs://...``) normalised."""
  if "://" in path:
    scheme, rest = path.split("://", 1)
    return f"{scheme}://" + posixpath.normpath("/" + rest).lstrip("/")
  return os.path.realpath(os.path.expanduser(path))


def _inside(path: str, root: str) -> bool:
  if "://" in root:
    return path.startswith(root.rstrip("/") + "/")
  return path.startswith(root.rstrip(os.sep) + os.sep)


def holds(outer: str, inner: str) -> bool:
  """Whether path ``inner`` is ``outer`` or lies inside it (symlinks resolved, ``gs://`` paths
  normalised)."""
  a, b = _where(outer), _where(inner)
  return b == a or _inside(b, a)


def overlap(outputs: Sequence[Tuple[str, str]], inputs: Sequence[Tuple[str, str]]
            ) -> Optional[str]:
  """The one-line refusal for the first ``(flag, path)`` output that is, contains or is inside
  an input (symlinks resolved), or None when every output lies apart from every input."""
  for out_flag, out in outputs:
    out_at = _where(out)
    for in_flag, source in inputs:
      in_at = _where(source)
      if out_at == in_at:
        relation = f"is {in_flag} {source}" + (f" (both {out_at})" if out != source else "")
      elif _inside(out_at, in_at):
        relation = f"is inside {in_flag} {source}"
      elif _inside(in_at, out_at):
        relation = f"contains {in_flag} {source}"
      else:
        continue
      return (f"{out_flag} {out} {relation}, which this command reads; write the output "
              "somewhere apart from the inputs")
  return None


def not_regular(inputs: Sequence[Tuple[str, str]]) -> Optional[str]:
  """The one-line refusal for the first ``(flag, path)`` input that exists locally but is
  neither a regular file nor a directory (a FIFO would block the read forever, ``/dev/zero``
  would fill memory), or None."""
  for flag, path in inputs:
    if "://" in path:
      continue
    try:
      mode = os.stat(path).st_mode
    except OSError:  # missing or unreadable: the command says so in its own words
      continue
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
      kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode)
              or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
      return f"{flag} {path} is {kind}, not a regular file or directory; give a file"
  return None


def _with_default(add, *args, **kwargs):
  io = kwargs.pop("io", None)
  if io not in (None, READS, READS_GLOB, WRITES):
    raise ValueError(f"io={io!r}: expected one of READS, READS_GLOB, WRITES")
  action = _add_with_default(add, *args, **kwargs)
  action.io = io
  return action


def _add_with_default(add, *args, **kwargs):
  if kwargs.get("help") is None and args and str(args[0]).startswith("--"):
    raise ValueError(f"flag {args[0]} has no help")
  text = kwargs.get("help")
  default = kwargs.get("default")
  shown = (text and text is not argparse.SUPPRESS and "default" not in text
           and kwargs.get("action") not in ("store_true", "store_false", "help", "version")
           and default is not None
           and not kwargs.get("required"))
  if shown:
    kwargs["help"] = f"{text} (default: %(default)s)"
  return add(*args, **kwargs)


def exit_quietly_on_stop_signals(prog: str, when: str = "while starting") -> None:
  """Until a command's own handlers take over: Ctrl-C or SIGTERM while Python imports the
  command's libraries (TensorFlow takes ~5 s) and parses its flags is one line,
  ``<prog>: error: interrupted (SIGINT) <when>; nothing was written``, and exit status 130 /
  143, no traceback (nothing has been written yet).  A SIGINT that is ignored (a background
  job) stays ignored.  Main thread only (elsewhere Python cannot set handlers)."""
  import signal  # pylint: disable=g-import-not-at-top

  def stop(signum, frame):
    del frame
    what = "interrupted (SIGINT)" if signum == signal.SIGINT else "terminated (SIGTERM)"
    try:  # to the real stderr, also while TensorFlow's import has fd 2 captured
      os.write(_real_stderr_fd[-1] if _real_stderr_fd else 2,
               f"{prog}: error: {what} {when}; nothing was written\n".encode())
    finally:
      os._exit(128 + signum)  # pylint: disable=protected-access

  stop.starting = True  # replaced by a command's own handlers when it runs
  try:
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
      signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
  except ValueError:  # not the main thread
    pass


def module_command(package: str) -> Optional[str]:
  """``python -m <module>`` when this process was started as ``python -m <module>`` for a
  module of ``package`` (``model.predict``), else None: an import by a library user, a notebook
  or a test runner (``python -m pytest``) is not that command."""
  argv = list(getattr(sys, "orig_argv", []))
  for i, word in enumerate(argv[:-1]):
    if word == "-m":
      module = argv[i + 1]
      return prog_of(module) if module.split(".")[0] == package else None
  return None


class CommandError(Exception):
  """An unusable input or output, found by a command: one line, exit 1."""


def output_closed() -> bool:
  """Whether stdout or stderr is a pipe whose reader went away (``poll``: ``POLLERR``): then a
  ``BrokenPipeError`` is about the command's own output (``| head``), not another pipe's (a
  worker's connection, a FIFO given as an output), which stays an error.  A stream without a
  file descriptor (captured by a test) counts as closed."""
  import select  # pylint: disable=g-import-not-at-top
  poll = select.poll()
  for stream in (sys.stdout, sys.stderr):
    try:
      poll.register(stream.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):
      return True
  return any(ev & select.POLLERR for _, ev in poll.poll(0))


def closed_pipe() -> int:
  """What every command does when the reader of its output went away (``... | head -1``):
  the Python docs' recipe (``signal`` module, "Note on SIGPIPE"): stdout -- and stderr, where
  that pipe is closed too (``2>&1 | head``) -- now write to ``/dev/null``, so that no later
  write and not the interpreter's final flush raises again; nothing is printed; returns the exit
  status, 1."""
  import select  # pylint: disable=g-import-not-at-top
  for stream in (sys.stdout, sys.stderr):
    try:
      fd = stream.fileno()
      if stream is sys.stderr:  # only when its reader is gone too (a pipe's write end: POLLERR)
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        if not any(ev & select.POLLERR for _, ev in poll.poll(0)):
          continue
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, fd)
      os.close(devnull)
    except (AttributeError, OSError, ValueError):  # no file descriptor (a captured stream)
      pass
  return EXIT_FAILURE


def run_command(prog: str, body: Callable[[], Any],
                user_errors: Tuple[Type[BaseException], ...] = (),
                message_of: Optional[Callable[[BaseException], Optional[str]]] = None) -> int:
  """Runs ``body``; a dict it returns is printed as the last stdout line (JSON), an int is
  the exit status (None: 0).

  ``CommandError``, ``user_errors``, and any exception for which ``message_of`` returns a
  message print one ``<prog>: error: <message>`` line on stderr and return 1; anything else
  is a bug and propagates with its traceback.
  """
  previous = _handle_stop_signals()
  try:
    result = body()
  except (KeyboardInterrupt, Stopped) as e:
    if previous is None:  # an outer wrapper (model.faults.command) handles stops
      raise
    what = ("terminated (SIGTERM)" if isinstance(e, Stopped) else "interrupted (SIGINT)")
    print(f"{prog}: error: {what}; the command stopped before it finished", file=sys.stderr,
          flush=True)
    return 143 if isinstance(e, Stopped) else 130
  except Exception as e:  # pylint: disable=broad-except
    if isinstance(e, BrokenPipeError) and output_closed():  # ``| head``: quiet, exit 1
      return closed_pipe()
    message = message_of(e) if message_of is not None else None
    if message is None and isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
      message = (f"no space left on device writing {e.filename or 'the output'}; free space "
                 "and rerun")
    if message is None and isinstance(e, (CommandError,) + tuple(user_errors)):
      message = str(e)
    if message is None:
      raise
    message = " ".join(message.split("\n")[0].split()) or type(e).__name__
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return EXIT_FAILURE
  finally:
    _restore_stop_signals(previous)
  try:
    if isinstance(result, dict):
      print(json.dumps(result, sort_keys=True), flush=True)
      return 0
    sys.stdout.flush()  # what the body printed: a closed pipe shows here, not at exit
  except BrokenPipeError:
    return closed_pipe()
  return int(result or 0)


class Stopped(BaseException):
  """SIGTERM, raised in the main thread while :func:`run_command` runs a command's body."""


def _raise_stopped(signum, frame):
  del signum, frame
  raise Stopped()


def _handle_stop_signals() -> Optional[Dict[int, Any]]:
  """While a command runs: SIGTERM raises :class:`Stopped`, SIGINT ``KeyboardInterrupt`` (an
  ignored SIGINT, as in a background job, stays ignored).  Returns the handlers to restore, or
  None where a wrapper already turns stops into exceptions (or off the main thread)."""
  import signal  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  if threading.current_thread() is not threading.main_thread():
    return None
  current = signal.getsignal(signal.SIGTERM)
  if current not in (signal.SIG_DFL, None) and not getattr(current, "starting", False):
    return None
  previous = {signal.SIGTERM: current}
  signal.signal(signal.SIGTERM, _raise_stopped)
  if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
  return previous


def _restore_stop_signals(previous: Optional[Dict[int, Any]]) -> None:
  import signal  # pylint: disable=g-import-not-at-top
  for signum, handler in (previous or {}).items():
    signal.signal(signum, handler)


# --- TensorFlow's start-up banners --------------------------------------------------------

_BANNERS = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|^[IW]\d{4} [\d:. ]+\d+ (port|cpu_feature_guard|cuda_\w+|cudart_stub|gpu_device)\.cc:\d+\]"
    r"|^To enable the following instructions: .*rebuild TensorFlow"
    r"|^E\d{4} [\d:. ]+\d+ cuda_\w+\.cc:\d+\] Unable to register"
    r"|^Unable to register cu(DNN|FFT|BLAS) factory")


# The real stderr's file descriptor while :func:`_filtered_stderr` captures fd 2.
_real_stderr_fd: List[int] = []


@contextlib.contextmanager
def _filtered_stderr():
  """Captures file descriptor 2 (C++ writes there, not through ``sys.stderr``) and writes back
  every line that is not a known banner."""
  sys.stderr.flush()
  try:
    saved = os.dup(2)
  except OSError:  # no fd 2 (embedded interpreters)
    yield
    return
  with tempfile.TemporaryFile() as capture:
    os.dup2(capture.fileno(), 2)
    _real_stderr_fd.append(saved)
    try:
      yield
    finally:
      _real_stderr_fd.pop()
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      capture.seek(0)
      kept = [line for line in capture.read().decode("utf-8", "replace").splitlines(True)
              if not _BANNERS.search(line)]
      if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()


class _QuietLoader(importlib.abc.Loader):
  """TensorFlow's own loader, run with its banners filtered and matplotlib deferred."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    with _filtered_stderr(), _matplotlib_deferred():
      self._loader.exec_module(module)


# Keras (which ``import tensorflow`` imports) imports matplotlib for two figure helpers that no
# command uses: 0.4 s of a model command's 2.7-s start.  Each (module, name) below is bound to
# the matplotlib module named beside it.
_KERAS_MATPLOTLIB_USERS = (
    ("keras.src.visualization.plot_image_gallery", "plt", "matplotlib.pyplot"),
    ("keras.src.visualization.plot_bounding_box_gallery", "patches", "matplotlib.patches"),
)


class _DeferredModule:
  """Stands for a module in another module's namespace; imports it on first use."""

  def __init__(self, name: str):
    self._name = name

  def __getattr__(self, attr):
    return getattr(importlib.import_module(self._name), attr)


@contextlib.contextmanager
def _matplotlib_deferred():
  """While TensorFlow loads, ``import matplotlib`` fails (Keras' figure helpers then keep None
  for it); after, those helpers get a :class:`_DeferredModule`, and matplotlib imports as usual
  (on first use: the helpers work, ~0.4 s later)."""
  if "matplotlib" in sys.modules:
    yield
    return
  sys.modules["matplotlib"] = None  # an ImportError for matplotlib and every submodule
  try:
    yield
  finally:
    if "matplotlib" in sys.modules and sys.modules["matplotlib"] is None:
      del sys.modules["matplotlib"]
    for module, name, target in _KERAS_MATPLOTLIB_USERS:
      user = sys.modules.get(module)
      if user is not None and getattr(user, name, _DeferredModule) is None:
        setattr(user, name, _DeferredModule(target))


class _QuietFinder(importlib.abc.MetaPathFinder):
  """Finds ``tensorflow`` once, with a loader that hides its banners."""

  def find_spec(self, name, path=None, target=None):
    if name != "tensorflow":
      return None
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietFinder)]
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.loader is not None:
      spec.loader = _QuietLoader(spec.loader)
    return spec


def quiet_tensorflow_banners() -> None:
  """Makes the first ``import tensorflow`` hide TensorFlow's start-up banners (C++ log lines
  on fd 2 that ``TF_CPP_MIN_LOG_LEVEL`` no longer silences) and leave matplotlib to be
  imported when first used (:func:`_matplotlib_deferred`); does not import TensorFlow.
  ``READTWICE_TF_BANNERS=1`` shows the banners (and TensorFlow's import then imports matplotlib
  as Keras asks)."""
  if os.environ.get("READTWICE_TF_BANNERS") == "1" or "tensorflow" in sys.modules:
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if not any(isinstance(f, _QuietFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _QuietFinder())
