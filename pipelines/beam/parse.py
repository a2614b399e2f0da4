"""Parsing source records into Documents with a reader's ``parse(raw, source_id)``."""

from __future__ import annotations

import traceback
from typing import Any, Callable, Dict, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import BadInput, Document

Parser = Callable[[Any, str], Tuple[Document, Dict[str, int]]]


def failure(stage: str, source_id: str, e: Exception) -> Dict[str, Any]:
  """The dead letter for an element that failed in ``stage``.

  ``BadInput`` carries a stable reason slug; any other exception on one element must not kill
  a long job either: it is dead-lettered as ``internal_error:<type>`` with a short traceback.
  """
  if isinstance(e, BadInput):
    return dead_letter(stage, e.reason, source_id, e.detail)
  return dead_letter(stage, f"internal_error:{type(e).__name__}", source_id,
                     traceback.format_exc(limit=5))


class _ParseFn(beam.DoFn):

  def __init__(self, parse: Parser, namespace: str):
    self._parse = parse
    self._ns = namespace
    self._stats = BundleStats()

  def setup(self):
    self._ok = Metrics.counter(self._ns, "parse_ok")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, element: Tuple[str, Any]):
    source_id, raw = element
    self._stats.count("parse/input")
    try:
      doc, stats = self._parse(raw, source_id)
    except Exception as e:  # pylint: disable=broad-except
      dl = failure("parse", source_id, e)
      Metrics.counter(self._ns, f"parse_rejected_{dl['reason']}").inc()
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dl)
      return
    self._ok.inc()
    self._stats.count("parse/output")
    self._stats.update(stats, prefix="parse/")
    yield doc

  def finish_bundle(self):
    yield from self._stats.emit()


class ParseRecords(beam.PTransform):
  """``(source_id, raw)`` -> Document via a reader's ``parse(raw, source_id)``.

  Outputs: main (Document), ``dead_letter`` (stage ``parse``), ``stats`` (``parse/input``,
  ``parse/output`` and the reader's own counters).
  """

  def __init__(self, parse: Parser, namespace: str):
    super().__init__()
    self._fn = _ParseFn(parse, namespace)

  def expand(self, pcoll: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return pcoll | "Parse" >> beam.ParDo(self._fn).with_outputs(DEAD_LETTER, STATS,
                                                                main="documents")
