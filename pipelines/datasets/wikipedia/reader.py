"""Streaming reads of MediaWiki XML dumps (``*-pages-articles*.xml.bz2``), pure stdlib.

Two layouts are read:

* a whole dump (one bz2 stream, or concatenated streams, or the ``articlesN.xml-pXpY.bz2``
  parts; plain, uncompressed XML too): :func:`iter_pages`;
* a byte range of a multistream dump (``*-multistream.xml.bz2``), found with its index
  (``*-multistream-index.txt.bz2``, lines ``OFFSET:PAGE_ID:TITLE``, read and split by
  :mod:`pipelines.datasets.wikipedia.multistream_index`): :func:`iter_pages_in_range`.  The first stream of such a file holds
  only ``<mediawiki ...><siteinfo>...</siteinfo>``, each following one ~100 ``<page>``
  elements with no root, the last one ``</mediawiki>``; each stream is parsed on its own, so
  a damaged stream (truncated or corrupt bz2, malformed XML) costs only its own pages.

Memory is bounded by the largest page: input is read and decompressed in chunks, parsed with
``xml.etree.ElementTree.XMLPullParser`` and every page element is dropped once yielded.
Elements are matched by local name (export schemas 0.10 and 0.11 differ only in their
namespace URI).  Titles and wikitext are returned exactly as in the XML (entities decoded).
"""

from __future__ import annotations

import bz2
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import BinaryIO, Callable, Dict, Iterator, Optional, Tuple

READ_SIZE = 1 << 20          # compressed bytes per read
DECOMPRESS_SIZE = 1 << 20    # at most this many decompressed bytes per decompress() call
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# A bz2 stream starts at a byte boundary with "BZh" + block size + the block magic (pi) or,
# for an empty stream, the end-of-stream magic (sqrt(pi)).
_STREAM_MAGIC = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
_TRAILER = b"</mediawiki>"
_HOLD_BACK = 64  # bytes kept back at each feed so a stream's closing </mediawiki> can be cut

_ENGLISH_NAMESPACES: Tuple[Tuple[int, str], ...] = (
    (-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"), (3, "User talk"),
    (4, "Wikipedia"), (5, "Wikipedia talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"),
    (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"),
    (13, "Help talk"), (14, "Category"), (15, "Category talk"), (100, "Portal"),
    (101, "Portal talk"), (118, "Draft"), (119, "Draft talk"), (828, "Module"),
    (829, "Module talk"))
# English aliases, valid on every wiki (siteinfo names take precedence).
_ALIASES: Tuple[Tuple[str, int], ...] = (
    ("image", 6), ("image talk", 7), ("wp", 4), ("project", 4), ("project talk", 5))
# MediaWiki's canonical (English) namespace names: they work on every wiki, whatever the local
# names in its siteinfo (bgwiki: [[File:x]] is [[Файл:x]]).  The core namespaces exist on
# every wiki; the extension ones (TimedText, Module) only where the siteinfo lists their key.
_CANONICAL_CORE: Tuple[Tuple[int, str], ...] = (
    (-2, "Media"), (-1, "Special"), (1, "Talk"), (2, "User"), (3, "User talk"), (4, "Project"),
    (5, "Project talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"), (9, "MediaWiki talk"),
    (10, "Template"), (11, "Template talk"), (12, "Help"), (13, "Help talk"), (14, "Category"),
    (15, "Category talk"))
_CANONICAL_EXTENSIONS: Tuple[Tuple[int, str], ...] = (
    (710, "TimedText"), (711, "TimedText talk"), (828, "Module"), (829, "Module talk"))


def _name_key(name: str) -> str:
  """A namespace name as looked up: lower case (MediaWiki matches namespace prefixes
  case-insensitively), ``_`` as space, whitespace runs as one space."""
  return " ".join(name.replace("_", " ").split()).lower()


@dataclass(frozen=True)
class SiteInfo:
  """A dump's ``<siteinfo>``: its namespace table, title case rule and language."""
  namespaces: Tuple[Tuple[int, str], ...]  # (key, canonical name); namespace 0 has name ""
  case: str = "first-letter"
  lang: str = ""  # from <mediawiki xml:lang="...">

  @classmethod
  def default(cls) -> "SiteInfo":
    """The English Wikipedia table, for dumps without ``<siteinfo>``."""
    return cls(namespaces=_ENGLISH_NAMESPACES, case="first-letter", lang="en")

  def names(self) -> Dict[str, int]:
    """Lower-cased namespace names and the English aliases (Image, WP, Project, ...) -> key;
    namespace 0 (no name) is not included."""
    out = {name.lower(): key for key, name in self.namespaces if key != 0 and name}
    for alias, key in _ALIASES:
      out.setdefault(alias, key)
    return out

  def link_names(self) -> Dict[str, int]:
    """What a link or title prefix is matched against: :meth:`names` (the dump's own names
    first) plus MediaWiki's canonical English names (``File``, ``Category``, ``Template``,
    ``Project``, ...) of the wiki's namespaces, lower-cased, ``_`` as space.  For the English
    table it equals :meth:`names`."""
    out = {_name_key(name): key for key, name in self.namespaces if key != 0 and name}
    keys = {key for key, _ in self.namespaces}
    for key, name in _CANONICAL_CORE + tuple(
        (k, n) for k, n in _CANONICAL_EXTENSIONS if k in keys):
      out.setdefault(name.lower(), key)
    for alias, key in _ALIASES:
      out.setdefault(alias, key)
    return out


@dataclass(frozen=True)
class Page:
  """One ``<page>`` (its last ``<revision>``)."""
  title: str
  namespace: int
  page_id: int
  revision_id: int
  text: str  # wikitext; "" when <text> is empty or missing (e.g. deleted)
  redirect: Optional[str]  # <redirect title="..."> if present (a '#REDIRECT' is parsed elsewhere)
  source_id: str  # "<path>@<stream offset>#<page_id>" (multistream range) or "<path>#<page_id>"


class DumpError(ValueError):
  """A dump that cannot be read (or a part of it).

  ``reason`` is a short stable slug: ``truncated_bz2`` (the data ends inside a bz2 stream),
  ``corrupt_bz2`` (invalid bz2 data), ``malformed_xml``, ``not_a_dump`` (no ``<mediawiki>``
  document), ``bad_index``; ``source`` is ``path`` or ``path@stream_offset``.
  """

  def __init__(self, reason: str, message: str, source: str = ""):
    super().__init__(f"{reason} at {source or '?'}: {message}")
    self.reason = reason
    self.source = source
    self.message = message


def _local(tag) -> str:
  return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _int(text: Optional[str]) -> Optional[int]:
  try:
    return int((text or "").strip())
  except ValueError:
    return None


def _namespace_of(title: str, names: Dict[str, int]) -> int:
  """The namespace of a title by its prefix (for dumps without ``<ns>``)."""
  prefix, sep, _ = title.partition(":")
  if not sep:
    return 0
  return names.get(_name_key(prefix), 0)


def _page_of(elem: ET.Element, names: Dict[str, int], source_prefix: str) -> Page:
  title, ns, page_id, redirect, revision_id, text = "", None, 0, None, 0, ""
  for child in elem:
    tag = _local(child.tag)
    if tag == "title":
      title = child.text or ""
    elif tag == "ns":
      ns = _int(child.text)
    elif tag == "id":
      page_id = _int(child.text) or 0
    elif tag == "redirect":
      redirect = child.get("title")
    elif tag == "revision":  # the last one wins (full-history dumps list them oldest first)
      revision_id, text = 0, ""
      for part in child:
        ptag = _local(part.tag)
        if ptag == "id":
          revision_id = _int(part.text) or 0
        elif ptag == "text":
          text = part.text or ""
  if ns is None:
    ns = _namespace_of(title, names)
  return Page(title=title, namespace=ns, page_id=page_id, revision_id=revision_id, text=text,
              redirect=redirect, source_id=f"{source_prefix}#{page_id}")


def _siteinfo_of(elem: ET.Element, lang: str) -> SiteInfo:
  case, namespaces = "first-letter", []
  for child in elem:
    tag = _local(child.tag)
    if tag == "case":
      case = (child.text or "").strip() or case
    elif tag == "namespaces":
      for ns in child:
        key = _int(ns.get("key"))
        if key is not None:
          namespaces.append((key, (ns.text or "").strip()))
  return SiteInfo(namespaces=tuple(namespaces), case=case, lang=lang)


def decompressed_chunks(fileobj: BinaryIO, source: str) -> Iterator[bytes]:
  """A whole file, decompressed in bounded chunks: concatenated bz2 streams, or plain XML."""
  data = fileobj.read(READ_SIZE)
  if not data.startswith(b"BZh"):
    if data.lstrip()[:1] == b"<" or data.startswith(b"\xef\xbb\xbf<"):
      while data:  # uncompressed XML
        yield data
        data = fileobj.read(READ_SIZE)
      return
    raise DumpError("not_a_dump", "neither bz2 data nor XML" if data else "empty file",
                    source)
  dec = bz2.BZ2Decompressor()
  while True:
    if dec.eof:
      data = dec.unused_data or fileobj.read(READ_SIZE)
      if not data:
        return
      dec = bz2.BZ2Decompressor()
    elif not data and dec.needs_input:  # (data: read, not yet decompressed)
      data = fileobj.read(READ_SIZE)
      if not data:
        raise DumpError("truncated_bz2", "the file ends inside a bz2 stream", source)
    try:
      out = dec.decompress(data, DECOMPRESS_SIZE)
    except OSError as e:
      raise DumpError("corrupt_bz2", f"invalid bz2 data ({e})", source) from None
    data = b""
    if out:
      yield out


def read_siteinfo(fileobj: BinaryIO, path: str = "") -> Optional[SiteInfo]:
  """The ``<siteinfo>`` of a dump, read from the file's start (a freshly opened file) up to
  ``</siteinfo>``; None when the first ``<page>`` (or the end) comes first.  Raises DumpError
  (``not_a_dump`` when the root is not ``<mediawiki>``, ``malformed_xml``, ``*_bz2``)."""
  parser = ET.XMLPullParser(events=("start", "end"))
  depth, lang = 0, ""
  try:
    for chunk in decompressed_chunks(fileobj, path):
      parser.feed(chunk)
      for event, elem in parser.read_events():
        if event == "start":
          depth += 1
          if depth == 1:
            if _local(elem.tag) != "mediawiki":
              raise DumpError("not_a_dump", f"root element is <{_local(elem.tag)}>", path)
            lang = elem.get(_XML_LANG, "")
          elif depth == 2 and _local(elem.tag) == "page":
            return None
        else:
          depth -= 1
          if depth == 1 and _local(elem.tag) == "siteinfo":
            return _siteinfo_of(elem, lang)
  except ET.ParseError as e:
    raise DumpError("malformed_xml" if depth else "not_a_dump", str(e), path) from None
  return None


def iter_pages(fileobj: BinaryIO, path: str) -> Iterator[Page]:
  """Every page of a whole dump (single- or multi-stream bz2, or plain XML), in file order,
  streamed (one page in memory at a time); source ids ``"<path>#<page_id>"``.  A page without
  ``<ns>`` gets the namespace of its title prefix (by the dump's siteinfo, else English).
  Raises DumpError, after yielding the pages before the damage."""
  parser = ET.XMLPullParser(events=("start", "end"))
  names = SiteInfo.default().link_names()
  root, depth = None, 0
  try:
    for chunk in decompressed_chunks(fileobj, path):
      parser.feed(chunk)
      for event, elem in parser.read_events():
        if event == "start":
          depth += 1
          if depth == 1:
            if _local(elem.tag) != "mediawiki":
              raise DumpError("not_a_dump", f"root element is <{_local(elem.tag)}>", path)
            root = elem
          continue
        depth -= 1
        if depth != 1:
          continue
        tag = _local(elem.tag)
        if tag == "page":
          yield _page_of(elem, names, path)
        elif tag == "siteinfo":
          names = _siteinfo_of(elem, root.get(_XML_LANG, "")).link_names()
        elem.clear()
        del root[:]
    parser.close()
  except ET.ParseError as e:
    raise DumpError("malformed_xml" if root is not None else "not_a_dump", str(e),
                    path) from None
  if root is None:
    raise DumpError("not_a_dump", "no XML element", path)


class _StreamParser:
  """The XML of one bz2 stream of a multistream dump, fed incrementally.

  A stream that starts the document (``<?xml`` / ``<mediawiki``: the header stream) is parsed
  as it is; any other is parsed as ``<pages>`` + its text + ``</pages>``, with a closing
  ``</mediawiki>`` at its end (the trailer) cut off.
  """

  def __init__(self, names: Dict[str, int], source: str):
    self.names = names
    self.source = source
    self.yielded = 0
    self.siteinfo: Optional[SiteInfo] = None
    self._head = b""
    self._header = None  # unknown until the first bytes are seen
    self._parser = ET.XMLPullParser(events=("start", "end"))
    self._root = None
    self._depth = 0
    self._tail = b""

  def feed(self, data: bytes) -> Iterator[Page]:
    if self._header is None:
      self._head += data
      head = self._head.lstrip()
      if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
      if len(head) < 10:
        return
      self._header = head.startswith(b"<?xml") or head.startswith(b"<mediawiki")
      data, self._head = self._head, b""
      if not self._header:
        self._parser.feed(b"<pages>")
    if not self._header:
      data = self._tail + data
      data, self._tail = data[:-_HOLD_BACK], data[-_HOLD_BACK:]
    self._parser.feed(data)
    yield from self._pages()

  def finish(self) -> Iterator[Page]:
    """At the stream's end: the pages still pending (raises ET.ParseError if malformed)."""
    if self._header is None:  # a (near-)empty stream
      self._header = False
      self._tail, self._head = self._head, b""
      self._parser.feed(b"<pages>")
    if self._header:
      if self._depth == 0 and self._root is not None:  # a whole document in one stream
        self._parser.close()
      yield from self._pages()
      return
    tail = self._tail.rstrip()
    if tail.endswith(_TRAILER):
      tail = tail[:-len(_TRAILER)]
    self._parser.feed(tail)
    self._parser.feed(b"</pages>")
    self._parser.close()
    yield from self._pages()

  def _pages(self) -> Iterator[Page]:
    for event, elem in self._parser.read_events():
      if event == "start":
        self._depth += 1
        if self._depth == 1:
          self._root = elem
        continue
      self._depth -= 1
      if self._depth != 1:
        continue
      tag = _local(elem.tag)
      if tag == "page":
        self.yielded += 1
        yield _page_of(elem, self.names, self.source)
      elif tag == "siteinfo":
        self.siteinfo = _siteinfo_of(elem, self._root.get(_XML_LANG, ""))
        self.names = self.siteinfo.link_names()
      elem.clear()
      del self._root[:]


def iter_pages_in_range(fileobj: BinaryIO, path: str, start: int, end: int,
                        on_error: Optional[Callable[[DumpError], None]] = None, *,
                        siteinfo: Optional[SiteInfo] = None) -> Iterator[Page]:
  """The pages of the bz2 streams that start in ``[start, end)`` of a multistream dump (a range
  from :func:`pipelines.datasets.wikipedia.multistream_index.plan_splits`), in file order; source ids ``"<path>@<stream offset>#<page_id>"``.

  ``fileobj`` must be seekable; no byte at or past ``end`` is read, and the range is read in
  ``READ_SIZE`` chunks.  Each stream gets its own decompressor and XML parser; the header
  (``<mediawiki><siteinfo>``) and trailer (``</mediawiki>``) streams yield nothing.  A damaged
  stream (``truncated_bz2``: the file or range ends inside it; ``corrupt_bz2``: invalid data,
  then reading resumes at the next bz2 stream signature; ``malformed_xml``: the stream is still
  decompressed to find the next one) is a DumpError with source ``"<path>@<stream offset>"``:
  passed to ``on_error`` and reading goes on, or raised when there is no ``on_error``.  Pages
  already yielded from a damaged stream stay yielded.  A page without ``<ns>`` gets the
  namespace of its title prefix by ``siteinfo`` (else English).
  """
  names = (siteinfo or SiteInfo.default()).link_names()

  def report(reason: str, offset: int, message: str) -> None:
    err = DumpError(reason, message, f"{path}@{offset}")
    if on_error is None:
      raise err
    on_error(err)

  fileobj.seek(start)
  pos, buf = start, b""  # pos: file offset after the bytes read; buf: read, not yet decompressed

  def read() -> bytes:
    nonlocal pos
    want = min(READ_SIZE, end - pos)
    data = fileobj.read(want) if want > 0 else b""
    pos += len(data)
    return data

  while True:
    offset = pos - len(buf)  # where the next stream starts
    if offset >= end:
      return
    if not buf:
      buf = read()
      if not buf:
        report("truncated_bz2", offset, f"the file ends at byte {offset}, before the end of the "
               f"range [{start}, {end})")
        return
    dec = bz2.BZ2Decompressor()
    stream = _StreamParser(names, f"{path}@{offset}")
    failed = False  # one error per stream: its XML failed, the rest is only decompressed

    def fail(reason: str, what: str) -> None:
      nonlocal failed
      if not failed:
        failed = True
        report(reason, offset, f"{what}; {stream.yielded} pages of this stream were read")

    while not dec.eof:
      if dec.needs_input:
        if not buf:
          buf = read()
          if not buf:
            fail("truncated_bz2", f"the {'file' if pos < end else 'range'} ends inside this "
                 "bz2 stream")
            return
        data, buf = buf, b""
      else:
        data = b""
      try:
        out = dec.decompress(data, DECOMPRESS_SIZE)
      except OSError as e:
        fail("corrupt_bz2", f"invalid bz2 data ({e})")
        nxt = _next_stream(fileobj, offset + 1, end)
        if nxt is None:
          return
        fileobj.seek(nxt)
        pos, buf = nxt, b""
        break
      if out and not failed:
        try:
          yield from stream.feed(out)
        except ET.ParseError as e:
          fail("malformed_xml", str(e))
    else:  # the stream ended well
      buf = dec.unused_data
      if not failed:
        try:
          yield from stream.finish()
        except ET.ParseError as e:
          fail("malformed_xml", str(e))
      if stream.siteinfo is not None and siteinfo is None:
        names = stream.siteinfo.link_names()


def _next_stream(fileobj: BinaryIO, offset: int, end: int) -> Optional[int]:
  """The offset of the next bz2 stream signature in ``[offset, end)``, if any."""
  fileobj.seek(offset)
  keep = 9  # a signature is 10 bytes
  carry, carry_at = b"", offset
  while carry_at + len(carry) < end:
    data = fileobj.read(min(READ_SIZE, end - carry_at - len(carry)))
    if not data:
      return None
    window = carry + data
    m = _STREAM_MAGIC.search(window)
    if m:
      return carry_at + m.start()
    carry_at += max(len(window) - keep, 0)
    carry = window[-keep:] if len(window) > keep else window
  return None
