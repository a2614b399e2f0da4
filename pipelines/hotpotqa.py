r"""HotpotQA (distractor or fullwiki; train/dev/test JSON) -> packed ReadTwice TFRecords.

One document per question (its context paragraphs); answers are labelled at every occurrence in
the context; yes/no answers set the answer type; supporting paragraphs set the per-segment
``supporting`` flag.  Writes ``records-*.tfrecord``, ``documents/``, ``dead_letter/``,
``skipped/``, ``manifest.json`` and ``COMPLETED`` under --output_dir.
"""

from __future__ import annotations

import logging
import sys
from typing import Dict, List, Optional, Sequence

import apache_beam as beam

from pipelines import cli
from pipelines.beam import read, writer
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents import DocumentsToRecords
from pipelines.beam.inputs import describe_inputs
from pipelines.beam.parse import ParseRecords
from pipelines.beam.stats import STATS
from pipelines.readers import hotpotqa as reader

PROG = "python -m pipelines.hotpotqa"
EXAMPLE = r"""  python -m pipelines.hotpotqa \
    --input hotpot_dev_distractor_v1.json --output_dir /tmp/hotpot_records \
    --seq_length 512 --overlap 128 --direct_num_workers 2 --direct_running_mode multi_processing
  (on Dataflow add: --runner DataflowRunner --project P --region R --temp_location gs://B/tmp
   --setup_file ./setup.py, and use gs:// paths)"""
LOGGER = logging.getLogger("pipelines")


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False) -> beam.PCollection:
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
              output_dir, config, header, reshuffle=reshuffle)


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (also written to output_dir).

  Raises FileNotFoundError if ``input_pattern`` matches no file, FileExistsError if
  ``output_dir`` holds an earlier run's output and not ``overwrite``, UserError (or the
  runner's wrapping of it) if the input is unusable (e.g. duplicate ids with
  ``deduplicate=False``; nothing is written then).
  """
  inputs = describe_inputs(input_pattern)
  LOGGER.info("reading %d file(s), %.1f MB: %s", len(inputs),
              sum(i["bytes"] for i in inputs) / 1e6,
              ", ".join(f"{i['path']} ({i['bytes'] / 1e6:,.1f} MB)" for i in inputs[:5])
              + (f", ... ({len(inputs) - 5} more)" if len(inputs) > 5 else ""))
  existed = writer.prepare_output_dir(output_dir, overwrite)
  header = cli.manifest_header("hotpotqa", config, input_pattern, inputs)
  LOGGER.info("writing records, documents/, dead_letter/, skipped/ and manifest.json to %s",
              output_dir)
  p = cli.make_pipeline(beam_args)
  build(p, [i["path"] for i in inputs], output_dir, config, header,
        reshuffle=not cli.is_local(beam_args))
  try:
    p.run().wait_until_finish()
  except BaseException:
    writer.clean_up_failed_run(output_dir, existed)
    raise
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from schemas import manifest as manifest_schema  # pylint: disable=g-import-not-at-top
  with FileSystems.open(FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE)) as f:
    return manifest_schema.loads(f.read().decode("utf-8"))


def summary(m: Dict, output_dir: str) -> Dict:
  """The last stdout line: what was written, skipped and rejected, and where."""
  return {"counts": m["counts"], "examples": m["examples"],
          "rejected_by_reason": m["rejected_by_reason"],
          "skipped_by_reason": m["skipped_by_reason"],
          "input_count_exact": m.get("input_count_exact", True), "output_dir": output_dir}


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = cli.new_parser(PROG, __doc__.split("\n\n")[0], EXAMPLE)
  args, beam_args = cli.parse(parser, argv)
  config = cli.records_config(parser, args)
  cli.setup_logging(args.log_level)

  def body():
    m = run(args.input, args.output_dir, config, beam_args, overwrite=args.overwrite)
    c = m["counts"]
    LOGGER.info("done: %d input, %d written, %d skipped, %d rejected -> %s", c["input"],
                c["written"], c["skipped"], c["rejected"], args.output_dir)
    if not c["written"]:
      LOGGER.warning("no document was written: %s", "the input holds no records" if not
                     c["input"] else f"see {args.output_dir}/dead_letter/ for why")
    return summary(m, args.output_dir)

  return cli.run_main(PROG, body)


if __name__ == "__main__":
  sys.exit(main())
