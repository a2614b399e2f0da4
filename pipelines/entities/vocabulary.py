"""The entity vocabulary and alias table of a hyperlinked corpus, as Beam stages.

  links ((raw target title, anchor text), count) ─────────┐
  redirects (redirect title, target title) ───────────────┴─ one join on the raw title ─▶
     resolution (raw -> resolved title, count) ─▶ counts per resolved title ─▶ vocabulary
     ─▶ entity table (raw title -> id, for the records' writer)
     and (anchor, resolved title, raw, count) ─▶ aliases, summed and written per shard

Everything is a Beam join or combine; nothing is looked up in the launcher's memory.  A
redirect is followed one hop, as MediaWiki does (a double redirect is a broken link there too).
The vocabulary itself (at most ``max_entities`` titles with their counts) is combined on one
worker and then used as a side input; the raw-title table it yields has one entry per distinct
link target in the vocabulary.  Files: see :mod:`schemas.entities`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import entities as entities_schema
from pipelines import keys
from pipelines.beam import writer

NAMESPACE = "readtwice.entities"
# Rows per aliases file: a shard is built in memory by one worker (~1 KB per row while it is
# grouped, sorted and converted), so this bounds the writer's memory (~100 MB).
ALIASES_PER_SHARD = 100_000


@dataclasses.dataclass(frozen=True)
class VocabularyConfig:
  min_entity_count: int = 1
  max_entities: int = 1_000_000  # 0: no limit

  def __post_init__(self):
    if not isinstance(self.min_entity_count, int) or self.min_entity_count < 1:
      raise ValueError(f"--min_entity_count must be an integer >= 1, got "
                       f"{self.min_entity_count!r}")
    if not isinstance(self.max_entities, int) or self.max_entities < 0:
      raise ValueError(f"--max_entities must be an integer >= 0 (0: no limit), got "
                       f"{self.max_entities!r}")


ALIASES = "aliases"


def _resolve(element: Tuple[str, Dict[str, List[Any]]]):
  """One join per raw title: (raw, {"links": [(anchor, n)], "redirect": [targets]}) ->
  (raw, resolved, n) and, tagged ``aliases``, (anchor, resolved, raw, n) per anchor."""
  raw, joined = element
  links = joined["links"]
  if not links:  # a redirect nobody links to
    return
  targets = sorted(joined["redirect"])
  resolved = targets[0] if targets else raw
  by_anchor: Dict[str, int] = {}
  for anchor, n in links:
    by_anchor[anchor] = by_anchor.get(anchor, 0) + n
  yield raw, resolved, sum(by_anchor.values())
  for anchor, n in sorted(by_anchor.items()):
    yield beam.pvalue.TaggedOutput(ALIASES, (anchor, resolved, raw, n))


def _alias_row(alias: Tuple[str, str, str, int], vocabulary: Dict[str, int]):
  """Keyed by (anchor, entity, raw title): unique; the shard (by anchor) sums the raw titles."""
  anchor, title, raw, n = alias
  return keys.join_key(anchor, title, raw), (
      anchor, vocabulary.get(title, entities_schema.UNKNOWN_ENTITY_ID), title, n)


def _alias_shard_bytes(shard: int, items: List[Tuple[str, Any]]):
  """One aliases file: rows of the same (anchor, entity) reached through several raw titles
  (redirects) summed."""
  del shard
  rows: Dict[Tuple[str, str], List] = {}
  for _, (anchor, entity_id, title, n) in items:
    row = rows.setdefault((anchor, title), [anchor, entity_id, title, 0])
    row[3] += n
  return [entities_schema.aliases_bytes([tuple(r) for r in rows.values()])], {"rows": len(rows)}


def _identity(data: bytes) -> bytes:
  return data


class BuildEntityTables(beam.PTransform):
  """``{"links": ((raw title, anchor), count), "redirects": (title, target)}`` -> entity
  tables (a link's pairs may come several times: their counts are summed).

  Writes ``entities/vocabulary.parquet`` and ``entities/aliases-*.parquet`` under
  ``output_dir``.  Outputs a dict: ``entity_table`` ((raw title, id) for every linked raw
  title whose resolved title has an id: the records' writer side input), ``vocabulary`` (one
  list of (id, title, count) rows), ``shards`` (the written files' stats) and ``stats``
  (counters for the manifest: ``entities/...``).
  """

  def __init__(self, output_dir: str, config: VocabularyConfig):
    super().__init__()
    self._out = FileSystems.join(output_dir, entities_schema.ENTITIES_DIR)
    self._config = config

  def expand(self, inputs: Dict[str, beam.PCollection]) -> Dict[str, beam.PCollection]:
    cfg = self._config
    links, redirects = inputs["links"], inputs["redirects"]
    # One grouping by raw title joins the links with the redirects and yields both the
    # resolution and the alias pairs.
    by_raw = links | "ByRawTitle" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1])))
    joined = ({"links": by_raw, "redirect": redirects}
              | "JoinRedirects" >> beam.CoGroupByKey()
              | "Resolve" >> beam.FlatMap(_resolve).with_outputs(ALIASES, main="resolved"))
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
    aliases = joined[ALIASES] | "AliasRows" >> beam.Map(_alias_row, ids)
    num_shards = (aliases | "CountAliasRows" >> beam.combiners.Count.Globally()
                  | "AliasShards" >> beam.Map(lambda n: max(1, -(-n // ALIASES_PER_SHARD))))
    alias_files = aliases | "WriteAliases" >> writer.WriteShards(
        self._out, entities_schema.ALIASES_PREFIX, ".parquet", num_shards, _alias_shard_bytes,
        _identity, namespace=NAMESPACE) | "AliasPaths" >> beam.Map(
            lambda s: dict(s, path=f"{entities_schema.ENTITIES_DIR}/{s['path']}"))
    stats = (vocabulary | "VocabularyStats" >> beam.Map(
        lambda rows: {"entities/vocabulary": len(rows),
                      "entities/mentions_in_vocabulary": sum(c for _, _, c in rows)}))
    return {"entity_table": entity_table, "vocabulary": vocabulary, "stats": stats,
            "files": (vocab_file, alias_files) | "FlattenEntityFiles" >> beam.Flatten()}


def _write_vocabulary(rows: List[Tuple[int, str, int]], out: str) -> Dict[str, Any]:
  path = FileSystems.join(out, entities_schema.VOCABULARY_FILE)
  size = writer.write_atomically(path, [entities_schema.vocabulary_bytes(rows)])
  return {"path": f"{entities_schema.ENTITIES_DIR}/{entities_schema.VOCABULARY_FILE}",
          "rows": len(rows), "bytes": size, "kind": "vocabulary"}

