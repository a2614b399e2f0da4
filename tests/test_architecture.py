"""The layer rules of docs/architecture.md, read from its table and checked on every module's
imports (module level and inside functions), and no import circle among the project's
modules."""

from __future__ import annotations

import ast
import os
import re
from typing import Dict, List, Set, Tuple

import pytest

from tests import REPO_ROOT

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"


def layer_rules() -> Dict[str, Tuple[Set[str], Set[str]]]:
  """``{package: (project packages it may import, modules it never imports)}`` from the
  table under the ``layer-rules`` marker of docs/architecture.md."""
  text = ARCHITECTURE.read_text(encoding="utf-8")
  assert "<!-- layer-rules" in text, "docs/architecture.md lost its layer-rules table"
  rows = text.split("<!-- layer-rules", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
  rules = {}
  for row in rows[2:]:  # after the header and its rule
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    names = [re.findall(r"`([\w.]+)`", c) for c in cells]
    assert len(names) == 3 and len(names[0]) == 1, row
    rules[names[0][0]] = (set(names[1]), set(names[2]))
  return rules


def module_name(path: str) -> str:
  rel = os.path.relpath(path, REPO_ROOT)[:-3].replace(os.sep, ".")
  return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def project_modules(packages) -> Dict[str, str]:
  """``{module name: path}`` of every ``.py`` file under ``packages``."""
  found = {}
  for package in packages:
    for d, dirs, files in os.walk(REPO_ROOT / package):
      dirs[:] = [x for x in dirs if x != "__pycache__"]
      for f in files:
        if f.endswith(".py"):
          found[module_name(os.path.join(d, f))] = os.path.join(d, f)
  return found


def imported_names(source: str, name: str, is_package: bool) -> Set[str]:
  """Every module name ``source`` (module ``name``) imports, anywhere in it; ``from a import b``
  gives both ``a`` and ``a.b`` (b may be a module)."""
  out = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
      else:
        module = node.module
      out.add(module)
      out.update(f"{module}.{a.name}" for a in node.names)
  return out


def violations(rules, modules: Dict[str, str], sources: Dict[str, str]) -> List[str]:
  """``"<module> imports <name> (<rule>)"`` for each import against ``rules``."""
  found = []
  for name, path in sorted(modules.items()):
    package = name.split(".")[0]
    allowed, never = rules[package]
    for imported in sorted(imported_names(sources[name], name, path.endswith("__init__.py"))):
      top = imported.split(".")[0]
      if top in rules and top != package and top not in allowed:
        found.append(f"{name} imports {imported} ({package} may import only "
                     f"{sorted(allowed) or 'no project package'})")
      if top in never:
        found.append(f"{name} imports {imported} ({package} never imports {top})")
  return found


def import_graph(modules: Dict[str, str], sources: Dict[str, str]) -> Dict[str, Set[str]]:
  """Module -> the project modules it imports, without its own enclosing packages."""
  graph = {}
  for name, path in modules.items():
    names = imported_names(sources[name], name, path.endswith("__init__.py"))
    graph[name] = {m for m in names if m in modules and m != name
                   and not name.startswith(m + ".")}
  return graph


def circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
  """The strongly connected components of more than one module (Tarjan, iterative)."""
  index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
  for root in sorted(graph):
    if root in index:
      continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = counter[0]
    counter[0] += 1
    stack.append(root)
    on_stack.add(root)
    while work:
      v, children = work[-1]
      w = next(children, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = counter[0]
          counter[0] += 1
          stack.append(w)
          on_stack.add(w)
          work.append((w, iter(sorted(graph[w]))))
        elif w in on_stack:
          low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work:
        low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        component = []
        while True:
          w = stack.pop()
          on_stack.discard(w)
          component.append(w)
          if w == v:
            break
        if len(component) > 1:
          found.append(sorted(component))
  return found


@pytest.fixture(scope="module")
def project():
  rules = layer_rules()
  modules = project_modules(rules)
  sources = {name: open(path, encoding="utf-8").read() for name, path in modules.items()}
  return rules, modules, sources


def test_every_file_the_page_names_exists():
  """The record's path and the recipes name real files (``<name>``: a deployed dataset,
  ``<task>``: a task, ``<benchmark>``: a benchmark, ``*``: any match)."""
  import glob  # pylint: disable=g-import-not-at-top
  text = ARCHITECTURE.read_text(encoding="utf-8")
  named = set(re.findall(r"`([\w./<>*-]+/[\w./<>*-]*)`", text))
  assert len(named) > 25, sorted(named)
  missing = []
  for path in sorted(named):
    concrete = (path.replace("<name>", "hotpotqa").replace("<task>", "hotpotqa")
                .replace("<benchmark>", "job_cost"))
    if not glob.glob(str(REPO_ROOT / concrete)):
      missing.append(path)
  assert not missing, missing


def test_the_table_names_the_layers_of_the_design():
  rules = layer_rules()
  assert {"schemas", "pipelines", "model", "benchmarks"} <= set(rules)
  assert rules["schemas"][0] == set()  # the contract imports no other layer
  assert "model" not in rules["pipelines"][0] and "pipelines" not in rules["model"][0]
  assert {"tensorflow", "keras"} <= rules["pipelines"][1]
  for package in rules:
    assert (REPO_ROOT / package).is_dir(), package


def test_every_module_keeps_to_its_layer(project):
  rules, modules, sources = project
  assert len(modules) > 200 and "pipelines.runner" in modules and "model.training.trainer" in modules
  found = violations(rules, modules, sources)
  assert not found, "\n".join(found)


def test_no_import_circle(project):
  _, modules, sources = project
  found = circles(import_graph(modules, sources))
  assert not found, found


def commands(modules: Dict[str, str], sources: Dict[str, str]) -> Set[str]:
  """The modules that run as commands (``python -m <module>``: an ``if __name__ ==
  "__main__":`` block)."""
  return {name for name, source in sources.items()
          if re.search(r"^if __name__ == [\"']__main__[\"']:", source, re.M)}


def command_imports(package: str, modules, sources) -> List[str]:
  """``"<module> imports <command>"`` for each module of ``package`` that imports one of its
  commands (other than itself): a command is a thin module over a library."""
  runnable = {c for c in commands(modules, sources) if c.split(".")[0] == package}
  found = []
  for name, path in sorted(modules.items()):
    if name.split(".")[0] != package:
      continue
    for imported in imported_names(sources[name], name, path.endswith("__init__.py")):
      if imported in runnable and imported != name:
        found.append(f"{name} imports {imported}")
  return found


def test_no_model_module_imports_a_command(project):
  _, modules, sources = project
  assert {"model.finetune", "model.predict", "model.evaluate"} <= commands(modules, sources)
  found = command_imports("model", modules, sources)
  assert not found, found


# Folders whose modules are named after a dataset or a task, one per entry, on purpose.
PER_ENTRY_FOLDERS = ("pipelines/datasets", "model/tasks", "model/evaluation")


def name_clashes(paths: List[str]) -> List[List[str]]:
  """Groups of module paths whose names are equal or differ only by a trailing "s"."""
  groups: Dict[str, List[str]] = {}
  for path in paths:
    stem = os.path.basename(path)[:-3]
    if stem in ("__init__", "__main__") or path.startswith(PER_ENTRY_FOLDERS):
      continue
    groups.setdefault(stem[:-1] if stem.endswith("s") else stem, []).append(path)
  return sorted(sorted(g) for g in groups.values() if len(g) > 1)


@pytest.mark.parametrize("package", ["pipelines", "model"])
def test_module_names_are_unique_in_the_package(project, package):
  _, modules, _ = project
  paths = [os.path.relpath(p, REPO_ROOT) for m, p in modules.items()
           if m.split(".")[0] == package]
  assert len(paths) > 20
  assert not name_clashes(paths), name_clashes(paths)


LONG_MODULE = 500  # lines


def long_modules_without_a_reason(sources: Dict[str, str]) -> List[str]:
  """Modules over :data:`LONG_MODULE` lines whose docstring does not say why
  (``Why this module is over 500 lines: ...``)."""
  return sorted(name for name, source in sources.items()
                if source.count("\n") > LONG_MODULE
                and "over 500 lines" not in (ast.get_docstring(ast.parse(source)) or ""))


def test_a_module_over_500_lines_says_why(project):
  _, _, sources = project
  long = [n for n, s in sources.items() if s.count("\n") > LONG_MODULE]
  assert long, "no module over 500 lines: the check below checks nothing"
  assert long_modules_without_a_reason(sources) == []


def test_the_checks_find_what_they_look_for():
  """Controls: a pipelines module that imports the model or TensorFlow inside a function, a
  relative import out of its package, and a two- and a three-module circle."""
  rules = {"pipelines": ({"schemas"}, {"tensorflow"}), "model": ({"schemas"}, set()),
           "schemas": (set(), set())}
  modules = {"pipelines.a": "pipelines/a.py", "pipelines.b": "pipelines/b.py",
             "model.c": "model/c.py", "schemas.d": "schemas/d.py"}
  sources = {"pipelines.a": "def f():\n  from model import c\n  import tensorflow as tf\n",
             "pipelines.b": "from schemas import d\nfrom . import a\n",
             "model.c": "from ..pipelines import b\n", "schemas.d": "import json\n"}
  found = violations(rules, modules, sources)
  assert any(v.startswith("pipelines.a imports model.c") for v in found), found
  assert any(v.startswith("pipelines.a imports tensorflow") for v in found), found
  assert any(v.startswith("model.c imports pipelines.b") for v in found), found
  assert not [v for v in found if v.startswith(("pipelines.b", "schemas.d"))], found
  assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
  assert circles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": set()}) == [["x", "y", "z"]]
  # A package importing its own modules (a registry) is no circle.
  graph = import_graph({"p": "p/__init__.py", "p.m": "p/m.py"},
                       {"p": "from p import m\n", "p.m": "from p import base\n"})
  assert graph == {"p": {"p.m"}, "p.m": set()} and circles(graph) == []
  cmd = {"m.a": 'import sys\nif __name__ == "__main__":\n  sys.exit(0)\n',
         "m.b": "from m import a\n", "m.a_lib": "x = 1\n"}
  assert commands({k: k for k in cmd}, cmd) == {"m.a"}
  assert command_imports("m", {k: k + ".py" for k in cmd}, cmd) == ["m.b imports m.a"]
  assert name_clashes(["pipelines/document.py", "pipelines/beam/documents.py",
                       "pipelines/beam/read.py", "pipelines/datasets/a/reader.py",
                       "pipelines/datasets/b/reader.py", "pipelines/x/__init__.py",
                       "pipelines/__init__.py"]) == [["pipelines/beam/documents.py",
                                                      "pipelines/document.py"]]
  long = "x = 1\n" * 501
  assert long_modules_without_a_reason(
      {"a": long, "b": '"""Doc.\n\nWhy this module is over 500 lines: one parser."""\n' + long,
       "c": "x = 1\n"}) == ["a"]
