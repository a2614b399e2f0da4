"""Reading JSON source files (a JSON list per file, or JSON lines) into ``(source_id, record)``."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, List

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter

INPUT_COUNT = "input_count"


def match_inputs(pattern: str) -> List[str]:
  """Paths matching a comma-separated list of paths/globs; fails early with a clear message."""
  paths: List[str] = []
  for part in [p.strip() for p in pattern.split(",") if p.strip()]:
    result = FileSystems.match([part])[0]
    found = sorted(m.path for m in result.metadata_list)
    if not found:
      raise FileNotFoundError(f"--input {part!r} matches no file.")
    paths.extend(found)
  if not paths:
    raise FileNotFoundError(f"--input {pattern!r} names no file.")
  return sorted(set(paths))


_WS = re.compile(r"[ \t\n\r]*")


def iter_json_list(text: str) -> Iterator[Any]:
  """Yields the items of a JSON list one at a time (peak memory: the text plus one item, not
  the whole parsed list).  Raises json.JSONDecodeError where the text stops being valid."""
  decoder = json.JSONDecoder()
  pos = _WS.match(text, 0).end()
  if not text.startswith("[", pos):
    raise json.JSONDecodeError("Expecting '['", text, pos)
  pos = _WS.match(text, pos + 1).end()
  if text.startswith("]", pos):
    pos = _WS.match(text, pos + 1).end()
  else:
    while True:
      item, pos = decoder.raw_decode(text, pos)
      yield item
      pos = _WS.match(text, pos).end()
      if text.startswith(",", pos):
        pos = _WS.match(text, pos + 1).end()
      elif text.startswith("]", pos):
        pos = _WS.match(text, pos + 1).end()
        break
      else:
        raise json.JSONDecodeError("Expecting ',' or ']'", text, pos)
  if pos != len(text):
    raise json.JSONDecodeError("Extra data after the list", text, pos)


class _ReadJsonFileFn(beam.DoFn):
  """One file -> its records.  ``[``-led files are one JSON list; others are JSON lines.

  A JSON list is parsed item by item: if it breaks off (truncated or corrupt), the items before
  the break are read and the rest of the file is one dead letter (stage ``read``, source id
  ``path#<index of the first unreadable item>``).  An unparsable line of a JSON-lines file is
  one dead letter for that line.  Each record or dead letter counts once as input.
  """

  def process(self, path: str):
    with FileSystems.open(path) as f:
      data = f.read()
    try:
      text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter("read", "invalid_utf8", path, str(e)))
      yield beam.pvalue.TaggedOutput(INPUT_COUNT, 1)
      return
    del data
    if text.lstrip().startswith("["):
      count = 0
      try:
        for item in iter_json_list(text):
          yield (f"{path}#{count}", item)
          count += 1
      except json.JSONDecodeError as e:
        Metrics.counter("readtwice.read", "invalid_json_list").inc()
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
            "read", "invalid_json", f"{path}#{count}",
            f"the list breaks off at item {count} ({e}); the rest of the file is unreadable"))
        count += 1
      Metrics.counter("readtwice.read", "records").inc(count)
      yield beam.pvalue.TaggedOutput(INPUT_COUNT, count)
      return
    count = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
      if not line.strip():
        continue
      count += 1
      source_id = f"{path}:{lineno}"
      try:
        yield (source_id, json.loads(line))
      except json.JSONDecodeError as e:
        yield beam.pvalue.TaggedOutput(DEAD_LETTER,
                                       dead_letter("read", "invalid_json", source_id, str(e)))
    Metrics.counter("readtwice.read", "records").inc(count)
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, count)


class ReadJsonRecords(beam.PTransform):
  """Paths -> ``(source_id, record)``; outputs ``dead_letter`` and ``input_count``.

  The source id (``path#index`` or ``path:line``) maps every record back to its input.
  """

  def __init__(self, paths: List[str]):
    super().__init__()
    self._paths = paths

  def expand(self, pbegin: beam.pvalue.PBegin) -> beam.pvalue.DoOutputsTuple:
    return (pbegin | "Paths" >> beam.Create(self._paths)
            | "Read" >> beam.ParDo(_ReadJsonFileFn()).with_outputs(
                DEAD_LETTER, INPUT_COUNT, main="records"))
