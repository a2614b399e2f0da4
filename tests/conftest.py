"""Test-session settings, applied before any test module imports a library."""

import logging
import os
import signal

import pytest

# gRPC's C core logs at INFO when a loopback server (the Cloud NL fake, Beam's own runner)
# closes its connections ("Got goaway"): noise in the test output, not a finding.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# Under pytest-xdist (make test / make check) each worker is one process of its own: its
# TensorFlow thread pools get that worker's share of the cores (set before any test imports
# TensorFlow; the commands that tests run as subprocesses inherit it), so that workers do not
# fight over the same cores.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
  _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(_share))
  os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(_share))

# A run started in the background by a non-interactive shell (`make check &`, a script's `&`)
# inherits SIGINT ignored, and so would every command that the tests start: the tests that
# stop a command as Ctrl-C does need SIGINT delivered, so the test processes take Python's
# own handler back (the commands they start then get SIGINT's default, as from a terminal).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
  """The duration guard (tests/duration_guard.py): a test over its time limit fails.  Beam's
  signature introspection is memoised in this process (tests/beam_introspection.py)."""
  from tests import beam_introspection, duration_guard  # pylint: disable=g-import-not-at-top
  beam_introspection.install()
  if not config.pluginmanager.is_registered(duration_guard):
    config.pluginmanager.register(duration_guard, "readtwice-duration-guard")


# The files whose tests take longest (the sums in docs/development.md, "Tests and CI"), longest
# first.  They are collected first, and `make test` / `make check` hand files to the xdist
# workers in collection order (--dist loadfile --no-loadscope-reorder): a worker that starts
# one of them near the end of the run would keep the other worker idle until it finishes
# (xdist's default order, by number of tests, put them last: ~150 core-seconds idle).
LONGEST_FILES = (
    "tests/benchmarks/test_benchmarks.py",
    "tests/test_readme_quickstarts.py",
    "tests/model/test_memory_ladder.py",
    "tests/model/training/test_trainer.py",
    "tests/model/test_long_documents_e2e.py",
    "tests/test_bad_inputs.py",
    "tests/model/test_faults.py",
    "tests/model/test_cli_errors.py",
    "tests/model/training/test_training_views.py",
    "tests/golden/test_job_outputs.py",
    "tests/pipelines/test_faults.py",
    "tests/pipelines/test_output_dirs.py",
    # (collected last otherwise: one of them as the run's last file kept a core idle ~30 s)
    "tests/synthetic/test_long_range_qa.py",
    "tests/test_cli_contract.py",
    "tests/readtwice/test_console.py",
)


def pytest_collection_modifyitems(items):
  """The tests of :data:`LONGEST_FILES` first, in that order, then the other files with a
  ``slow`` test, then the files of fast tests only (a slow file handed out last kept the other
  worker idle: ``test_docs.py``'s 7-s flag check, ~7 s at the end of a run); each group in
  collection order, every file's own order kept."""
  rank = {path: i for i, path in enumerate(LONGEST_FILES)}
  slow_files = {item.nodeid.split("::", 1)[0] for item in items
                if item.get_closest_marker("slow") is not None}

  def key(item):
    path = item.nodeid.split("::", 1)[0]
    return rank.get(path, len(rank) + (path not in slow_files))

  items.sort(key=key)


@pytest.fixture
def restore_logging():
  """Puts the root and ``pipelines`` loggers back after a test that ran a job's ``main()``
  (which installs its own handler on the root logger)."""
  root = logging.getLogger()
  handlers, level = root.handlers[:], root.level
  ours = logging.getLogger("pipelines").level
  yield
  root.handlers[:] = handlers
  root.setLevel(level)
  logging.getLogger("pipelines").setLevel(ours)


@pytest.fixture(autouse=True)
def _restore_stop_signal_handlers():
  """Each test starts with the SIGINT/SIGTERM handlers the session had: a command's main()
  run in process installs its own (one line on a stop), and one left behind would change how
  the next test's command (or pytest itself) sees a signal."""
  saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  yield
  for s, handler in saved.items():
    if signal.getsignal(s) is not handler and handler is not None:
      signal.signal(s, handler)
