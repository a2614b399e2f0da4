r"""Your own long-document QA data (JSON lines: id, question, context or context_file, answers
as strings and/or character spans, optional title) -> packed ReadTwice TFRecords.

One document per example (:mod:`pipelines.datasets.jsonl_qa.reader`; the line format is
:mod:`schemas.jsonl_qa`): string answers are labelled at every occurrence, span answers at their
spans.  A line that is not JSON, or breaks the format, is a dead letter with its reason; a
repeated id is skipped (``--nodeduplicate``: refused).  ``context_file`` is read where the line
is parsed (on the worker that reads the JSONL file, a few files cached), only under the JSONL
file's folder or an ``--allow_read_root`` and up to ``--max_input_file_bytes``
(:mod:`schemas.data_paths`; a refused one is a dead letter with its reason).  The manifest names the
model task, ``extractive_qa``.  Writes ``records-*.tfrecord``, ``documents/``, ``dead_letter/``,
``skipped/``, ``manifest.json``, the stats report (``stats.json``, ``stats.png``:
:mod:`pipelines.beam.report`) and ``COMPLETED`` under --output_dir.
"""

from __future__ import annotations

import functools
from typing import Dict, List, Optional, Tuple

import apache_beam as beam

from schemas import data_paths
from schemas.data_paths import DataPathPolicy
from pipelines.beam import data_files, read
from pipelines.beam import report as report_lib
from pipelines.beam import annotation_config
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.beam.label_answers import GivenAnswerSpans
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents_to_records import to_records
from pipelines.beam.parse import ParseRecords
from pipelines.beam.stats import STATS
from pipelines.datasets import DatasetSpec
from pipelines.datasets.jsonl_qa import reader
from pipelines.datasets.jsonl_qa import cost, fake_input

EXAMPLE = r"""  python -m pipelines jsonl_qa \
    --input pipelines/datasets/jsonl_qa/sample/examples.jsonl --output_dir /tmp/my_qa \
    --seq_length 512 --overlap 128
  (several files: a glob or a comma-separated list; on Dataflow add --runner DataflowRunner
   --project P --region R --temp_location gs://B/tmp --setup_file ./setup.py, gs:// paths)"""


@functools.lru_cache(maxsize=4)  # several questions on one context file read it once
def read_file(root: str, name: str,
              policy: DataPathPolicy = DataPathPolicy()) -> Tuple[str, Optional[bytes]]:
  """``(path, bytes)`` of the context file ``name`` under ``root`` (local or gs://; decompressed
  by extension), bytes None when it does not exist; a name ``policy`` refuses raises
  DataPathError (a dead letter); storage errors propagate (the element fails, and a runner
  retries it)."""
  try:
    return data_files.read_data_file(policy, root, name, "context_file", decompress=True)
  except FileNotFoundError:
    return data_paths.joined(root, name), None


def parse_record(record, source_id: str, policy: DataPathPolicy = DataPathPolicy()):
  """ParseRecords parser: a decoded line -> (Document, counters)."""
  return reader.parse_record(record, source_id,
                             lambda root, name: read_file(root, name, policy))


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: AnnotationConfig = AnnotationConfig()) -> beam.PCollection:
  """Adds the jsonl_qa job to ``p``; returns the PCollection holding the manifest."""
  raw = p | "ReadJsonLines" >> read.ReadJsonRecords(paths, split_bytes=config.json_split_bytes)
  parsed = raw[read.RECORDS] | "ParseJsonlQA" >> ParseRecords(
      functools.partial(parse_record, policy=config.data_paths), "readtwice.jsonl_qa")
  return to_records(parsed.documents, dead_letters=(raw[DEAD_LETTER], parsed[DEAD_LETTER]),
                    stats=(raw[read.STATS], parsed[STATS]), input_count=raw[read.INPUT_COUNT],
                    output_dir=output_dir, config=config, header=header, reshuffle=reshuffle,
                    labeller=GivenAnswerSpans(), annotation=options)


spec = DatasetSpec(
    name="jsonl_qa", description=__doc__.split("\n\n")[0], example=EXAMPLE, build=build,
    add_flags=annotation_config.add_flags, options_from_args=annotation_config.config_from_args,
    task="extractive_qa", deployed=False, outputs=report_lib.OUTPUTS,
    cost=cost.COST, fake_input=fake_input.write)
