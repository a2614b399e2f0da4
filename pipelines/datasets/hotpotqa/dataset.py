r"""HotpotQA (distractor or fullwiki; train/dev/test JSON) -> packed ReadTwice TFRecords.

One document per question (its context paragraphs); answers are labelled at every occurrence in
the context; yes/no answers set the answer type; supporting paragraphs set the per-segment
``supporting`` flag.  Writes ``records-*.tfrecord``, ``documents/``, ``dead_letter/``,
``skipped/``, ``manifest.json``, the stats report (``stats.json``, ``stats.png``:
:mod:`pipelines.beam.report`) and ``COMPLETED`` under --output_dir.  Parquet files of the
Hugging Face Hub (``hotpotqa/hotpot_qa``, ``distractor`` or ``fullwiki``) are read as the same
records (:mod:`pipelines.datasets.hotpotqa.hub`).
"""

from __future__ import annotations

from typing import Dict, List

import apache_beam as beam

from pipelines.beam import read, read_parquet
from pipelines.beam import report as report_lib
from pipelines.beam import annotation_config
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents_to_records import to_records
from pipelines.beam.parse import ParseRecords
from pipelines.beam.stats import STATS
from pipelines.datasets import DatasetSpec
from pipelines.datasets.hotpotqa import hub, reader
from pipelines.datasets.hotpotqa import cost, fake_input

EXAMPLE = r"""  python -m pipelines hotpotqa \
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
  raw = p | "ReadJson" >> read_parquet.ReadRecords(paths, hub.SCHEMA,
                                                    split_bytes=config.json_split_bytes)
  parsed = raw[read.RECORDS] | "ParseHotpotQA" >> ParseRecords(reader.parse_record,
                                                               "readtwice.hotpotqa")
  return to_records(parsed.documents, dead_letters=(raw[DEAD_LETTER], parsed[DEAD_LETTER]),
                    stats=(raw[read.STATS], parsed[STATS]), input_count=raw[read.INPUT_COUNT],
                    output_dir=output_dir, config=config, header=header, reshuffle=reshuffle,
                    annotation=options)


spec = DatasetSpec(
    name="hotpotqa", description=__doc__.split("\n\n")[0], example=EXAMPLE, build=build,
    add_flags=annotation_config.add_flags, options_from_args=annotation_config.config_from_args,
    outputs=report_lib.OUTPUTS,
    cost=cost.COST, fake_input=fake_input.write)
