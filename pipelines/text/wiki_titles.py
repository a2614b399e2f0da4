"""MediaWiki titles (pure Python): a wiki's namespace table (:class:`Namespaces`), link targets
and page titles normalised as MediaWiki does (:func:`normalize_title`, :func:`parse_target`)
into a :class:`Title`, and redirect targets (:func:`redirect_target`).  The wikitext cleaner
(:mod:`pipelines.text.wikitext`) sorts a page's links with these rules; the Wikipedia dataset
names its pages and redirects with them.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

DEFAULT_NAMESPACES: Dict[str, int] = {
    "media": -2, "special": -1, "talk": 1, "user": 2, "user talk": 3,
    "wikipedia": 4, "wp": 4, "project": 4, "wikipedia talk": 5, "wt": 5, "project talk": 5,
    "file": 6, "image": 6, "file talk": 7, "image talk": 7,
    "mediawiki": 8, "mediawiki talk": 9, "template": 10, "template talk": 11,
    "help": 12, "help talk": 13, "category": 14, "category talk": 15,
    "portal": 100, "portal talk": 101, "draft": 118, "draft talk": 119,
    "timedtext": 710, "timedtext talk": 711, "module": 828, "module talk": 829,
}

# Canonical English names, for Title.full.
CANONICAL_NAMESPACE_NAMES: Dict[int, str] = {
    -2: "Media", -1: "Special", 1: "Talk", 2: "User", 3: "User talk", 4: "Wikipedia",
    5: "Wikipedia talk", 6: "File", 7: "File talk", 8: "MediaWiki", 9: "MediaWiki talk",
    10: "Template", 11: "Template talk", 12: "Help", 13: "Help talk", 14: "Category",
    15: "Category talk", 100: "Portal", 101: "Portal talk", 118: "Draft", 119: "Draft talk",
    710: "TimedText", 711: "TimedText talk", 828: "Module", 829: "Module talk",
}

_LANGUAGES = """
  en de fr es it ja zh ru pt pl nl sv uk vi ar fa ca no nb nn fi cs hu ko id tr ro sr sh he da bg
  el et eu gl hr hy ka kk lt lv ms sk sl th ur hi bn ta te mr ml kn gu pa simple eo la az be
  be-tarask ceb war arz ast af sq is ga cy mk mn ne si sw tl tt uz yo yue zh-yue zh-min-nan nan
  zh-classical lzh bs lb oc br an fy io jv su ku ps ht qu ckb ky tg lmo vec scn nap pms sco als
  gd ia ie ba cv ce mg my km lo am ha ig zu xh so rw mi sm to fj haw hak wuu gan
""".split()
_PROJECTS = """
  w wikipedia-prefix wikt wiktionary commons wikisource s wikiquote q wikibooks b wikinews n
  wikiversity v wikivoyage voy wikidata d species wikispecies meta metawiki m mw mediawikiwiki
  phab phabricator foundation wmf wikimedia incubator outreach
""".split()
INTERWIKI_PREFIXES: FrozenSet[str] = frozenset(_LANGUAGES + _PROJECTS) - {"wikipedia-prefix"}
# Interlanguage prefixes: MediaWiki moves such a link (without a leading colon) to the sidebar;
# the other interwiki prefixes (sister projects: wikt, s, q, ...) render inline.
LANGUAGE_PREFIXES: FrozenSet[str] = frozenset(_LANGUAGES)

# Characters no title may contain.
INVALID_TITLE_CHARS = frozenset("<>[]{}|")
# A run of whitespace and underscores: one space in a title.
TITLE_SPACES = re.compile(r"[\s_]+")
_REDIRECT = re.compile(r"\s*#redirect\s*:?\s*\[\[([^\[\]|]*)(?:\|[^\[\]]*)?\]\]", re.I)


@dataclass(frozen=True)
class Namespaces:
  """A wiki's namespace table: lower-cased names and aliases -> namespace id, and its title case
  rule (``<case>first-letter</case>`` in ``<siteinfo>``; ``case-sensitive`` -> False)."""
  names: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_NAMESPACES))
  first_letter_case: bool = True

  @classmethod
  def default(cls) -> "Namespaces":
    """English Wikipedia's table (:data:`DEFAULT_NAMESPACES`), first-letter case."""
    return _DEFAULT


_DEFAULT = Namespaces(names=dict(DEFAULT_NAMESPACES), first_letter_case=True)


@dataclass(frozen=True)
class Title:
  """A normalised link target: its namespace id and its title without the namespace prefix."""
  namespace: int
  text: str

  @property
  def full(self) -> str:
    """``text`` for namespace 0, else ``"<canonical English name>:<text>"`` (``"ns<id>:..."`` for a
    namespace without an English canonical name)."""
    if self.namespace == 0:
      return self.text
    name = CANONICAL_NAMESPACE_NAMES.get(self.namespace, f"ns{self.namespace}")
    return f"{name}:{self.text}"


# What a link target is (:func:`parse_target`): a page title, a fragment only (``#Section``), an
# interwiki link to a sister project (``wikt:``), not a valid title, or a language link (``de:``).
PAGE, FRAGMENT, INTERWIKI, INVALID, LANGUAGE = 0, 1, 2, 3, 4


def parse_target(raw: str, namespaces: Namespaces) -> Tuple[int, Optional[Title], bool]:
  """(kind, title or None, leading colon) of a link target as written: ``kind`` is
  :data:`PAGE` (with its title, normalised as :func:`normalize_title` says), :data:`FRAGMENT`,
  :data:`INTERWIKI` (a sister project), :data:`LANGUAGE` (another language's wiki) or
  :data:`INVALID`."""
  s = raw
  if "&" in s:
    s = html.unescape(s)
  if "%" in s:
    try:
      s = urllib.parse.unquote(s, errors="strict")
    except UnicodeDecodeError:
      pass
  s = TITLE_SPACES.sub(" ", s).strip()
  colon = False
  if s.startswith(":"):
    colon = True
    s = s[1:].lstrip()
  hash_at = s.find("#")
  if hash_at >= 0:
    if hash_at == 0:
      return FRAGMENT, None, colon
    s = s[:hash_at].rstrip()
  ns = 0
  colon_at = s.find(":")
  if colon_at > 0:
    prefix = s[:colon_at].strip().lower()
    key = namespaces.names.get(prefix)
    if key is not None:
      ns = key
      s = s[colon_at + 1:].strip()
    elif prefix in INTERWIKI_PREFIXES:
      return (LANGUAGE if prefix in LANGUAGE_PREFIXES else INTERWIKI), None, colon
  if not s or not INVALID_TITLE_CHARS.isdisjoint(s):
    return INVALID, None, colon
  if namespaces.first_letter_case:
    first = s[0].upper()
    if len(first) == 1:
      s = first + s[1:]
  return PAGE, Title(ns, s), colon


def normalize_title(raw: str, namespaces: Optional[Namespaces] = None) -> Optional[Title]:
  """MediaWiki title normalisation of a link target or page title as written.

  HTML entities are decoded (``&amp;``, ``&nbsp;``, ``&#39;``); percent-encoding is decoded only
  if the result is valid UTF-8; underscores become spaces, runs of whitespace (NBSP, tabs, ...)
  one space, and the title is stripped.  A ``#fragment`` is dropped; a target that is only a
  fragment (``#Section``) -> None.  One leading ``:`` is removed (``:Category:X`` is the page
  Category:X, namespace 14).  A prefix before the first ``:`` that is a namespace name or alias
  (case-insensitive, surrounding spaces ignored) sets the namespace and is removed; an
  interwiki/language prefix (:data:`INTERWIKI_PREFIXES`) -> None.  With
  ``namespaces.first_letter_case`` the first character is upper-cased (kept as is when its
  upper case is several characters, e.g. ``ß``); the rest is unchanged.  An empty title, or one
  containing any of ``< > [ ] { } |`` -> None.
  """
  kind, title, _ = parse_target(raw, namespaces or _DEFAULT)
  return title if kind == PAGE else None


def redirect_target(wikitext: str, namespaces: Optional[Namespaces] = None) -> Optional[Title]:
  """The target of a redirect page (``#REDIRECT [[X]]``, any case, also ``#redirect:[[X]]``, at
  the start of the page), normalised; None for other pages or an invalid/interwiki target."""
  m = _REDIRECT.match(wikitext)
  if m is None:
    return None
  return normalize_title(m.group(1), namespaces)
