"""Job statistics that end up in the manifest: summed counters and value distributions.

Every stage emits small dicts on its ``stats`` output.  A value is either an ``int`` (a counter,
summed over the job) or a :class:`Distribution` (merged: count, sum, min, max and a power-of-two
histogram).  :class:`SumStats` combines them into one dict.  The same numbers also go to Beam
``Metrics`` (counters and distributions) so the Dataflow UI shows them while the job runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, Mapping, Tuple

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

STATS = "stats"  # tag of the tagged output every stage uses for its counters


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

  def add(self, v: int) -> None:
    if v < 0:
      raise ValueError(f"Distribution values must be >= 0, got {v}")
    self.min = v if self.count == 0 else min(self.min, v)
    self.max = v if self.count == 0 else max(self.max, v)
    self.count += 1
    self.total += v
    b = v.bit_length()
    buckets = list(self.buckets) + [0] * max(0, b + 1 - len(self.buckets))
    buckets[b] += 1
    self.buckets = tuple(buckets)

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


class SumStats(beam.CombineFn):
  """Combines stats dicts: ints are summed, Distributions merged."""

  def create_accumulator(self) -> Dict[str, Any]:
    return {}

  def add_input(self, acc: Dict[str, Any], d: Mapping[str, Any]) -> Dict[str, Any]:
    for k, v in d.items():
      if isinstance(v, Distribution):
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
  """(counters, distributions) of a combined stats dict."""
  counters = {k: v for k, v in stats.items() if not isinstance(v, Distribution)}
  dists = {k: v for k, v in stats.items() if isinstance(v, Distribution)}
  return counters, dists



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

  def count(self, key: str, n: int = 1) -> None:
    self.counters[key] = self.counters.get(key, 0) + int(n)

  def update(self, counters: Mapping[str, int], prefix: str = "") -> None:
    for k, n in counters.items():
      self.count(prefix + k, n)

  def observe(self, key: str, value: int) -> None:
    d = self.distributions.get(key)
    if d is None:
      d = self.distributions[key] = Distribution()
    d.add(int(value))

  def emit(self):
    """Yields the accumulated stats (as a tagged, globally windowed value) and resets."""
    out: Dict[str, Any] = dict(self.counters)
    out.update(self.distributions)
    self.counters, self.distributions = {}, {}
    if out:
      yield beam.pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value(out))
