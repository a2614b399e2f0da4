"""From raw source records to written records: the shared middle and end of every job.

  (source_id, raw record) --ParseRecords(reader)--> Document --DeduplicateDocuments-->
  --TokenizeAndSegment--> SubDocument --WriteShards(PackEncoder)--> records-*.tfrecord
                      \\--> documents side file                  --> documents/*.jsonl
  dead letters of every stage ------------------------------------> dead_letter/*.jsonl
  counters of every stage -----------------------------------------> manifest.json, COMPLETED
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import subprocess
import traceback
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from schemas import records
from pipelines.beam import writer
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter, reason_key, to_json_line
from pipelines.beam.packing import PackEncoder
from pipelines.document import BadInput, Document
from pipelines.text import answers as answers_lib
from pipelines.text.segmenter import SegmenterConfig, segment_document
from pipelines.text.tokenizer import Tokenizer, TokenizerSpec

STATS = "stats"
SIDE = "documents"


@dataclasses.dataclass(frozen=True)
class RecordsConfig:
  """Everything that shapes the output records (written to the manifest's ``config``)."""
  segmenter: SegmenterConfig = SegmenterConfig()
  tokenizer: TokenizerSpec = TokenizerSpec()
  segments_per_pack: int = 128
  num_shards: int = 0  # 0: ceil(total segments / segments_per_shard), at least 1
  segments_per_shard: int = 16384
  deduplicate: bool = True
  batch_size: int = 64

  def __post_init__(self):
    if self.segmenter.max_segments_per_document > self.segments_per_pack:
      raise ValueError(
          f"max_segments_per_document={self.segmenter.max_segments_per_document} exceeds "
          f"segments_per_pack={self.segments_per_pack}: a (sub-)document must fit one pack.")

  def describe(self) -> Dict[str, Any]:
    d = dataclasses.asdict(self.segmenter)
    d.update(segments_per_pack=self.segments_per_pack, num_shards=self.num_shards,
             segments_per_shard=self.segments_per_shard, deduplicate=self.deduplicate)
    return d


def _fail(stage: str, source_id: str, e: Exception) -> Dict[str, Any]:
  if isinstance(e, BadInput):
    return dead_letter(stage, e.reason, source_id, e.detail)
  # Unexpected errors on one element must not kill a long job: dead-letter them with the trace.
  return dead_letter(stage, f"internal_error:{type(e).__name__}", source_id,
                     traceback.format_exc(limit=5))


class _ParseFn(beam.DoFn):

  def __init__(self, parse: Callable[[Any, str], Tuple[Document, Dict[str, int]]],
               namespace: str):
    self._parse = parse
    self._ns = namespace

  def process(self, element: Tuple[str, Any]):
    source_id, raw = element
    try:
      doc, stats = self._parse(raw, source_id)
    except Exception as e:  # pylint: disable=broad-except
      dl = _fail("parse", source_id, e)
      Metrics.counter(self._ns, f"parse_rejected_{dl['reason']}").inc()
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dl)
      return
    Metrics.counter(self._ns, "parse_ok").inc()
    if stats:
      yield beam.pvalue.TaggedOutput(STATS, {f"parse/{k}": v for k, v in stats.items()})
    yield doc


class ParseRecords(beam.PTransform):
  """``(source_id, raw)`` -> Document via a reader's ``parse(raw, source_id)``.

  Outputs: main (Document), ``dead_letter``, ``stats``.
  """

  def __init__(self, parse, namespace: str):
    super().__init__()
    self._fn = _ParseFn(parse, namespace)

  def expand(self, pcoll: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return pcoll | "Parse" >> beam.ParDo(self._fn).with_outputs(DEAD_LETTER, STATS,
                                                                main="documents")


def _keep_first(element: Tuple[str, Iterable[Document]]):
  _, docs = element
  docs = sorted(docs, key=lambda d: d.source_id)
  yield docs[0]
  if len(docs) > 1:
    Metrics.counter("readtwice.dedup", "duplicate_id").inc(len(docs) - 1)
    yield beam.pvalue.TaggedOutput(STATS, {"skipped/dedup/duplicate_id": len(docs) - 1})


class DeduplicateDocuments(beam.PTransform):
  """Keeps one document per id (the smallest source id); the others count as skipped."""

  def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return (docs | "ById" >> beam.Map(lambda d: (d.id, d))
            | "Group" >> beam.GroupByKey()
            | "KeepFirst" >> beam.ParDo(_keep_first).with_outputs(STATS, main="documents"))


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
    self._ok = Metrics.counter("readtwice.segment", "documents")
    self._rejected = Metrics.counter("readtwice.segment", "rejected")
    self._segments = Metrics.counter("readtwice.segment", "segments")

  def process(self, batch: List[Document]):
    chunks = [batch[i:i + self.CHUNK] for i in range(0, len(batch), self.CHUNK)]
    texts = ([d.text for d in c] + [d.question.text for d in c if d.question] for c in chunks)
    total: collections.Counter = collections.Counter()
    for chunk, encoded in zip(chunks, self._tokenizer.encode_batches(texts)):
      questions = iter(encoded[len(chunk):])
      for doc, ctx in zip(chunk, encoded):
        yield from self._segment(doc, ctx, next(questions) if doc.question else None, total)
    yield beam.pvalue.TaggedOutput(STATS, dict(total))

  def _segment(self, doc: Document, ctx, q_enc, total: collections.Counter):
    tok = self._tokenizer
    q = doc.question
    try:
      spans: List[Tuple[int, int]] = []
      if q is not None and q.answer_type == records.ANSWER_TYPE_SPAN:
        spans, how = answers_lib.find_answer_spans(doc.text, q.answers)
        total[f"segment/answers_{how}"] += 1
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
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, _fail("segment", doc.source_id, e))
      return
    total.update({f"segment/{k}": v for k, v in stats.items()})
    self._ok.inc()
    self._segments.inc(stats["segments"])
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


class SumCounts(beam.CombineFn):
  """Sums dicts of counters."""

  def create_accumulator(self):
    return collections.Counter()

  def add_input(self, acc, d):
    acc.update(d)
    return acc

  def merge_accumulators(self, accs):
    out = collections.Counter()
    for a in accs:
      out.update(a)
    return out

  def extract_output(self, acc):
    return dict(sorted(acc.items()))


def git_revision() -> str:
  """HEAD of the checkout this code runs from, or 'unknown' (e.g. an installed wheel)."""
  try:
    out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10)
    return out.stdout.strip() or "unknown"
  except (OSError, subprocess.SubprocessError):
    return "unknown"


def build_manifest(header: Dict[str, Any], input_count: int, stats: Dict[str, int],
                   reasons: List[Tuple[str, int]], shards: List[Dict[str, Any]]) -> Dict:
  """Assembles (and validates) the manifest from the pipeline's aggregated counters."""
  rejected_by_reason = dict(sorted(reasons))
  skipped_by_reason = {k[len("skipped/"):]: v for k, v in stats.items()
                       if k.startswith("skipped/")}
  stages: Dict[str, Dict[str, int]] = collections.defaultdict(dict)
  for k, v in stats.items():
    stage, _, name = k.partition("/")
    if stage != "skipped":
      stages[stage][name] = v
  for k, v in rejected_by_reason.items():
    stage, _, reason = k.partition("/")
    stages[stage][f"rejected:{reason}"] = v
  record_shards = sorted((s for s in shards if s["kind"] == "records"), key=lambda s: s["path"])
  examples = {"documents": stats.get("segment/documents", 0),
              "sub_documents": stats.get("segment/sub_documents", 0),
              "segments": stats.get("segment/segments", 0),
              "packs": sum(s["packs"] for s in record_shards),
              "padding_segments": sum(s["padding_segments"] for s in record_shards)}
  docs = max(examples["documents"], 1)
  examples["segments_per_document"] = round(examples["segments"] / docs, 3)
  m = dict(header)
  m.update(
      manifest_version=manifest_schema.MANIFEST_VERSION,
      schema_name=records.SCHEMA_NAME, schema_version=records.SCHEMA_VERSION,
      counts={"input": input_count, "written": examples["documents"],
              "skipped": sum(skipped_by_reason.values()),
              "rejected": sum(rejected_by_reason.values())},
      rejected_by_reason=rejected_by_reason, skipped_by_reason=skipped_by_reason,
      stages={k: dict(sorted(v.items())) for k, v in sorted(stages.items())},
      examples=examples,
      shards=[{k: s[k] for k in ("path", "records", "bytes", "packs", "segments",
                                 "sub_documents", "padding_segments")} for s in record_shards],
      documents=sorted(f"{documents_schema.DOCUMENTS_DIR}/{s['path']}" for s in shards
                       if s["kind"] == "documents"),
      dead_letter=sorted(f"{manifest_schema.DEAD_LETTER_DIR}/{s['path']}" for s in shards
                         if s["kind"] == "dead_letter"))
  return m


def _write_manifest(_, output_dir: str, header: Dict[str, Any], input_count: int,
                    stats: Dict[str, int], reasons: List[Tuple[str, int]],
                    shards: List[Dict[str, Any]]):
  m = build_manifest(header, input_count, stats, reasons, shards)
  text = manifest_schema.dumps(m)  # validates: raises if the counters do not reconcile
  writer.write_atomically(FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE),
                          [text.encode("utf-8")])
  writer.write_atomically(FileSystems.join(output_dir, manifest_schema.COMPLETED_FILE), [])
  yield m


class DocumentsToRecords(beam.PTransform):
  """Documents -> packed TFRecords, documents side file, dead letters, manifest, COMPLETED.

  Input: a dict with ``documents`` (Document), ``input_count`` (ints to sum: how many source
  records the job read), and optionally ``dead_letters`` and ``stats`` from earlier stages.
  ``header`` holds the manifest's job, git revision, config and ``tokenizer`` description
  (``Tokenizer.describe()``, whose fingerprint the workers check).
  Output: a PCollection holding the manifest dict once everything is written.
  """

  def __init__(self, output_dir: str, config: RecordsConfig, header: Dict[str, Any]):
    super().__init__()
    self._output_dir = output_dir
    self._config = config
    self._header = header

  def expand(self, inputs: Dict[str, beam.PCollection]) -> beam.PCollection:
    cfg = self._config
    out = self._output_dir
    p = inputs["documents"].pipeline
    docs = inputs["documents"]
    stats = [inputs[k] for k in ("stats",) if k in inputs]
    dead = [inputs[k] for k in ("dead_letters",) if k in inputs]
    # Either step redistributes documents over workers (a file read by one worker otherwise
    # stays on it through the fused stages).
    if cfg.deduplicate:
      deduped = docs | "Deduplicate" >> DeduplicateDocuments()
      docs = deduped.documents
      stats.append(deduped[STATS])
    else:
      docs = docs | "Reshuffle" >> beam.Reshuffle()
    tokenizer = self._header["tokenizer"]
    seg = docs | "TokenizeAndSegment" >> TokenizeAndSegment(cfg, tokenizer["fingerprint"])
    stats.append(seg[STATS])
    dead.append(seg[DEAD_LETTER])
    pad_id = tokenizer["special_ids"]["pad"]
    total_stats = (tuple(stats) | "FlattenStats" >> beam.Flatten()
                   | "SumStats" >> beam.CombineGlobally(SumCounts()))
    num_shards = total_stats | "NumShards" >> beam.Map(
        lambda st: cfg.num_shards or max(1, -(-st.get("segment/segments", 0)
                                              // cfg.segments_per_shard)))

    shards = [
        seg.sub_documents | "WriteRecords" >> writer.WriteShards(
            out, "records", ".tfrecord", num_shards,
            PackEncoder(cfg.segments_per_pack, cfg.segmenter.seq_length, pad_id),
            writer.frame_tfrecord),
        seg[SIDE] | "WriteDocuments" >> writer.WriteShards(
            FileSystems.join(out, documents_schema.DOCUMENTS_DIR), "documents", ".jsonl",
            num_shards, writer.encode_lines, writer.frame_line),
    ]
    all_dead = tuple(dead) | "FlattenDeadLetters" >> beam.Flatten()
    shards.append(
        all_dead
        | "DeadLetterKey" >> beam.Map(lambda d: (f"{d['source_id']}\x1f{reason_key(d)}",
                                                 to_json_line(d)))
        | "WriteDeadLetters" >> writer.WriteShards(
            FileSystems.join(out, manifest_schema.DEAD_LETTER_DIR), "dead_letter", ".jsonl", 1,
            writer.encode_lines, writer.frame_line))
    reasons = (all_dead | "ReasonKey" >> beam.Map(reason_key)
               | "CountReasons" >> beam.combiners.Count.PerElement())
    input_count = inputs["input_count"] | "SumInput" >> beam.CombineGlobally(sum)
    all_shards = tuple(shards) | "FlattenShards" >> beam.Flatten()
    return (p | "ManifestTrigger" >> beam.Create([None])
            | "WriteManifest" >> beam.FlatMap(
                _write_manifest, out, self._header,
                beam.pvalue.AsSingleton(input_count), beam.pvalue.AsSingleton(total_stats),
                beam.pvalue.AsList(reasons), beam.pvalue.AsList(all_shards)))
