"""Tokenise and segment documents: Document -> SubDocuments (+ the documents side-file line)."""

from __future__ import annotations

import json
from typing import List, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from schemas import records
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.parse import failure
from pipelines.beam.progress import Progress
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import Document
from pipelines.text import answers as answers_lib
from pipelines.text.segmenter import segment_document
from pipelines.text.tokenizer import Tokenizer

SIDE = "documents"  # tag of the documents side-file lines
NAMESPACE = "readtwice.segment"
# Per-document distributions (Beam Metrics while running, the manifest's "distributions").
DISTRIBUTIONS = ("tokens_per_document", "segments_per_document", "answers_per_question")


class TokenizeAndSegmentFn(beam.DoFn):
  """Batch of Documents -> SubDocuments (+ side-file lines, stats, dead letters).

  The tokenizer is built once per worker in ``setup``.  A batch is tokenised in chunks of
  ``CHUNK`` documents with ``encode_batch`` (parallel threads in the Rust tokenizer), the next
  chunk being tokenised while this one is segmented.
  """
  CHUNK = 16

  def __init__(self, config: RecordsConfig, fingerprint: Optional[str] = None):
    self._config = config
    self._fingerprint = fingerprint
    self._tokenizer: Optional[Tokenizer] = None

  def setup(self):
    self._tokenizer = Tokenizer(self._config.tokenizer)
    if self._fingerprint and self._tokenizer.fingerprint != self._fingerprint:
      raise RuntimeError(
          f"Worker tokenizer {self._tokenizer.fingerprint} differs from the one the job was "
          f"launched with ({self._fingerprint}): the vocabulary files changed mid-job.")
    self._ok = Metrics.counter(NAMESPACE, "documents")
    self._rejected = Metrics.counter(NAMESPACE, "rejected")
    self._segments = Metrics.counter(NAMESPACE, "segments")
    self._dists = {name: Metrics.distribution(NAMESPACE, name) for name in DISTRIBUTIONS}
    self._progress = Progress("segment")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, batch: List[Document]):
    chunks = [batch[i:i + self.CHUNK] for i in range(0, len(batch), self.CHUNK)]
    texts = ([d.text for d in c] + [d.question.text for d in c if d.question] for c in chunks)
    for chunk, encoded in zip(chunks, self._tokenizer.encode_batches(texts)):
      questions = iter(encoded[len(chunk):])
      for doc, ctx in zip(chunk, encoded):
        yield from self._segment(doc, ctx, next(questions) if doc.question else None)
    self._progress.update(len(batch), lambda n, s: (
        f"{n:,} documents tokenised and segmented ({n / max(s, 1e-9):,.0f}/s)"))

  def finish_bundle(self):
    yield from self._stats.emit()

  def _observe(self, name: str, value: int) -> None:
    self._dists[name].update(value)
    self._stats.observe(f"segment/{name}", value)

  def _segment(self, doc: Document, ctx, q_enc):
    tok = self._tokenizer
    q = doc.question
    self._stats.count("segment/input")
    try:
      spans: List[Tuple[int, int]] = []
      if q is not None and q.answer_type == records.ANSWER_TYPE_SPAN:
        spans, how = answers_lib.find_answer_spans(doc.text, q.answers)
        self._stats.count(f"segment/answers_{how}")
      known = [p for p in doc.paragraphs if p.supporting is not None]
      supporting = ([(p.begin, p.end) for p in doc.paragraphs if p.supporting]
                    if known else None)
      subs, stats = segment_document(
          doc.id, q.id if q else "", ctx, q_enc, tok.special_ids, self._config.segmenter,
          answer_char_spans=spans,
          mentions=[(m.begin, m.end, m.entity_id) for m in doc.mentions],
          answer_type=q.answer_type if q else records.ANSWER_TYPE_NONE,
          supporting_ranges=supporting)
    except Exception as e:  # pylint: disable=broad-except
      self._rejected.inc()
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("segment", doc.source_id, e))
      return
    self._stats.update(stats, prefix="segment/")
    self._ok.inc()
    self._segments.inc(stats["segments"])
    self._observe("tokens_per_document", len(ctx))
    self._observe("segments_per_document", stats["segments"])
    if q is not None and q.answer_type == records.ANSWER_TYPE_SPAN:
      self._observe("answers_per_question", len(spans))
    yield beam.pvalue.TaggedOutput(SIDE, (doc.id, json.dumps(doc.side_record(),
                                                            ensure_ascii=False,
                                                            sort_keys=True)))
    for sub in subs:
      yield (sub.key, sub)


class TokenizeAndSegment(beam.PTransform):
  """Documents -> ``(key, SubDocument)``; outputs ``documents`` (side lines), ``stats``,
  ``dead_letter``."""

  def __init__(self, config: RecordsConfig, fingerprint: Optional[str] = None):
    super().__init__()
    self._config = config
    self._fingerprint = fingerprint

  def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    n = self._config.batch_size
    fn = TokenizeAndSegmentFn(self._config, self._fingerprint)
    return (docs | "Batch" >> beam.BatchElements(min_batch_size=n, max_batch_size=n)
            | "Segment" >> beam.ParDo(fn).with_outputs(
                DEAD_LETTER, STATS, SIDE, main="sub_documents"))
