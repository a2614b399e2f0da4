r"""Plain-text books (BooksCorpus / PG-19 / Project Gutenberg style, one book per file) ->
pretraining records.

Each file is one document: decoded (UTF-8, else UTF-16 with a BOM, cp1252, latin-1; the
encoding is counted), CRLF normalised, the Project Gutenberg header and licence footer removed,
hard-wrapped lines joined into paragraphs (see ``pipelines.datasets.books.reader``), then
annotated with entity mentions by flag (``--ner spacy --linker alias --entities_dir WIKI_OUT``,
see ``pipelines.beam.annotate``).  Documents are segmented without a question prefix (longer
than ``--max_segments_per_document`` segments: explicit sub-documents) and written with
``documents/``, ``dead_letter/``, ``skipped/``, ``stats.json``, ``stats.png``, ``manifest.json``
and ``COMPLETED``.
"""

from __future__ import annotations

from typing import Dict, List

import apache_beam as beam

from pipelines.beam import report as report_lib
from pipelines.beam import annotation_config
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents_to_records import to_records
from pipelines.beam.files import ReadWholeFiles
from pipelines.beam.parse import ParseRecords
from pipelines.beam.read import INPUT_COUNT, RECORDS
from pipelines.beam.stats import STATS
from pipelines.datasets import DatasetSpec
from pipelines.datasets.books import reader
from pipelines.datasets.books import cost, fake_input

EXAMPLE = r"""  python -m pipelines books --input 'pg19/train/*.txt' --output_dir /tmp/books \
    --direct_num_workers 2 --direct_running_mode multi_processing
  (on Dataflow add --runner DataflowRunner --project P --region R --temp_location gs://B/tmp
   --setup_file ./setup.py, and use gs:// paths)"""
OUTPUTS = report_lib.OUTPUTS


def parse_file(raw: bytes, source_id: str):
  """ParseRecords parser: a file's bytes -> (Document, counters)."""
  return reader.parse_book_with_stats(raw, source_id)


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: AnnotationConfig = AnnotationConfig()) -> beam.PCollection:
  """Adds the books job to ``p``; returns the PCollection holding the manifest."""
  raw = p | "ReadBooks" >> ReadWholeFiles(paths, reshuffle=reshuffle)
  parsed = raw[RECORDS] | "ParseBooks" >> ParseRecords(parse_file, "readtwice.books")
  return to_records(parsed.documents, dead_letters=(raw[DEAD_LETTER], parsed[DEAD_LETTER]),
                    stats=(raw[STATS], parsed[STATS]), input_count=raw[INPUT_COUNT],
                    output_dir=output_dir, config=config, header=header, annotation=options)


spec = DatasetSpec(
    name="books", description=__doc__.split("\n\n")[0], example=EXAMPLE, build=build,
    add_flags=annotation_config.add_flags, options_from_args=annotation_config.config_from_args,
    outputs=OUTPUTS,
    cost=cost.COST, fake_input=fake_input.write)
