"""Plain-text books (BooksCorpus / PG-19 / Project Gutenberg style, one book per file) ->
Document.  Pure Python: no Beam, no TensorFlow.

One document per file, in four steps:

1. :func:`pipelines.text.plain_text.decode_text`: bytes -> str (UTF-8, UTF-16 with a BOM,
   cp1252, latin-1), line ends normalised to LF and NUL characters removed;
2. :func:`strip_gutenberg`: the Project Gutenberg header and licence footer removed, with the
   "Produced by ..." credit paragraph that follows the header;
3. :func:`pipelines.text.plain_text.paragraphs`: blank-line separated paragraphs, hard-wrapped
   lines joined with a space;
4. :func:`parse_book`: the paragraphs joined with a blank line into ``Document.text``, one
   ``Paragraph`` (title ``""``) per paragraph with exact character offsets.

Everything is one pass over the lines (``str.split`` / ``str.join``), so a book of a few
million characters parses in a fraction of a second.
"""

from __future__ import annotations

import posixpath
import re
from typing import Dict, List, Optional, Tuple

from pipelines.document import BadInput, Document, Paragraph
from pipelines.text import plain_text

# Gutenberg markers only count in these windows, so a book that quotes one in its body keeps it:
# the header marker in the first max(20% of lines, 600 lines), the footer marker in the last.
MARKER_WINDOW_FRACTION = 0.2
MARKER_WINDOW_LINES = 600
# The credit paragraph ("Produced by ...") is dropped when it starts within this many non-empty
# lines after the header.
CREDIT_WINDOW_LINES = 10

_EBOOK = r"e-?(?:book|text)"
# A line that ends the header (matched at the start of the line, after spaces and asterisks).
_START = re.compile(
    r"[\s*]*(?:start\s+of\s+(?:(?:this|the)\s+)?project\s+gutenberg(?:'s|\u2019s)?\s+" + _EBOOK
    + r"|end[\s*]*the\s+small\s+print)", re.IGNORECASE)
# A line that starts the footer.
_END = re.compile(
    r"[\s*]*end\s+of\s+(?:(?:this|the)\s+)?project\s+gutenberg(?:'s|\u2019s|\s+" + _EBOOK + ")",
    re.IGNORECASE)
_CREDIT = re.compile(r"(?:this\s+" + _EBOOK + r"\s+(?:was|has\s+been)\s+)?produced\s+by\b",
                     re.IGNORECASE)


def _window(n: int) -> int:
  return max(int(n * MARKER_WINDOW_FRACTION), MARKER_WINDOW_LINES)


def _header_end(lines: List[str]) -> int:
  """Index of the first body line after the header, or -1 when no start marker is found.

  The last start marker in the window wins (old files have a "small print" block and a START
  line).  A marker line opened with asterisks but not closed is taken to run on into the next
  line when that one closes them ("*** START OF THIS PROJECT GUTENBERG EBOOK THE\\nTIME
  MACHINE ***").
  """
  found = -1
  for i in range(min(len(lines), _window(len(lines)))):
    if _START.match(lines[i]):
      found = i
  if found < 0:
    return -1
  marker = lines[found].strip()
  if (marker.startswith("*") and not marker.endswith("*") and found + 1 < len(lines)
      and lines[found + 1].rstrip().endswith("***")):
    found += 1
  return found + 1


def _footer_start(lines: List[str], first: int) -> int:
  """Index of the first footer line (an end marker at or after ``first`` in the window), or -1."""
  for i in range(max(first, len(lines) - _window(len(lines))), len(lines)):
    if _END.match(lines[i]):
      return i
  return -1


def _credit_span(lines: List[str], begin: int, end: int) -> Optional[Tuple[int, int]]:
  """``[a, b)``: the credit paragraph starting within the first non-empty lines of
  ``lines[begin:end]`` (it must start a paragraph), or None."""
  seen = 0
  previous_blank = True
  for i in range(begin, end):
    stripped = lines[i].strip()
    if not stripped:
      previous_blank = True
      continue
    if previous_blank and _CREDIT.match(stripped):
      j = i + 1
      while j < end and lines[j].strip():
        j += 1
      return i, j
    previous_blank = False
    seen += 1
    if seen >= CREDIT_WINDOW_LINES:
      break
  return None


def _strip(text: str) -> Tuple[str, bool, bool, bool]:
  lines = text.split("\n")
  begin = _header_end(lines)
  header = begin >= 0
  begin = max(begin, 0)
  end = _footer_start(lines, begin)
  footer = end >= 0
  if not header and not footer:
    return text, False, False, False
  if not footer:
    end = len(lines)
  credit = _credit_span(lines, begin, end)
  if credit is None:
    return "\n".join(lines[begin:end]), header, footer, False
  a, b = credit
  return "\n".join(lines[begin:a] + lines[b:end]), header, footer, True


def strip_gutenberg(text: str) -> Tuple[str, bool, bool]:
  """Returns ``(body, header_found, footer_found)``.

  Header: everything up to and including the line with a start marker ("*** START OF THIS /
  THE PROJECT GUTENBERG EBOOK ...", "***START OF THE PROJECT GUTENBERG EBOOK", "*END*THE SMALL
  PRINT! FOR PUBLIC DOMAIN ETEXTS*...*END*"; case-insensitive, any spaces and asterisks before
  it; EBOOK, E-BOOK, ETEXT or E-TEXT).  Footer: from the line with an end marker ("*** END OF
  THIS / THE PROJECT GUTENBERG EBOOK", "End of the Project Gutenberg EBook of ...", "End of
  Project Gutenberg's ...") to the end.  The header marker only counts in the first
  max(20% of the lines, 600 lines), the footer marker in the last max(20%, 600), so a book that
  quotes a marker in its body keeps it.

  When a marker is found, a credit paragraph ("Produced by ...", "This etext was produced by
  ...") that starts within the first 10 non-empty lines of what is left is dropped too (PG-19
  files have no header but keep the credit and the footer).  Without markers the text comes
  back unchanged, flags False.  Lines are split on "\\n" only (see
  :func:`pipelines.text.plain_text.decode_text`).
  """
  body, header, footer, _ = _strip(text)
  return body, header, footer


def book_id(path: str) -> str:
  """The file's name without its last extension: ``".../train/10006.txt"`` -> ``"10006"``."""
  name = posixpath.basename(path.replace("\\", "/"))
  stem, _ = posixpath.splitext(name)
  return stem


def book_stats(data: bytes, doc: Document, encoding: str, header: bool, footer: bool,
               credit: bool = False) -> Dict[str, int]:
  """The reader's counters for one book (the pipeline sums them into its manifest)."""
  return {
      f"books/encoding/{encoding}": 1,
      "books/bytes": len(data),
      "books/gutenberg_header_removed": int(header),
      "books/gutenberg_footer_removed": int(footer),
      "books/gutenberg_credit_removed": int(credit),
      "books/paragraphs": len(doc.paragraphs),
      "books/characters": len(doc.text),
  }


def parse_book_with_stats(data: bytes, path: str,
                          document_id: Optional[str] = None) -> Tuple[Document, Dict[str, int]]:
  """Returns the document and its counters (:func:`book_stats`); see :func:`parse_book`."""
  doc_id = document_id or book_id(path)
  if not doc_id:
    raise BadInput("bad_id", f"no document id and no file name in {path!r}")
  text, encoding = plain_text.decode_text(data)
  body, header, footer, credit = _strip(text)
  paras = plain_text.paragraphs(body)
  if not paras:
    raise BadInput("empty_book", f"no text left in {len(data)} bytes ({encoding}, "
                                 f"Gutenberg header {header}, footer {footer})")
  spans = []
  pos = 0
  for para in paras:
    spans.append(Paragraph(title="", begin=pos, end=pos + len(para)))
    pos += len(para) + len(plain_text.PARAGRAPH_SEPARATOR)
  doc = Document(id=doc_id, text=plain_text.PARAGRAPH_SEPARATOR.join(paras), source_id=path,
                 paragraphs=tuple(spans))
  return doc, book_stats(data, doc, encoding, header, footer, credit)


def parse_book(data: bytes, path: str, document_id: Optional[str] = None) -> Document:
  """A book file's bytes -> Document.

  ``id``: ``document_id``, else the file's name without extension; ``text``: the paragraphs of
  the decoded book (Gutenberg header, credit and footer removed) joined with a blank line;
  ``source_id``: ``path``; one ``Paragraph(title="")`` per paragraph, with its exact offsets.
  Raises ``BadInput("empty_book")`` when no paragraph is left.
  """
  return parse_book_with_stats(data, path, document_id)[0]
