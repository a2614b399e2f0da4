"""Test-session settings, applied before any test module imports a library."""

import logging
import os

import pytest

# gRPC's C core logs at INFO when a loopback server (the Cloud NL fake, Beam's own runner)
# closes its connections ("Got goaway"): noise in the test output, not a finding.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


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
  import signal  # pylint: disable=g-import-not-at-top
  saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  yield
  for s, handler in saved.items():
    if signal.getsignal(s) is not handler and handler is not None:
      signal.signal(s, handler)
