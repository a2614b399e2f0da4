"""The README is a guide with a table of contents, and the docs it links to hold together: every
relative markdown link of README.md and docs/*.md names a file of the repository, and every
``#anchor`` a heading of its page (GitHub's anchors); the README stays short."""

import re
import unicodedata
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from tests import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README] + sorted((REPO_ROOT / "docs").glob("*.md"))
MAX_README_LINES = 300
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")


def prose(text: str) -> str:
  """``text`` without fenced code blocks and inline code (links there are not links)."""
  text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
  return re.sub(r"`[^`\n]*`", "", text)


def headings(text: str) -> List[Tuple[int, str]]:
  """``(level, title)`` of the page's headings, outside code blocks."""
  return [(len(m.group(1)), m.group(2).strip())
          for m in re.finditer(r"^(#{1,6}) (.+)$", re.sub(r"^```.*?^```", "", text,
                                                        flags=re.S | re.M), re.M)]


def slug(title: str) -> str:
  """GitHub's anchor of a heading: markup dropped, lower case, punctuation out, spaces -> -."""
  title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link keeps its text
  title = title.replace("`", "").replace("*", "").strip().lower()
  kept = "".join(c for c in title if c in " -_" or unicodedata.category(c)[0] in "LN")
  return kept.replace(" ", "-")


def anchors(text: str) -> Set[str]:
  seen: Dict[str, int] = {}
  out = set()
  for _, title in headings(text):
    base = slug(title)
    n = seen.get(base, 0)
    out.add(base if n == 0 else f"{base}-{n}")
    seen[base] = n + 1
  return out


def links(page: Path) -> List[str]:
  return [m.group(2) for m in LINK.finditer(prose(page.read_text(encoding="utf-8")))]


def test_slug_is_githubs():
  assert slug("Your own QA data (JSON lines)") == "your-own-qa-data-json-lines"
  assert slug("Pre-training corpora: Wikipedia and books") == \
      "pre-training-corpora-wikipedia-and-books"
  assert slug("Records (schema `readtwice.segments` 1.0.0)") == \
      "records-schema-readtwicesegments-100"
  assert anchors("# A\n## A\n") == {"a", "a-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page):
  problems = []
  for target in links(page):
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, gs:
      continue
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
      problems.append(f"{target}: no such file")
    elif REPO_ROOT.resolve() not in file.resolve().parents and file != README:
      problems.append(f"{target}: outside the repository")
    elif anchor and file.suffix == ".md" and anchor not in anchors(
        file.read_text(encoding="utf-8")):
      problems.append(f"{target}: no heading with anchor #{anchor} in {file.name}")
  assert not problems, f"{page.relative_to(REPO_ROOT)}: " + "; ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_code_fences_are_closed(page):
  fences = [line for line in page.read_text(encoding="utf-8").splitlines()
            if line.lstrip().startswith("```")]
  assert len(fences) % 2 == 0, f"{page.name}: an unclosed ``` block"


def test_every_docs_page_is_linked_from_the_readme():
  linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
  assert {p.resolve() for p in PAGES[1:]} <= linked, \
      sorted(p.name for p in PAGES[1:] if p.resolve() not in linked)


def documented_commands() -> Dict[str, List[Tuple[str, str]]]:
  """``{module: [(page, command), ...]}`` of every ``python -m pipelines...`` / ``model...``
  command in the pages' bash blocks (continuation lines joined; ``python -m pipelines <name>``
  is keyed ``pipelines <name>``)."""
  found: Dict[str, List[Tuple[str, str]]] = {}
  for page in PAGES:
    text = page.read_text(encoding="utf-8")
    for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, re.S | re.M):
      for cmd in re.sub(r"\\\n\s*", " ", block).splitlines():
        m = re.search(r"python -m ((?:pipelines|model)[\w.]*)(?: ([a-z_]+)(?= |$))?", cmd)
        if m:
          module = m.group(1) + (f" {m.group(2)}" if m.group(1) == "pipelines" else "")
          found.setdefault(module, []).append((page.name, cmd.split("#")[0]))
  return found


def test_every_prediction_after_fine_tuning_uses_the_best_model():
  """A ``model.predict`` that follows a ``model.finetune`` on a page predicts with that run's
  ``<model_dir>/best`` (the checkpoint the dev metric chose), not its last checkpoint."""
  problems, checked = [], 0
  for page in PAGES:
    text = page.read_text(encoding="utf-8")
    finetuned = None  # the --model_dir of the page's last model.finetune command
    for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, re.S | re.M):
      for cmd in re.sub(r"\\\n\s*", " ", block).splitlines():
        m = re.search(r"python -m (model\.finetune|model\.predict) .*--model_dir (\S+)", cmd)
        if not m:
          continue
        if m.group(1) == "model.finetune":
          finetuned = m.group(2).rstrip("/")
        elif finetuned is not None:
          checked += 1
          if m.group(2).rstrip("/") != f"{finetuned}/best":
            problems.append(f"{page.name}: {cmd.strip()}")
  assert checked >= 5 and not problems, (checked, problems)


def test_readme_is_short():
  n = len(README.read_text(encoding="utf-8").splitlines())
  assert n <= MAX_README_LINES, f"README.md has {n} lines (at most {MAX_README_LINES})"


def test_readme_table_of_contents_matches_its_headings():
  text = README.read_text(encoding="utf-8")
  assert "\n## Contents\n" in text
  toc_block = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
  toc = [(len(m.group(1)) // 2, m.group(2), m.group(3))
         for m in re.finditer(r"^( *)- \[([^\]]+)\]\(#([^)]+)\)$", toc_block, re.M)]
  sections = [(level - 2, title) for level, title in headings(text)
              if level in (2, 3) and title != "Contents"]
  assert [(depth, title) for depth, title, _ in toc] == sections
  assert [anchor for _, _, anchor in toc] == [slug(title) for _, title in sections]
  assert all(a in anchors(text) for _, _, a in toc)
