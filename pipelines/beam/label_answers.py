"""The labelling stage: where each question's answers occur in its document (char spans).

Extractive QA (HotpotQA, TriviaQA) labels every occurrence of an answer string
(:func:`pipelines.text.answers.find_answer_spans`); a dataset with free-form answers plugs in
another labeller (e.g. a ROUGE-L oracle) with the same contract: Document in, the same Document
with ``question.answer_spans`` set out, plus ``stats`` and ``dead_letter`` outputs.  The
segmenter then maps the spans to tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Sequence, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from schemas import records
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.parse import failure
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import Document
from pipelines.text.answers import find_answer_spans

NAMESPACE = "readtwice.answers"


# search(text, answers) -> (sorted char spans, how: "exact" | "normalised" | "not_found")
Search = Callable[[str, Sequence[str]], Tuple[List[Tuple[int, int]], str]]


class _AnswerSearchFn(beam.DoFn):

  def __init__(self, search: Search = find_answer_spans):
    self._search = search

  def setup(self):
    self._per_question = Metrics.distribution(NAMESPACE, "answers_per_question")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, doc: Document):
    self._stats.count("answers/input")
    q = doc.question
    if q is None or q.answer_type != records.ANSWER_TYPE_SPAN:
      self._stats.count("answers/output")
      yield doc
      return
    try:
      spans, how = self._search(doc.text, q.answers)
    except Exception as e:  # pylint: disable=broad-except
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("answers", doc.source_id, e))
      return
    self._stats.count(f"answers/{how}")
    self._stats.count("answers/output")
    self._per_question.update(len(spans))
    self._stats.observe("answers/answers_per_question", len(spans))
    yield dataclasses.replace(doc, question=dataclasses.replace(q, answer_spans=tuple(spans)))

  def finish_bundle(self):
    yield from self._stats.emit()


class LabelAnswers(beam.PTransform):
  """Documents -> the same documents with ``question.answer_spans`` (span questions only).

  ``search``: how answers are found (default :func:`find_answer_spans`; TriviaQA:
  :func:`pipelines.datasets.triviaqa.answers.find_alias_spans`, every alias after the official
  normalisation).  A question whose answer occurs nowhere is kept and counted.
  Outputs: main (Document), ``stats`` (``answers/exact|normalised|not_found`` and the
  ``answers_per_question`` distribution), ``dead_letter`` (stage ``answers``).
  """

  def __init__(self, search: Search = find_answer_spans):
    super().__init__()
    self._search = search

  def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return docs | "AnswerSearch" >> beam.ParDo(_AnswerSearchFn(self._search)).with_outputs(
        DEAD_LETTER, STATS, main="documents")


class _GivenSpansFn(beam.DoFn):

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, doc: Document):
    self._stats.count("answers/input")
    q = doc.question
    if q is not None and q.answer_type == records.ANSWER_TYPE_SPAN:
      self._stats.count("answers/labelled" if q.answer_spans else "answers/not_found")
      self._stats.observe("answers/answers_per_question", len(q.answer_spans))
    self._stats.count("answers/output")
    yield doc

  def finish_bundle(self):
    yield from self._stats.emit()


class GivenAnswerSpans(beam.PTransform):
  """The labelling stage of a dataset whose reader already set ``question.answer_spans``
  (e.g. ``jsonl_qa``, whose answers may be character spans): documents pass unchanged, counted
  (``answers/labelled``, ``answers/not_found`` and the ``answers_per_question`` distribution).
  Outputs as :class:`LabelAnswers`'s (the ``dead_letter`` output stays empty)."""

  def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return docs | "GivenSpans" >> beam.ParDo(_GivenSpansFn()).with_outputs(
        DEAD_LETTER, STATS, main="documents")
