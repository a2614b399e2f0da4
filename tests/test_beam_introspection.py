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


# ---- PipelineOptions.view_as -------------------------------------------------------------

def test_view_as_is_memoised_in_the_test_process():
  from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top
  assert pipeline_options.PipelineOptions.view_as is beam_introspection.view_as


def test_a_remembered_view_reads_and_writes_what_beams_own_view_does():
  from apache_beam.options.pipeline_options import (  # pylint: disable=g-import-not-at-top
      DirectOptions, PipelineOptions, StandardOptions)
  original = beam_introspection._ORIGINAL_VIEW_AS  # pylint: disable=protected-access
  flags = ["--runner", "DirectRunner", "--direct_num_workers", "3", "--unknown_flag", "x"]
  memo, plain = PipelineOptions(flags), PipelineOptions(flags)
  for cls in (StandardOptions, DirectOptions):
    first = memo.view_as(cls)
    assert memo.view_as(cls) is first  # a hit
    want = original(plain, cls)
    assert type(first) is type(want)
    assert first.get_all_options() == want.get_all_options()
  assert memo.view_as(DirectOptions).direct_num_workers == 3
  # A write through one view is seen through the others and the options, as in Beam.
  memo.view_as(StandardOptions).streaming = True
  original(plain, StandardOptions).streaming = True
  assert memo.view_as(StandardOptions).streaming and memo.get_all_options()["streaming"]
  assert memo.get_all_options() == plain.get_all_options()


def test_a_view_is_made_again_when_its_options_changed_under_it():
  from apache_beam.options.pipeline_options import (  # pylint: disable=g-import-not-at-top
      DirectOptions, PipelineOptions)
  options = PipelineOptions(["--direct_num_workers", "2"])
  first = options.view_as(DirectOptions)
  options._flags = ["--direct_num_workers", "5"]  # pylint: disable=protected-access
  options._all_options = {}  # pylint: disable=protected-access
  again = options.view_as(DirectOptions)
  assert again is not first and again.direct_num_workers == 5
  options._all_options.pop("direct_num_workers")  # pylint: disable=protected-access
  third = options.view_as(DirectOptions)
  assert third is not again and third.direct_num_workers == 5
  # Each object has its own views.
  other = PipelineOptions(["--direct_num_workers", "2"])
  assert other.view_as(DirectOptions) is not third
  assert other.view_as(DirectOptions).direct_num_workers == 2
