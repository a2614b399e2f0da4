"""Entity vocabulary, alias table and the raw-title table, as Beam stages (hand-made links)."""

import collections
import glob
import os

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from schemas import entities as entities_schema
from pipelines.entities.vocabulary import (BuildEntityTables, VocabularyConfig, link_blocks,
                                           partition_of)

LINKS = [  # (raw target title, anchor)
    ("Paris", "Paris"), ("Paris", "the capital"), ("Paris", "Paris"),
    ("Paris, France", "Paris"),            # a redirect to Paris
    ("Lutetia", "Lutetia"),                # a redirect to Paris too
    ("Berlin", "Berlin"), ("Berlin", "Berlin"),
    ("Rome", "Rome"),
    ("Nowhere", "nowhere"),                # linked, no page: still an entity (its own title)
]
REDIRECTS = [("Paris, France", "Paris"), ("Lutetia", "Paris"), ("Unlinked", "Rome")]


def _run(tmp_path, config):
  out = str(tmp_path)
  with beam.Pipeline(runner=FnApiRunner()) as p:
    # As two parse workers would emit them: each counts its pairs and packs them per partition.
    half = len(LINKS) // 2
    blocks = (link_blocks(collections.Counter(LINKS[:half]), config.entity_partitions)
              + link_blocks(collections.Counter(LINKS[half:]), config.entity_partitions))
    tables = {"links": p | "Links" >> beam.Create(blocks),
              "redirects": p | "Redirects" >> beam.Create(REDIRECTS)} | BuildEntityTables(
                  out, config)
    assert_that(tables["entity_table"], equal_to(EXPECTED_TABLE[config.max_entities]),
                label="EntityTable")
  vocab = entities_schema.read_vocabulary(
      os.path.join(out, entities_schema.ENTITIES_DIR, entities_schema.VOCABULARY_FILE))
  alias_files = sorted(glob.glob(os.path.join(out, entities_schema.ENTITIES_DIR, "aliases-*")))
  assert len(alias_files) == config.entity_partitions  # one per partition, empty ones too
  return vocab.to_pylist(), entities_schema.read_aliases(alias_files).to_pylist()


EXPECTED_TABLE = {
    0: [("Paris", 1), ("Paris, France", 1), ("Lutetia", 1), ("Berlin", 2), ("Nowhere", 3),
        ("Rome", 4)],
    2: [("Paris", 1), ("Paris, France", 1), ("Lutetia", 1), ("Berlin", 2)],
}


@pytest.mark.slow
def test_vocabulary_counts_redirect_resolved_mentions_and_ranks_them(tmp_path):
  # "Paris" and "Paris, France" (a redirect to Paris) lie in different partitions: their
  # ("Paris", Paris) alias rows are in two files and read_aliases sums them.
  assert partition_of("Paris", 3) != partition_of("Paris, France", 3)
  vocab, aliases = _run(tmp_path, VocabularyConfig(max_entities=0, entity_partitions=3))
  # Paris 3 + 1 (redirect) + 1 (redirect); Berlin 2; then count ties broken by title.
  assert vocab == [{"entity_id": 1, "title": "Paris", "count": 5},
                   {"entity_id": 2, "title": "Berlin", "count": 2},
                   {"entity_id": 3, "title": "Nowhere", "count": 1},
                   {"entity_id": 4, "title": "Rome", "count": 1}]
  assert sorted((a["alias"], a["title"], a["entity_id"], a["count"]) for a in aliases) == [
      ("Berlin", "Berlin", 2, 2), ("Lutetia", "Paris", 1, 1), ("Paris", "Paris", 1, 3),
      ("Rome", "Rome", 4, 1), ("nowhere", "Nowhere", 3, 1), ("the capital", "Paris", 1, 1)]


@pytest.mark.slow
def test_max_entities_and_min_count_cut_the_vocabulary_and_unknown_is_zero(tmp_path):
  vocab, aliases = _run(tmp_path, VocabularyConfig(max_entities=2, entity_partitions=1))
  assert [(v["title"], v["entity_id"]) for v in vocab] == [("Paris", 1), ("Berlin", 2)]
  assert {a["alias"]: a["entity_id"] for a in aliases}["Rome"] == 0
  config = VocabularyConfig(min_entity_count=2, max_entities=0)
  rows = entities_schema.rank([("Paris", 5), ("Berlin", 2), ("Rome", 1)], 2, 0)
  assert rows == [(1, "Paris", 5), (2, "Berlin", 2)]
  assert config.min_entity_count == 2


@pytest.mark.parametrize("kwargs", [{"min_entity_count": 0}, {"max_entities": -1},
                                    {"entity_partitions": 0}])
def test_bad_vocabulary_settings_name_the_flag(kwargs):
  with pytest.raises(ValueError, match="--" + next(iter(kwargs))):
    VocabularyConfig(**kwargs)


def test_entity_files_refuse_another_major_version(tmp_path):
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "v.parquet")
  table = pa.table({"entity_id": [1], "title": ["A"], "count": [1]}).replace_schema_metadata(
      {b"readtwice.entities.version": b"2.0.0"})
  pq.write_table(table, path)
  with pytest.raises(ValueError, match="2.0.0"):
    entities_schema.read_vocabulary(path)
