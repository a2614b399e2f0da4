"""The test processes' memo of Beam's signature introspection (tests/beam_introspection.py)
gives what Beam itself gives, for every DoFn of the product and for a stateful DoFn."""

import importlib
import inspect
import pkgutil

import apache_beam as beam
import pytest
from apache_beam.transforms import core, userstate

import pipelines
from tests import beam_introspection

pytestmark = pytest.mark.skipif(beam_introspection._ORIGINAL is None,  # pylint: disable=protected-access
                                reason=f"{beam_introspection.ENV}=0: the memo is off")


def _product_dofns():
  """Every DoFn class defined in ``pipelines`` (importing each module)."""
  found = {}
  for info in pkgutil.walk_packages(pipelines.__path__, "pipelines."):
    if info.name.endswith("__main__"):
      continue
    module = importlib.import_module(info.name)
    for name, obj in vars(module).items():
      if inspect.isclass(obj) and issubclass(obj, beam.DoFn) and obj.__module__ == info.name:
        found[f"{info.name}.{name}"] = obj
  return found


class _Stateful(beam.DoFn):
  COUNT = userstate.CombiningValueStateSpec("count", sum)

  def process(self, element, count=beam.DoFn.StateParam(COUNT),
              timestamp=beam.DoFn.TimestampParam):
    count.add(1)
    yield element


def _methods(cls):
  dofn = cls.__new__(cls)  # the signatures are the class's: no constructor arguments needed
  return dofn, [n for n in dir(dofn) if inspect.ismethod(getattr(dofn, n, None))]


def test_the_memo_is_installed_in_the_test_process():
  assert core.get_function_args_defaults is beam_introspection.get_function_args_defaults


def test_the_memo_equals_beams_own_for_every_product_dofn_and_a_stateful_one():
  classes = _product_dofns()
  assert len(classes) >= 20, sorted(classes)  # the walk found the product's DoFns
  original = beam_introspection._ORIGINAL  # pylint: disable=protected-access
  for name, cls in dict(classes, stateful=_Stateful).items():
    dofn, methods = _methods(cls)
    for method in methods:
      f = getattr(dofn, method)
      want = original(f)
      for _ in range(2):  # a miss, then a hit
        got = beam_introspection.get_function_args_defaults(f)
        assert got == want, (name, method)
        got[0].append("changed")  # each call gets its own lists
  # Beam's own checks still see the state parameter through the memo.
  dofn, _ = _methods(_Stateful)
  assert userstate.is_stateful_dofn(dofn)
  state_specs, timer_specs = userstate.get_dofn_specs(dofn)
  assert [s.name for s in state_specs] == ["count"] and not timer_specs
  assert not userstate.is_stateful_dofn(beam.Map(len).dofn)


def test_a_map_over_different_functions_sees_each_ones_arguments():
  def one(x, y=1):
    return x + y

  def two(x, timestamp=beam.DoFn.TimestampParam):
    return x, timestamp

  for fn, defaults in ((one, [1]), (two, [beam.DoFn.TimestampParam])):
    got = core.get_function_arguments(beam.Map(fn).dofn, "process")
    assert got[1] == defaults


def test_it_can_be_turned_off(monkeypatch):
  monkeypatch.setenv(beam_introspection.ENV, "0")
  assert beam_introspection.install() is False


@pytest.mark.parametrize("f", [len, lambda x: x, str.upper])
def test_other_callables_give_beams_answer(f):
  original = beam_introspection._ORIGINAL  # pylint: disable=protected-access
  assert beam_introspection.get_function_args_defaults(f) == original(f)
