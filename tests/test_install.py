"""The install layout: setup.py's extras, the two requirements files and the Makefile agree.

`make demo` installs requirements.txt (the pipeline + trainer + cpu extras at exact pins, no
test tools); `make test` adds requirements-test.txt; the `gpu` and `tpu` extras each bring one
TensorFlow build and the `trainer` extra none, so `[trainer,gpu]` never pulls tensorflow-cpu
(which would overwrite the GPU build's `tensorflow/` package).  Read statically: nothing is
installed here (the pins themselves were resolved by pip, see docs/development.md "Installation").
"""

import ast
import os
import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import REPO_ROOT

TF_BUILDS = {"tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tensorflow-gpu"}
TEST_ONLY = {"pytest", "ruff", "torch", "transformers"}


def _setup_lists():
  tree = ast.parse(open(os.path.join(REPO_ROOT, "setup.py")).read())
  lists = {}
  for node in tree.body:
    if isinstance(node, ast.Assign):
      for target in node.targets:
        if isinstance(target, ast.Name) and target.id.isupper():
          try:
            value = ast.literal_eval(node.value)
          except ValueError:
            continue
          if isinstance(value, list):
            lists[target.id] = [Requirement(r) for r in value]
  return lists


def _pins(name):
  pins = {}
  for line in open(os.path.join(REPO_ROOT, name)).read().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
      req = Requirement(line)
      (spec,) = req.specifier
      assert spec.operator == "==", f"{name}: {line!r} is not an exact pin"
      pins[canonicalize_name(req.name)] = spec.version
  return pins


def _names(reqs):
  return {canonicalize_name(r.name) for r in reqs}


def test_each_tensorflow_flavour_brings_exactly_one_build():
  lists = _setup_lists()
  assert not _names(lists["BASE"] + lists["TRAINER"]) & TF_BUILDS
  assert _names(lists["CPU"]) & TF_BUILDS == {"tensorflow-cpu"}
  assert _names(lists["GPU"]) & TF_BUILDS == {"tensorflow"}
  assert "and-cuda" in next(r for r in lists["GPU"] if r.name == "tensorflow").extras
  assert _names(lists["TPU"]) & TF_BUILDS == {"tensorflow-tpu"}
  for flavour in ("GPU", "TPU"):  # [trainer,gpu] / [trainer,tpu] never pull tensorflow-cpu
    assert "tensorflow-cpu" not in _names(lists["BASE"] + lists["TRAINER"] + lists[flavour])


def test_requirements_pin_the_demo_extras_and_nothing_for_tests_only():
  lists, pins = _setup_lists(), _pins("requirements.txt")
  wanted = lists["BASE"] + lists["PIPELINE"] + lists["TRAINER"] + lists["CPU"]
  missing = _names(wanted) - set(pins)  # (it may also pin a transitive dependency)
  assert not missing, f"requirements.txt does not pin {sorted(missing)}"
  for req in wanted:
    assert req.specifier.contains(pins[canonicalize_name(req.name)]), (req, pins[req.name])
  assert not TEST_ONLY & set(pins)


def test_test_requirements_are_the_test_tools_within_setup_ranges():
  lists, pins = _setup_lists(), _pins("requirements-test.txt")
  assert TEST_ONLY <= set(pins) and not set(pins) & set(_pins("requirements.txt"))
  for req in lists["ROBERTA_TEST"]:
    assert req.specifier.contains(pins[canonicalize_name(req.name)]), req


def test_make_demo_installs_only_requirements_and_make_test_adds_the_test_file():
  text = open(os.path.join(REPO_ROOT, "Makefile")).read()
  rules = dict(re.findall(r"^(\S+):[^\n=]*\n((?:\t[^\n]*\n)+)", text, re.M))
  assert "requirements-test.txt" not in rules["$(STAMP)"]
  assert "-r requirements.txt" in rules["$(STAMP)"]
  assert "-r requirements-test.txt" in rules["$(TEST_STAMP)"]
  assert re.search(r"^demo: \$\(STAMP\)$", text, re.M)
  assert re.search(r"^test: \$\(TEST_STAMP\)$", text, re.M)
