r"""Plain-text books (BooksCorpus / PG-19 / Project Gutenberg style, one book per file) ->
pretraining records.

Each file is one document: decoded (UTF-8, else UTF-16 with a BOM, cp1252, latin-1; the
encoding is counted), CRLF normalised, the Project Gutenberg header and licence footer removed,
hard-wrapped lines joined into paragraphs (see ``pipelines.readers.books``).  Documents are
segmented without a question prefix (longer than ``--max_segments_per_document`` segments:
explicit sub-documents) and written with ``documents/``, ``dead_letter/``, ``skipped/``,
``stats.json``, ``stats.png``, ``manifest.json`` and ``COMPLETED``.  Entity mentions will come
from the annotation stage (``--ner``); today ``--ner none`` is the only choice.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Dict, List, Optional, Sequence

import apache_beam as beam

from pipelines import cli
from pipelines.beam import report as report_lib
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents import DocumentsToRecords
from pipelines.beam.files import ReadWholeFiles
from pipelines.beam.parse import ParseRecords
from pipelines.beam.read import INPUT_COUNT, RECORDS
from pipelines.beam.stats import STATS
from pipelines.readers import books as reader

PROG = "python -m pipelines.books"
EXAMPLE = r"""  python -m pipelines.books --input 'pg19/train/*.txt' --output_dir /tmp/books \
    --direct_num_workers 2 --direct_running_mode multi_processing
  (on Dataflow add --runner DataflowRunner --project P --region R --temp_location gs://B/tmp
   --setup_file ./setup.py, and use gs:// paths)"""
OUTPUTS = (report_lib.STATS_JSON, report_lib.STATS_PNG)
NER_CHOICES = ("none",)


@dataclasses.dataclass(frozen=True)
class BooksOptions:
  ner: str = "none"

  def __post_init__(self):
    if self.ner not in NER_CHOICES:
      raise ValueError(f"--ner must be one of {NER_CHOICES}, got {self.ner!r}")


def add_flags(group) -> None:
  group.add_argument("--ner", default="none", choices=NER_CHOICES,
                     help="entity mentions: 'none' (the spaCy and Cloud Natural Language "
                          "backends come with the annotation stage) (default: %(default)s)")


def options_from_args(args) -> BooksOptions:
  return BooksOptions(ner=args.ner)


def parse_file(raw: bytes, source_id: str):
  """ParseRecords parser: a file's bytes -> (Document, counters)."""
  return reader.parse_book_with_stats(raw, source_id)


def _report(manifest: Dict[str, Any], output_dir: str, _unused=None) -> None:
  report_lib.write_report(manifest, output_dir)


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: BooksOptions = BooksOptions()) -> beam.PCollection:
  """Adds the books job to ``p``; returns the PCollection holding the manifest."""
  del options  # --ner none: no annotation stage yet
  raw = p | "ReadBooks" >> ReadWholeFiles(paths, reshuffle=reshuffle)
  parsed = raw[RECORDS] | "ParseBooks" >> ParseRecords(parse_file, "readtwice.books")
  dead = (raw[DEAD_LETTER], parsed[DEAD_LETTER]) | "FlattenReadParseDead" >> beam.Flatten()
  stats = (raw[STATS], parsed[STATS]) | "FlattenReadParseStats" >> beam.Flatten()
  return {"documents": parsed.documents, "dead_letters": dead, "stats": stats,
          "input_count": raw[INPUT_COUNT]} | "ToRecords" >> DocumentsToRecords(
              output_dir, config, header, reshuffle=False, report=_report)


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        options: BooksOptions = BooksOptions(),
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.cli.run_job`)."""
  import functools  # pylint: disable=g-import-not-at-top
  return cli.run_job("books", functools.partial(build, options=options), input_pattern,
                     output_dir, config, beam_args, overwrite, dataclasses.asdict(options),
                     OUTPUTS)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return cli.job_main(PROG, __doc__.split("\n\n")[0], EXAMPLE, "books", build, argv,
                      add_flags=add_flags, job_options=options_from_args, outputs=OUTPUTS)


if __name__ == "__main__":
  sys.exit(main())
