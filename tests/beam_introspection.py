"""Memoised signature introspection for Beam in the test processes (issue 42).

Building and running a pipeline, Beam asks ``inspect.signature`` of every method of every DoFn
many times over: ``apache_beam.transforms.userstate.get_dofn_specs`` walks ``dir(dofn)`` and
wraps each method (``runners.common.MethodWrapper``) to look for state and timer parameters,
for each of the ~550 times a small pipeline asks whether a DoFn is stateful (the DoFns are
also pickled copies of each other).  Profiled on ``tests/pipelines/beam/test_read.py``, that
introspection was ~40% of a test's time.

:func:`install` memoises ``apache_beam.transforms.core.get_function_args_defaults`` -- the
``(argument names, default values)`` of a function, which ``get_function_arguments`` and so
``MethodWrapper`` and ``get_dofn_specs`` use -- keyed by the plain function behind a bound
method (every instance of a DoFn class has the same signature) or by the function itself.
Callables of other kinds (objects with ``__call__``, builtins, partials) are not memoised.
The values are the ones Beam computes (each call gets fresh lists), so what a pipeline does
is unchanged: ``tests/test_beam_introspection.py`` compares them with Beam's own on every DoFn
of the product and on a stateful DoFn.

It also memoises ``PipelineOptions.view_as``: each call builds an argparse parser of the view's
options and parses the pipeline's flags again (~550 calls a small pipeline, ~0.15 s of its
~1.2 s: type checks and transform applications ask for a view each time).  A view holds
nothing of its own -- its values live in the ``_all_options`` dict it shares with the object
it was made from -- so the view made the first time is handed out again while that object
still has the same flags and the same ``_all_options`` (and every key the view reads is
there); otherwise Beam makes a new one.

``READTWICE_BEAM_INTROSPECTION_CACHE=0`` turns both off.  Subprocess jobs (``python -m
pipelines ...``) run Beam as it ships.
"""

from __future__ import annotations

import os
import types
import weakref

ENV = "READTWICE_BEAM_INTROSPECTION_CACHE"

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ORIGINAL = None
_VIEWS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ORIGINAL_VIEW_AS = None


def _key(f):
  if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
    return f.__func__, True
  if isinstance(f, types.FunctionType):
    return f, False
  return None, None


def get_function_args_defaults(f):
  """Beam's ``get_function_args_defaults(f)``, memoised by function (see the module doc)."""
  func, bound = _key(f)
  if func is None:
    return _ORIGINAL(f)
  per_kind = _CACHE.setdefault(func, {})
  if bound not in per_kind:
    per_kind[bound] = _ORIGINAL(f)
  args, defaults = per_kind[bound]
  return list(args), list(defaults)


def view_as(options, cls):
  """Beam's ``options.view_as(cls)``, the same view again while it still fits (module doc)."""
  flags = options._flags  # pylint: disable=protected-access
  store = options._all_options  # pylint: disable=protected-access
  flags_key = None if flags is None else tuple(flags)
  hit = _VIEWS.get(options, {}).get(cls)
  if hit is not None:
    view, seen_flags, seen_store = hit
    if (seen_flags == flags_key and seen_store is store and view._all_options is store  # pylint: disable=protected-access
        and all(k in store for k in view._visible_option_list())):  # pylint: disable=protected-access
      return view
  view = _ORIGINAL_VIEW_AS(options, cls)
  _VIEWS.setdefault(options, {})[cls] = (view, flags_key, store)
  return view


def install() -> bool:
  """Installs the memo (once); False when ``READTWICE_BEAM_INTROSPECTION_CACHE=0``."""
  global _ORIGINAL, _ORIGINAL_VIEW_AS
  if os.environ.get(ENV, "1") == "0":
    return False
  from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top
  from apache_beam.transforms import core  # pylint: disable=g-import-not-at-top
  if _ORIGINAL is None:
    _ORIGINAL = core.get_function_args_defaults
    core.get_function_args_defaults = get_function_args_defaults
  if _ORIGINAL_VIEW_AS is None:
    _ORIGINAL_VIEW_AS = pipeline_options.PipelineOptions.view_as
    pipeline_options.PipelineOptions.view_as = view_as
  return True
