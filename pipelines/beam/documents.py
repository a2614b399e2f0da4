"""From parsed documents to written records: the shared middle and end of every job.

  Document --CheckLabels--> --DeduplicateDocuments--> --TokenizeAndSegment--> SubDocument
     --WriteShards(PackEncoder)--> records-*.tfrecord
     \\--> documents side file ----------------------> documents/*.jsonl
  dead letters of every stage ----------------------> dead_letter/*.jsonl
  skipped items (duplicate ids) --------------------> skipped/*.jsonl
  counters and distributions of every stage --------> manifest.json, then COMPLETED

The stages live in their own modules (``labels``, ``dedup``, ``segment``, ``writer``,
``packing``, ``stats``, ``manifest``); this module only wires them.
"""

from __future__ import annotations

from typing import Any, Dict, List

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from pipelines import keys
from pipelines.beam import writer
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER, reason_key, to_json_line
from pipelines.beam.dedup import (SKIPPED, DeduplicateDocuments, FindDuplicateIds,
                                  duplicate_ids_message)
from pipelines.beam.labels import LABELS, CheckLabels
from pipelines.beam.manifest import write_manifest
from pipelines.beam.packing import PackEncoder
from pipelines.beam.segment import SIDE, TokenizeAndSegment
from pipelines.beam.stats import STATS, SumStats
from pipelines.errors import UserError


def _num_shards(stats: Dict[str, Any], cfg: RecordsConfig, duplicates: List = ()) -> int:
  """The shard count (every write waits for it, so a refusal here comes before any write)."""
  if duplicates:
    raise UserError(duplicate_ids_message(list(duplicates)))
  return cfg.num_shards or max(1, -(-stats.get("segment/segments", 0) // cfg.segments_per_shard))


def _side_lines(records: beam.PCollection, label: str) -> beam.PCollection:
  """Dead-letter / skipped records -> ``(key, json line)``, keyed by source id then reason."""
  return records | f"{label}Key" >> beam.Map(
      lambda d: (keys.join_key(d["source_id"], reason_key(d)), to_json_line(d)))


class DocumentsToRecords(beam.PTransform):
  """Documents -> packed TFRecords, side files, dead letters, skipped items, manifest, COMPLETED.

  Input: a dict with ``documents`` (Document), ``input_count`` (ints to sum: how many source
  records the job read), and optionally ``dead_letters`` and ``stats`` from earlier stages.
  ``header`` holds the manifest's job, git revision, inputs, config and ``tokenizer``
  description (``Tokenizer.describe()``, whose fingerprint the workers check).
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
    stats = [inputs[k] for k in ("stats",) if k in inputs]
    dead = [inputs[k] for k in ("dead_letters",) if k in inputs]

    checked = inputs["documents"] | "CheckLabels" >> CheckLabels()
    docs = checked["documents"]
    stats.append(checked[STATS])
    dead.append(checked[DEAD_LETTER])
    # Either step redistributes documents over workers (a file read by one worker otherwise
    # stays on it through the fused stages).
    if cfg.deduplicate:
      deduped = docs | "Deduplicate" >> DeduplicateDocuments()
      docs = deduped.documents
      stats.append(deduped[STATS])
      skipped = deduped[SKIPPED]
      duplicates = None
    else:
      duplicates = docs | "FindDuplicateIds" >> FindDuplicateIds()
      docs = docs | "Reshuffle" >> beam.Reshuffle()
      skipped = p | "NoSkipped" >> beam.Create([])
    tokenizer = self._header["tokenizer"]
    seg = docs | "TokenizeAndSegment" >> TokenizeAndSegment(cfg, tokenizer["fingerprint"])
    stats.append(seg[STATS])
    dead.append(seg[DEAD_LETTER])
    pad_id = tokenizer["special_ids"]["pad"]
    total_stats = (tuple(stats) | "FlattenStats" >> beam.Flatten()
                   | "SumStats" >> beam.CombineGlobally(SumStats()))
    side = [] if duplicates is None else [beam.pvalue.AsSingleton(duplicates)]
    num_shards = total_stats | "NumShards" >> beam.Map(_num_shards, cfg, *side)
    one_shard = num_shards | "OneShard" >> beam.Map(lambda _: 1)

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
    shards.append(_side_lines(all_dead, "DeadLetter") | "WriteDeadLetters" >> writer.WriteShards(
        FileSystems.join(out, manifest_schema.DEAD_LETTER_DIR), "dead_letter", ".jsonl",
        one_shard, writer.encode_lines, writer.frame_line))
    shards.append(_side_lines(skipped, "Skipped") | "WriteSkipped" >> writer.WriteShards(
        FileSystems.join(out, manifest_schema.SKIPPED_DIR), "skipped", ".jsonl",
        one_shard, writer.encode_lines, writer.frame_line))
    reasons = (all_dead | "ReasonKey" >> beam.Map(reason_key)
               | "CountReasons" >> beam.combiners.Count.PerElement())
    input_count = inputs["input_count"] | "SumInput" >> beam.CombineGlobally(sum)
    all_shards = tuple(shards) | "FlattenShards" >> beam.Flatten()
    return (p | "ManifestTrigger" >> beam.Create([None])
            | "WriteManifest" >> beam.FlatMap(
                write_manifest, out, self._header,
                beam.pvalue.AsSingleton(input_count), beam.pvalue.AsSingleton(total_stats),
                beam.pvalue.AsList(reasons), beam.pvalue.AsList(all_shards),
                beam.pvalue.AsSingleton(checked[LABELS])))
