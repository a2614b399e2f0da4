"""The text rules of plain-text sources (books, NarrativeQA stories and summaries): bytes
decoded to text whatever the encoding (:func:`decode_text`), and hard-wrapped lines joined into
paragraphs (:func:`paragraphs`) that a document joins with :data:`PARAGRAPH_SEPARATOR`.  Pure
Python: no Beam, no TensorFlow.
"""

from __future__ import annotations

import re
from typing import List, Tuple

# Between two paragraphs of a document's text.
PARAGRAPH_SEPARATOR = "\n\n"

# Horizontal whitespace collapsed inside paragraphs.
_SPACES = re.compile(r"[ \t\f\v]+")

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode_text(data: bytes) -> Tuple[str, str]:
  """Returns ``(text, encoding)``; never fails.

  The first that applies: UTF-8 with a BOM (``"utf-8-sig"``, the BOM stripped), UTF-8
  (``"utf-8"``), UTF-16 when the data starts with a UTF-16 BOM (``"utf-16"``, the BOM stripped),
  cp1252 when every byte decodes (``"cp1252"``), else latin-1 (``"latin-1"``, which decodes any
  bytes).  Then NUL characters are removed and CRLF and lone CR become LF.
  """
  text, encoding = None, ""
  try:
    if data.startswith(_UTF8_BOM):
      text, encoding = data.decode("utf-8-sig"), "utf-8-sig"
    else:
      text, encoding = data.decode("utf-8"), "utf-8"
  except UnicodeDecodeError:
    pass
  if text is None and data.startswith(_UTF16_BOMS):
    try:
      text, encoding = data.decode("utf-16"), "utf-16"
    except UnicodeDecodeError:
      pass
  if text is None:
    try:
      text, encoding = data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
      text, encoding = data.decode("latin-1"), "latin-1"
  if "\x00" in text:
    text = text.replace("\x00", "")
  if "\r" in text:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
  return text, encoding


def paragraphs(body: str) -> List[str]:
  """The paragraphs of ``body`` (LF line ends).

  Paragraphs are separated by blank lines (lines that are empty after ``str.strip()``).  Inside
  a paragraph each line is stripped and the lines are joined with one space; hyphenated line
  ends are kept as they are ("well-" + "known" -> "well- known").  Runs of spaces, tabs, form
  feeds and vertical tabs become one space.  Empty paragraphs are dropped.
  """
  out: List[str] = []
  current: List[str] = []
  for line in _SPACES.sub(" ", body).split("\n"):
    line = line.strip()
    if line:
      current.append(line)
    elif current:
      out.append(" ".join(current))
      current = []
  if current:
    out.append(" ".join(current))
  return out
