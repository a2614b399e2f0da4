"""Reading MediaWiki XML dumps as Beam splits, and their pages as documents.

  paths --PlanSplits--> DumpSplit (a byte range of bz2 streams, from the multistream index;
        --Reshuffle-->  or a whole file)   spread over workers
        --ReadSplit-->  (Page, SiteInfo)    streamed by a read-ahead thread (<= 200 pages held)
        --ParsePages--> Document (mentions keyed by title) | (title, target) redirects
                        | (target, anchor) links | skipped pages, by reason

A multistream dump (``*-multistream.xml.bz2`` with its ``*-multistream-index.txt.bz2`` beside
it, or ``--index``) is cut into ranges of ``streams_per_split`` bz2 streams (~100 pages each),
or into at most ``max_splits`` ranges (an unusable index: the dump is read whole, with a
warning and ``read/unusable_index`` counted); the ranges are reshuffled, so a runner spreads them over
workers, and each is read by seeking to its offset.  Any other dump file is one split (a glob
of partial dumps is read file-parallel).  A damaged stream (truncated bz2, malformed XML) is
one dead letter (``read``, ``truncated_bz2`` / ``malformed_xml``, source ``path@offset``,
counted as an uncertain region: it held an unknown number of pages) and reading goes on with
the next stream.
"""

from __future__ import annotations

import collections
import logging
from typing import Dict, List, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.parse import failure
from pipelines.beam.progress import Progress
from pipelines.beam.read import INPUT_COUNT
from pipelines.beam.stats import STATS, BundleStats
from pipelines.entities.vocabulary import link_blocks
from pipelines.datasets.wikipedia import multistream_index
from pipelines.datasets.wikipedia import reader as dump_reader
from pipelines.datasets.wikipedia import pages as pages_lib
from pipelines.sources.read_ahead import ReadAhead

LOGGER = logging.getLogger("pipelines")
NAMESPACE = "readtwice.wikipedia"
PAGES, LINKS, REDIRECTS, SKIPPED = "pages", "links", "redirects", "skipped"
# Distinct (target, anchor) pairs counted in a parse worker before they are emitted: links
# cross the shuffle as counts (~30 links a page, many repeated), not one element per link.
MAX_LINK_PAIRS = 200_000
_RAW = CompressionTypes.UNCOMPRESSED
# Pages a split's reader thread keeps ready (a bz2 stream holds ~100).
READ_AHEAD_PAGES = 200


class DumpSplit(NamedTuple):
  path: str
  start: int
  end: int
  multistream: bool
  siteinfo: Optional[dump_reader.SiteInfo]


def index_path_for(path: str) -> Optional[str]:
  """The multistream index beside a dump, if there is one."""
  candidates = []
  if path.endswith("-multistream.xml.bz2"):
    candidates.append(path[:-len(".xml.bz2")] + "-index.txt.bz2")
  candidates.append(path + ".index.txt.bz2")
  for candidate in candidates:
    if FileSystems.exists(candidate):
      return candidate
  return None


class _PlanSplitsFn(beam.DoFn):
  """A dump path -> its DumpSplits (its siteinfo read once, from its first stream)."""

  def __init__(self, streams_per_split: int, max_splits: int, index: Optional[str]):
    self._streams_per_split = streams_per_split
    self._max_splits = max_splits
    self._index = index

  def process(self, path: str):
    stats = {"read/files": 1}
    try:
      with FileSystems.open(path, compression_type=_RAW) as f:
        siteinfo = dump_reader.read_siteinfo(f, path)
      index = self._index or index_path_for(path)
      size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
      if index is None:
        splits = [DumpSplit(path, 0, size, False, siteinfo)]
      else:
        try:
          with FileSystems.open(index, compression_type=_RAW) as f:
            offsets = multistream_index.read_index(f, index)
          ranges = multistream_index.plan_splits(offsets, size, self._max_splits,
                                           self._streams_per_split)
        except dump_reader.DumpError as e:  # the dump may be fine: read it whole instead
          LOGGER.warning("%s: unusable multistream index (%s); reading the dump as one split",
                         path, e)
          stats["read/unusable_index"] = 1
          ranges = None
        if ranges is None:
          splits = [DumpSplit(path, 0, size, False, siteinfo)]
        else:
          splits = [DumpSplit(path, s, e, True, siteinfo) for s, e in ranges]
          stats["read/indexed_files"] = 1
    except dump_reader.DumpError as e:
      stats[f"read/{e.reason}"] = 1
      stats["read/uncertain_regions"] = 1
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter("read", e.reason, path, str(e)))
      yield beam.pvalue.TaggedOutput(INPUT_COUNT, 1)
      yield beam.pvalue.TaggedOutput(STATS, stats)
      return
    stats["read/splits"] = len(splits)
    yield beam.pvalue.TaggedOutput(STATS, stats)
    yield from splits


class _ReadSplitFn(beam.DoFn):
  """DumpSplit -> (Page, SiteInfo), streamed; a damaged stream is a dead letter."""

  def setup(self):
    self._pages = Metrics.counter(NAMESPACE, "pages_read")
    self._progress = Progress("read")

  def process(self, split: DumpSplit):
    stats: Dict[str, int] = {"read/records": 0}
    errors: List[dump_reader.DumpError] = []
    with FileSystems.open(split.path, compression_type=_RAW) as f:
      if split.multistream:
        pages = dump_reader.iter_pages_in_range(f, split.path, split.start, split.end,
                                                on_error=errors.append,
                                                siteinfo=split.siteinfo)
      else:
        pages = dump_reader.iter_pages(f, split.path)
      # Decompressing (which releases the GIL) runs beside the cleaning of the pages already
      # read; the thread is stopped and joined before the file closes.
      with ReadAhead(pages, READ_AHEAD_PAGES, name="read-dump") as ahead:
        try:
          for page in ahead:
            stats["read/records"] += 1
            self._pages.inc()
            self._progress.update(
                1, lambda n, s: f"{n:,} pages read ({n / max(s, 1e-9):,.0f}/s)")
            yield page, split.siteinfo
        except dump_reader.DumpError as e:  # a single-stream file: the rest of it is lost
          errors.append(e)
    for e in errors:
      stats[f"read/{e.reason}"] = stats.get(f"read/{e.reason}", 0) + 1
      stats["read/uncertain_regions"] = stats.get("read/uncertain_regions", 0) + 1
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
          "read", e.reason, getattr(e, "source", "") or split.path, str(e)))
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, stats["read/records"] + len(errors))
    yield beam.pvalue.TaggedOutput(STATS, stats)


class ReadDumpPages(beam.PTransform):
  """Dump paths -> ``(Page, SiteInfo)``; outputs ``dead_letter``, ``input_count``, ``stats``."""

  def __init__(self, paths: List[str], streams_per_split: int = 10, max_splits: int = 0,
               index: Optional[str] = None):
    super().__init__()
    self._paths = paths
    self._plan = _PlanSplitsFn(streams_per_split, max_splits, index)

  def expand(self, pbegin: beam.pvalue.PBegin) -> Dict[str, beam.PCollection]:
    planned = (pbegin | "Paths" >> beam.Create(self._paths)
               | "PlanSplits" >> beam.ParDo(self._plan).with_outputs(
                   DEAD_LETTER, INPUT_COUNT, STATS, main="splits"))
    read = (planned.splits | "SpreadSplits" >> beam.Reshuffle()
            | "ReadSplit" >> beam.ParDo(_ReadSplitFn()).with_outputs(
                DEAD_LETTER, INPUT_COUNT, STATS, main=PAGES))
    flat = {}
    for tag in (DEAD_LETTER, INPUT_COUNT, STATS):
      flat[tag] = (planned[tag], read[tag]) | f"Flatten_{tag}" >> beam.Flatten()
    flat[PAGES] = read[PAGES]
    return flat


class _ParsePagesFn(beam.DoFn):
  """(Page, SiteInfo) -> Document | link blocks ((target, anchor) pairs counted per worker,
  packed per partition) | (title, target) redirects | skipped records, counted by reason."""

  def __init__(self, rules: pages_lib.PageRules, link_partitions: int):
    self._rules = rules
    self._partitions = link_partitions
    self._namespaces: Dict[Optional[dump_reader.SiteInfo], object] = {}

  def setup(self):
    self._docs = Metrics.counter(NAMESPACE, "documents")

  def start_bundle(self):
    self._stats = BundleStats()
    self._links: collections.Counter = collections.Counter()

  def _flush_links(self):
    """The (target, anchor) pairs counted so far, as one block per partition
    (:func:`pipelines.entities.vocabulary.link_blocks`)."""
    links, self._links = self._links, collections.Counter()
    for block in link_blocks(links, self._partitions):
      yield beam.pvalue.TaggedOutput(LINKS, block)

  def process(self, element: Tuple[dump_reader.Page, Optional[dump_reader.SiteInfo]]):
    page, siteinfo = element
    self._stats.count("parse/input")
    namespaces = self._namespaces.get(siteinfo)
    if namespaces is None:
      namespaces = self._namespaces[siteinfo] = pages_lib.namespaces_of(siteinfo)
    try:
      kind, value = pages_lib.convert_page(page, namespaces, self._rules)
    except Exception as e:  # pylint: disable=broad-except  # one page never kills the job
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("parse", page.source_id, e))
      return
    if kind == pages_lib.SKIP:
      self._stats.count(f"skipped/parse/{value}")
      if value in ("disambiguation", "empty_after_cleaning"):
        yield beam.pvalue.TaggedOutput(SKIPPED, dead_letter(
            "parse", value, page.source_id, page.title))
      return
    if kind == pages_lib.REDIRECT:
      self._stats.count("skipped/parse/redirect")
      yield beam.pvalue.TaggedOutput(REDIRECTS, value)
      return
    doc, links = value
    self._stats.count("parse/output")
    self._stats.count("parse/mentions", len(doc.mentions))
    self._docs.inc()
    self._links.update(links)
    if len(self._links) >= MAX_LINK_PAIRS:
      yield from self._flush_links()
    yield doc

  def finish_bundle(self):
    for out in self._flush_links():
      yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))
    yield from self._stats.emit()


class ParsePages(beam.PTransform):
  """(Page, SiteInfo) -> ``documents``, ``links``, ``redirects``, ``skipped``, ``dead_letter``,
  ``stats``."""

  def __init__(self, rules: pages_lib.PageRules, link_partitions: int):
    super().__init__()
    self._fn = _ParsePagesFn(rules, link_partitions)

  def expand(self, pages: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    return pages | "Parse" >> beam.ParDo(self._fn).with_outputs(
        LINKS, REDIRECTS, SKIPPED, DEAD_LETTER, STATS, main="documents")
