r"""HotpotQA (distractor or fullwiki; train/dev/test JSON) -> packed ReadTwice TFRecords.

One document per question (its context paragraphs); answers are labelled at every occurrence in
the context; yes/no answers set the answer type; supporting paragraphs set the per-segment
``supporting`` flag.  Writes ``records-*.tfrecord``, ``documents/``, ``dead_letter/``,
``skipped/``, ``manifest.json`` and ``COMPLETED`` under --output_dir.
"""

from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence

import apache_beam as beam

from pipelines import cli
from pipelines.beam import annotate, read
from pipelines.beam.annotate import AnnotateDocuments, AnnotationConfig
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents import DocumentsToRecords
from pipelines.beam.parse import ParseRecords
from pipelines.beam.stats import STATS
from pipelines.readers import hotpotqa as reader

PROG = "python -m pipelines.hotpotqa"
EXAMPLE = r"""  python -m pipelines.hotpotqa \
    --input hotpot_dev_distractor_v1.json --output_dir /tmp/hotpot_records \
    --seq_length 512 --overlap 128 --direct_num_workers 2 --direct_running_mode multi_processing
  (on Dataflow add: --runner DataflowRunner --project P --region R --temp_location gs://B/tmp
   --setup_file ./setup.py, and use gs:// paths)"""


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: AnnotationConfig = AnnotationConfig()) -> beam.PCollection:
  """Adds the HotpotQA job to ``p``; returns the PCollection holding the manifest.

  ``reshuffle``: spread parsed documents over workers before tokenising (for distributed
  runners, where one worker reads a whole file).
  """
  raw = p | "ReadJson" >> read.ReadJsonRecords(paths)
  parsed = raw[read.RECORDS] | "ParseHotpotQA" >> ParseRecords(reader.parse_record,
                                                               "readtwice.hotpotqa")
  dead = ((raw[DEAD_LETTER], parsed[DEAD_LETTER])
          | "FlattenReadParseDeadLetters" >> beam.Flatten())
  stats = (raw[read.STATS], parsed[STATS]) | "FlattenReadParseStats" >> beam.Flatten()
  return {"documents": parsed.documents, "dead_letters": dead, "stats": stats,
          "input_count": raw[read.INPUT_COUNT]} | "ToRecords" >> DocumentsToRecords(
              output_dir, config, header, reshuffle=reshuffle,
              annotator=AnnotateDocuments(options) if options.enabled else None)


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.cli.run_job`)."""
  return cli.run_job("hotpotqa", build, input_pattern, output_dir, config, beam_args, overwrite)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return cli.job_main(PROG, __doc__.split("\n\n")[0], EXAMPLE, "hotpotqa", build, argv,
                      add_flags=annotate.add_flags, job_options=annotate.config_from_args)


if __name__ == "__main__":
  sys.exit(main())
