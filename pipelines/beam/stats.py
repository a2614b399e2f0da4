"""Job statistics that end up in the manifest: summed counters and value distributions.

Every stage emits small dicts on its ``stats`` output.  A value is either an ``int`` (a counter,
summed over the job), a :class:`Distribution` (merged: count, sum, min, max and a power-of-two
histogram) or a :class:`ValueCounts` (how often each small integer value occurred; exact
quantiles).  :class:`SumStats` combines them into one dict.  The same numbers also go to Beam
``Metrics`` (counters and distributions) so the Dataflow UI shows them while the job runs.

Keys under ``report/`` (:data:`REPORT_PREFIX`) are for the job's stats report only
(``stats.json`` / ``stats.png``, :mod:`pipelines.beam.report`): the manifest leaves them out
(:func:`split_stats`), so adding one never changes ``manifest.json``; :func:`report_stats`
picks them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

STATS = "stats"  # tag of the tagged output every stage uses for its counters
REPORT_PREFIX = "report/"  # keys of stats for the report only (not in the manifest)


@dataclasses.dataclass
class Distribution:
  """count / sum / min / max of non-negative integers plus a histogram of power-of-two buckets.

  Bucket ``b`` holds values ``v`` with ``bucket_lower(b) <= v < bucket_lower(b + 1)``, where
  the lower bounds are 0, 1, 2, 4, 8, ... (``v.bit_length()`` is the bucket index).
  """
  count: int = 0
  total: int = 0
  min: int = 0
  max: int = 0
  buckets: Tuple[int, ...] = ()

  @classmethod
  def of(cls, values: Iterable[int]) -> "Distribution":
    d = cls()
    for v in values:
      d.add(int(v))
    return d

  def add(self, v: int, times: int = 1) -> None:
    """Adds the value ``v`` ``times`` times (one call for a run of equal values)."""
    if v < 0:
      raise ValueError(f"Distribution values must be >= 0, got {v}")
    if times <= 0:
      return
    if self.count == 0:
      self.min = self.max = v
    elif v < self.min:
      self.min = v
    elif v > self.max:
      self.max = v
    self.count += times
    self.total += v * times
    b = v.bit_length()
    buckets = self.buckets
    if b < len(buckets):
      self.buckets = buckets[:b] + (buckets[b] + times,) + buckets[b + 1:]
    else:
      self.buckets = buckets + (0,) * (b - len(buckets)) + (times,)

  def merge(self, other: "Distribution") -> "Distribution":
    if other.count == 0:
      return Distribution(self.count, self.total, self.min, self.max, self.buckets)
    if self.count == 0:
      return Distribution(other.count, other.total, other.min, other.max, other.buckets)
    n = max(len(self.buckets), len(other.buckets))
    a = list(self.buckets) + [0] * (n - len(self.buckets))
    b = list(other.buckets) + [0] * (n - len(other.buckets))
    return Distribution(self.count + other.count, self.total + other.total,
                        min(self.min, other.min), max(self.max, other.max),
                        tuple(x + y for x, y in zip(a, b)))

  @staticmethod
  def bucket_lower(b: int) -> int:
    return 0 if b == 0 else 1 << (b - 1)

  def describe(self) -> Dict[str, Any]:
    """The manifest's form: count, min, max, mean and the non-empty histogram buckets as
    ``{"<lower>-<upper>": n}`` (upper exclusive)."""
    hist = {f"{self.bucket_lower(b)}-{self.bucket_lower(b + 1)}": n
            for b, n in enumerate(self.buckets) if n}
    return {"count": self.count, "min": self.min, "max": self.max, "sum": self.total,
            "mean": round(self.total / self.count, 3) if self.count else 0.0,
            "histogram": hist}


@dataclasses.dataclass
class ValueCounts:
  """How often each non-negative integer value occurred (``{value: count}``): for values of a
  small range (a score x 100, segments per pack), whose exact quantiles and histograms of any
  bins the report shows."""
  counts: Dict[int, int] = dataclasses.field(default_factory=dict)

  @classmethod
  def of(cls, values: Iterable[int]) -> "ValueCounts":
    c = cls()
    for v in values:
      c.add(int(v))
    return c

  def add(self, v: int, n: int = 1) -> None:
    if v < 0:
      raise ValueError(f"ValueCounts values must be >= 0, got {v}")
    self.counts[int(v)] = self.counts.get(int(v), 0) + int(n)

  def merge(self, other: "ValueCounts") -> "ValueCounts":
    out = ValueCounts(dict(self.counts))
    for v, n in other.counts.items():
      out.add(v, n)
    return out

  @property
  def count(self) -> int:
    return sum(self.counts.values())

  def quantile(self, q: float) -> int:
    """The nearest-rank quantile: the smallest value with at least ``ceil(q * count)`` (and at
    least one) values at or below it; ``quantile(0)`` is the minimum, ``quantile(1)`` the
    maximum.  ValueError when empty."""
    if not self.counts:
      raise ValueError("quantile of no values")
    rank, seen = max(1, math.ceil(q * self.count)), 0
    for v in sorted(self.counts):
      seen += self.counts[v]
      if seen >= rank:
        return v
    return max(self.counts)

  def histogram(self, edges: Sequence[float]) -> List[int]:
    """Counts per bin ``[edges[i], edges[i + 1])``, the last bin closed; values outside the
    edges are not counted."""
    out = [0] * (len(edges) - 1)
    for v, n in self.counts.items():
      if edges[0] <= v <= edges[-1]:
        i = min(bisect.bisect_right(edges, v) - 1, len(out) - 1)
        out[i] += n
    return out

  def describe(self) -> Dict[str, Any]:
    return {"count": self.count, "values": {str(v): self.counts[v] for v in sorted(self.counts)}}


class SumStats(beam.CombineFn):
  """Combines stats dicts: ints are summed, Distributions and ValueCounts merged."""

  def create_accumulator(self) -> Dict[str, Any]:
    return {}

  def add_input(self, acc: Dict[str, Any], d: Mapping[str, Any]) -> Dict[str, Any]:
    for k, v in d.items():
      if isinstance(v, (Distribution, ValueCounts)):
        acc[k] = acc[k].merge(v) if k in acc else v
      else:
        acc[k] = acc.get(k, 0) + int(v)
    return acc

  def merge_accumulators(self, accs: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for a in accs:
      self.add_input(out, a)
    return out

  def extract_output(self, acc: Dict[str, Any]) -> Dict[str, Any]:
    return dict(sorted(acc.items()))


def split_stats(stats: Mapping[str, Any]) -> Tuple[Dict[str, int], Dict[str, Distribution]]:
  """(counters, distributions) of a combined stats dict, for the manifest: the report-only
  ``report/`` keys are left out."""
  kept = {k: v for k, v in stats.items() if not k.startswith(REPORT_PREFIX)}
  counters = {k: v for k, v in kept.items() if not isinstance(v, Distribution)}
  dists = {k: v for k, v in kept.items() if isinstance(v, Distribution)}
  return counters, dists


def report_stats(stats: Mapping[str, Any]) -> Dict[str, Any]:
  """The report-only entries of a combined stats dict (keys without the ``report/`` prefix)."""
  return {k[len(REPORT_PREFIX):]: v for k, v in sorted(stats.items())
          if k.startswith(REPORT_PREFIX)}


class BundleStats:
  """Per-bundle accumulation of a DoFn's stats, emitted once in ``finish_bundle`` (one small
  dict per bundle instead of one per element).

  Usage in a DoFn::

    def start_bundle(self):
      self._stats = BundleStats()
    def process(self, x):
      self._stats.count("parse/input")
      self._stats.observe("segment/tokens_per_document", n)
    def finish_bundle(self):
      yield from self._stats.emit()
  """

  def __init__(self):
    self.counters: Dict[str, int] = {}
    self.distributions: Dict[str, Distribution] = {}
    self.values: Dict[str, ValueCounts] = {}

  def count(self, key: str, n: int = 1) -> None:
    self.counters[key] = self.counters.get(key, 0) + int(n)

  def update(self, counters: Mapping[str, int], prefix: str = "") -> None:
    for k, n in counters.items():
      self.count(prefix + k, n)

  def observe(self, key: str, value: int, times: int = 1) -> None:
    """Adds ``value`` (``times`` times) to the :class:`Distribution` of ``key``."""
    d = self.distributions.get(key)
    if d is None:
      d = self.distributions[key] = Distribution()
    d.add(int(value), int(times))

  def tally(self, key: str, value: int) -> None:
    """Counts one occurrence of ``value`` in the :class:`ValueCounts` of ``key``."""
    c = self.values.get(key)
    if c is None:
      c = self.values[key] = ValueCounts()
    c.add(int(value))

  def emit(self):
    """Yields the accumulated stats (as a tagged, globally windowed value) and resets."""
    out: Dict[str, Any] = dict(self.counters)
    out.update(self.distributions)
    out.update(self.values)
    self.counters, self.distributions, self.values = {}, {}, {}
    if out:
      yield beam.pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value(out))
