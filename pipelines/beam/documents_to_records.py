"""From parsed documents to written records: the shared middle and end of every job.

  Document --LabelAnswers--> --TokenizeAndSegment--> (sub-documents, side line to .tmp/spill/) Entry
     --CheckLabels--> --DeduplicateDocuments--> Entry, one per written document
     --WriteShards(SpilledPackEncoder)--> records-*.tfrecord   (one grouping: each shard
                 (spilled_side_lines)---> documents/*.jsonl   reads its own documents back)
  dead letters of every stage ---------------------------------> dead_letter/*.jsonl
  skipped items (duplicate ids) --------------------------------> skipped/*.jsonl
  counters and distributions of every stage -------------------> manifest.json, then COMPLETED

Each document's tokens cross Beam at most once (a reshuffle on distributed runners, so that
tokenising spreads over workers); after segmentation only its small ``Entry`` does.  Memory is
therefore bounded by a bundle and a shard, not by the input (see ``pipelines/beam/spill.py``).
The stages live in their own modules (``label_answers``, ``check_labels``, ``dedup``, ``segment``, ``spill``,
``writer``, ``packing``, ``stats``, ``manifest``); this module only wires them.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from pipelines import keys
from pipelines.beam import report as report_lib
from pipelines.beam import writer
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER, reason_key, to_json_line
from pipelines.beam.dedup import (SKIPPED, DeduplicateDocuments, FindDuplicateIds,
                                  duplicate_ids_message)
from pipelines.beam.check_labels import LABELS, CheckLabels
from pipelines.beam.manifest import RELEASE_CLAIM_KEY, write_manifest
from pipelines.beam import spill
from pipelines.beam.label_answers import LabelAnswers
from pipelines.beam.packing import SpilledPackEncoder, spilled_side_lines
from pipelines.beam.segment import TokenizeAndSegment
from pipelines.beam.stats import STATS, SumStats
from pipelines.errors import UserError


def _num_shards(segments: int, cfg: RecordsConfig, duplicates: List = ()) -> int:
  """The shard count from the segments of the documents to write (every write waits for it,
  so a refusal here comes before any write)."""
  if duplicates:
    raise UserError(duplicate_ids_message(list(duplicates)))
  return cfg.num_shards or max(1, -(-segments // cfg.segments_per_shard))


def _side_lines(records: beam.PCollection, label: str) -> beam.PCollection:
  """Dead-letter / skipped records -> ``(key, json line)``, keyed by source id, reason, then the
  line itself: one source may fail several times for one reason (a TriviaQA web question is one
  document per page), and the writer requires unique keys."""
  def keyed(d):
    line = to_json_line(d)
    return keys.join_key(d["source_id"], reason_key(d), line), line

  return records | f"{label}Key" >> beam.Map(keyed)


class DocumentsToRecords(beam.PTransform):
  """Documents -> packed TFRecords, side files, dead letters, skipped items, manifest, COMPLETED.

  Input: a dict with ``documents`` (Document), ``input_count`` (ints to sum: how many source
  records the job read), and optionally ``dead_letters``, ``stats`` and ``skipped`` (records
  like dead letters, of items an earlier stage skipped on purpose and counted in its stats as
  ``skipped/<stage>/<reason>``) from earlier stages, and ``entity_table``: ``(entity key, id)``
  pairs that resolve the entity keys of mentions (:class:`pipelines.document.Mention`) when
  the records are written, and ``other_files``: stats dicts (``path``, ``kind``, ...) of
  further files the job wrote, which the manifest lists under ``other_files`` and waits for.
  ``header`` holds the manifest's job, git revision, inputs, config and ``tokenizer``
  description (``Tokenizer.describe()``, whose fingerprint the workers check).
  ``reshuffle``: redistribute documents before tokenising (distributed runners: a file is read
  by one worker; locally it would only hold every document in memory).
  ``report``: ``report(manifest, output_dir, report_input, stats=...)`` writes a report (e.g.
  :func:`pipelines.beam.report.write_report`) after the manifest and before ``COMPLETED``;
  ``report_input`` is the optional ``report_input`` singleton PCollection of the inputs (None
  without it), ``stats`` the report-only stats (:func:`pipelines.beam.manifest.report_inputs`).
  ``annotator``: the annotation stage (Document -> Document with mentions, with ``documents``,
  ``stats`` and ``dead_letter`` outputs; e.g. :class:`pipelines.beam.annotate.AnnotateDocuments`),
  run before the labeller; none by default.  An annotator whose ``dry_run`` is true replaces
  the rest: its ``write_plan(documents, input_count, output_dir)`` is the output.
  ``labeller``: the labelling stage (Document -> Document with ``question.answer_spans``, with
  ``documents``, ``stats`` and ``dead_letter`` outputs); default :class:`LabelAnswers`.
  Output: a PCollection holding the manifest dict once everything is written.
  """

  def __init__(self, output_dir: str, config: RecordsConfig, header: Dict[str, Any],
               reshuffle: bool = False, labeller: Optional[beam.PTransform] = None,
               report: Optional[Callable[..., Any]] = None,
               annotator: Optional[beam.PTransform] = None):
    super().__init__()
    self._report = report
    self._annotator = annotator
    self._output_dir = output_dir
    self._config = config
    self._header = header
    self._reshuffle = reshuffle
    self._labeller = labeller if labeller is not None else LabelAnswers()

  def expand(self, inputs: Dict[str, beam.PCollection]) -> beam.PCollection:
    cfg = self._config
    out = self._output_dir
    spill_dir = spill.spill_dir(out)
    tmp = writer.tmp_dir_of(out)  # shards are written there, then renamed into place
    p = inputs["documents"].pipeline
    stats = [inputs[k] for k in ("stats",) if k in inputs]
    dead = [inputs[k] for k in ("dead_letters",) if k in inputs]

    docs = inputs["documents"]
    if self._reshuffle:
      docs = docs | "Reshuffle" >> beam.Reshuffle()
    if getattr(self._annotator, "dry_run", False):  # plans the annotation's cost, no records
      return self._annotator.write_plan(docs, inputs["input_count"], out,
                                        self._header.get(RELEASE_CLAIM_KEY))
    if self._annotator is not None:
      annotated = docs | "Annotate" >> self._annotator
      docs = annotated["documents"]
      stats.append(annotated[STATS])
      dead.append(annotated[DEAD_LETTER])
    labelled = docs | "Label" >> self._labeller
    docs = labelled["documents"]
    stats.append(labelled[STATS])
    dead.append(labelled[DEAD_LETTER])
    tokenizer = self._header["tokenizer"]
    seg = docs | "TokenizeAndSegment" >> TokenizeAndSegment(cfg, spill_dir,
                                                            tokenizer["fingerprint"])
    stats.append(seg[STATS])
    dead.append(seg[DEAD_LETTER])
    checked = seg["entries"] | "CheckLabels" >> CheckLabels()
    entries = checked["documents"]
    stats.append(checked[STATS])
    dead.append(checked[DEAD_LETTER])
    if cfg.deduplicate:
      deduped = entries | "Deduplicate" >> DeduplicateDocuments()
      entries = deduped.documents
      stats.append(deduped[STATS])
      skipped = deduped[SKIPPED]
      side = []
    else:
      duplicates = entries | "FindDuplicateIds" >> FindDuplicateIds()
      skipped = p | "NoSkipped" >> beam.Create([])
      side = [beam.pvalue.AsSingleton(duplicates)]
    if "skipped" in inputs:
      skipped = (inputs["skipped"], skipped) | "FlattenSkipped" >> beam.Flatten()
    pad_id = tokenizer["special_ids"]["pad"]
    total_stats = (tuple(stats) | "FlattenStats" >> beam.Flatten()
                   | "SumStats" >> beam.CombineGlobally(SumStats()))
    segments = (entries | "EntrySegments" >> beam.Map(lambda e: e.segments)
                | "SumSegments" >> beam.CombineGlobally(sum))
    num_shards = segments | "NumShards" >> beam.Map(_num_shards, cfg, *side)
    one_shard = num_shards | "OneShard" >> beam.Map(lambda _: 1)

    keyed = entries | "ById" >> beam.Map(lambda e: (e.id, e))
    # Records and the documents side file of a shard come from one grouping of the entries.
    documents_file = writer.ShardFile(
        FileSystems.join(out, documents_schema.DOCUMENTS_DIR), "documents", ".jsonl",
        spilled_side_lines, writer.frame_line, cfg.compression, tmp_dir=tmp)
    shards = [
        keyed | "WriteRecordsAndDocuments" >> writer.WriteShards(
            out, "records", ".tfrecord", num_shards,
            SpilledPackEncoder(cfg.segments_per_pack, cfg.segmenter.seq_length, pad_id),
            writer.frame_tfrecord, compression=cfg.compression, also=[documents_file],
            side_inputs=([beam.pvalue.AsDict(inputs["entity_table"])]
                         if "entity_table" in inputs else ()), tmp_dir=tmp),
    ]
    all_dead = tuple(dead) | "FlattenDeadLetters" >> beam.Flatten()
    shards.append(_side_lines(all_dead, "DeadLetter") | "WriteDeadLetters" >> writer.WriteShards(
        FileSystems.join(out, manifest_schema.DEAD_LETTER_DIR), "dead_letter", ".jsonl",
        one_shard, writer.encode_lines, writer.frame_line, tmp_dir=tmp))
    shards.append(_side_lines(skipped, "Skipped") | "WriteSkipped" >> writer.WriteShards(
        FileSystems.join(out, manifest_schema.SKIPPED_DIR), "skipped", ".jsonl",
        one_shard, writer.encode_lines, writer.frame_line, tmp_dir=tmp))
    reasons = (all_dead | "ReasonKey" >> beam.Map(reason_key)
               | "CountReasons" >> beam.combiners.Count.PerElement())
    input_count = inputs["input_count"] | "SumInput" >> beam.CombineGlobally(sum)
    if "other_files" in inputs:  # e.g. entity tables: the manifest lists them, waits for them
      shards.append(inputs["other_files"])
    all_shards = tuple(shards) | "FlattenShards" >> beam.Flatten()
    return (p | "ManifestTrigger" >> beam.Create([None])
            | "WriteManifest" >> beam.FlatMap(
                write_manifest, out, self._header,
                beam.pvalue.AsSingleton(input_count), beam.pvalue.AsSingleton(total_stats),
                beam.pvalue.AsList(reasons), beam.pvalue.AsList(all_shards),
                beam.pvalue.AsSingleton(checked[LABELS]), spill_dir, self._report,
                *([beam.pvalue.AsSingleton(inputs["report_input"])]
                  if "report_input" in inputs else []),
                max_error_fraction=cfg.max_error_fraction, allow_empty=cfg.allow_empty))


def to_records(documents: beam.PCollection, *, dead_letters: Sequence[beam.PCollection],
               stats: Sequence[beam.PCollection], input_count: beam.PCollection,
               output_dir: str, config: RecordsConfig, header: Dict[str, Any],
               reshuffle: bool = False, labeller: Optional[beam.PTransform] = None,
               annotation: Optional[Any] = None, **more: beam.PCollection) -> beam.PCollection:
  """The tail every dataset's job shares: the dead letters and the stats of its own stages
  (read, parse, ...) flattened, then :class:`DocumentsToRecords` with the stats report
  (:func:`pipelines.beam.report.write_report`) and, when ``annotation`` (an
  :class:`pipelines.beam.annotation_config.AnnotationConfig`) is enabled, its entity annotation.
  ``more``: the optional inputs of :class:`DocumentsToRecords` (``skipped``,
  ``entity_table``, ``report_input``, ``other_files``).  Returns the PCollection holding the
  manifest."""
  annotator = None
  if annotation is not None and annotation.enabled:
    from pipelines.beam.annotate import AnnotateDocuments  # pylint: disable=g-import-not-at-top
    annotator = AnnotateDocuments(annotation)
  dead = tuple(dead_letters) | "FlattenDeadLetters" >> beam.Flatten()
  stats = tuple(stats) | "FlattenStats" >> beam.Flatten()
  return ({"documents": documents, "dead_letters": dead, "stats": stats,
           "input_count": input_count, **more}
          | "ToRecords" >> DocumentsToRecords(output_dir, config, header, reshuffle=reshuffle,
                                              labeller=labeller, report=report_lib.write_report,
                                              annotator=annotator))
