"""Reading whole files (one record per file, e.g. a book) into ``(source_id, bytes)``.

For sources whose unit is a file of modest size (a book is at most a few MB): each file is
read whole by one worker, through ``FileSystems`` (local or gs://; ``.gz`` / ``.bz2`` ...
decompressed by extension).  The paths are reshuffled first on distributed runners, so that
files spread over workers.  An unreadable file (a damaged compressed file, a file larger than
``max_bytes``) is one dead letter with the path as source id; storage errors are raised (Beam
retries them).  Outputs: ``records``, ``dead_letter``, ``input_count`` and ``stats``
(``read/files``, ``read/records``, ``read/bytes``), like :mod:`pipelines.beam.read`.
"""

from __future__ import annotations

from typing import List

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.progress import Progress
from pipelines.beam.read import INPUT_COUNT, RECORDS
from pipelines.beam.stats import STATS
from pipelines.sources.byte_stream import is_decompression_error, raise_if_truncated

NAMESPACE = "readtwice.read"
DEFAULT_MAX_BYTES = 256 << 20


class _ReadWholeFileFn(beam.DoFn):

  def __init__(self, max_bytes: int):
    self._max_bytes = max_bytes

  def setup(self):
    self._files = Metrics.counter(NAMESPACE, "files")
    self._bytes = Metrics.counter(NAMESPACE, "bytes")
    self._progress = Progress("read")

  def process(self, path: str):
    stats = {"read/files": 1, "read/records": 0, "read/bytes": 0}
    try:
      with FileSystems.open(path) as f:
        data = f.read(self._max_bytes + 1)
        if len(data) <= self._max_bytes:  # read to the end
          raise_if_truncated(f)
    except Exception as e:  # pylint: disable=broad-except
      if not is_decompression_error(e):
        raise
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
          "read", "invalid_compression", path, f"{type(e).__name__}: {e}"))
      stats["read/invalid_compression"] = 1
    else:
      if len(data) > self._max_bytes:
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
            "read", "file_too_large", path, f"more than {self._max_bytes:,} bytes"))
        stats["read/file_too_large"] = 1
      else:
        stats["read/records"] = 1
        stats["read/bytes"] = len(data)
        self._bytes.inc(len(data))
        yield path, data
    self._files.inc()
    self._progress.update(1, lambda n, s: f"{n:,} files read ({n / max(s, 1e-9):,.1f}/s)")
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, 1)
    yield beam.pvalue.TaggedOutput(STATS, stats)


class ReadWholeFiles(beam.PTransform):
  """Paths -> ``(path, bytes)``; outputs ``dead_letter``, ``input_count`` and ``stats``."""

  def __init__(self, paths: List[str], reshuffle: bool = False,
               max_bytes: int = DEFAULT_MAX_BYTES):
    super().__init__()
    self._paths = paths
    self._reshuffle = reshuffle
    self._fn = _ReadWholeFileFn(max_bytes)

  def expand(self, pbegin: beam.pvalue.PBegin) -> beam.pvalue.DoOutputsTuple:
    paths = pbegin | "Paths" >> beam.Create(self._paths)
    if self._reshuffle:
      paths = paths | "SpreadPaths" >> beam.Reshuffle()
    return paths | "Read" >> beam.ParDo(self._fn).with_outputs(
        DEAD_LETTER, INPUT_COUNT, STATS, main=RECORDS)
