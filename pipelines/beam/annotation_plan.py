"""The Cloud NL budget and dry-run planner of the annotation stage (``--max_api_units``,
``--dry_run``).

A first pass plans every document's billable units (:class:`PlanFn`, the backend's
``plan(text)``: no call is made).  Documents are admitted in the order of a hash of their source
document id (:func:`budget_bucket`) while the sum of their units stays within the budget
(:class:`BudgetCutoff` -> :class:`Budget`), the same on one machine or on many workers.  A dry
run writes :func:`plan_report` (requests, cache hits, billable units, cost at
``--price_per_1000_units``) to ``<output_dir>/annotation_plan.json`` (:data:`PLAN_FILE`) instead
of records.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Dict, Optional

import apache_beam as beam
from apache_beam.utils import shared

from pipelines.beam.stats import BundleStats
from pipelines.document import Document

PLAN_FILE = "annotation_plan.json"  # what --dry_run writes
BUCKET_COUNT = 1 << 20  # admission order of --max_api_units: a hash of the source id


def budget_key(doc: Document) -> str:
  """What --max_api_units admits: a source document (all documents reading its text)."""
  return doc.source_document_id or doc.source_id


def budget_bucket(source_id: str) -> int:
  """Where a document stands in the admission order of ``--max_api_units``."""
  digest = hashlib.sha256(source_id.encode("utf-8", "surrogatepass")).digest()
  return int.from_bytes(digest[:8], "little") % BUCKET_COUNT


@dataclasses.dataclass(frozen=True)
class Budget:
  """Which documents may call the API: those whose :func:`budget_bucket` is below ``cutoff``.

  ``planned_units``: what every document would cost; ``admitted_units``: what the admitted
  ones cost (<= the budget)."""
  cutoff: int
  planned_units: int
  admitted_units: int

  def admits(self, source_id: str) -> bool:
    return budget_bucket(source_id) < self.cutoff


class BudgetCutoff(beam.CombineFn):
  """(bucket, units) of the documents that need calls -> the :class:`Budget` of ``limit``:
  buckets are admitted in order while the units stay within the limit (a document that alone
  exceeds the limit stops the admission there)."""

  def __init__(self, limit: int):
    self._limit = limit

  def create_accumulator(self) -> Dict[int, int]:
    return {}

  def add_input(self, acc: Dict[int, int], element) -> Dict[int, int]:
    bucket, cost = element
    acc[bucket] = acc.get(bucket, 0) + cost
    return acc

  def merge_accumulators(self, accs) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for acc in accs:
      for bucket, cost in acc.items():
        out[bucket] = out.get(bucket, 0) + cost
    return out

  def extract_output(self, acc: Dict[int, int]) -> Budget:
    total = sum(acc.values())
    spent = 0
    cutoff = BUCKET_COUNT
    for bucket in sorted(acc):
      if spent + acc[bucket] > self._limit:
        cutoff = bucket
        break
      spent += acc[bucket]
    return Budget(cutoff, total, spent)


class PlanFn(beam.DoFn):
  """Document -> (bucket, billable units) when it needs calls, and plan stats: what the Cloud
  NL backend would send (no call is made).  ``make_annotators()`` builds the worker's
  annotators (their ``backend.plan(text)``), held through the ``shared`` handle."""

  def __init__(self, handle: shared.Shared, make_annotators: Callable[[], Any]):
    self._handle = handle
    self._make_annotators = make_annotators

  def setup(self):
    self._annotators = self._handle.acquire(self._make_annotators)

  def start_bundle(self):
    self._stats = BundleStats()
    self._last_text: Optional[str] = None

  def process(self, doc: Document):
    if doc.text is self._last_text:  # another question of the same story: planned already
      return
    self._last_text = doc.text
    plan = self._annotators.backend.plan(doc.text)
    self._stats.count("annotate/planned_documents")
    self._stats.count("annotate/planned_requests", plan.requests)
    self._stats.count("annotate/planned_cache_hits", plan.cached)
    self._stats.count("annotate/planned_units", plan.units)
    self._stats.count("annotate/planned_characters", plan.characters)
    if plan.units:
      self._stats.count("annotate/planned_documents_calling")
      yield budget_bucket(budget_key(doc)), plan.units

  def finish_bundle(self):
    yield from self._stats.emit()



def plan_report(stats: Dict[str, Any], config: Any, budget: Budget) -> Dict[str, Any]:
  """The dry run's report: documents, requests, cache hits, billable units and their cost
  (``config``: the :class:`pipelines.beam.annotation_config.AnnotationConfig`)."""
  def get(name):
    return int(stats.get(f"annotate/planned_{name}", 0))

  units = get("units")
  report = {"dry_run": True, "documents": get("documents"), "requests": get("requests"),
            "cache_hits": get("cache_hits"), "documents_calling": get("documents_calling"),
            "billable_units": units, "characters": get("characters"),
            "price_per_1000_units": config.price_per_1000_units,
            "estimated_cost": round(units / 1000 * config.price_per_1000_units, 4),
            "cache_dir": config.cloud.cache_dir}
  if config.max_api_units:
    report.update(max_api_units=config.max_api_units, units_within_budget=budget.admitted_units)
  return report


def write_plan(report: Dict[str, Any], output_dir: str, input_count: int,
                release_claim: Optional[str] = None) -> Dict[str, Any]:
  import json  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from pipelines.beam.writer import write_atomically  # pylint: disable=g-import-not-at-top
  report = dict(report, input=input_count)
  write_atomically(FileSystems.join(output_dir, PLAN_FILE),
                   [(json.dumps(report, indent=1, sort_keys=True) + "\n").encode("utf-8")])
  if release_claim:
    from pipelines.beam import claim  # pylint: disable=g-import-not-at-top
    claim.release_token(output_dir, release_claim)
  return report
