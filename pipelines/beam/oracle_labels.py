"""The labelling stage of free-form answers (NarrativeQA): spans of the document whose ROUGE-L
against a reference answer is high (:mod:`pipelines.text.oracle`) become the answer spans.

Same contract as :class:`pipelines.beam.label_answers.LabelAnswers`: Document in, the same Document
with ``question.answer_spans`` set out, plus ``stats`` and ``dead_letter`` outputs.  The word
index of a text is built once and reused while the next documents hold the same text object
(NarrativeQA's questions of one story come one after the other): ``answers/stories`` counts
the indexes built.  Counters: ``answers/input``, ``answers/output``, ``answers/oracle_found``,
``answers/not_found`` (no span reaches the threshold: the question is kept, without spans),
``answers/oracle_spans``; distributions ``answers/best_rouge_l_pct`` (the question's best
ROUGE-L F1 x 100) and ``answers/answers_per_question``.  For the stats report only (not in the
manifest, :mod:`pipelines.beam.stats`): ``report/oracle/span_rouge_l_pct``, the ROUGE-L F1 x 100
of every chosen span, and ``report/oracle/best_rouge_l_pct``, every question's best, as exact
value counts (also the Beam distribution ``span_rouge_l_pct``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.parse import failure
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import Document
from pipelines.text import oracle

NAMESPACE = "readtwice.oracle"


class _OracleFn(beam.DoFn):

  def __init__(self, config: oracle.OracleConfig):
    self._config = config

  def setup(self):
    self._best = Metrics.distribution(NAMESPACE, "best_rouge_l_pct")
    self._span = Metrics.distribution(NAMESPACE, "span_rouge_l_pct")

  def start_bundle(self):
    self._stats = BundleStats()
    self._last: Tuple[Optional[str], Any] = (None, None)  # the last text and its index

  def process(self, doc: Document):
    self._stats.count("answers/input")
    q = doc.question
    if q is None or not q.answers:
      self._stats.count("answers/output")
      yield doc
      return
    try:
      if doc.text is self._last[0]:
        index = self._last[1]
      else:
        index = oracle.StoryIndex(doc.text)
        self._last = (doc.text, index)
        self._stats.count("answers/stories")
      spans, stats = oracle.oracle_spans(index, q.answers, self._config)
    except Exception as e:  # pylint: disable=broad-except
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("answers", doc.source_id, e))
      return
    best = float(stats.get("best", max((s for _, _, s in spans), default=0.0)))
    self._best.update(int(round(100 * best)))
    self._stats.observe("answers/best_rouge_l_pct", int(round(100 * best)))
    self._stats.tally("report/oracle/best_rouge_l_pct", int(round(100 * best)))
    for _, _, score in spans:
      self._span.update(int(round(100 * score)))
      self._stats.tally("report/oracle/span_rouge_l_pct", int(round(100 * score)))
    self._stats.observe("answers/answers_per_question", len(spans))
    self._stats.count("answers/oracle_found" if spans else "answers/not_found")
    self._stats.count("answers/oracle_spans", len(spans))
    self._stats.count("answers/output")
    yield dataclasses.replace(doc, question=dataclasses.replace(
        q, answer_spans=tuple((b, e) for b, e, _ in spans)))

  def finish_bundle(self):
    yield from self._stats.emit()


class LabelWithOracle(beam.PTransform):
  """Documents -> the same documents with ROUGE-L oracle ``question.answer_spans``."""

  def __init__(self, config: oracle.OracleConfig = oracle.OracleConfig()):
    super().__init__()
    self._config = config

  def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return docs | "Oracle" >> beam.ParDo(_OracleFn(self._config)).with_outputs(
        DEAD_LETTER, STATS, main="documents")
