"""The parse's fast paths in ``wikitext.clean`` (issue 29): markup lifted out before the parse
must clean to exactly what the parser's nodes give.  Each page is cleaned twice, with the fast
path and with it switched off (the walk then sees only the parser's nodes), and the two
CleanPages must be equal -- text, links, paragraphs, templates and categories."""

from __future__ import annotations

import random

import pytest

from pipelines.text import wikitext
from pipelines.datasets.wikipedia import fake_input as synth_wiki

TRICKY = [
    "The [[Paris]]ian [[river]]s of [[France|la France]]s.",  # link trails
    "[[Seattle, Washington|]] and [[Foo (bar)|]] pipe tricks; [[A| ]] blank; [[B|]].",
    "[[A|see [[B]] and [[C|c]]]] nested inside an anchor.",
    "[[[A]]] and [[B]]] and [[[C]] brackets around.",
    "{{lang|fr|[[Paris|la ville]]}} and {{nowrap|[[A]]s}} text templates; {{foo|[[A|x=y]]}}.",
    "{{foo|x=[[A|b]]|[[C]]}} dropped template params.",
    "== [[A]] ==\nSection text [[B]].\n== See also ==\n* [[C]]\n[[Category:Cats]] [[D]]",
    "<nowiki>[[A]]</nowiki> [[B]] on a page with unparsed tags.",
    "<pre>[[A]]</pre> [[B]]",
    "''[[A|b]]'' and '''[[C]]''' and ''[[D]]s'' styled.",
    "[[A|__NOTOC__x]] and [[A|b&amp;c]] and [[A&amp;B]] entities.",
    "[[a]] lower-case target, [[A_b]] underscore, [[A#frag|x]] fragment, [[#frag]] only.",
    "[[File:X.jpg|thumb|[[A]] caption]] [[Image:Y.png]] and [[:Category:Z]] and [[fr:Paris]].",
    "[[wikt:word|word]] and [[s:Text|text]] sister links; [[A]][[B]] adjacent; [[A]]\n[[B]].",
    "A [http://example.com [[A]] site] and a http://x.org/[[A]] bare URL.",
    "Text \ue000 with a private-use char [[A]].",
    "{{convert|1,234|km}} and [[A|1 km]]s.",
    "<ref>[[A]]</ref>[[B]]<!-- [[C]] --> [[D]]",
    "==[[A]]==\n;[[A]]: [[B]]\n*[[C]]s\n#[[D|d]]\n mailto:x[[A]] and {{{1|[[A]]}}}.",
    "[[A]]<span>b</span>[[B|c]]d<br/>[[E]]&nbsp;[[F]]",
    "{{Infobox x|a=[[A]]|b=1}}[[B]]{{cite|x}}s and {{ }} {{}} {{#if:x|y}} {{Template:Foo}}.",
    "{{convert|5|{{abbr|km}}}} and {{lang|fr|{{x}} y}} and {{outer|{{inner|z}}}} nesting.",
    "[[A|b {{x}} c]] and [[{{x}}]] and {{x}}{{y}} and http://x.org/{{x}} and {{x|\n|y}}.",
    "Lead {{a}}.\n== See also ==\n{{b}} [[C]] {{c|[[D]]}}\n== Next ==\n{{d}} text",
    "{{{1|{{x}}}}} and {{x}}} and {{{{x}}}} and {{nowrap|[[A]]}}s {{small|b}}.",
]


def _both(text: str, title: str = "Page"):
  fast = wikitext.clean(text, title)
  lift, lift_templates = wikitext._lift_simple_links, wikitext._lift_simple_templates  # pylint: disable=protected-access
  try:
    wikitext._lift_simple_links = lambda t: (t, [])  # pylint: disable=protected-access
    wikitext._lift_simple_templates = lambda t, ns: (t, [])  # pylint: disable=protected-access
    slow = wikitext.clean(text, title)
  finally:
    wikitext._lift_simple_links = lift  # pylint: disable=protected-access
    wikitext._lift_simple_templates = lift_templates  # pylint: disable=protected-access
  return fast, slow


@pytest.mark.parametrize("text", TRICKY)
def test_lifted_links_clean_like_parsed_ones(text):
  fast, slow = _both(text)
  assert fast == slow


def test_lifting_takes_most_links_of_a_page_and_skips_pages_with_unparsed_tags():
  text, lifted = wikitext._lift_simple_links(TRICKY[0])  # pylint: disable=protected-access
  assert [t for t, _ in lifted] == ["Paris", "river", "France"]
  assert "[[" not in text
  assert wikitext._lift_simple_links(TRICKY[7])[1] == []  # pylint: disable=protected-access


def test_generated_pages_clean_alike():
  pages = list(synth_wiki.generate_pages(60, seed=7, words_per_page=200))
  rng = random.Random(3)
  checked = 0
  for page in pages:
    text = page.text
    if rng.random() < 0.5:  # splice tricky markup into some pages
      text = text + "\n" + rng.choice(TRICKY)
    fast, slow = _both(text, page.title)
    assert fast == slow, page.title
    checked += bool(fast.links)
  assert checked > 20


def _regex_mentions(text, names):
  """The self-mention search as it was: one regex of the names, longest first."""
  import re  # pylint: disable=g-import-not-at-top
  pattern = re.compile(r"(?<![^\W_])(?:" + "|".join(re.escape(s) for s in names)
                       + r")(?![^\W_])")
  return [m.span() for m in pattern.finditer(text)]


def test_self_mention_search_equals_the_regex_search():
  rng = random.Random(11)
  alphabet = ["Paris", "Paris Texas", "Texas", "é", "ß", "_", " ", "-", "1", "a", "(", ")",
              "Ünal", "x2", "\u00e9t\u00e9", ",", "\n"]
  for _ in range(400):
    names = sorted({"".join(rng.choice(alphabet[:6] + ["Ünal", "a"]) for _ in range(
        rng.randrange(1, 3))).strip() or "a" for _ in range(rng.randrange(1, 4))},
        key=len, reverse=True)
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
    assert list(wikitext._self_mentions(text, names)) == _regex_mentions(text, names), (  # pylint: disable=protected-access
        text, names)


@pytest.mark.parametrize("title", ["Paris", "Mercury (planet)", "iPhone", "C++", "A_b c"])
def test_self_mentions_of_a_page(title):
  text = (f"{title} is here. The {title.split(' (')[0]}ian and {title}s are not; "
          f"({title.split(' (')[0]}) is, _{title}_ is not.")
  page = wikitext.wiki_titles.normalize_title(title, wikitext.Namespaces.default())
  names = wikitext._self_mention_names(page, title)  # pylint: disable=protected-access
  assert list(wikitext._self_mentions(text, names)) == _regex_mentions(text, names)  # pylint: disable=protected-access
  found = any(link.target == page.text for link in wikitext.clean(text, title).links)
  assert found == ("_" not in title)  # "A_b c" is shown "A b c", which the text lacks


def _reference_normalise(raw):
  """The whitespace rewrite spelled out: each maximal whitespace run becomes "" at either end of
  the text, else " " (no newline in it), "\\n" (one) or "\\n\\n" (more)."""
  import re  # pylint: disable=g-import-not-at-top
  out, at = [], 0
  for m in re.finditer(r"\s+", raw):
    out.append(raw[at:m.start()])
    run = m.group()
    if m.start() == 0 or m.end() == len(raw):
      rep = ""
    else:
      k = run.count("\n")
      rep = " " if k == 0 else "\n" if k == 1 else "\n\n"
    out.append(rep)
    at = m.end()
  out.append(raw[at:])
  return "".join(out)


def test_whitespace_rewrite_skips_runs_it_keeps_and_maps_offsets():
  rng = random.Random(5)
  alphabet = ["a", "b", " ", "\n", "\t", "\xa0", "\r", "x y", "\n\n"]
  for _ in range(20000):
    raw = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
    text, mapper = wikitext._normalise(raw)  # pylint: disable=protected-access
    assert text == _reference_normalise(raw), repr(raw)
    for p in range(len(raw) + 1):
      if not raw[:p].strip() or not raw[p:].strip():
        continue
      if not raw[p - 1].isspace() and not raw[p].isspace():  # outside whitespace: exact
        assert text[mapper(p, False)] == raw[p] and text[mapper(p, True) - 1] == raw[p - 1]
