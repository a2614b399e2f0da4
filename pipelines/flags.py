"""The command line every job shares: its flags, their validation, and Beam's options passed
through.

Every job has the same command line: its own flags (``--input``, ``--output_dir`` and the
record settings of :func:`new_parser`, plus the dataset's own, e.g. the annotation flags of
:func:`pipelines.beam.annotation_config.add_flags`), then Beam pipeline options, so the same command runs locally or
on Dataflow (``--runner=DataflowRunner --project=... --region=... --temp_location=gs://...
--sdk_container_image=...``).

* An argument that is neither one of the job's flags nor an option some Beam
  ``PipelineOptions`` class defines is an error before any work, naming the closest real flag
  (``--seq_lenght`` -> "did you mean --seq_length?").  Abbreviations are not accepted.
* Every numeric flag is validated up front (:func:`records_config`); a bad value is one
  ``<prog>: error: ...`` line on stderr and exit status 2.
* ``--estimate`` (every job, :func:`pipelines.estimate.arguments.add_flags`, added by the runner)
  prints what the run would cost instead of running it, priced by the ``--price_*`` flags.

Running the job is :mod:`pipelines.runner`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence, Tuple

from schemas import cli as schema_cli
from schemas import tfrecord_io
from pipelines.beam.config import RecordsConfig
from pipelines.text.segmenter import SegmenterConfig
from pipelines.text.tokenizer import TokenizerSpec

EXIT_USAGE = schema_cli.EXIT_USAGE      # bad flags or flag values (argparse's convention)
EXIT_FAILURE = schema_cli.EXIT_FAILURE  # unusable inputs or outputs, or a user error


bool_flag = schema_cli.bool_flag


def new_parser(prog: str, description: str, example: str) -> schema_cli.Parser:
  """A job's parser with the flags every job shares; ``example`` is shown by ``--help``;
  Beam's pipeline options pass through (:func:`parse`)."""
  module = prog[len("python -m "):] if prog.startswith("python -m ") else prog
  p = schema_cli.Parser(module, description, example,
                        passthrough=lambda: _flag_names(_beam_parser()),
                        epilog="Any Beam pipeline option (e.g. --runner, --project, --region, "
                               "--temp_location, --direct_num_workers) is passed to Beam; any "
                               "other unknown flag is an error.")
  d = RecordsConfig()
  s = d.segmenter
  io = p.add_argument_group("input and output")
  io.add_argument("--input", required=True, io=schema_cli.READS_GLOB,
                  help="input path, glob, or comma-separated list of them (local or gs://)")
  io.add_argument("--output_dir", required=True, io=schema_cli.WRITES, help="output directory (local or gs://)")
  bool_flag(io, "overwrite", False,
            "replace the output of an earlier run in --output_dir (otherwise refused); "
            "--nooverwrite")
  io.add_argument("--json_split_mb", type=float, default=d.json_split_bytes / 2 ** 20,
                  help="JSON inputs (a list, a {\"Data\": [...]} object, JSON lines) of at "
                       "least twice this many MiB are read in byte ranges of about this size "
                       "by all workers, with the records of a whole-file read; compressed "
                       "files are read whole, and so is every file when the job runs on one "
                       "worker (a local run in the default in-memory mode); 0: every file "
                       "whole (default: %(default)g)")
  io.add_argument("--allow_read_root", action="append", default=None, metavar="DIR",
                  help="repeatable (once per folder): a folder outside the data that files "
                       "named by the data (a jsonl_qa context_file, a NarrativeQA story id, a "
                       "TriviaQA evidence Filename) may be read from; without it such a name "
                       "that is absolute or leads outside its dataset's folder (the JSONL "
                       "file's folder, --stories_dir, --evidence_dir), symlinks included, is "
                       "a dead letter (absolute_path, path_outside_root)")
  io.add_argument("--max_input_file_bytes", type=int, default=d.max_input_file_bytes,
                  metavar="N",
                  help="largest file named by the data that is read (not --input files): a "
                       "larger one is a dead letter (file_too_large), found from its size "
                       "before reading it; the default (64 MiB) is 32x NarrativeQA's largest "
                       "story (2.0 MB) (default: %(default)s)")
  bool_flag(io, "wait", True,
            "wait for the job and print its summary; --nowait submits it to a remote runner "
            "(Dataflow) and exits, as a Flex Template launch must (the job still writes "
            "manifest.json and COMPLETED when it succeeds; local runners always wait)")
  rec = p.add_argument_group("segments and records")
  rec.add_argument("--seq_length", type=int, default=s.seq_length,
                   help="tokens per segment, special tokens included (default: %(default)s)")
  rec.add_argument("--overlap", type=int, default=s.overlap,
                   help="context tokens shared by consecutive segments (default: %(default)s)")
  rec.add_argument("--max_segments_per_document", type=int,
                   default=s.max_segments_per_document,
                   help="longer documents become explicit sub-documents of this many segments "
                        "(default: %(default)s)")
  rec.add_argument("--max_question_tokens", type=int, default=s.max_question_tokens,
                   help="longer questions are truncated, and counted (default: %(default)s)")
  rec.add_argument("--segments_per_pack", type=int, default=d.segments_per_pack,
                   help="segments per record, one record = one global training batch "
                        "(default: %(default)s)")
  rec.add_argument("--num_shards", type=int, default=d.num_shards,
                   help="output shards; 0 = ceil(segments / --segments_per_shard). Shard "
                        "contents depend only on the input (default: %(default)s)")
  rec.add_argument("--segments_per_shard", type=int, default=d.segments_per_shard,
                   help="target segments per shard when --num_shards=0; a shard is sorted and "
                        "packed in one worker's memory, ~5-7 KB per segment at seq_length 512 "
                        "(default: %(default)s)")
  bool_flag(rec, "deduplicate", d.deduplicate,
            "keep the first document per id (in input order), list the others under "
            "skipped/; --nodeduplicate: ids must be unique, else the job fails before "
            "writing")
  rec.add_argument("--vocab_file", default=None, io=schema_cli.READS,
                   help="byte-level BPE vocab.json (e.g. RoBERTa's); default: the packaged "
                        "GPT-2 BPE")
  rec.add_argument("--merges_file", default=None, io=schema_cli.READS, help="merges.txt that goes with --vocab_file")
  rec.add_argument("--compression", default=d.compression, choices=tfrecord_io.COMPRESSIONS,
                   help="gzip the record shards (.tfrecord.gz, TFRecord GZIP as tf.data reads "
                        "it) and the documents side files (.jsonl.gz); readers follow the "
                        "manifest (default: %(default)s)")
  rec.add_argument("--max_error_fraction", type=float, default=d.max_error_fraction,
                   help="fail the job (exit 1, no COMPLETED; manifest.json and dead_letter/ "
                        "are still written; the error names the top reasons) when more than "
                        "this share of the input records is rejected, in [0, 1]; 1 accepts "
                        "any share (default: %(default)s)")
  rec.add_argument("--batch_size", type=int, default=d.batch_size,
                   help="documents tokenised per encode_batch call (default: %(default)s)")
  p.add_argument("--log_level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                 help="level of the job's own log lines on stderr (default: %(default)s)")
  return p


def _beam_parser() -> argparse.ArgumentParser:
  """A parser of every option that Beam's ``PipelineOptions`` classes define (as Beam builds
  it in ``PipelineOptions.get_all_options``), refusing abbreviations."""
  from apache_beam.options import pipeline_options as po  # pylint: disable=g-import-not-at-top

  parser = po._BeamArgumentParser(allow_abbrev=False)  # pylint: disable=protected-access
  classes = {}
  for cls in po.PipelineOptions.__subclasses__():
    classes.setdefault(str(cls), cls)
  for cls in classes.values():
    cls._add_argparse_args(parser)  # pylint: disable=protected-access
  return parser


def _flag_names(parser: argparse.ArgumentParser) -> List[str]:
  return [s for s in parser._option_string_actions if s.startswith("--")]  # pylint: disable=protected-access


def split_beam_args(parser: argparse.ArgumentParser, unknown: List[str]) -> List[str]:
  """Checks that every argument the job's parser did not take is a Beam pipeline option.

  Returns them (for ``PipelineOptions``); calls ``parser.error`` (exit 2) on the first
  argument that is not, suggesting the closest of the job's and Beam's flags.
  """
  if not unknown:
    return []
  beam_parser = _beam_parser()
  _, rest = beam_parser.parse_known_args(list(unknown))
  for arg in rest:
    if arg.startswith("-") and arg != "--":
      name = arg.split("=", 1)[0]
      ours = _flag_names(parser)
      guess = schema_cli.closest(
          name, ours + [f for f in _flag_names(beam_parser) if f not in ours])
      hint = f" (did you mean {guess}?)" if guess else ""
      parser.error(f"unknown flag {name}{hint}; see --help")
    parser.error(f"unexpected argument {arg!r}: every value belongs to a --flag; see --help")
  return list(unknown)


def parse(parser: argparse.ArgumentParser,
          argv: Optional[Sequence[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
  """``(job flags, Beam args)``; usage errors exit with status 2 and one line on stderr."""
  args, unknown = parser.parse(list(sys.argv[1:] if argv is None else argv))
  return args, split_beam_args(parser, unknown)


def _mib(parser: argparse.ArgumentParser, name: str, value: float) -> int:
  """``value`` MiB in bytes; a negative or non-finite value is a usage error."""
  if not value >= 0 or value == float("inf"):
    parser.error(f"--{name} must be a number of MiB >= 0, got {value!r}")
  return int(value * 2 ** 20)


def _read_roots(parser: argparse.ArgumentParser, roots: Optional[List[str]]) -> Tuple[str, ...]:
  """--allow_read_root values: local ones must be existing folders (a usage error otherwise)."""
  out = []
  for root in roots or ():
    if not root or "\x00" in root:
      parser.error(f"--allow_read_root must name a folder, got {root!r}")
    if "://" not in root and not os.path.isdir(root):
      parser.error(f"--allow_read_root {root!r} is not a directory; name an existing folder "
                   "that files named by the data may be read from")
    out.append(root)
  return tuple(out)


def records_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> RecordsConfig:
  """The RecordsConfig of the flags; an invalid value or combination is a usage error."""
  try:
    return RecordsConfig(
        segmenter=SegmenterConfig(seq_length=args.seq_length, overlap=args.overlap,
                                  max_segments_per_document=args.max_segments_per_document,
                                  max_question_tokens=args.max_question_tokens),
        tokenizer=TokenizerSpec(args.vocab_file, args.merges_file),
        segments_per_pack=args.segments_per_pack, num_shards=args.num_shards,
        segments_per_shard=args.segments_per_shard,
        deduplicate=args.deduplicate, batch_size=args.batch_size,
        compression=args.compression, max_error_fraction=args.max_error_fraction,
        allow_empty=getattr(args, "allow_empty", False),
        json_split_bytes=_mib(parser, "json_split_mb", args.json_split_mb),
        allow_read_roots=_read_roots(parser, getattr(args, "allow_read_root", None)),
        max_input_file_bytes=getattr(args, "max_input_file_bytes",
                                     RecordsConfig().max_input_file_bytes))
  except ValueError as e:
    parser.error(str(e))
    raise  # unreachable: parser.error exits


def add_run_flags(parser: argparse.ArgumentParser) -> None:
  """Flags of every job that decide whether a run succeeds (beside :func:`new_parser`'s)."""
  group = next((g for g in parser._action_groups  # pylint: disable=protected-access
                if g.title == "input and output"), parser)
  bool_flag(group, "allow_empty", RecordsConfig().allow_empty,
            "accept a run that writes no document (otherwise it fails with exit 1 naming the "
            "top reject reasons, and writes no COMPLETED; manifest.json and dead_letter/ are "
            "still written)")
