"""MediaWiki wikitext -> clean text + entity links (pure Python; ``mwparserfromhell``, no Beam/TF).

:func:`clean` removes comments, refs and wiki tables (:func:`strip_dropped_markup`, so that
malformed markup inside them cannot swallow prose), parses the page once
(``mwparserfromhell.parse``) and produces, from one walk over the node tree, the clean text, every internal article link as a :class:`Link` whose character span is
exactly its anchor text, the paragraphs with their section titles, the templates and the
categories of the page.  Link targets and namespaces follow :mod:`pipelines.text.wiki_titles`.

Cleaning rules (what :func:`clean` keeps and drops):

* Text is kept; HTML entities are decoded (``&nbsp;`` becomes a space after normalisation);
  behaviour switches (``__TOC__``, ``__NOTOC__``, ...) and stray ``''``/``'''`` runs that the
  parser left unmatched are removed.
* ``[[T]]``, ``[[T|anchor]]`` with ``T`` in namespace 0: the anchor is emitted (``anchor`` cleaned
  recursively; else the title as written minus a leading ``:`` and minus ``#fragment``; the pipe
  trick ``[[Foo (bar)|]]`` gives ``Foo``, ``[[Seattle, Washington|]]`` gives ``Seattle``) and a
  :class:`Link` covers it, extended by a link trail of lower-case ``a-z`` (``[[bus]]es``).  A link
  inside another link's anchor gives text only.  ``[[#Section|x]]`` gives ``x`` (``[[#Section]]``
  gives ``Section``), no Link.  A target that is not a valid title (``[[{{x}}]]``, ``[[a<b]]``)
  gives its display text, no Link.
* File/Image/Media links (namespace 6, -2) are removed with their captions; ``[[Category:X]]`` is
  removed and ``X`` recorded in ``categories``; language links ``[[de:Foo]]`` are removed (the
  sidebar's); sister-project links (``[[wikt:anarchism|anarchism]]``, ``[[s:Text|x]]``) keep
  their display text, no Link.  With a leading colon (``[[:Category:X|y]]``, ``[[:de:Foo|x]]``, ``[[:File:F.jpg]]``)
  and for every other namespace (``[[Wikipedia:Foo|bar]]``) the display text is kept, no Link.
  A namespace prefix is any name in the :class:`pipelines.text.wiki_titles.Namespaces` table
  (case-insensitive, ``_`` as space); for a dump the table holds its ``<siteinfo>`` names
  (bgwiki ``Файл``, ``Категория``) plus MediaWiki's canonical English names and built-in aliases
  (``File``, ``Image``, ``Category``, ``Project``;
  :meth:`pipelines.datasets.wikipedia.reader.SiteInfo.link_names`).
* Templates, parser functions and template arguments (``{{{1}}}``) are removed; the normalised
  names of the templates the walk meets (lower case, ``_`` -> space, ``Template:`` or another
  namespace-10 name of the table (``Шаблон:``) dropped; for ``{{NAME:arg}}`` magic words the
  part before the colon; parser functions ``{{#if:..}}`` are not recorded) go to ``templates``,
  also those inside dropped sections.  Templates that render running text keep it (outside
  dropped sections): ``{{convert|2|km|mi}}`` / ``{{cvt|..}}`` give the value and the unit as
  written (``2 km``; ranges ``{{convert|10|to|20|km}}`` -> ``10 to 20 km``, ``10|-|20`` ->
  ``10–20``, feet and inches ``{{convert|5|ft|6|in}}`` -> ``5 ft 6 in``; no conversion, and
  nothing when the value is not a plain number); ``{{lang|fr|texte}}`` / ``{{transl|..}}``
  give their text, ``{{nowrap|x}}``, ``{{nobr|x}}``, ``{{small|x}}`` and the like give ``x``
  (links inside are links); :data:`TEXT_TEMPLATES`.
* Tags: ``<ref>``, ``<references>``, ``<gallery>``, ``<math>``, ``<chem>``, ``<score>``,
  ``<timeline>``, ``<syntaxhighlight>``, ``<source>``, ``<imagemap>``, ``<templatedata>``,
  ``<templatestyles>``, ``<graph>``, ``<mapframe>``, ``<includeonly>``, ``<style>``, ``<script>``,
  HTML ``<table>`` and wiki tables ``{| |}`` are removed with their contents (:data:`DROPPED_TAGS`).
  Every other tag keeps its contents: bold/italic, ``<b> <i> <small> <span> <sup> <sub> <u> <s>
  <big> <abbr> <code> <poem> <noinclude> <onlyinclude>``, ``<nowiki>``/``<pre>`` (their literal
  content, entities decoded).  Block tags (``<div> <p> <blockquote> <center> <li>`` ...) start a
  new line; ``<br>`` is a newline.  List markers ``* # : ;`` are dropped (the items stay separate
  lines); ``----`` and comments are removed.
* External links: ``[http://x.org label]`` -> ``label`` (no Link); ``[http://x.org]`` and bare
  URLs are removed.
* ``== Heading ==``: the heading text is its own paragraph and starts a section (the heading's
  paragraph and the paragraphs after it carry its title; the lead's title is "").  A section whose
  title (case-insensitive) is in :data:`DROPPED_SECTIONS` is removed, heading included, up to the
  next heading of the same or a higher level (its templates and categories are still recorded).
* Whitespace: a whitespace run holding two or more newlines is a paragraph break (``"\\n\\n"``),
  one newline is a line break (``"\\n"``; lines are kept, also outside lists), any other run
  (spaces, tabs, NBSP, other Unicode spaces) is one space; lines and paragraphs are stripped,
  empty ones disappear, and the text has no leading/trailing whitespace.  Link anchors are
  stripped too; a link whose anchor is empty is dropped.
* Self mentions (``self_mentions`` and an article ``title``): case-sensitive occurrences of the
  normalised title or the title as given (``_`` -> space), and of those without a trailing
  ``(disambiguator)``, that are not preceded/followed by an alphanumeric character and do not
  overlap a link, become Links to the page itself (target: the normalised title).

Offsets are Python ``str`` indices into ``CleanPage.text`` (code points), exact for any script.
Malformed markup never raises: what the parser leaves as plain text (an unclosed ``{{`` or ``[[``)
is kept as text.

Why this module is over 500 lines: the cleaning rules above are one contract, and the code
that keeps them (the strippers that run before the parse and the walker over its node tree)
hands one page's text and spans from one step to the next; the rules stay on one page.
"""

from __future__ import annotations

import bisect
import functools
import html
import itertools
import re
from dataclasses import dataclass
from typing import FrozenSet, Iterator, List, Optional, Tuple

import mwparserfromhell
from mwparserfromhell.nodes import (Argument, Comment, ExternalLink, Heading, HTMLEntity, Tag,
                                    Template, Text, Wikilink)

from pipelines.text import wiki_titles
from pipelines.text.wiki_titles import Namespaces, Title

DEFAULT_DISAMBIGUATION_TEMPLATES: FrozenSet[str] = frozenset({
    "disambiguation", "disambig", "dab", "disamb", "dbig", "dis", "hndis", "hndisambig",
    "geodis", "surname", "given name", "set index article", "sia", "human name disambiguation",
    "place name disambiguation", "disambiguation cleanup", "disambig-cleanup", "numberdis",
    "number disambiguation", "roaddis", "road disambiguation", "school disambiguation",
    "hospital disambiguation", "mil-unit-dis", "letter-number combination disambiguation",
    "lnd", "species latin name disambiguation", "genus disambiguation", "taxonomy disambiguation",
    "call sign disambiguation", "chinese title disambiguation", "airport disambiguation",
    "math disambiguation", "mathdab", "ship index", "shipindex", "mountain index",
    "mountainindex", "sport index", "sportindex", "lake index", "storm index", "plant common name",
    "molecular formula index", "chemistry index", "enzyme index", "fish common name",
})

DROPPED_SECTIONS: FrozenSet[str] = frozenset({
    "references", "external links", "see also", "further reading", "notes", "bibliography",
    "sources", "citations", "notes and references", "references and notes", "footnotes",
})

# Tags removed together with their contents (lower-case tag names).
DROPPED_TAGS: FrozenSet[str] = frozenset({
    "ref", "references", "gallery", "math", "chem", "ce", "score", "timeline", "syntaxhighlight",
    "source", "imagemap", "templatedata", "templatestyles", "graph", "mapframe", "maplink",
    "inputbox", "categorytree", "includeonly", "style", "script", "table", "tr", "td", "th",
    "caption", "hiero", "indicator", "charinsert", "ul-references",
})
# Tags whose contents start and end a line.
_BLOCK_TAGS = frozenset({
    "div", "p", "blockquote", "center", "li", "ul", "ol", "dl", "dd", "dt", "h1", "h2", "h3",
    "h4", "h5", "h6", "poem",
})

_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
_BEHAVIOUR_SWITCH = re.compile(r"__[A-Z]+__")
_APOSTROPHES = re.compile(r"'{2,}")
_TRAIL = re.compile(r"[a-z]+")
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
# Templates that show one of their positional parameters as running text: name -> its number.
TEXT_TEMPLATES = {"lang": 2, "transl": 2, "nowrap": 1, "nobr": 1, "small": 1, "smaller": 1,
                  "big": 1, "larger": 1, "nobold": 1, "noitalic": 1}
_CONVERT = frozenset({"convert", "cvt"})
_CONVERT_RANGES = frozenset({"-", "–", "to", "and", "or", "by", "x", "+/-", "to(-)", "and(-)",
                             "or(-)", "xx", "*"})
_NUMBER = re.compile(r"[-+−]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?(?:\+?\d+/\d+)?$",
                     re.I)


def _convert_text(args: List[str]) -> Optional[str]:
  """What ``{{convert|..}}`` shows, simplified: the value(s) and the input unit as written
  (``args``: its positional parameters, stripped); None when the first is not a number."""
  if len(args) < 2 or not _NUMBER.match(args[0]):
    return None
  text, i = args[0], 1
  while i + 1 < len(args) and args[i] in _CONVERT_RANGES and _NUMBER.match(args[i + 1]):
    sep = args[i].replace("(-)", "")
    text += ("–" if sep in ("-", "–") else f" {sep} ") + args[i + 1]
    i += 2
  if i >= len(args) or not args[i] or _NUMBER.match(args[i]):
    return None
  text += f" {args[i]}"
  if i + 2 < len(args) and _NUMBER.match(args[i + 1]) and not _NUMBER.match(args[i + 2]):
    text += f" {args[i + 1]} {args[i + 2]}"  # 5 ft 6 in
  return text


_REF = re.compile(r"<ref(?:\s[^>]*?)?(?:/>|>.*?</ref\s*>)", re.I | re.S)
_TABLE_LINE = re.compile(r"^[ \t]*(\{\||\|\})", re.M)


def _without_tables(wikitext: str) -> str:
  """``wikitext`` without its wiki tables: from each outermost ``{|`` at a line start to its
  matching ``|}`` at a line start (nested tables counted); a table never closed is kept."""
  pieces, at, depth, start = [], 0, 0, 0
  for m in _TABLE_LINE.finditer(wikitext):
    if m.group(1) == "{|":
      if depth == 0:
        start = m.start(1)
      depth += 1
    elif depth:
      depth -= 1
      if depth == 0:
        pieces.append(wikitext[at:start])
        at = m.end(1)
  if not pieces:
    return wikitext
  pieces.append(wikitext[at:])
  return "".join(pieces)


def strip_dropped_markup(wikitext: str, namespaces: Optional[Namespaces] = None) -> str:
  """Removes, before the parse, the markup whose contents are dropped anyway and that malformed
  markup inside would otherwise let swallow the prose after it: HTML comments first (a
  ``<ref>`` or table inside a comment goes with it; an unclosed comment hides the rest, as in
  MediaWiki), then ``<ref>..</ref>`` and ``<ref/>`` (each ends at its first ``</ref>``, so an
  unbalanced ``''`` inside cannot run on), then wiki tables by their line-start delimiters
  (:func:`_without_tables`, so a stray quote in a table's attributes cannot hide the rest of
  the page), then File/Image/Media links with their captions (:func:`_without_file_links`: an
  unbalanced bold/italic quote run in a caption would pair with one after the link, and the
  parser would then read no link at all and leave ``[[File:...]]`` in the text), and the
  quote runs of a link whose bold/italic runs do not pair up inside it
  (:func:`_balanced_link_quotes`, for the same reason).  Well-formed
  pages clean to the same text either way.  ``namespaces``: the wiki's table (the names of
  namespaces 6 and -2; default English Wikipedia's)."""
  # Comments and refs become an empty comment, which the walk drops like them (an anchor that
  # held only a ref stays a blank anchor, not a pipe trick).
  if "<!--" in wikitext:
    wikitext = _COMMENT.sub("<!---->", wikitext)
  if "<ref" in wikitext or "<REF" in wikitext or "<Ref" in wikitext:
    wikitext = _REF.sub("<!---->", wikitext)
  if "{|" in wikitext:
    wikitext = _without_tables(wikitext)
  if "[[" in wikitext:
    wikitext = _without_file_links(wikitext, namespaces or Namespaces.default())
    if "''" in wikitext:
      wikitext = _QUOTED_LINK.sub(_balanced_link_quotes, wikitext)
  return wikitext


# A link without links or line breaks inside whose text holds a bold/italic quote run.
_QUOTED_LINK = re.compile(r"\[\[[^\[\]\n]*''[^\[\]\n]*\]\]")
_QUOTE_RUN = re.compile(r"'{2,}")


def _balanced_link_quotes(m: re.Match) -> str:
  """A link (``[[Paris|A '''b'' c]]``) whose bold/italic quote runs do not pair up inside it,
  without them: the parser would pair the odd run with one after the link, read no link at all
  and leave ``[[Paris|A b c]]`` in the text.  Formatting has no plain text, so the anchor reads
  the same (a run of 4 keeps one apostrophe, of more than 5 the extra ones, as MediaWiki
  does).  A link whose runs pair up is returned unchanged."""
  link = m.group()
  runs = [len(r) for r in _QUOTE_RUN.findall(link)]
  italics = sum(1 for n in runs if n in (2, 5) or n > 5)
  bolds = sum(1 for n in runs if n in (3, 4) or n >= 5)
  if italics % 2 == 0 and bolds % 2 == 0:
    return link
  return _QUOTE_RUN.sub(lambda r: "'" if len(r.group()) == 4 else "'" * max(0, len(r.group()) - 5),
                        link)


_BRACKETS = re.compile(r"\[\[|\]\]")


@functools.lru_cache(maxsize=64)
def _file_link_start(names: Tuple[str, ...]) -> "re.Pattern[str]":
  """``[[`` + one of ``names`` (a File or Media namespace name, any case, ``_`` or spaces for
  its spaces) + ``:``; no leading colon (``[[:File:X]]`` is a link to the file page, kept)."""
  alternatives = sorted((r"[\s_]+".join(map(re.escape, n.split())) for n in names), key=len,
                        reverse=True)
  return re.compile(r"\[\[[\s_]*(?:" + "|".join(alternatives) + r")[\s_]*:", re.I)


def _without_file_links(wikitext: str, namespaces: Namespaces) -> str:
  """``wikitext`` without its File/Image/Media links (namespaces 6 and -2, which :func:`clean`
  drops with their captions): each from its ``[[`` to the matching ``]]`` (links inside the
  caption counted), replaced by an empty comment (the walk drops it).  A link never closed is
  left to the parser."""
  names = tuple(sorted(n for n, ns in namespaces.names.items() if ns in (6, -2) and n.strip()))
  if not names:
    return wikitext
  start_re = _file_link_start(names)
  pieces, at = [], 0
  m = start_re.search(wikitext)
  while m is not None:
    depth, end = 1, -1
    for b in _BRACKETS.finditer(wikitext, m.end()):
      depth += 1 if b.group() == "[[" else -1
      if depth == 0:
        end = b.end()
        break
    if end < 0:  # never closed: the parser's job
      break
    pieces.append(wikitext[at:m.start()])
    pieces.append("<!---->")
    at = end
    m = start_re.search(wikitext, end)
  if not pieces:
    return wikitext
  pieces.append(wikitext[at:])
  return "".join(pieces)
# Simple links, taken out before the parse (:func:`_lift_simple_links`): a namespace-0-looking
# target and an optional plain anchor, with nothing the parser would read inside (brackets,
# braces, tags, entities in the anchor, quotes, '=', ':', newlines).  Not right after '[' nor
# right before ']' (``[[[A]]]``).
_SIMPLE_LINK = re.compile(r"(?<!\[)\[\[([^\[\]{}<>|\n:'=\ue000\ue001]+)"
                          r"(?:\|([^\[\]{}<>|\n:'=&\ue000\ue001]*))?\]\](?!\])")
# Simple templates, taken out after the links (:func:`_lift_simple_templates`): a one-line name
# and parameters without braces, brackets or tags (lifted links inside are fine: the walk never
# reads a dropped template's parameters).
_SIMPLE_TEMPLATE = re.compile(r"(?<!\{)\{\{([^{}\[\]<>|\n\ue000-\ue003]+)"
                              r"(\|[^{}\[\]<>\ue002\ue003]*)?\}\}(?!\})")
_LIFTED = re.compile("\ue000([0-9]+)\ue001|\ue002([0-9]+)\ue003")
_URL_LOOKBACK = 2048
_NESTING_LOOKBACK = 20000  # how far back an enclosing '{{' or '[[' is looked for
# Tags whose contents the parser leaves unparsed (``<nowiki>``, ``<pre>``, ...): a page with any
# of them is parsed as it is.
_LITERAL_TAGS = re.compile(
    "<(?:" + "|".join(sorted(mwparserfromhell.definitions.PARSER_BLACKLIST)) + r")\b", re.I)


def _lift_simple_links(wikitext: str) -> Tuple[str, List[Tuple[str, Optional[str]]]]:
  """``wikitext`` with each simple link ``[[target]]`` / ``[[target|anchor]]`` replaced by a
  placeholder (U+E000, its index, U+E001), and the ``(target, anchor or None)`` of each; the
  walk reads a placeholder as the parser's Wikilink node (same text, link and link trail), so
  the parser builds no node for most links (the bulk of its time on real pages).  Unchanged
  when the page holds unparsed-content tags or the placeholder characters."""
  if "[[" not in wikitext or "\ue000" in wikitext or "\ue001" in wikitext or (
      "<" in wikitext and _LITERAL_TAGS.search(wikitext)):
    return wikitext, []
  lifted: List[Tuple[str, Optional[str]]] = []

  def lift(m: re.Match) -> str:
    # A link right after a word with a ':' may end a free URL ("http://x.org/[[A]]"), which
    # would run on over a placeholder: left to the parser.
    if _after_url_word(wikitext, m.start()):
      return m.group()
    lifted.append((m.group(1), m.group(2)))
    return f"\ue000{len(lifted) - 1}\ue001"

  return _SIMPLE_LINK.sub(lift, wikitext), lifted


def _after_url_word(wikitext: str, at: int) -> bool:
  """Whether the text right before ``at`` is a word holding ':' (the end of a free URL, which
  would run on over a placeholder)."""
  i = at - 1
  stop = max(-1, i - _URL_LOOKBACK)
  while i > stop and not wikitext[i].isspace():
    if wikitext[i] == ":":
      return True
    i -= 1
  return False


def _inside(wikitext: str, at: int, opening: str, closing: str) -> bool:
  """Whether ``at`` follows an ``opening`` not closed before it (within the lookback)."""
  start = max(0, at - _NESTING_LOOKBACK)
  return wikitext.rfind(opening, start, at) > wikitext.rfind(closing, start, at)


def _lift_simple_templates(wikitext: str, namespaces: Namespaces
                           ) -> Tuple[str, List[Optional[str]]]:
  """``wikitext`` (links lifted) with each simple template that renders nothing replaced by a
  placeholder (U+E002, its index, U+E003), and the normalised name of each (None: not a
  template name the walk keeps, e.g. a parser function); the walk reads a placeholder as the
  Template node (its name recorded, nothing shown).  Left to the parser: the templates that
  render text (``convert``, :data:`TEXT_TEMPLATES`), a blank name, and templates inside another
  template or a link, or right after a free URL (where the parser reads them in context)."""
  if "{{" not in wikitext or "\ue002" in wikitext or "\ue003" in wikitext:
    return wikitext, []
  names: List[Optional[str]] = []

  def lift(m: re.Match) -> str:
    raw = m.group(1)
    if not raw.strip():
      return m.group()
    name = _normalised_template_name(raw, namespaces)
    if (name in _CONVERT or TEXT_TEMPLATES.get(name) or _after_url_word(wikitext, m.start())
        or _inside(wikitext, m.start(), "{{", "}}") or _inside(wikitext, m.start(), "[[", "]]")):
      return m.group()
    names.append(name)
    return f"\ue002{len(names) - 1}\ue003"

  return _SIMPLE_TEMPLATE.sub(lift, wikitext), names


# Whitespace runs to rewrite: longer than one char, a single non-" " whitespace char, or a
# single " " at either end of the text.  (A pattern that skips the runs a rewrite keeps, "\n"
# and "\n\n", was tried: it has fewer matches but scans 1.7x slower.)
_WS = re.compile(r"\s{2,}|[^\S ]|^ | \Z")



@dataclass(frozen=True)
class Link:
  """An internal link (or self mention): ``CleanPage.text[begin:end] == anchor``; ``target`` is
  the normalised namespace-0 title (not redirect-resolved)."""
  begin: int
  end: int
  target: str
  anchor: str


@dataclass(frozen=True)
class CleanPage:
  """The result of :func:`clean`.

  ``links`` are sorted by ``begin`` and do not overlap.  ``paragraphs`` are ``(begin, end,
  section title)`` of every paragraph (text between ``"\\n\\n"``), in order, lead section "".
  ``templates``: normalised names of the templates met, in page order, with repeats.
  ``categories``: category titles (normalised, without ``Category:``), in page order."""
  text: str
  links: Tuple[Link, ...]
  paragraphs: Tuple[Tuple[int, int, str], ...]
  templates: Tuple[str, ...]
  categories: Tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Disambiguation pages, template names

def is_disambiguation(title: str, page: CleanPage,
                      templates: FrozenSet[str] = DEFAULT_DISAMBIGUATION_TEMPLATES,
                      title_suffix: bool = True) -> bool:
  """True when the page uses a disambiguation template (a name in ``templates``, or any name
  ending with "disambiguation"), or (``title_suffix``) its title ends with "(disambiguation)"
  (case-insensitive, ``_`` as space)."""
  for name in page.templates:
    if name in templates or name.endswith("disambiguation"):
      return True
  if title_suffix:
    return wiki_titles.TITLE_SPACES.sub(" ", title).strip().lower().endswith("(disambiguation)")
  return False


def _template_name(node: Template, namespaces: Namespaces) -> Optional[str]:
  nodes = node.name.nodes
  if len(nodes) == 1 and nodes[0].__class__ is Text:
    raw = nodes[0].value
  else:
    raw = _COMMENT.sub("", str(node.name))
  return _normalised_template_name(raw, namespaces)


def _normalised_template_name(raw: str, namespaces: Namespaces) -> Optional[str]:
  """The template name as the walk records it: spaces normalised, lower case, without a
  ``Template:`` prefix; a parser function's (``#if:``) is None, a magic word's is the part
  before ':'."""
  name = wiki_titles.TITLE_SPACES.sub(" ", raw).strip().lower()
  if not name or name.startswith("#"):
    return None
  colon_at = name.find(":")
  if colon_at >= 0:
    prefix = name[:colon_at].strip()
    template = prefix == "template" or namespaces.names.get(prefix) == 10
    name = name[colon_at + 1:].strip() if template else prefix
  return name or None


# ---------------------------------------------------------------------------------------------
# The walk


class _Walker:
  """Walks the node tree once, appending raw text pieces to ``out``; spans are recorded as
  indices into ``out`` and turned into character offsets afterwards."""

  def __init__(self, namespaces: Namespaces):
    self.namespaces = namespaces
    self.out: List[str] = []
    self.links: List[list] = []  # [first piece, end piece, target]
    self.headings: List[Tuple[int, str]] = []  # (first piece of the heading text, title)
    self.templates: List[str] = []
    self.categories: List[str] = []
    self.in_link = 0
    self.drop_level = 0  # > 0 while inside a dropped section
    self.lifted: List[Tuple[str, Optional[str]]] = []  # (target, anchor) of the placeholders
    self.lifted_templates: List[Optional[str]] = []  # names of the template placeholders
    self.handlers = {
        Wikilink: self.wikilink, Template: self.template, Tag: self.tag,
        Heading: self.heading, ExternalLink: self.external_link, HTMLEntity: self.entity,
        Comment: None, Argument: None,
    }

  def walk(self, nodes) -> None:
    handlers = self.handlers
    trail = None  # the Link record a following link trail extends
    for node in nodes:
      cls = node.__class__
      if self.drop_level:
        if cls is Heading and node.level <= self.drop_level:
          self.drop_level = 0
        else:
          self.record_only(node)
          continue
      if cls is Text:
        value = node.value
        if "\ue000" in value or "\ue002" in value:
          trail = self.text_with_links(value, trail)
          continue
        self.text(value, trail)
        trail = None
        continue
      handler = handlers.get(cls)
      trail = handler(node) if handler is not None else None

  def text(self, value: str, trail: Optional[list]) -> None:
    """A text node's text; its first letters extend the link ``trail`` (the link before it)."""
    out = self.out
    if trail is not None:
      m = _TRAIL.match(value)
      if m is not None:
        out.append(m.group())
        trail[1] = len(out)
        value = value[m.end():]
    if "__" in value:
      value = _BEHAVIOUR_SWITCH.sub("", value)
    if "''" in value:
      value = _APOSTROPHES.sub("", value)
    out.append(value)

  def text_with_links(self, value: str, trail: Optional[list]) -> Optional[list]:
    """A text node holding placeholders of lifted links and templates: the text between them
    as text nodes, each placeholder as the Wikilink or Template it stands for; returns the
    trail of the last link if the text ends with it."""
    at = 0
    for m in _LIFTED.finditer(value):
      if m.start() > at or trail is not None:
        self.text(value[at:m.start()], trail)
      if m.group(1) is not None:
        target, anchor = self.lifted[int(m.group(1))]
        trail = self.link(target, anchor)
      else:
        name = self.lifted_templates[int(m.group(2))]
        if name:
          self.templates.append(name)
        trail = None
      at = m.end()
    if at < len(value):
      self.text(value[at:], trail)
      return None
    return trail

  def record_only(self, node) -> None:
    """Inside a dropped section: keep the page's templates and categories."""
    cls = node.__class__
    if cls is Template:
      name = _template_name(node, self.namespaces)
      if name:
        self.templates.append(name)
    elif cls is Text and "\ue002" in node.value:
      for m in _LIFTED.finditer(node.value):
        name = None if m.group(2) is None else self.lifted_templates[int(m.group(2))]
        if name:
          self.templates.append(name)
    elif cls is Wikilink:
      kind, title, colon = wiki_titles.parse_target(str(node.title), self.namespaces)
      if kind == wiki_titles.PAGE and title.namespace == 14 and not colon:
        self.categories.append(title.text)

  def emit_walk(self, wikicode) -> None:
    self.in_link += 1
    self.walk(wikicode.nodes)
    self.in_link -= 1

  def wikilink(self, node: Wikilink):
    nodes = node.title.nodes
    raw = nodes[0].value if len(nodes) == 1 and nodes[0].__class__ is Text else str(node.title)
    return self.link(raw, node.text)

  def link(self, raw: str, text):
    """A link to ``raw`` with the anchor ``text``: None (``[[raw]]``), the anchor's nodes
    (Wikicode) or, for a lifted link, its plain text.  Returns the Link record a link trail
    extends, or None."""
    kind, title, colon = wiki_titles.parse_target(raw, self.namespaces)
    if kind == wiki_titles.PAGE:
      ns = title.namespace
      if ns != 0:
        if not colon and (ns == 6 or ns == -2):
          return None
        if not colon and ns == 14:
          self.categories.append(title.text)
          return None
      elif not self.in_link:
        out = self.out
        begin = len(out)
        self.anchor(raw, text)
        if len(out) == begin:
          return None
        record = [begin, len(out), title.text]
        self.links.append(record)
        return record
    elif kind == wiki_titles.LANGUAGE and not colon:
      return None
    # Text only: other namespaces, fragment-only and invalid targets, links inside anchors.
    self.anchor(raw, text)
    return None

  def anchor(self, raw: str, text) -> None:
    """The visible text of a link (see :meth:`link`)."""
    if text is None:
      self.out.append(_display(raw))
    elif text.__class__ is str:
      if text:
        self.in_link += 1
        self.text(text, None)
        self.in_link -= 1
      else:
        self.out.append(_pipe_trick(raw))
    elif text.nodes:
      self.emit_walk(text)
    else:
      self.out.append(_pipe_trick(raw))

  def template(self, node: Template) -> None:
    name = _template_name(node, self.namespaces)
    if not name:
      return None
    self.templates.append(name)
    if name in _CONVERT:
      args = [_COMMENT.sub("", str(p.value)).strip() for p in node.params if not p.showkey]
      text = _convert_text(args)
      if text is not None:
        self.out.append(text)
    elif TEXT_TEMPLATES.get(name):
      number = str(TEXT_TEMPLATES[name])
      for p in node.params:
        if str(p.name).strip() == number:
          self.walk(p.value.nodes)
          break
    return None

  def tag(self, node: Tag) -> None:
    markup = node.wiki_markup
    if markup is not None:
      if markup == "''" or markup == "'''":
        if node.contents is not None:
          self.walk(node.contents.nodes)
      return None  # '{|' tables, list markers, '----'
    tag_nodes = node.tag.nodes
    if len(tag_nodes) == 1 and tag_nodes[0].__class__ is Text:
      name = tag_nodes[0].value.strip().lower()
    else:
      name = str(node.tag).strip().lower()
    if name in DROPPED_TAGS:
      return None
    if name == "br":
      self.out.append("\n")
      return None
    contents = node.contents
    if name in _BLOCK_TAGS:
      self.out.append("\n")
      if contents is not None:
        self.walk(contents.nodes)
      self.out.append("\n")
    elif contents is not None:
      self.walk(contents.nodes)
    return None

  def heading(self, node: Heading) -> None:
    out = self.out
    start, num_links = len(out), len(self.links)
    out.append("\n\n")
    mark = len(out)
    self.walk(node.title.nodes)
    title = " ".join("".join(out[mark:]).split())
    if title.lower() in DROPPED_SECTIONS:
      del out[start:]
      del self.links[num_links:]
      self.drop_level = node.level
      return None
    out.append("\n\n")
    self.headings.append((mark, title))
    return None

  def external_link(self, node: ExternalLink) -> None:
    if node.brackets and node.title is not None:
      self.emit_walk(node.title)
    return None

  def entity(self, node: HTMLEntity) -> None:
    try:
      self.out.append(node.normalize())
    except (ValueError, OverflowError):
      self.out.append(str(node))
    return None


def _display(raw: str) -> str:
  """The visible text of ``[[raw]]``: minus a leading ':' and a '#fragment', entities decoded,
  stripped (underscores are kept, as MediaWiki shows them)."""
  s = raw.lstrip()
  if s.startswith(":"):
    s = s[1:]
  hash_at = s.find("#")
  if hash_at > 0:
    s = s[:hash_at]
  elif hash_at == 0:
    s = s[1:]
  if "&" in s:
    s = html.unescape(s)
  return s.strip()


def _pipe_trick(raw: str) -> str:
  """``[[Foo (bar)|]]`` -> "Foo", ``[[Seattle, Washington|]]`` -> "Seattle",
  ``[[Help:Foo|]]`` -> "Foo"."""
  s = _display(raw)
  colon_at = s.find(":")
  if colon_at > 0:
    s = s[colon_at + 1:]
  stripped = _PARENTHETICAL.sub("", s)
  if stripped != s:
    return stripped
  comma = s.find(", ")
  return s[:comma] if comma > 0 else s


# ---------------------------------------------------------------------------------------------
# Whitespace normalisation with offset mapping


def _normalise(raw: str):
  """(text, mapper): ``mapper(p, is_end)`` maps a raw offset to a text offset.  An offset inside
  a rewritten whitespace run maps after it (a begin) or before it (an end)."""
  n = len(raw)
  pieces: List[str] = []
  starts: List[int] = []  # raw match starts
  table: List[Tuple[int, int, int]] = []  # (raw match end, text start, replacement length)
  last = 0
  pos = 0
  for m in _WS.finditer(raw):
    ms, me = m.span()
    if ms == 0 or me == n:
      rep = ""
    else:
      newlines = raw.count("\n", ms, me)
      rep = " " if newlines == 0 else ("\n" if newlines == 1 else "\n\n")
    pieces.append(raw[last:ms])
    pos += ms - last
    starts.append(ms)
    table.append((me, pos, len(rep)))
    pieces.append(rep)
    pos += len(rep)
    last = me
  if not starts:
    return raw, lambda p, is_end: p
  pieces.append(raw[last:])
  text = "".join(pieces)

  def mapper(p: int, is_end: bool) -> int:
    i = bisect.bisect_right(starts, p) - 1
    if i < 0:
      return p
    me, out_start, rep_len = table[i]
    if p >= me:
      return out_start + rep_len + (p - me)
    if p == starts[i] or is_end:
      return out_start
    return out_start + rep_len

  return text, mapper


def without_qualifier(title: str) -> str:
  """A title without its trailing "(qualifier)": "Mercury (planet)" -> "Mercury"."""
  return _PARENTHETICAL.sub("", title).strip()


def _self_mention_names(title: Title, given: str) -> List[str]:
  """The normalised title, the title as given (``_`` -> space; differs for first-letter case:
  "iPhone" vs "IPhone"), and both without a trailing "(disambiguator)"; longest first."""
  names = set()
  for name in (title.text, wiki_titles.TITLE_SPACES.sub(" ", given).strip()):
    if name and wiki_titles.INVALID_TITLE_CHARS.isdisjoint(name):
      names.add(name)
      stripped = without_qualifier(name)
      if stripped:
        names.add(stripped)
  return sorted(names, key=len, reverse=True)


def _self_mentions(text: str, names: List[str]) -> Iterator[Tuple[int, int]]:
  """``(begin, end)`` of the names in ``text`` at word bounds (no letter or digit right before
  or after), left to right without overlaps, the longest name at a position first: what
  ``re.finditer`` gives for ``(?<![^\W_])(?:name|...)(?![^\W_])`` with the names longest
  first (found with ``str.find``: compiling that pattern per page cost more than the search)."""
  best = {}
  n = len(text)
  for name in names:
    size = len(name)
    at = text.find(name)
    while at >= 0:
      end = at + size
      if ((at == 0 or not text[at - 1].isalnum()) and (end == n or not text[end].isalnum())
          and best.get(at, 0) < size):
        best[at] = size
      at = text.find(name, at + 1)
  pos = 0
  for at in sorted(best):
    if at >= pos:
      pos = at + best[at]
      yield at, pos


def clean(wikitext: str, title: str = "", namespaces: Optional[Namespaces] = None,
          self_mentions: bool = True) -> CleanPage:
  """The clean text, links, paragraphs, templates and categories of one page's wikitext (rules in
  the module docstring).  ``title`` (the page title as written) enables self mentions."""
  namespaces = namespaces or Namespaces.default()
  walker = _Walker(namespaces)
  lifted_text, walker.lifted = _lift_simple_links(strip_dropped_markup(wikitext, namespaces))
  lifted_text, walker.lifted_templates = _lift_simple_templates(lifted_text, namespaces)
  walker.walk(mwparserfromhell.parse(lifted_text).nodes)
  out = walker.out
  cum = [0]
  cum.extend(itertools.accumulate(map(len, out)))
  raw = "".join(out)
  text, mapper = _normalise(raw)

  links: List[Link] = []
  for first, end_piece, target in walker.links:
    b = mapper(cum[first], False)
    e = mapper(cum[end_piece], True)
    while b < e and text[b].isspace():
      b += 1
    while e > b and text[e - 1].isspace():
      e -= 1
    if b < e:
      links.append(Link(b, e, target, text[b:e]))

  if self_mentions and title:
    page = wiki_titles.normalize_title(title, namespaces)
    if page is not None and page.namespace == 0:
      extra = []
      j, num = 0, len(links)
      for b, e in _self_mentions(text, _self_mention_names(page, title)):
        while j < num and links[j].end <= b:
          j += 1
        if j < num and links[j].begin < e:
          continue
        extra.append(Link(b, e, page.text, text[b:e]))
      if extra:
        links.extend(extra)
        links.sort(key=lambda l: l.begin)

  headings = [(mapper(cum[mark], False), name) for mark, name in walker.headings]
  paragraphs = []
  h, num_headings, section = 0, len(headings), ""
  pos = 0
  for para in text.split("\n\n"):
    end = pos + len(para)
    if para:
      while h < num_headings and headings[h][0] <= pos:
        section = headings[h][1]
        h += 1
      paragraphs.append((pos, end, section))
    pos = end + 2
  return CleanPage(text=text, links=tuple(links), paragraphs=tuple(paragraphs),
                   templates=tuple(walker.templates), categories=tuple(walker.categories))
