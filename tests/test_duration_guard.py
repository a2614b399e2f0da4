"""The duration guard (tests/duration_guard.py) fails a test over its limit, shows the slowest
tests, honours the allow-list and the scale, and refuses a bad scale (pytester: each case is a
small pytest run of its own, in process, with the guard's limits lowered so that the test stays fast)."""

import pytest

from tests import duration_guard


pytest_plugins = ["pytester"]

SLOW_TEST = """
import time
import pytest

def test_quick():
  pass

def test_sleeps():
  time.sleep(0.15)

@pytest.mark.slow
def test_sleeps_but_slow():
  time.sleep(0.15)


@pytest.fixture(scope="module")
def shared():  # set up once for the module's tests: not the first test's own time
  time.sleep(0.2)


def test_first_user_of_a_shared_fixture(shared):
  pass


def test_second_user_of_a_shared_fixture(shared):
  pass
"""

# The guard as the suite loads it (a copy of the module: this run's own limits stay as they
# are), with limits small enough for a test to cross in 0.15 s.
CONFTEST = """
import importlib.util
spec = importlib.util.spec_from_file_location("guard_under_test", {path!r})
duration_guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(duration_guard)
duration_guard.FAST_LIMIT_S = 0.1
duration_guard.SLOW_LIMIT_S = 5.0
duration_guard.SCALE_ENV = "GUARD_UNDER_TEST_SCALE"  # not this run's own
duration_guard._machine_load = lambda: {load}  # an idle machine, or a busy one
{allowed}

def pytest_configure(config):
  config.pluginmanager.register(duration_guard, "readtwice-duration-guard")
"""


@pytest.fixture
def run(pytester, monkeypatch):

  def go(allowed="", env=None, load=1.0):
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makeconftest(CONFTEST.format(path=duration_guard.__file__, allowed=allowed,
                                          load=load))
    pytester.makepyfile(test_subject=SLOW_TEST)
    for k, v in (env or {}).items():
      monkeypatch.setenv(k, v)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")
  return go


def test_a_deliberately_slow_test_fails_and_the_slowest_are_listed(run):
  result = run()
  result.assert_outcomes(passed=4, failed=1)
  result.stdout.fnmatch_lines([
      "*test_subject.py::test_sleeps took * s: over 0.1 s, the limit of a test not marked "
      "slow.*",
      "*slowest 5 tests (setup + call + teardown)*",
      "*s  test_subject.py::test_sleeps*"])
  assert "test_sleeps_but_slow took" not in result.stdout.str()  # within the slow limit


def test_the_allow_list_names_a_limit_and_a_reason(run):
  result = run(allowed='duration_guard.ALLOWED["test_subject.py::test_sleeps"] = '
                       '(1.0, "sleeps on purpose")')
  result.assert_outcomes(passed=5)


def test_the_scale_loosens_or_turns_off_the_guard(run):
  run(env={"GUARD_UNDER_TEST_SCALE": "4"}).assert_outcomes(passed=5)
  run(env={"GUARD_UNDER_TEST_SCALE": "0"}).assert_outcomes(passed=5)


def test_a_scale_under_1_tightens_the_guard(run):
  result = run(env={"GUARD_UNDER_TEST_SCALE": "0.5"})  # the shared fixture too: 0.2 > 3 x 0.05
  result.assert_outcomes(passed=3, failed=2)
  result.stdout.fnmatch_lines(["*its shared fixture 'shared' took * s to set up: over 0.2 s "
                               "(3 x the limit of a test not marked slow)*"])
  result.stdout.fnmatch_lines(["*over 0.1 s, the limit of a test not marked slow (x 0.5: "
                               "GUARD_UNDER_TEST_SCALE x the load).*"])


def test_a_busy_machine_loosens_the_guard_by_its_load_per_core(run):
  run(load=4.0).assert_outcomes(passed=5)  # limits x4: the 0.15 s sleep is within 0.4 s


def test_a_bad_scale_is_a_usage_error(run):
  result = run(env={"GUARD_UNDER_TEST_SCALE": "fast"})
  assert result.ret == pytest.ExitCode.USAGE_ERROR
  assert "GUARD_UNDER_TEST_SCALE must be a number (0: no duration guard), got 'fast'" in (
      result.stdout.str() + result.stderr.str())


def test_the_longest_files_are_collected_first_and_exist():
  """tests/conftest.py puts LONGEST_FILES first (the xdist workers get them early), then the
  other files with a slow test, then the files of fast tests only; a renamed file must be
  renamed there too."""
  from tests import REPO_ROOT, conftest  # pylint: disable=g-import-not-at-top
  missing = [p for p in conftest.LONGEST_FILES if not (REPO_ROOT / p).is_file()]
  assert not missing, f"tests/conftest.py LONGEST_FILES names missing files: {missing}"
  assert len(set(conftest.LONGEST_FILES)) == len(conftest.LONGEST_FILES)

  class Item:
    def __init__(self, nodeid, slow=False):
      self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name):
      return "slow" if name == "slow" and self.slow else None

  items = [Item("tests/a/test_x.py::t1"), Item(f"{conftest.LONGEST_FILES[1]}::t"),
           Item("tests/b/test_y.py::t1"), Item("tests/a/test_x.py::t2"),
           Item("tests/b/test_y.py::t2", slow=True), Item(f"{conftest.LONGEST_FILES[0]}::t")]
  conftest.pytest_collection_modifyitems(items)
  assert [i.nodeid for i in items] == [f"{conftest.LONGEST_FILES[0]}::t",
                                       f"{conftest.LONGEST_FILES[1]}::t",
                                       "tests/b/test_y.py::t1", "tests/b/test_y.py::t2",
                                       "tests/a/test_x.py::t1", "tests/a/test_x.py::t2"]
