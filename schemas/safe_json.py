"""JSON from user files, parsed with a nesting limit.

``json.loads`` recurses once per nesting level, so 200k nested ``[`` (a few hundred KB) raise
``RecursionError`` deep inside the parser: a traceback instead of one line.  Every reader of a
user-supplied JSON file (manifests, model configs, gold and prediction files, RoBERTa
``config.json``/``vocab.json``, JSON-lines dataset lines) goes through :func:`loads` /
:func:`load_file`, which first measure the bracket depth outside strings (linear, in C: a regex
drops the strings, NumPy sums the brackets; NumPy is imported only then) and refuse anything nested deeper than
:data:`MAX_DEPTH` levels with :class:`JsonTooDeepError`, one line naming the file.  Real files
nest a handful of levels (a HotpotQA gold file: 5), so the limit only refuses crafted input.

Invalid JSON still raises ``json.JSONDecodeError`` (a ``ValueError``) as ``json.loads`` does.
TF-free and Beam-free.
"""

from __future__ import annotations

import json
import re
from typing import Any, Union

# Deepest nesting of arrays and objects accepted (levels; ``[[1]]`` is 2).  Far above any real
# input, far below the interpreter's recursion limit (1000) that ``json`` runs into.
MAX_DEPTH = 200

# A JSON string (escapes included), unrolled so that it matches in linear time.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_OPENERS = str.maketrans("[]{}", "[][]")


class JsonTooDeepError(ValueError):
  """JSON nested deeper than :data:`MAX_DEPTH`; the message names the file."""


def depth(text: str) -> int:
  """The deepest array/object nesting of ``text`` (brackets inside strings do not count)."""
  if text.count("[") + text.count("{") == 0:
    return 0
  brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_OPENERS)
  if not brackets:
    return 0
  import numpy as np  # pylint: disable=g-import-not-at-top  (only for input with many brackets)
  steps = np.where(np.frombuffer(brackets.encode("ascii"), np.uint8) == ord("["), 1, -1)
  return int(np.cumsum(steps, dtype=np.int64).max())


def check_depth(text: str, source: str = "JSON", max_depth: int = MAX_DEPTH) -> None:
  """:class:`JsonTooDeepError` if ``text`` nests deeper than ``max_depth`` levels."""
  if text.count("[") + text.count("{") <= max_depth:  # cannot be deeper: skip the scan
    return
  found = depth(text)
  if found > max_depth:
    raise JsonTooDeepError(
        f"{source}: JSON nested {found} levels deep, more than the {max_depth} levels readtwice "
        "accepts; the file is damaged or crafted, not a file this command writes or reads")


def loads(text: Union[str, bytes], source: str = "JSON", max_depth: int = MAX_DEPTH,
          **kwargs) -> Any:
  """``json.loads(text, **kwargs)`` after :func:`check_depth` (``source`` names the file in
  the error).  Bytes are decoded as UTF-8 (a BOM is skipped)."""
  if isinstance(text, (bytes, bytearray)):
    text = bytes(text).decode("utf-8-sig")
  check_depth(text, source, max_depth)
  try:
    return json.loads(text, **kwargs)
  except RecursionError:  # a deep call stack left less room than MAX_DEPTH: still one line
    raise JsonTooDeepError(f"{source}: JSON nested too deeply to parse") from None


def load_file(path: str, max_depth: int = MAX_DEPTH, **kwargs) -> Any:
  """The JSON value of the local file ``path`` (see :func:`loads`)."""
  with open(path, "rb") as f:
    data = f.read()
  return loads(data, path, max_depth, **kwargs)
