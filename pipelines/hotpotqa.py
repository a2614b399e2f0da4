r"""HotpotQA (distractor or fullwiki; train/dev/test JSON) -> packed ReadTwice TFRecords.

  python -m pipelines.hotpotqa \
    --input ../shared/samples/hotpotqa/hotpot_dev_distractor_v1.head20.json \
    --output_dir /tmp/hotpot_records [Beam options, e.g.
    --direct_running_mode=multi_processing --direct_num_workers=2 | --runner=DataflowRunner ...]

One document per question (its context paragraphs); answers are labelled at every occurrence in
the context; yes/no answers set the answer type; supporting paragraphs set the per-segment
``supporting`` flag.  Writes ``records-*.tfrecord``, ``documents/``, ``dead_letter/``,
``manifest.json`` and ``COMPLETED`` under --output_dir.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Dict, List, Optional, Sequence

import apache_beam as beam
from absl import app, flags

from pipelines import cli
from pipelines.beam import read, writer
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents import STATS, DocumentsToRecords, ParseRecords, RecordsConfig
from pipelines.readers import hotpotqa as reader

flags.adopt_module_key_flags(cli)
FLAGS = flags.FLAGS


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict) -> beam.PCollection:
  """Adds the HotpotQA job to ``p``; returns the PCollection holding the manifest."""
  raw = p | "ReadJson" >> read.ReadJsonRecords(paths)
  parsed = raw.records | "ParseHotpotQA" >> ParseRecords(reader.parse_record,
                                                         "readtwice.hotpotqa")
  dead = ((raw[DEAD_LETTER], parsed[DEAD_LETTER])
          | "FlattenReadParseDeadLetters" >> beam.Flatten())
  return {"documents": parsed.documents, "dead_letters": dead, "stats": parsed[STATS],
          "input_count": raw[read.INPUT_COUNT]} | "ToRecords" >> DocumentsToRecords(
              output_dir, config, header)


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (also written to output_dir).

  Raises FileExistsError if ``output_dir`` holds an earlier run's output and not ``overwrite``.
  """
  paths = read.match_inputs(input_pattern)
  writer.prepare_output_dir(output_dir, overwrite)
  header = cli.manifest_header("hotpotqa", config, input_pattern)
  p = cli.make_pipeline(beam_args)
  build(p, paths, output_dir, config, header)
  p.run().wait_until_finish()
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from schemas import manifest as manifest_schema  # pylint: disable=g-import-not-at-top
  with FileSystems.open(FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE)) as f:
    return manifest_schema.loads(f.read().decode("utf-8"))


def main(argv: List[str]) -> None:
  logging.getLogger().setLevel(logging.WARNING)
  config = cli.records_config_from_flags()
  m = run(FLAGS.input, FLAGS.output_dir, config, argv[1:], overwrite=FLAGS.overwrite)
  summary = {"counts": m["counts"], "examples": m["examples"],
             "rejected_by_reason": m["rejected_by_reason"], "output_dir": FLAGS.output_dir}
  print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_with_beam_args)
