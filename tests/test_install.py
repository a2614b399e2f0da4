"""The install layout: setup.py's extras, the two requirements files, the Makefile and the
README's commands agree.

`make demo` installs requirements.txt (the pipeline + trainer + cpu extras at exact pins, no
test tools); `make test` and `make test-fast` add requirements-test.txt (no torch: the RoBERTa
parity test reads a committed reference), and every test command the README shows is a make
target that installs what it runs; the `gpu` and `tpu` extras each bring one
TensorFlow build and the `trainer` extra none, so `[trainer,gpu]` never pulls tensorflow-cpu
(which would overwrite the GPU build's `tensorflow/` package).  Read statically: nothing is
installed here (the pins themselves were resolved by pip, see docs/development.md "Installation").
"""

import ast
import os
import re
import shutil
import subprocess

import pytest

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import REPO_ROOT

TF_BUILDS = {"tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tensorflow-gpu"}
TEST_ONLY = {"pytest", "ruff"}
# Only to regenerate the RoBERTa parity reference (tests/model/roberta_import/make_roberta_reference.py): in no
# requirements file (torch from PyPI is the multi-GB CUDA build on Linux).
REGENERATE_ONLY = {"torch", "transformers"}


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
  assert not (TEST_ONLY | REGENERATE_ONLY) & set(pins)


def test_test_requirements_are_the_test_tools_without_torch():
  lists, pins = _setup_lists(), _pins("requirements-test.txt")
  assert TEST_ONLY <= set(pins) and not set(pins) & set(_pins("requirements.txt"))
  assert not REGENERATE_ONLY & set(pins), "the tests must not need torch or transformers"
  assert _names(lists["ROBERTA_TEST"]) == REGENERATE_ONLY  # the regenerator's extra


def test_no_test_imports_torch_or_transformers():
  """Only the reference's generator imports them, inside its main()."""
  pattern = re.compile(r"^\s*(import|from)\s+(torch|transformers)\b"
                       r"|importorskip\(\s*[\"'](torch|transformers)", re.M)
  found = []
  for root in ("model", "pipelines", "schemas", "readtwice", "synthetic", "benchmarks", "demo",
               "tests"):
    for dirpath, _, files in os.walk(os.path.join(REPO_ROOT, root)):
      for name in files:
        path = os.path.join(dirpath, name)
        if name.endswith(".py") and not path.endswith("make_roberta_reference.py"):
          if pattern.search(open(path, encoding="utf-8").read()):
            found.append(os.path.relpath(path, REPO_ROOT))
  assert found == []


def test_make_demo_installs_only_requirements_and_make_test_adds_the_test_file():
  text = open(os.path.join(REPO_ROOT, "Makefile")).read()
  rules = dict(re.findall(r"^(\S+):[^\n=]*\n((?:\t[^\n]*\n)+)", text, re.M))
  assert "requirements-test.txt" not in rules["$(STAMP)"]
  assert "-r requirements.txt" in rules["$(STAMP)"]
  assert "-r requirements-test.txt" in rules["$(TEST_STAMP)"]
  assert re.search(r"^demo: \$\(STAMP\)$", text, re.M)
  assert re.search(r"^test: \$\(TEST_STAMP\)$", text, re.M)


def _make_targets():
  """``{target: (prerequisites, recipe)}`` of the Makefile (variables left as written)."""
  text = open(os.path.join(REPO_ROOT, "Makefile")).read()
  return {target: (prereqs.split(), recipe) for target, prereqs, recipe in
          re.findall(r"^([^\s:=#]+):(?!=)([^\n]*)\n((?:\t[^\n]*\n)*)", text, re.M)}


def _needs(targets, target):
  """The stamps ``target`` depends on, directly or through other targets."""
  seen, todo, stamps = set(), [target], set()
  while todo:
    t = todo.pop()
    if t in seen or t not in targets:
      continue
    seen.add(t)
    for p in targets[t][0]:
      stamps |= {p} if p in ("$(STAMP)", "$(TEST_STAMP)") else set()
      todo.append(p)
  return stamps


def _shown_commands(markdown):
  """Every command line a markdown file shows: code-block lines and inline code spans."""
  blocks = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, re.M | re.S)
  lines = [line for block in blocks for line in block.splitlines()]
  outside = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.M | re.S)
  return lines + re.findall(r"`([^`\n]+)`", outside)


def test_every_test_command_the_readme_shows_installs_what_it_needs():
  """After the README's set-up (`make demo`), each test command it shows works as written: it
  is a make target whose prerequisites install the test tools (a bare ``python -m pytest``
  would fail with "No module named pytest"); the fast subset has its own target, named in the
  Development section, and CI runs the whole suite."""
  targets = _make_targets()
  readme = open(os.path.join(REPO_ROOT, "README.md")).read()
  commands = _shown_commands(readme)
  bare = [c for c in commands if re.search(r"\b(pytest|ruff)\b", c) and "make " not in c]
  assert bare == [], f"README runs test tools outside make (not installed by make demo): {bare}"
  named = {t for c in commands for t in re.findall(r"\bmake ([\w-]+)", c)}
  assert {"demo", "test", "check"} <= named
  for target in sorted(named):
    assert target in targets, f"README names `make {target}`, which the Makefile lacks"
    recipe = targets[target][1]
    if re.search(r"\b(pytest|ruff)\b", recipe):
      assert "$(TEST_STAMP)" in _needs(targets, target), f"make {target} runs tests uninstalled"
    elif "$(PY)" in recipe:
      assert _needs(targets, target), f"make {target} runs $(PY) without installing it"
  fast, every = targets["test"][1], targets["check"][1]
  assert "ruff check ." in fast and re.search(r"\$\(PYTEST\) -m \"not slow\"", fast)
  assert "ruff check ." in every and re.search(r"\$\(PYTEST\)$", every, re.M)
  makefile = open(os.path.join(REPO_ROOT, "Makefile")).read()
  assert re.search(r"^PYTEST := .*-m pytest -q -n \$\(TEST_WORKERS\) --dist loadfile "
                   r"--no-loadscope-reorder$", makefile, re.M)
  development = readme.split("\n## Development", 1)[1].split("\n## ", 1)[0]
  assert "`make test`" in development and "`make check`" in development
  assert re.search(r"^make check$", open(os.path.join(REPO_ROOT, ".ci", "run")).read(), re.M)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_test_after_make_demo_installs_the_test_tools(tmp_path):
  """make's own dry run (``make -n``) with a virtualenv that ``make demo`` set up (its stamp
  newer than requirements.txt and setup.py): ``make test`` first installs
  requirements-test.txt, then lints and runs the fast subset on the test workers; once
  installed, only that."""
  venv = tmp_path / "venv"
  (venv / "bin").mkdir(parents=True)
  (venv / ".installed").touch()

  def dry_run():
    out = subprocess.run(["make", "-n", "-C", str(REPO_ROOT), "test", f"VENV={venv}",
                          "TEST_WORKERS=2"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return [line for line in out.splitlines() if not line.startswith("make")]

  steps = dry_run()
  assert any("-r requirements-test.txt" in x and "pip install" in x for x in steps), steps
  assert not any(re.search(r"pip install .*-r requirements\.txt$", x) for x in steps)  # demo's
  assert any(x.endswith("ruff check .") for x in steps)
  assert any(x.endswith('-m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not slow"')
             for x in steps)
  (venv / ".installed-test").touch()
  steps = dry_run()
  assert not any("pip" in x for x in steps) and len(steps) == 2, steps


def test_docs_run_pytest_only_after_a_make_target_installed_it():
  """docs/development.md may show ``python -m pytest <path>``: only in a block that first runs
  `make test` / `make check` (which install pytest)."""
  text = open(os.path.join(REPO_ROOT, "docs", "development.md")).read()
  for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S):
    lines = block.splitlines()
    for i, line in enumerate(lines):
      if re.search(r"-m pytest\b", line):
        assert any(re.match(r"make (test|check)\b", x) for x in lines[:i]), line
