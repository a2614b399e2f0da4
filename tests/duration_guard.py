"""A pytest plugin that keeps the suite's pace (issue 42): a test not marked ``slow`` may take
:data:`FAST_LIMIT_S`, a ``slow`` one :data:`SLOW_LIMIT_S` (setup + call, wall clock; a module-
or session-scoped fixture's setup is checked on its own, against :data:`SHARED_FIXTURE_FACTOR`
times that limit); a test over its limit fails, naming its time, its limit and the three ways out (make it faster,
mark it ``slow``, or list it in :data:`ALLOWED` with the reason).  The slowest ten tests of the
run are printed at its end.

The limits are for an idle 2-core machine: they are multiplied by the machine's load per core
when the run starts (when above 1) and by ``READTWICE_DURATION_SCALE=<x>`` (a slower machine);
``READTWICE_DURATION_SCALE=0`` turns the guard off (a debugger, a profiler).  Under pytest-xdist each worker checks its own tests.

Loaded from ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Tuple

import pytest

FAST_LIMIT_S = 2.0
SLOW_LIMIT_S = 60.0
# A module- or session-scoped fixture is set up once, in the first test that asks for it, and
# shared: it is not that test's own time.  It is checked on its own, against this multiple of
# the limit of the test that first asked for it.
SHARED_FIXTURE_FACTOR = 3.0
SCALE_ENV = "READTWICE_DURATION_SCALE"

# node id (without parameters: every parametrisation) -> (limit in seconds, why).  Keep it
# short; each entry says why the test cannot be faster or split.
ALLOWED: Dict[str, Tuple[float, str]] = {
    "tests/test_readme_quickstarts.py::test_the_quick_start_runs_as_written": (
        150.0, "a README quick start as a user runs it: 3-4 commands, each a process that "
        "loads Beam or TensorFlow; pre-training's MLM head spans RoBERTa's 50,265 tokens"),
    "tests/model/test_memory_ladder.py::"
    "test_quick_ladder_readtwice_e_learns_the_lookup_scratch_and_pretrained": (
        200.0, "the one test that the memory learns a cross-segment lookup: 2 seeds from "
        "scratch and one pre-trained (2,000 pre-training steps) to >= 0.9, then a cached rerun"),
    "tests/benchmarks/test_benchmarks.py::test_benchmark_with_an_output_dir_prints_its_figure_"
    "last": (150.0, "memory_gap end to end: a generated corpus through the pipeline, then three "
                    "models (e_book, e, e_ss) built, trained and evaluated in their processes"),
    "tests/benchmarks/test_benchmarks.py::test_benchmark_prints_its_figure_last": (
        150.0, "every benchmark as a user runs it, a process that loads Beam or TensorFlow; "
        "memory_ladder pre-trains and fine-tunes two models"),
    "tests/model/training/test_trainer.py::test_killed_run_resumes_with_the_same_batches": (
        120.0, "a training process killed mid-run, then resumed: two TensorFlow processes that "
        "build, trace and train"),
}

_DURATIONS_KEY = pytest.StashKey[Dict[str, float]]()  # per node id, from the reports
_SCALE_KEY = pytest.StashKey[float]()
_SPENT_KEY = pytest.StashKey[float]()  # per item, where it runs (an xdist worker)
_SHARED_KEY = pytest.StashKey[Dict[str, float]]()  # per item: its shared fixtures' setup
_SLOWEST = 10


def _machine_load() -> float:
  """How much slower than on an idle machine the run's tests will be, from the 1-minute load
  average as the run starts: this run's processes (its xdist workers) plus the load already
  there, per core, relative to this run alone; at least 1."""
  cores = os.cpu_count() or 1
  workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
  try:
    load = os.getloadavg()[0]
  except OSError:  # pragma: no cover  (no load average here)
    return 1.0
  return max(1.0, (load + workers) / max(cores, workers))


def _scale() -> float:
  text = os.environ.get(SCALE_ENV, "1")
  try:
    value = float(text)
  except ValueError:
    raise pytest.UsageError(f"{SCALE_ENV} must be a number (0: no duration guard), got "
                            f"{text!r}") from None
  if value < 0:
    raise pytest.UsageError(f"{SCALE_ENV} must be >= 0, got {text!r}")
  return value


def limit_of(item: pytest.Item) -> Tuple[float, str]:
  """``(limit in seconds, what it is)`` of ``item`` before scaling."""
  base = item.nodeid.split("[", 1)[0]
  if base in ALLOWED:
    return ALLOWED[base][0], f"its allow-list limit ({ALLOWED[base][1]})"
  if item.get_closest_marker("slow") is not None:
    return SLOW_LIMIT_S, "the limit of a test marked slow"
  return FAST_LIMIT_S, "the limit of a test not marked slow"


_CONFIG: List = [None]


def pytest_configure(config: pytest.Config) -> None:
  config.stash[_DURATIONS_KEY] = {}
  scale = _scale()  # read once; a bad value stops the run at its start
  config.stash[_SCALE_KEY] = scale * _machine_load() if scale else 0.0
  _CONFIG[0] = config


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
  start = time.perf_counter()
  yield
  item = getattr(request, "_pyfuncitem", None)  # the test being set up (node: its module)
  if fixturedef.scope != "function" and isinstance(item, pytest.Item):
    shared = item.stash.setdefault(_SHARED_KEY, {})
    shared[fixturedef.argname] = shared.get(fixturedef.argname, 0.0) + (
        time.perf_counter() - start)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
  outcome = yield
  report = outcome.get_result()
  took = item.stash.get(_SPENT_KEY, 0.0) + call.duration
  item.stash[_SPENT_KEY] = took
  if call.when != "call" or not report.passed:  # setup + call: the test fails, not teardown
    return
  scale = item.config.stash[_SCALE_KEY]
  if scale == 0:
    return
  limit, what = limit_of(item)
  shared = item.stash.get(_SHARED_KEY, {})
  own = took - sum(shared.values())
  over = []
  if own > limit * scale:
    over.append(f"{item.nodeid} took {own:.1f} s: over {limit * scale:.1f} s, {what}")
  for name, seconds in sorted(shared.items()):
    if seconds > SHARED_FIXTURE_FACTOR * limit * scale:
      over.append(f"its shared fixture {name!r} took {seconds:.1f} s to set up: over "
                  f"{SHARED_FIXTURE_FACTOR * limit * scale:.1f} s ({SHARED_FIXTURE_FACTOR:g} "
                  f"x {what})")
  if over:
    report.outcome = "failed"
    report.longrepr = (
        "; ".join(over) + f"{f' (x {scale:.2g}: {SCALE_ENV} x the load)' if scale != 1 else ''}.  Make it "
        "faster (a wider fixture, fewer steps, main(argv) in process), mark it slow, or list "
        "it in tests/duration_guard.py's ALLOWED with the reason.")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
  # Where the reports arrive: the session itself, or pytest-xdist's controller.
  config = _CONFIG[0]
  if config is None:
    return
  spent = config.stash[_DURATIONS_KEY]
  spent[report.nodeid] = spent.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
  del exitstatus
  spent = config.stash.get(_DURATIONS_KEY, {})
  if not spent:
    return
  slowest: List[Tuple[str, float]] = sorted(spent.items(), key=lambda kv: -kv[1])[:_SLOWEST]
  terminalreporter.write_sep("-", f"slowest {len(slowest)} tests (setup + call + teardown)")
  for nodeid, seconds in slowest:
    terminalreporter.write_line(f"{seconds:7.2f} s  {nodeid}")
