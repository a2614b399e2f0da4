"""Tokenise and segment documents: Document -> Segmented (its SubDocuments and side-file line),
then spill them (:mod:`pipelines.beam.spill`): Segmented -> Entry."""

from __future__ import annotations

import collections
import concurrent.futures
from typing import Any, Deque, Dict, List, NamedTuple, Optional, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from schemas import records
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.parse import failure
from pipelines.beam import spill
from pipelines.beam.progress import Progress
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import Document, SideLines
from pipelines.text.segmenter import SubDocument, entity_table, segment_document
from pipelines.text.tokenizer import shared_tokenizer

NAMESPACE = "readtwice.segment"
# Per-document distributions (Beam Metrics while running, the manifest's "distributions").
DISTRIBUTIONS = ("tokens_per_document", "segments_per_document", "mentions_per_segment")
# What became of a question's answer (the stats report's coverage, ``report/questions/<kind>``,
# counted once per segmented document with a question; not in the manifest).
COVERAGE = ("in_segment", "lost_in_segmentation", "not_in_text", "yes_no", "no_answer")


def answer_coverage(question, char_spans, placed: int) -> str:
  """One of :data:`COVERAGE`: no reference answer (a test question, or unanswerable); a yes/no
  answer (in every segment as the answer type); no answer span in the text (not found, or no
  oracle span reached the threshold); spans in the text but none wholly inside a segment (cut by
  window edges, or no token covers them); else at least one span labelled in a segment
  (``placed``: the labels the segmenter placed)."""
  if not question.answers:
    return "no_answer"
  if question.answer_type in (records.ANSWER_TYPE_YES, records.ANSWER_TYPE_NO):
    return "yes_no"
  if not len(char_spans):
    return "not_in_text"
  return "in_segment" if placed else "lost_in_segmentation"


class Segmented(NamedTuple):
  """One segmented document: its sub-documents and its documents side-file line."""
  id: str
  source_id: str
  question_id: str
  labelled: Optional[bool]  # None: no question
  sub_documents: List[SubDocument]
  side_line: str
  # Other documents read the same text (``Document.source_document_id``): the spill stage
  # stores its tokens once for all of them.
  shared: bool = False


class TokenizeAndSegmentFn(beam.DoFn):
  """Document -> Segmented (+ stats, dead letters), the tokenizer working beside Python.

  The tokenizer is built once per process (:func:`shared_tokenizer`, in ``setup``).  Documents
  are tokenised in chunks of ``min(CHUNK, batch_size)`` documents, or fewer whose texts reach
  ``CHUNK_CHARS`` characters (books, stories: else one call would tokenise a whole bundle of
  books while nothing else runs, and then the segmenting would run while the tokenizer idles),
  with one ``encode_batch`` call each (parallel threads in the Rust tokenizer, which releases
  the GIL), submitted to this instance's tokenizing thread as soon as a chunk is full.
  Finished chunks are segmented when the next documents arrive, so the tokenizer works while
  this thread parses, labels, segments and spills the documents before and after it; at most ``batch_size`` documents (rounded up to a
  chunk) wait in flight, and ``finish_bundle`` segments the rest.  Outputs therefore leave a
  few elements after their inputs: in the global window of these batch pipelines that changes
  nothing (every output of ``finish_bundle`` is globally windowed), and a document's output
  never depends on which chunk it was tokenised in.
  """
  CHUNK = 64
  CHUNK_CHARS = 1 << 21  # ~0.6 s of tokenising on two cores

  def __init__(self, config: RecordsConfig, fingerprint: Optional[str] = None):
    self._config = config
    self._fingerprint = fingerprint
    self._tokenizer = None
    self._chunk = max(1, min(self.CHUNK, config.batch_size))
    self._max_in_flight = max(config.batch_size, self._chunk)

  @classmethod
  def chunk_full(cls, documents: int, chars: int, per_chunk: int) -> bool:
    """Whether a waiting chunk of ``documents`` whose distinct texts hold ``chars`` characters
    goes to the tokenizer (once a document with another text comes)."""
    return documents >= per_chunk or chars >= cls.CHUNK_CHARS

  def setup(self):
    self._tokenizer = shared_tokenizer(self._config.tokenizer)
    if self._fingerprint and self._tokenizer.fingerprint != self._fingerprint:
      raise RuntimeError(
          f"Worker tokenizer {self._tokenizer.fingerprint} differs from the one the job was "
          f"launched with ({self._fingerprint}): the vocabulary files changed mid-job.")
    self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tokenize")
    self._ok = Metrics.counter(NAMESPACE, "documents")
    self._rejected = Metrics.counter(NAMESPACE, "rejected")
    self._segments = Metrics.counter(NAMESPACE, "segments")
    self._dists = {name: Metrics.distribution(NAMESPACE, name) for name in DISTRIBUTIONS}
    self._progress = Progress("segment")

  def teardown(self):
    pool = getattr(self, "_pool", None)
    if pool is not None:
      pool.shutdown(wait=True)

  def start_bundle(self):
    self._stats = BundleStats()
    self._side_lines = SideLines()
    self._waiting: List[Document] = []
    self._waiting_chars = 0  # of the waiting documents' distinct texts
    # (documents, (their texts, the distinct texts sent), encode_raw of the distinct texts)
    self._in_flight: Deque[Tuple[List[Document], Tuple[List[str], List[str]],
                                 concurrent.futures.Future]] = collections.deque()
    self._docs_in_flight = 0

  def process(self, doc: Document):
    # A full chunk goes when a document with another text comes: documents that read one
    # text (NarrativeQA's questions of a story, one after the other) share a chunk, and the
    # text is tokenised once.
    new_text = not self._waiting or doc.text is not self._waiting[-1].text
    if new_text and self.chunk_full(len(self._waiting), self._waiting_chars, self._chunk):
      self._submit()
    self._waiting.append(doc)
    if new_text:
      self._waiting_chars += len(doc.text)
    yield from self._segment_ready(wait=False)

  def finish_bundle(self):
    self._submit()
    for out in self._segment_ready(wait=True):
      if isinstance(out, beam.pvalue.TaggedOutput):
        yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))
      else:
        yield GlobalWindows.windowed_value(out)
    yield from self._stats.emit()

  def _submit(self) -> None:
    chunk, self._waiting, self._waiting_chars = self._waiting, [], 0
    if chunk:
      texts = [d.text for d in chunk] + [d.question.text for d in chunk if d.question]
      unique = list(dict.fromkeys(texts))  # a text several documents read: tokenised once
      self._stats.count("segment/texts_tokenised", len(unique))
      self._in_flight.append((chunk, (texts, unique),
                              self._pool.submit(self._tokenizer.encode_raw, unique)))
      self._docs_in_flight += len(chunk)

  def _segment_ready(self, wait: bool):
    """Segments the oldest chunks whose tokens are ready (all of them with ``wait``, or while
    more than ``batch_size`` documents are in flight)."""
    while self._in_flight and (wait or self._in_flight[0][2].done()
                               or self._docs_in_flight > self._max_in_flight):
      chunk, (texts, unique), future = self._in_flight.popleft()
      self._docs_in_flight -= len(chunk)
      built = dict(zip(unique, self._tokenizer.build(unique, future.result())))
      encoded = [built[t] for t in texts]
      questions = iter(encoded[len(chunk):])
      for doc, ctx in zip(chunk, encoded):
        yield from self._segment(doc, ctx, next(questions) if doc.question else None)
      self._progress.update(len(chunk), lambda n, s: (
          f"{n:,} documents tokenised and segmented ({n / max(s, 1e-9):,.0f}/s)"))

  def _observe(self, name: str, value: int, times: int = 1) -> None:
    dist = self._dists[name]
    for _ in range(times):
      dist.update(value)
    self._stats.observe(f"segment/{name}", value, times)

  def _segment(self, doc: Document, ctx, q_enc):
    tok = self._tokenizer
    q = doc.question
    self._stats.count("segment/input")
    try:
      spans = list(q.answer_spans) if q is not None else []  # set by the labelling stage
      known = [p for p in doc.paragraphs if p.supporting is not None]
      supporting = ([(p.begin, p.end) for p in doc.paragraphs if p.supporting]
                    if known else None)
      mentions, entity_keys = entity_table(doc.mentions)
      subs, stats = segment_document(
          doc.id, q.id if q else "", ctx, q_enc, tok.special_ids, self._config.segmenter,
          answer_char_spans=spans, mentions=mentions, entity_keys=entity_keys,
          answer_type=q.answer_type if q else records.ANSWER_TYPE_NONE,
          supporting_ranges=supporting)
    except Exception as e:  # pylint: disable=broad-except
      self._rejected.inc()
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("segment", doc.source_id, e))
      return
    self._stats.update(stats, prefix="segment/")
    if q is not None:
      self._stats.count("report/questions/" + answer_coverage(
          q, spans, stats.get("answer_spans_labels", 0)))
    self._ok.inc()
    self._segments.inc(stats["segments"])
    self._observe("tokens_per_document", len(ctx))
    self._observe("segments_per_document", stats["segments"])
    for sub in subs:  # one call per distinct count (most segments of a book have none)
      per_segment = np.bincount(sub.mentions[:, 0], minlength=sub.num_segments)
      for n, times in zip(*(a.tolist() for a in np.unique(per_segment, return_counts=True))):
        self._observe("mentions_per_segment", n, times)
    side = self._side_lines(doc)
    labelled = None if q is None else bool(q.answers)
    yield Segmented(doc.id, doc.source_id, q.id if q else "", labelled, subs, side,
                    bool(doc.source_document_id))


class _SpillFn(beam.DoFn):
  """Segmented -> Entry: the payloads go to this bundle's spill file (see ``spill``)."""

  def __init__(self, directory: str):
    self._directory = directory
    self._writer: Optional[spill.SpillWriter] = None

  def setup(self):
    self._bytes = Metrics.counter(NAMESPACE, "spilled_bytes")

  def start_bundle(self):
    self._writer = spill.SpillWriter(self._directory)
    self._last_context: Tuple[Any, Optional[spill.Ref]] = (None, None)  # (tokens, their ref)

  def _context_ref(self, subs: List[SubDocument]) -> Optional[spill.Ref]:
    """Where the tokens the sub-documents slice lie, written on the first document that reads
    them (the documents reading one text come one after the other); None: spill them inline."""
    source = subs[0].context_source if subs else None
    if source is None or any(s.context_source is not source for s in subs):
      return None
    if self._last_context[0] is not source:
      ref = self._writer.write(spill.encode(source))
      self._bytes.inc(ref.length)
      self._last_context = (source, ref)
    return self._last_context[1]

  def process(self, seg: Segmented):
    subs = seg.sub_documents
    context = self._context_ref(subs) if seg.shared else None
    if context is not None:
      subs = [s.detached() for s in subs]
    records_ref = self._writer.write(spill.encode(subs))
    side_ref = self._writer.write(seg.side_line.encode("utf-8"))  # right after the records
    self._bytes.inc(records_ref.length + side_ref.length)
    yield spill.Entry(seg.id, seg.source_id, seg.question_id, seg.labelled,
                      sum(s.num_segments for s in subs), len(subs),
                      records_ref.path, records_ref.offset, records_ref.length, side_ref.length,
                      tuple(s.num_segments for s in subs),
                      context.offset if context else -1, context.length if context else 0)

  def finish_bundle(self):
    self._writer.close()
    self._last_context = (None, None)


class TokenizeAndSegment(beam.PTransform):
  """Documents -> :class:`spill.Entry` (payloads spilled under ``spill_dir``); outputs
  ``stats`` and ``dead_letter``."""

  def __init__(self, config: RecordsConfig, spill_dir: str, fingerprint: Optional[str] = None):
    super().__init__()
    self._config = config
    self._spill_dir = spill_dir
    self._fingerprint = fingerprint

  def expand(self, docs: beam.PCollection) -> Dict[str, beam.PCollection]:
    fn = TokenizeAndSegmentFn(self._config, self._fingerprint)
    seg = docs | "Segment" >> beam.ParDo(fn).with_outputs(DEAD_LETTER, STATS, main="segmented")
    entries = seg.segmented | "Spill" >> beam.ParDo(_SpillFn(self._spill_dir))
    return {"entries": entries, DEAD_LETTER: seg[DEAD_LETTER], STATS: seg[STATS]}
