r"""Writes MediaWiki XML dumps (``*-pages-articles.xml.bz2``, single- or multistream with its
index) of generated, Wikipedia-like pages, for tests, benchmarks and the demo.

Pages: articles about fictional entities (a ``'''bold title'''`` lead, ``== sections ==`` of
Zipf-distributed pseudo-words, internal links in every form: ``[[T]]``, ``[[T|anchor]]``,
``[[t]]s``, links to redirects, infoboxes, ``<ref>{{cite web}}</ref>``, tables, files,
categories, lists, comments, CJK and emoji), ~10% redirects, ~3% disambiguation pages, ~3%
pages in other namespaces.  Deterministic for a given seed; written streamed.

  python -m pipelines.datasets.wikipedia.fake_input --pages 10000 --multistream \
    --output /tmp/wiki/enwiki-20240101-pages-articles-multistream.xml.bz2

:func:`write` is the dataset's fake input (its spec's ``fake_input``): a multistream dump of
``PAGES`` pages (times the scale) with its index.
"""

from __future__ import annotations

import bz2
import hashlib
import itertools
import os
import random
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Tuple
from xml.sax.saxutils import escape, quoteattr

from schemas import cli
from pipelines.datasets import FakeInput
from pipelines.datasets.wikipedia.reader import SiteInfo
from pipelines.fake_data.prose import MIN_WORDS, scaled

PAGES, WORDS_PER_PAGE = 3000, 700  # at scale 1.0

_TEXT_ENTITIES = {'"': "&quot;", "\r": "&#13;"}
_COMPRESS_EVERY = 1 << 20  # uncompressed bytes buffered before a compress() call


@dataclass(frozen=True)
class PageSpec:
  title: str
  text: str
  namespace: int = 0
  page_id: int = 0  # 0: assigned 1, 2, ... in write order
  redirect: Optional[str] = None  # written as <redirect title="..." />


def index_path_for(path: str) -> str:
  """The multistream index written beside ``path``."""
  if path.endswith("-multistream.xml.bz2"):
    return path[:-len("-multistream.xml.bz2")] + "-multistream-index.txt.bz2"
  return path + ".index.txt.bz2"


def _header(schema: str, siteinfo: bool) -> str:
  uri = f"http://www.mediawiki.org/xml/export-{schema}/"
  head = (f'<mediawiki xmlns="{uri}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
          f'xsi:schemaLocation="{uri} http://www.mediawiki.org/xml/export-{schema}.xsd" '
          f'version="{schema}" xml:lang="en">\n')
  if not siteinfo:
    return head
  lines = ["  <siteinfo>", "    <sitename>Wikipedia</sitename>", "    <dbname>enwiki</dbname>",
           "    <base>https://en.wikipedia.org/wiki/Main_Page</base>",
           "    <generator>MediaWiki 1.42.0-wmf.5</generator>", "    <case>first-letter</case>",
           "    <namespaces>"]
  for key, name in SiteInfo.default().namespaces:
    if name:
      lines.append(f'      <namespace key="{key}" case="first-letter">{name}</namespace>')
    else:
      lines.append(f'      <namespace key="{key}" case="first-letter" />')
  lines += ["    </namespaces>", "  </siteinfo>"]
  return head + "\n".join(lines) + "\n"


def _sha1_base36(text: str) -> str:
  n = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest(), "big")
  digits = "0123456789abcdefghijklmnopqrstuvwxyz"
  out = []
  while n:
    n, r = divmod(n, 36)
    out.append(digits[r])
  return "".join(reversed(out)).rjust(31, "0")


def page_xml(spec: PageSpec, page_id: int) -> str:
  """A ``<page>`` as in real dumps; the revision id is ``1000000 + page_id``."""
  nbytes = len(spec.text.encode("utf-8"))
  redirect = (f"    <redirect title={quoteattr(spec.redirect)} />\n"
              if spec.redirect is not None else "")
  text = (f'      <text bytes="{nbytes}" xml:space="preserve">'
          f"{escape(spec.text, _TEXT_ENTITIES)}</text>\n" if spec.text
          else '      <text bytes="0" />\n')
  return (f"  <page>\n    <title>{escape(spec.title)}</title>\n    <ns>{spec.namespace}</ns>\n"
          f"    <id>{page_id}</id>\n{redirect}    <revision>\n"
          f"      <id>{1000000 + page_id}</id>\n      <parentid>{999999 + page_id}</parentid>\n"
          f"      <timestamp>2024-01-01T00:00:00Z</timestamp>\n"
          f"      <contributor>\n        <username>Synthetic</username>\n        <id>1</id>\n"
          f"      </contributor>\n      <comment>generated</comment>\n"
          f"      <model>wikitext</model>\n      <format>text/x-wiki</format>\n{text}"
          f"      <sha1>{_sha1_base36(spec.text)}</sha1>\n    </revision>\n  </page>\n")


def _write_dump(pages: Iterable[PageSpec], path: str, multistream: bool, pages_per_stream: int,
                siteinfo: bool, schema: str) -> Tuple[Optional[str], int]:
  """Returns the index path (None if not multistream) and the uncompressed size."""
  if pages_per_stream < 1:
    raise ValueError(f"pages_per_stream must be >= 1, got {pages_per_stream}")
  if not schema.startswith("0.") or not schema[2:].isdigit():
    raise ValueError(f"schema must look like '0.11', got {schema!r}")
  ids = itertools.count(1)
  header = _header(schema, siteinfo).encode("utf-8")
  trailer = b"</mediawiki>\n"
  size = len(header) + len(trailer)
  if not multistream:
    with open(path, "wb") as f:
      comp = bz2.BZ2Compressor(9)
      f.write(comp.compress(header))
      parts: List[bytes] = []
      buffered = 0
      for spec in pages:
        page_id = spec.page_id or next(ids)
        data = page_xml(spec, page_id).encode("utf-8")
        parts.append(data)
        buffered += len(data)
        if buffered >= _COMPRESS_EVERY:
          f.write(comp.compress(b"".join(parts)))
          size += buffered
          parts, buffered = [], 0
      size += buffered
      f.write(comp.compress(b"".join(parts) + trailer))
      f.write(comp.flush())
    return None, size
  index_path = index_path_for(path)
  with open(path, "wb") as f, open(index_path, "wb") as fi:
    index = bz2.BZ2Compressor(9)
    f.write(bz2.compress(header, 9))
    batches = iter(pages)
    while True:
      batch = list(itertools.islice(batches, pages_per_stream))
      if not batch:
        break
      offset = f.tell()
      xml, lines = [], []
      for spec in batch:
        page_id = spec.page_id or next(ids)
        xml.append(page_xml(spec, page_id))
        lines.append(f"{offset}:{page_id}:{spec.title}\n")
      data = "".join(xml).encode("utf-8")
      size += len(data)
      f.write(bz2.compress(data, 9))
      fi.write(index.compress("".join(lines).encode("utf-8")))
    f.write(bz2.compress(trailer, 9))
    fi.write(index.flush())
  return index_path, size


def write_dump(pages: Iterable[PageSpec], path: str, multistream: bool = False,
               pages_per_stream: int = 100, siteinfo: bool = True,
               schema: str = "0.11") -> Optional[str]:
  """Writes ``pages`` as a bz2 MediaWiki dump at ``path``, streamed (memory bounded by one
  stream of pages).  Multistream: a header stream (``<mediawiki>`` + ``<siteinfo>``), streams
  of ``pages_per_stream`` pages, a ``</mediawiki>`` stream, and the index
  (``OFFSET:PAGE_ID:TITLE`` lines) at :func:`index_path_for`, whose path is returned (else
  None).  Page ids 0 are assigned 1, 2, ...; revision ids are ``1000000 + page_id``."""
  return _write_dump(pages, path, multistream, pages_per_stream, siteinfo, schema)[0]


# --- page generation -------------------------------------------------------------------------

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
# Three-letter syllables: names built from a fixed number of them are unique by construction.
_SYLLABLES = [c + v + d for c in _CONSONANTS for v in _VOWELS for d in "lnrs"]
_KINDS = [("{}", "person"), ("{} River", "river"), ("Battle of {}", "battle"),
          ("{} (band)", "band"), ("{} University", "university"), ("{} Island", "island"),
          ("HMS {}", "ship"), ("{} Prize", "award")]
_INFOBOX = {"person": "person", "river": "river", "battle": "military conflict",
            "band": "musical artist", "university": "university", "island": "islands",
            "ship": "ship", "award": "award"}
_SECTIONS = ["History", "Early life", "Career", "Geography", "Legacy", "Background",
             "Reception", "Etymology", "Description", "Later years", "Notes"]
_CJK = ["東京", "北京大学", "한국어", "日本語の本", "漢字", "中华人民共和国", "ひらがな"]
_EMOJI = ["🎵", "🚀", "🌍", "📚", "⚓", "🏛️"]
_NS_PAGES = [(1, "Talk:{}"), (10, "Template:Infobox {}"), (14, "Category:{}"),
             (6, "File:{}.jpg")]
_MASK = (1 << 64) - 1


def _mix(*values: int) -> int:
  """splitmix64 over the values: a deterministic, well-spread hash (unlike ``hash``)."""
  x = 0x9E3779B97F4A7C15
  for v in values:
    x = (x ^ (v & _MASK)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 31)) * 0x94D049BB133111EB & _MASK
    x ^= x >> 29
  return x


class _Plan:
  """The kind and title of every page index, computed on demand (nothing stored per page)."""

  ARTICLE, REDIRECT, DISAMBIGUATION, OTHER_NS = range(4)

  def __init__(self, num_pages: int, seed: int):
    self.n, self.seed = num_pages, seed

  def kind(self, i: int) -> int:
    r = _mix(self.seed, i, 1) % 1000
    if r < 100:
      return self.REDIRECT
    if r < 130:
      return self.DISAMBIGUATION
    if r < 160:
      return self.OTHER_NS
    return self.ARTICLE

  def core(self, i: int) -> Tuple[str, str]:
    """Two words, unique per page index (a bijection of ``i`` onto syllable digits)."""
    k = len(_SYLLABLES)  # 280 = 2^3 * 5 * 7: the multiplier, coprime with it, permutes
    space = k ** 4
    j = (i * 2654435761 + _mix(self.seed) % space) % space
    d = []
    for _ in range(4):
      j, r = divmod(j, k)
      d.append(_SYLLABLES[r])
    extra = f" {i // space + 1}" if i >= space else ""
    return (d[0] + d[1]).capitalize(), (d[2] + d[3]).capitalize() + extra

  def article_kind(self, i: int) -> str:
    return _KINDS[_mix(self.seed, i, 2) % len(_KINDS)][1]

  def title(self, i: int) -> str:
    w1, w2 = self.core(i)
    kind = self.kind(i)
    if kind == self.REDIRECT:  # an alternative name: no article title has a hyphen
      return f"{w1}-{w2}"
    if kind == self.DISAMBIGUATION:
      return f"{w1} {w2} (disambiguation)"
    if kind == self.OTHER_NS:
      _, pattern = _NS_PAGES[_mix(self.seed, i, 3) % len(_NS_PAGES)]
      return pattern.format(f"{w1} {w2}")
    pattern = _KINDS[_mix(self.seed, i, 2) % len(_KINDS)][0]
    return pattern.format(f"{w1} {w2}")

  def namespace(self, i: int) -> int:
    if self.kind(i) != self.OTHER_NS:
      return 0
    return _NS_PAGES[_mix(self.seed, i, 3) % len(_NS_PAGES)][0]

  def article_near(self, j: int, skip: int = -1) -> Optional[int]:
    """The first article index at or after ``j`` (cyclically), other than ``skip``."""
    for t in range(min(self.n, 200)):
      c = (j + t) % self.n
      if c != skip and self.kind(c) == self.ARTICLE:
        return c
    return None

  def redirect_target(self, i: int) -> Optional[int]:
    return self.article_near(_mix(self.seed, i, 4) % self.n, skip=i)


class _Zipf:
  """Pseudo-words with a Zipfian frequency distribution (like running text)."""

  def __init__(self, rng: random.Random, vocab_size: int = 30000, exponent: float = 1.1):
    syl = ["ka", "lo", "mi", "ran", "tes", "vo", "bel", "dor", "an", "is", "qu", "zen", "por",
           "lum", "sa", "rit", "ne", "gal", "ost", "fer", "mar", "th", "ul", "ve", "e", "o"]
    self.words = ["".join(rng.choice(syl) for _ in range(rng.randint(1, 4)))
                  for _ in range(vocab_size)]
    self.words[:8] = ["the", "of", "and", "in", "a", "to", "was", "is"]
    acc, self.cum = 0.0, []
    for r in range(vocab_size):
      acc += 1.0 / (r + 1) ** exponent
      self.cum.append(acc)

  def words_(self, rng: random.Random, n: int) -> List[str]:
    return rng.choices(self.words, cum_weights=self.cum, k=n)


class _Writer:
  """The wikitext of one page."""

  def __init__(self, plan: _Plan, zipf: _Zipf, rng: random.Random, i: int):
    self.plan, self.zipf, self.rng, self.i = plan, zipf, rng, i

  def link_target(self) -> str:
    """A random page title to link to: an article, a redirect, a disambiguation page or
    (rarely) a missing page."""
    rng, plan = self.rng, self.plan
    j = rng.randrange(plan.n)
    kind = plan.kind(j)
    if (kind == plan.OTHER_NS or j == self.i
        or (kind == plan.DISAMBIGUATION and rng.random() < 0.8)):
      j = plan.article_near(j, skip=self.i)
      if j is None:
        return "Nonexistent page"
    elif rng.random() < 0.02:
      w1, w2 = plan.core(j)
      return f"{w2} {w1} Society"  # a red link
    return plan.title(j)

  def link(self) -> str:
    rng = self.rng
    target = self.link_target()
    r = rng.random()
    if r < 0.45:
      return f"[[{target}]]"
    if r < 0.75:
      return f"[[{target}|{' '.join(self.zipf.words_(rng, rng.randint(1, 3)))}]]"
    if r < 0.9:
      return f"[[{target[:1].lower()}{target[1:]}]]s"
    return f"[[{target}#History|{target}]]"

  def sentence(self, n: int) -> str:
    rng = self.rng
    words = self.zipf.words_(rng, n)
    for _ in range(max(1, n // 12)):
      if rng.random() < 0.8:
        words[rng.randrange(len(words))] = self.link()
    text = " ".join(words)
    return text[:1].upper() + text[1:] + "."

  def paragraph(self, words: int) -> str:
    rng = self.rng
    sents = []
    while words > 0:
      n = min(words, rng.randint(8, 25))
      words -= n
      s = self.sentence(n)
      r = rng.random()
      if r < 0.15:
        s += (f"<ref>{{{{cite web|url=https://example.org/{rng.randrange(10**6)}|title="
              f"{' '.join(self.zipf.words_(rng, 3))}|access-date=2023-0{rng.randint(1, 9)}-1"
              f"{rng.randint(0, 9)}}}}}</ref>")
      elif r < 0.2:
        s += f'<ref name="r{rng.randrange(20)}" />'
      elif r < 0.23:
        s += f" ({rng.choice(_CJK)}; {rng.choice(_EMOJI)})"
      elif r < 0.25:
        s += " R&D costs rose &gt; 5%&nbsp;a year.<br />"
      sents.append(s)
    return " ".join(sents)

  def article(self, title: str, words: int) -> str:
    rng, plan = self.rng, self.plan
    kind = plan.article_kind(self.i)
    w1, w2 = plan.core(self.i)
    parts = [f"{{{{Short description|A fictional {kind}}}}}",
             f"{{{{Infobox {_INFOBOX[kind]}\n| name = {title}\n| image = {w1} {w2}.jpg\n"
             f"| location = {self.link()}\n| known_for = {self.link()}\n"
             f"| founded = {{{{start date|{rng.randint(1700, 2020)}|{rng.randint(1, 12)}}}}}\n}}}}"]
    lead_words = max(10, words // 6)
    parts.append(f"'''{title.split(' (')[0]}''' ({rng.choice(_CJK)}) is {'an' if kind[0] in 'aeiou' else 'a'} {kind} in {self.link()}. "
                 + self.paragraph(lead_words))
    rest = max(0, words - lead_words)
    sections = rng.sample(_SECTIONS, rng.randint(2, 5))
    for k, section in enumerate(sections):
      share = rest // len(sections)
      parts.append(f"== {section} ==")
      if k == 0:
        parts.append(f"[[File:{w1} {w2} {k}.jpg|thumb|{rng.randint(180, 300)}px|The {kind} "
                     f"near {self.link()} in {rng.randint(1850, 2020)}]]")
      paras = rng.randint(1, 3)
      for _ in range(paras):
        parts.append(self.paragraph(max(5, share // paras)))
      if k == 1:
        parts.append("\n".join(f"* {self.link()} – {' '.join(self.zipf.words_(rng, 4))}"
                               for _ in range(rng.randint(2, 5))))
      if k == len(sections) - 1:
        rows = "\n".join(f"|-\n| {rng.randint(1900, 2020)} || {self.link()} || "
                         f"{rng.randint(1, 99)}" for _ in range(rng.randint(2, 4)))
        parts.append(f'{{| class="wikitable"\n! Year !! Title !! Rank\n{rows}\n|}}')
    parts.append(f"<!-- {' '.join(self.zipf.words_(rng, 5))} -->")
    parts.append("== References ==\n{{Reflist}}")
    parts.append("\n".join(f"[[Category:{c}]]" for c in
                           (f"{w2} family", f"Fictional {kind}s", f"{rng.randint(1800, 2000)}s")))
    return "\n\n".join(parts) + "\n"

  def disambiguation(self, title: str) -> str:
    rng = self.rng
    base = title[:-len(" (disambiguation)")]
    items = "\n".join(f"* {self.link()}, a {' '.join(self.zipf.words_(rng, 3))}"
                      for _ in range(rng.randint(2, 6)))
    return f"'''{base}''' may refer to:\n\n{items}\n\n{{{{disambiguation}}}}\n"

  def other(self, ns: int, title: str) -> str:
    rng = self.rng
    if ns == 1:
      return (f"== {' '.join(self.zipf.words_(rng, 3))} ==\n{self.paragraph(40)} "
              f"[[User:Synthetic|Synthetic]] ([[User talk:Synthetic|talk]]) 12:00, 1 January "
              f"2024 (UTC)\n")
    if ns == 10:
      return ("{{Infobox\n| title = {{{name|{{PAGENAME}}}}}\n| label1 = Location\n"
              "| data1 = {{{location|}}}\n}}<noinclude>{{Documentation}}</noinclude>\n")
    if ns == 14:
      return f"{self.paragraph(20)}\n\n[[Category:Fictional entities]]\n"
    return (f"== Summary ==\n{{{{Information|description={self.paragraph(15)}|source=own work"
            f"|date=2024-01-01}}}}\n\n== Licensing ==\n{{{{cc-by-sa-4.0}}}}\n")


def generate_pages(num_pages: int, seed: int = 0, words_per_page: int = 400
                   ) -> Iterator[PageSpec]:
  """``num_pages`` Wikipedia-like pages, deterministic for a seed: articles (~84%), redirects
  (~10%, ``#REDIRECT [[Target]]`` with ``redirect`` set), disambiguation pages (~3%, "X
  (disambiguation)") and Talk/Template/Category/File pages (~3%); page ids 10, 13, 16, ..."""
  plan = _Plan(num_pages, seed)
  zipf = _Zipf(random.Random(seed * 7919 + 1))
  for i in range(num_pages):
    rng = random.Random(_mix(seed, i, 5))
    title = plan.title(i)
    kind = plan.kind(i)
    writer = _Writer(plan, zipf, rng, i)
    page_id = 10 + 3 * i
    if kind == plan.REDIRECT:
      target = plan.redirect_target(i)
      if target is not None:
        to = plan.title(target)
        yield PageSpec(title=title, text=f"#REDIRECT [[{to}]]\n\n{{{{Redirect category shell|"
                       f"{{{{R from alternative name}}}}}}}}\n", page_id=page_id, redirect=to)
        continue
      kind = plan.ARTICLE
    if kind == plan.DISAMBIGUATION:
      yield PageSpec(title=title, text=writer.disambiguation(title), page_id=page_id)
    elif kind == plan.OTHER_NS:
      ns = plan.namespace(i)
      yield PageSpec(title=title, text=writer.other(ns, title), namespace=ns, page_id=page_id)
    else:
      words = max(20, int(words_per_page * rng.uniform(0.5, 1.5)))
      yield PageSpec(title=title, text=writer.article(title, words), page_id=page_id)


def write_multistream(root: str, pages: int, words_per_page: int) -> str:
  """A multistream dump of ``pages`` generated pages (seed 1) under ``root``; its path."""
  os.makedirs(root)
  path = os.path.join(root, "synwiki-pages-articles-multistream.xml.bz2")
  write_dump(generate_pages(pages, seed=1, words_per_page=words_per_page), path,
             multistream=True)
  return path


def write(root: str, scale: float) -> FakeInput:
  """The dataset's fake input under ``root`` (:class:`pipelines.datasets.FakeInput`)."""
  n, factor = scaled(PAGES, scale)
  return FakeInput(write_multistream(root, n, max(MIN_WORDS, int(WORDS_PER_PAGE * factor))))


def main(argv: Optional[List[str]] = None) -> None:
  ap = cli.Parser("pipelines.datasets.wikipedia.fake_input", __doc__.split("\n")[0],
                  "python -m pipelines.datasets.wikipedia.fake_input --pages 100 --multistream "
                  "--output /tmp/wiki/enwiki-pages-articles-multistream.xml.bz2")
  ap.add_argument("--pages", type=int, required=True, help="pages to generate")
  ap.add_argument("--output", required=True, io=cli.WRITES, help="the dump path (.xml.bz2)")
  cli.bool_flag(ap, "multistream", False, "a multistream dump with its index beside it")
  ap.add_argument("--pages_per_stream", type=int, default=100,
                  help="pages per bz2 stream of a multistream dump")
  ap.add_argument("--seed", type=int, default=0, help="the generator's seed")
  ap.add_argument("--words_per_page", type=int, default=400, help="mean words of an article")
  cli.bool_flag(ap, "siteinfo", True, "write the <siteinfo> header")
  args, _ = ap.parse(argv)
  index, size = _write_dump(
      generate_pages(args.pages, args.seed, args.words_per_page), args.output,
      args.multistream, args.pages_per_stream, args.siteinfo, "0.11")
  print(args.output)
  if index:
    print(index)
  print(f"{size / 1e6:.1f} MB uncompressed, {args.pages} pages")


if __name__ == "__main__":
  main()
