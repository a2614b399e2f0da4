"""Tests of pipelines/inspector/html_view.py."""

from __future__ import annotations

import html.parser
from typing import Dict, List, Tuple

from pipelines.inspector import html_view
from tests.pipelines.inspector.builders import QUESTION, load

class _Collector(html.parser.HTMLParser):
  """Checks nesting and collects the text inside <mark class="ans"> and mention spans."""

  VOID = {"meta", "br", "link", "img", "hr", "input"}

  def __init__(self):
    super().__init__()
    self.stack: List[Tuple[str, Dict]] = []
    self.answers: Dict[str, str] = {}
    self.mentions: List[Tuple[str, str]] = []
    self.errors: List[str] = []

  def handle_starttag(self, tag, attrs):
    if tag in self.VOID:
      return
    self.stack.append((tag, dict(attrs)))

  def handle_endtag(self, tag):
    if tag in self.VOID:
      return
    if not self.stack or self.stack[-1][0] != tag:
      self.errors.append(f"unbalanced </{tag}>")
      return
    self.stack.pop()

  def handle_data(self, data):
    for tag, attrs in self.stack:
      if tag == "mark" and attrs.get("class") == "ans":
        key = attrs.get("title", "legend")
        self.answers[key] = self.answers.get(key, "") + data
      if tag == "span" and attrs.get("class") == "ent":
        self.mentions.append((attrs.get("data-entity", "legend"), data))


def test_render_html_is_well_formed_escaped_and_highlights(output_dir, tokenizer):
  paths, manifest, recs = load(output_dir)
  page = html_view.render_html(recs, tokenizer, manifest, paths=paths)
  parser = _Collector()
  parser.feed(page)
  parser.close()
  assert not parser.errors and not parser.stack
  assert parser.answers["ANS#0 tokens [21, 21]"] == "1903"
  assert parser.answers["ANS#1 tokens [16, 18]"] == "won the Nobel"
  entity42 = "".join(d for e, d in parser.mentions if e == "42")
  assert entity42 == "Marie Curie42"  # text, then the <sup> entity id
  assert "<sup>42</sup>" in page and "<sup>7</sup>" in page
  assert f'<span class="q" title="question prefix">{QUESTION}</span>' in page
  assert "&lt;radioactivity&gt; &amp; polonium" in page
  assert "<radioactivity>" not in page
  assert '<table class="labels">' in page and "<td>span</td>" in page
  assert "<td>doc-1</td>" in page and "<td>0/3</td>" in page
  for external in ("src=", "href=", "@import", "http://", "https://"):
    assert external not in page
  assert "<style>" in page
