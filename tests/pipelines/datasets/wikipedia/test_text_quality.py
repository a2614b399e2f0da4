"""Text quality of the Wikipedia cleaner on real dump pages (issue 29): no markup left in any
article's text -- no ``<ref``, ``{{``, ``}}``, ``[[``, ``]]``, table-row ``|`` at a line start,
no empty slot where a ``convert`` stood -- and no page swallowed by malformed markup (each
article keeps most of its prose).  Runs over the shared real-format dump samples (skipped when
absent) and over generated pages with the constructs that used to leak."""

from __future__ import annotations

import os
import re

import pytest

from pipelines.datasets.wikipedia import pages as pages_lib
from pipelines.datasets.wikipedia import reader as dump_reader
from pipelines.text import wikitext
from pipelines.datasets.wikipedia import fake_input as synth_wiki
from tests import REPO_ROOT

SAMPLES = os.path.join(str(REPO_ROOT), "..", "shared", "samples", "wikipedia")
LEAKS = {"<ref": re.compile(r"<ref", re.I), "{{": re.compile(r"\{\{"),
         "}}": re.compile(r"\}\}"), "[[": re.compile(r"\[\["), "]]": re.compile(r"\]\]"),
         "table row": re.compile(r"^[ \t]*(?:\||\{\||!)", re.M),
         "empty convert slot": re.compile(r"\b(?:At|at|of|about|is|was|by|from) [,.;]")}


def _leaks(text: str):
  return {name: len(p.findall(text)) for name, p in LEAKS.items() if p.search(text)}


def _articles(path: str):
  with open(path, "rb") as f:
    namespaces = pages_lib.namespaces_of(dump_reader.read_siteinfo(f, path))
  with open(path, "rb") as f:
    for page in dump_reader.iter_pages(f, path):
      if page.namespace == 0 and page.redirect is None:
        yield page, namespaces


@pytest.mark.parametrize("name", ["enwiki-table-markup.xml.bz2", "testcorpus.xml.bz2"])
def test_sample_dump_articles_have_no_markup_left(name):
  path = os.path.join(SAMPLES, name)
  if not os.path.exists(path):
    pytest.skip(f"{path} not present")
  count = 0
  for page, namespaces in _articles(path):
    text = wikitext.clean(page.text, page.title, namespaces).text
    assert _leaks(text) == {}, page.title
    count += 1
  assert count >= 5


def test_sample_pages_keep_their_plain_prose():
  """Every plain prose line of the sample pages (no markup in it, outside tables and dropped
  sections) is in the text: nothing is swallowed by the tables and refs around it."""
  path = os.path.join(SAMPLES, "enwiki-table-markup.xml.bz2")
  if not os.path.exists(path):
    pytest.skip(f"{path} not present")
  checked = 0
  for page, namespaces in _articles(path):
    text = " ".join(wikitext.clean(page.text, page.title, namespaces).text.split())
    prose = wikitext.strip_dropped_markup(page.text)
    for heading in ("See also", "References", "External links", "Notes", "Further reading"):
      prose = prose.split(f"== {heading} ==")[0]
    for line in prose.splitlines():
      line = " ".join(line.split())
      if len(line) > 40 and not re.search(r"[\[\]{}<>|=*#'&:;]", line):
        assert line in text, (page.title, line)
        checked += 1
  assert checked >= 5


def test_generated_pages_with_leaky_constructs_clean_fully():
  extra = ("The term [[wikt:anarchism|anarchism]] is a compound word. At "
           "{{convert|1,234|km|mi}}, it is long.<ref>A ''note</ref> After the ref. "
           "<!-- <ref>hidden</ref> --> Hidden ref gone.\n"
           '{| class="wikitable sortable" font-size:80%;"\n|-\n| a || b\n|}\n'
           "== Economy ==\nThe economy section survives the stray quote.\n")
  for page in synth_wiki.generate_pages(20, seed=4, words_per_page=150):
    text = wikitext.clean(extra + "\n" + page.text, page.title).text  # before any dropped section
    assert _leaks(text) == {}, page.title
    for kept in ("The term anarchism is a compound word.", "At 1,234 km, it is long.",
                 "After the ref.", "Hidden ref gone.",
                 "The economy section survives the stray quote."):
      assert kept in text, (page.title, kept)
