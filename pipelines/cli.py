"""Flags and runner set-up shared by every ``python -m pipelines.<job>`` command.

Domain knobs are absl flags; every other argument is passed to Beam's PipelineOptions, so the
same command runs locally or on Dataflow (``--runner=DataflowRunner --project=... --region=...
--temp_location=gs://... --sdk_container_image=...``).  Locally (no ``--runner`` or
``--runner=DirectRunner``) the FnApiRunner is used directly: the DirectRunner would first try to
download the Prism runner, which fails offline.  ``--direct_running_mode=multi_processing
--direct_num_workers=N`` parallelise a local run.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from absl import flags

from pipelines.beam.documents import RecordsConfig, git_revision
from pipelines.text.segmenter import SegmenterConfig
from pipelines.text.tokenizer import Tokenizer, TokenizerSpec

FLAGS = flags.FLAGS

flags.DEFINE_string("input", None, "Input path, glob, or comma-separated list of them.")
flags.DEFINE_string("output_dir", None, "Output directory (local or gs://).")
flags.DEFINE_integer("seq_length", 512, "Tokens per segment, special tokens included.")
flags.DEFINE_integer("overlap", 128, "Context tokens shared by consecutive segments.")
flags.DEFINE_integer("max_segments_per_document", 128,
                     "Longer documents become explicit sub-documents of this many segments.")
flags.DEFINE_integer("max_question_tokens", 64, "Longer questions are truncated (counted).")
flags.DEFINE_integer("segments_per_pack", 128,
                     "Segments per record (one record = one global training batch).")
flags.DEFINE_integer("num_shards", 0,
                     "Output shards; 0 = ceil(segments / --segments_per_shard). Shard contents "
                     "depend only on the input, never on workers or bundles.")
flags.DEFINE_integer("segments_per_shard", 16384,
                     "Target segments per shard when --num_shards=0 (a shard is sorted and "
                     "packed in one worker's memory: ~25 KB per segment at seq_length 512).")
flags.DEFINE_bool("deduplicate", True, "Keep one document per id; the rest count as skipped.")
flags.DEFINE_string("vocab_file", None,
                    "Byte-level BPE vocab.json (e.g. RoBERTa's); default: packaged GPT-2 BPE.")
flags.DEFINE_string("merges_file", None, "merges.txt that goes with --vocab_file.")
flags.DEFINE_integer("batch_size", 64, "Documents tokenised per encode_batch call.")
flags.DEFINE_bool("overwrite", False,
                  "Replace the output of an earlier run in --output_dir (otherwise refused).")

flags.mark_flags_as_required(["input", "output_dir"])


def records_config_from_flags() -> RecordsConfig:
  return RecordsConfig(
      segmenter=SegmenterConfig(seq_length=FLAGS.seq_length, overlap=FLAGS.overlap,
                                max_segments_per_document=FLAGS.max_segments_per_document,
                                max_question_tokens=FLAGS.max_question_tokens),
      tokenizer=TokenizerSpec(FLAGS.vocab_file, FLAGS.merges_file),
      segments_per_pack=FLAGS.segments_per_pack, num_shards=FLAGS.num_shards,
      segments_per_shard=FLAGS.segments_per_shard,
      deduplicate=FLAGS.deduplicate, batch_size=FLAGS.batch_size)


def manifest_header(job: str, config: RecordsConfig, input_pattern: str) -> dict:
  config_d = config.describe()
  config_d["input"] = input_pattern
  return {"job": job, "git_revision": git_revision(),
          "tokenizer": Tokenizer(config.tokenizer).describe(), "config": config_d}


def make_pipeline(beam_args: Optional[Sequence[str]]):
  """A Beam pipeline for ``beam_args``; local runs use the FnApiRunner (no Prism download)."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

  options = PipelineOptions(list(beam_args or []))
  runner = options.view_as(StandardOptions).runner
  if runner in (None, "DirectRunner", "direct", "FnApiRunner"):
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    return beam.Pipeline(runner=FnApiRunner(), options=options)
  return beam.Pipeline(options=options)


def parse_flags_with_beam_args(argv: List[str]) -> List[str]:
  """absl ``flags_parser``: parses our flags, returns the rest (Beam options) unparsed."""
  return FLAGS(argv, known_only=True)
