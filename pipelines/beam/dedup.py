"""One document per id: the first occurrence in input order is kept, the others are skipped.

Input order is the order of input files (sorted paths) and, inside a file, of records; it is
recovered from the source id (``path#index`` / ``path:line``): paths compare as strings (the
order the job reads them in), indices as numbers, so ``file#2`` comes before ``file#10``.
Every dropped document is one line of the job's ``skipped/`` side file (stage, reason, source id, the document id and the source id that was
kept) and counts as skipped in the manifest.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipelines import keys
from pipelines.beam.dead_letter import dead_letter
from pipelines.beam.stats import STATS, BundleStats

SKIPPED = "skipped"  # tag of the skipped-items output


def source_order(source_id: str) -> Tuple[str, int]:
  """Input-order sort key of a source id: ``(path, index)`` (``f#2`` < ``f#10``); an id
  without an index sorts before the indexed ids of the same path."""
  return keys.split_source_id(source_id)


class _KeepFirstFn(beam.DoFn):

  def setup(self):
    self._dups = Metrics.counter("readtwice.dedup", "duplicate_id")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, element: Tuple[str, Iterable[Any]]):
    doc_id, docs = element
    docs = sorted(docs, key=lambda d: source_order(d.source_id))
    self._stats.count("dedup/input", len(docs))
    self._stats.count("dedup/output")
    yield docs[0]
    for d in docs[1:]:
      self._dups.inc()
      self._stats.count("skipped/dedup/duplicate_id")
      yield beam.pvalue.TaggedOutput(SKIPPED, dead_letter(
          "dedup", "duplicate_id", d.source_id,
          f"document id {doc_id!r} was already read from {docs[0].source_id}",
          document_id=doc_id, kept_source_id=docs[0].source_id))

  def finish_bundle(self):
    yield from self._stats.emit()


class DeduplicateDocuments(beam.PTransform):
  """Documents -> one document per id; outputs ``skipped`` (records of the dropped ones) and
  ``stats`` (``dedup/input``, ``dedup/output``, ``skipped/dedup/duplicate_id``).

  A document is anything with ``id`` and ``source_id`` (the job passes the small
  :class:`~pipelines.beam.spill.Entry` of each segmented document, not its text).
  """

  def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return (docs | "ById" >> beam.Map(lambda d: (d.id, d))
            | "Group" >> beam.GroupByKey()
            | "KeepFirst" >> beam.ParDo(_KeepFirstFn()).with_outputs(SKIPPED, STATS,
                                                                    main="documents"))


def _duplicates(element: Tuple[str, Iterable[str]]):
  doc_id, sources = element
  sources = sorted(sources, key=source_order)
  if len(sources) > 1:
    yield doc_id, sources


class FindDuplicateIds(beam.PTransform):
  """Documents -> one list of ``(document id, [source ids])`` for ids read more than once.

  Only ids and source ids are shuffled (not documents); the job uses the list to refuse
  ``--nodeduplicate`` input with duplicates before it writes anything.
  """

  def expand(self, docs: beam.PCollection) -> beam.PCollection:
    return (docs | "IdSource" >> beam.Map(lambda d: (d.id, d.source_id))
            | "GroupIds" >> beam.GroupByKey()
            | "Duplicates" >> beam.FlatMap(_duplicates)
            | "ToList" >> beam.combiners.ToList())


def duplicate_ids_message(duplicates: List[Tuple[str, List[str]]]) -> str:
  """The one-line error for ``--nodeduplicate`` input with duplicate ids."""
  duplicates = sorted(duplicates)
  doc_id, sources = duplicates[0]
  return (f"{len(duplicates)} document ids occur more than once (e.g. {doc_id!r} in "
          f"{', '.join(sources[:3])}); with --nodeduplicate ids must be unique: drop the flag "
          "to keep the first occurrence of each id")
