"""The entity vocabulary and alias table of a hyperlinked corpus, as Beam stages.

  link blocks (partition, packed (raw target title, anchor, count) rows) ─┐
  redirects (redirect title, target title), by the partition of the title ─┴─ join by
  partition ─▶ per partition: resolution (raw -> resolved title, count) and the partition's
  alias rows (anchor, resolved title, count), in one block
     resolution ─▶ counts per resolved title ─▶ vocabulary (ids, one worker)
                ─▶ entity table (raw title -> id, for the records' writer)
     alias blocks + vocabulary ids ─▶ aliases-PPPPP-of-NNNNN.parquet, one file per partition

Link targets are partitioned by a hash of the raw title (``--entity_partitions``), and links
cross the shuffle as a few packed blocks per parse worker and partition (the parse stage counts
its (target, anchor) pairs first), not one element per link: what a runner buffers between the
stages is a few bytes per distinct pair, and a worker resolving a partition holds only that
partition's pairs.  Everything is a Beam join or combine; nothing is looked up in the
launcher's memory.  A redirect is followed one hop, as MediaWiki does.  The vocabulary (at most
``max_entities`` titles with their counts) is combined on one worker and used as a side input.
Files: see :mod:`schemas.entities`.
"""

from __future__ import annotations

import collections
import dataclasses
import pickle
import zlib
from typing import Any, Dict, Iterable, List, Mapping, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import entities as entities_schema
from schemas.settings import setting
from pipelines import atomic_files

NAMESPACE = "readtwice.entities"


@dataclasses.dataclass(frozen=True)
class VocabularyConfig:
  min_entity_count: int = setting(
      1, help="mentions an entity needs to get an id (default: %(default)s)")
  max_entities: int = setting(
      1_000_000, help="largest entity vocabulary, most mentioned first; 0: no limit (default: "
                      "%(default)s)")
  entity_partitions: int = setting(
      16, help="link targets are resolved in this many partitions, one aliases file each; more "
               "for larger corpora (a worker holds one partition's distinct (target, anchor) "
               "pairs) (default: %(default)s)")

  def __post_init__(self):
    if not isinstance(self.min_entity_count, int) or self.min_entity_count < 1:
      raise ValueError(f"--min_entity_count must be an integer >= 1, got "
                       f"{self.min_entity_count!r}")
    if not isinstance(self.entity_partitions, int) or self.entity_partitions < 1:
      raise ValueError(f"--entity_partitions must be an integer >= 1, got "
                       f"{self.entity_partitions!r}")
    if not isinstance(self.max_entities, int) or self.max_entities < 0:
      raise ValueError(f"--max_entities must be an integer >= 0 (0: no limit), got "
                       f"{self.max_entities!r}")


ALIASES = "aliases"


def partition_of(title: str, partitions: int) -> int:
  """The partition of a raw link target (stable across processes and runs)."""
  return zlib.crc32(title.encode("utf-8")) % partitions


def link_blocks(counts: Mapping[Tuple[str, str], int], partitions: int
                ) -> List[Tuple[int, bytes]]:
  """``{(raw title, anchor): count}`` -> ``(partition, block)`` elements, one per partition
  present: what the parse stage emits for :class:`BuildEntityTables`."""
  rows: Dict[int, List[Tuple[str, str, int]]] = collections.defaultdict(list)
  for (raw, anchor), n in counts.items():
    rows[partition_of(raw, partitions)].append((raw, anchor, n))
  return [(p, pickle.dumps(rows[p], protocol=pickle.HIGHEST_PROTOCOL)) for p in sorted(rows)]


class _ResolvePartitionFn(beam.DoFn):
  """(partition, {"links": [blocks], "redirect": [(title, target)]}) -> (raw, resolved, n)
  and, tagged ``aliases``, (partition, block of (anchor, resolved, n) rows)."""

  def process(self, element: Tuple[int, Dict[str, Iterable[Any]]]):
    partition, joined = element
    anchors: Dict[str, Dict[str, int]] = collections.defaultdict(dict)
    for block in joined["links"]:
      for raw, anchor, n in pickle.loads(block):
        by_anchor = anchors[raw]
        by_anchor[anchor] = by_anchor.get(anchor, 0) + n
    redirect: Dict[str, str] = {}
    for title, target in joined["redirect"]:
      redirect[title] = min(target, redirect.get(title, target))
    aliases: Dict[Tuple[str, str], int] = {}
    for raw in sorted(anchors):  # a redirect nobody links to yields nothing
      resolved = redirect.get(raw, raw)
      yield raw, resolved, sum(anchors[raw].values())
      for anchor, n in anchors[raw].items():
        aliases[(anchor, resolved)] = aliases.get((anchor, resolved), 0) + n
    rows = sorted((a, t, n) for (a, t), n in aliases.items())
    yield beam.pvalue.TaggedOutput(ALIASES, (partition, pickle.dumps(
        rows, protocol=pickle.HIGHEST_PROTOCOL)))


def _write_aliases(element: Tuple[int, bytes], out: str, partitions: int,
                   ids: Dict[str, int]) -> Dict[str, Any]:
  """One partition's aliases file, with the entities' ids (0: not in the vocabulary)."""
  partition, block = element
  rows = [(a, ids.get(t, entities_schema.UNKNOWN_ENTITY_ID), t, n) for a, t, n in
          pickle.loads(block)]
  name = atomic_files.shard_name(entities_schema.ALIASES_PREFIX, partition, partitions, ".parquet")
  return _write_table(out, name, entities_schema.aliases_bytes(rows), len(rows), "aliases")


def _write_table(out: str, name: str, data: bytes, rows: int, kind: str) -> Dict[str, Any]:
  """Writes one Parquet file under ``out`` (``<output_dir>/entities``); its stats for the
  manifest (``path`` relative to the output dir)."""
  path = FileSystems.join(out, name)
  size = atomic_files.write_atomically(path, [data])
  atomic_files.LOGGER.info("wrote %s: %d rows, %.1f MB", path, rows, size / 1e6)
  return {"path": f"{entities_schema.ENTITIES_DIR}/{name}", "rows": rows, "bytes": size,
          "kind": kind}


class BuildEntityTables(beam.PTransform):
  """``{"links": (partition, block) from :func:`link_blocks`, "redirects": (title,
  target)}`` -> entity tables (a pair may come in several blocks: counts are summed).

  Writes ``entities/vocabulary.parquet`` and ``entities/aliases-*.parquet`` under
  ``output_dir``.  Outputs a dict: ``entity_table`` ((raw title, id) for every linked raw
  title whose resolved title has an id: the records' writer side input), ``vocabulary`` (one
  list of (id, title, count) rows), ``files`` (the written files' stats) and ``stats``
  (counters for the manifest: ``entities/...``).
  """

  def __init__(self, output_dir: str, config: VocabularyConfig):
    super().__init__()
    self._out = FileSystems.join(output_dir, entities_schema.ENTITIES_DIR)
    self._config = config

  def expand(self, inputs: Dict[str, beam.PCollection]) -> Dict[str, beam.PCollection]:
    cfg = self._config
    parts = cfg.entity_partitions
    p = inputs["links"].pipeline
    redirects = inputs["redirects"] | "RedirectPartition" >> beam.Map(
        lambda r, n: (partition_of(r[0], n), r), parts)
    # Every partition appears (and gets its aliases file) even without links.
    markers = p | "Partitions" >> beam.Create([(k, None) for k in range(parts)])
    joined = ({"links": inputs["links"], "redirect": redirects, "marker": markers}
              | "JoinByPartition" >> beam.CoGroupByKey()
              | "Resolve" >> beam.ParDo(_ResolvePartitionFn()).with_outputs(
                  ALIASES, main="resolved"))
    resolved = joined.resolved
    counts = (resolved | "ByResolved" >> beam.Map(lambda r: (r[1], r[2]))
              | "CountResolved" >> beam.CombinePerKey(sum))
    vocabulary = (counts | "AllCounts" >> beam.combiners.ToList()
                  | "Rank" >> beam.Map(entities_schema.rank, cfg.min_entity_count,
                                       cfg.max_entities))
    ids = beam.pvalue.AsDict(vocabulary | "VocabularyIds" >> beam.FlatMap(
        lambda rows: [(title, i) for i, title, _ in rows]))
    entity_table = resolved | "RawIds" >> beam.FlatMap(
        lambda r, ids: [(r[0], ids[r[1]])] if r[1] in ids else [], ids)
    vocab_file = (vocabulary | "VocabularyFile" >> beam.Map(
        lambda rows, out: _write_vocabulary(rows, out), self._out))
    alias_files = joined[ALIASES] | "WriteAliases" >> beam.Map(_write_aliases, self._out,
                                                               parts, ids)
    stats = (vocabulary | "VocabularyStats" >> beam.Map(
        lambda rows: {"entities/vocabulary": len(rows),
                      "entities/mentions_in_vocabulary": sum(c for _, _, c in rows)}))
    return {"entity_table": entity_table, "vocabulary": vocabulary, "stats": stats,
            "files": (vocab_file, alias_files) | "FlattenEntityFiles" >> beam.Flatten()}


def _write_vocabulary(rows: List[Tuple[int, str, int]], out: str) -> Dict[str, Any]:
  return _write_table(out, entities_schema.VOCABULARY_FILE,
                      entities_schema.vocabulary_bytes(rows), len(rows), "vocabulary")

