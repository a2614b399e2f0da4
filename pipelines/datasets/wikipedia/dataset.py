r"""Wikipedia XML dumps -> pretraining records whose hyperlinks are entity mentions, plus the
entity vocabulary, the alias table and a stats report.

Reads official ``*-pages-articles*.xml.bz2`` dumps (single-stream, multistream with its index,
or a glob of partial dumps), keeps the articles, turns wikitext into clean text and every
internal link into an entity mention (redirects resolved over the whole dump), segments the
documents without a question prefix and writes ``records-*.tfrecord``, ``documents/``,
``entities/vocabulary.parquet``, ``entities/aliases-*.parquet``, ``stats.json``,
``stats.png``, ``dead_letter/``, ``skipped/``, ``manifest.json`` and ``COMPLETED``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import cli
from schemas import entities as entities_schema
from schemas import settings
from schemas.settings import setting
from pipelines.beam import report as report_lib
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents_to_records import to_records
from pipelines.beam.read import INPUT_COUNT
from pipelines.beam.stats import STATS
from pipelines.entities.vocabulary import BuildEntityTables, VocabularyConfig
from pipelines.datasets import DatasetSpec
from pipelines.datasets.wikipedia.dump import (LINKS, PAGES, REDIRECTS, SKIPPED, ParsePages,
                                             ReadDumpPages)
from pipelines.datasets.wikipedia.pages import PageRules
from pipelines.datasets.wikipedia import cost, fake_input

EXAMPLE = r"""  python -m pipelines wikipedia \
    --input 'enwiki-20240601-pages-articles-multistream.xml.bz2' --output_dir /tmp/wiki \
    --max_entities 1000000 --direct_num_workers 2 --direct_running_mode multi_processing
  (the multistream index enwiki-...-multistream-index.txt.bz2 beside the dump is found and
   used to split the read; on Dataflow add --runner DataflowRunner --project P --region R
   --temp_location gs://B/tmp --setup_file ./setup.py, and use gs:// paths)"""
OUTPUTS = (f"{entities_schema.ENTITIES_DIR}/*",) + report_lib.OUTPUTS


@dataclasses.dataclass(frozen=True)
class WikipediaOptions:
  """The Wikipedia job's own settings (each field a flag, its help beside it:
  :func:`schemas.settings.setting`; the page rules' and the vocabulary's in their place)."""
  index: Optional[str] = setting(
      None, io=cli.READS,
      help="multistream index (*-multistream-index.txt.bz2) of a single --input dump; default: "
           "found beside each dump")
  streams_per_split: int = setting(
      10, help="bz2 streams (~100 pages each) per read split of a multistream dump (default: "
               "%(default)s)")
  max_splits: int = setting(
      0, help="at most this many read splits per dump (0: by --streams_per_split)")
  vocabulary: VocabularyConfig = setting(VocabularyConfig())
  rules: PageRules = setting(PageRules())

  def __post_init__(self):
    if self.streams_per_split < 1:
      raise ValueError(f"--streams_per_split must be >= 1, got {self.streams_per_split}")
    if self.max_splits < 0:
      raise ValueError(f"--max_splits must be >= 0 (0: by --streams_per_split), got "
                       f"{self.max_splits}")

  def describe(self) -> Dict[str, Any]:
    d = dict(self.rules.describe())
    d.update(dataclasses.asdict(self.vocabulary), streams_per_split=self.streams_per_split,
             max_splits=self.max_splits, index=self.index)
    return d


def add_flags(group) -> None:
  """The job's own flags: every setting of :class:`WikipediaOptions`."""
  settings.add_flags(group, WikipediaOptions)


def options_from_args(args) -> WikipediaOptions:
  return settings.from_args(WikipediaOptions, args)


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: WikipediaOptions = WikipediaOptions()) -> beam.PCollection:
  """Adds the Wikipedia job to ``p``; returns the PCollection holding the manifest.  The read
  splits are reshuffled whatever the runner, so ``reshuffle`` is not needed."""
  del reshuffle
  if options.index is not None:
    if len(paths) != 1:
      raise FileNotFoundError(f"--index names one dump's index, but --input matches "
                              f"{len(paths)} files")
    if not FileSystems.exists(options.index):
      raise FileNotFoundError(f"--index {options.index!r} does not exist")
  read = p | "ReadDump" >> ReadDumpPages(paths, options.streams_per_split, options.max_splits,
                                         options.index)
  parsed = read[PAGES] | "ParsePages" >> ParsePages(options.rules,
                                                    options.vocabulary.entity_partitions)
  tables = ({"links": parsed[LINKS], "redirects": parsed[REDIRECTS]}
            | "EntityTables" >> BuildEntityTables(output_dir, options.vocabulary))
  return to_records(parsed.documents, dead_letters=(read[DEAD_LETTER], parsed[DEAD_LETTER]),
                    stats=(read[STATS], parsed[STATS], tables["stats"]),
                    input_count=read[INPUT_COUNT], output_dir=output_dir, config=config,
                    header=header, skipped=parsed[SKIPPED],
                    entity_table=tables["entity_table"], report_input=tables["vocabulary"],
                    other_files=tables["files"])


spec = DatasetSpec(
    name="wikipedia", description=__doc__.split("\n\n")[0], example=EXAMPLE, build=build,
    add_flags=add_flags, options_from_args=options_from_args, outputs=OUTPUTS,
    cost=cost.COST, fake_input=fake_input.write)
