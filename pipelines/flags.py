"""The command line every job shares: its flags, their validation, and Beam's options passed
through.

Every job has the same command line: its own flags (``--input``, ``--output_dir`` and the
record settings of :func:`new_parser`, plus the dataset's own, e.g. the annotation flags of
:func:`add_annotation_flags`), then Beam pipeline options, so the same command runs locally or
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
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from schemas import cli as schema_cli
from schemas import tfrecord_io
from pipelines.beam.config import RecordsConfig
from pipelines.text.segmenter import SegmenterConfig
from pipelines.text.tokenizer import TokenizerSpec

if TYPE_CHECKING:
  from pipelines.beam.annotate import AnnotationConfig

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


def add_annotation_flags(group) -> None:
  """The annotation flags of a job (:mod:`pipelines.beam.annotate`)."""
  from pipelines.beam.annotate import (  # pylint: disable=g-import-not-at-top
      LINKER_CHOICES, NER_CHOICES, AnnotationConfig)
  from pipelines.beam.annotation_plan import PLAN_FILE  # pylint: disable=g-import-not-at-top
  d = AnnotationConfig()
  group.add_argument("--ner", default=d.ner, choices=NER_CHOICES,
                     help="entity mentions: spacy (offline: a blank model with an EntityRuler "
                          "of the most linked aliases of --entities_dir) or cloud (Cloud "
                          "Natural Language analyzeEntities, billed) (default: %(default)s)")
  group.add_argument("--spacy_model", default=d.spacy_model,
                     help="blank:<lang> or an installed spaCy model package name "
                          "(default: %(default)s)")
  group.add_argument("--linker", default=d.linker, choices=LINKER_CHOICES,
                     help="entity ids for the mentions: alias (commonness over the alias table "
                          "of --entities_dir) (default: %(default)s)")
  group.add_argument("--entities_dir", default=None, io=schema_cli.READS,
                     help="output dir of python -m pipelines wikipedia (entity vocabulary and "
                          "alias table)")
  group.add_argument("--linker_min_count", type=int, default=d.linker_min_count,
                     help="links an (alias, entity) pair needs (default: %(default)s)")
  group.add_argument("--linker_min_probability", type=float, default=d.linker_min_probability,
                     help="smallest p(entity | alias) to link (default: %(default)s)")
  group.add_argument("--ruler_patterns", type=int, default=d.ruler_patterns,
                     help="most linked aliases used as EntityRuler patterns (default: "
                          "%(default)s)")
  group.add_argument("--annotate_batch_size", type=int, default=d.batch_size,
                     help="documents per nlp.pipe call or per batch of API requests "
                          "(default: %(default)s)")
  c = d.cloud
  group.add_argument("--nl_cache_dir", default=None,
                     help="--ner cloud: directory (local or gs://) of cached API results, "
                          "shared by runs and jobs (required with --ner cloud)")
  group.add_argument("--nl_endpoint", default=None,
                     help="--ner cloud: API host:port (default: the public endpoint)")
  bool_flag(group, "nl_insecure_channel", False,
            "--ner cloud: plaintext gRPC to --nl_endpoint (local emulators and fakes)")
  group.add_argument("--nl_requests_per_minute", type=float, default=c.requests_per_minute,
                     help="--ner cloud: requests per minute per worker process; the project's "
                          "quota divided by the workers (default: %(default)s)")
  group.add_argument("--nl_threads", type=int, default=c.threads,
                     help="--ner cloud: requests in flight per worker process "
                          "(default: %(default)s)")
  group.add_argument("--nl_timeout_s", type=float, default=c.timeout_s,
                     help="--ner cloud: deadline of one request (default: %(default)s)")
  group.add_argument("--nl_max_attempts", type=int, default=c.max_attempts,
                     help="--ner cloud: calls per request at most (retries on 429, 503 and "
                          "deadlines, with exponential backoff) (default: %(default)s)")
  group.add_argument("--nl_initial_backoff_s", type=float, default=c.initial_backoff_s,
                     help="--ner cloud: wait before the first retry, doubled for each next "
                          "one, with jitter (default: %(default)s)")
  group.add_argument("--nl_max_backoff_s", type=float, default=c.max_backoff_s,
                     help="--ner cloud: longest wait between retries (default: %(default)s)")
  group.add_argument("--nl_max_request_chars", type=int, default=c.max_request_chars,
                     help="--ner cloud: longer texts are split into requests of at most this "
                          "many characters (default: %(default)s)")
  group.add_argument("--nl_mention_types", default=",".join(c.mention_types),
                     help="--ner cloud: mention types kept, from PROPER,COMMON "
                          "(default: %(default)s)")
  group.add_argument("--nl_max_consecutive_failures", type=int,
                     default=d.nl_max_consecutive_failures,
                     help="--ner cloud: stop the job (exit 1) when this many texts in a row "
                          "fail for want of the service (UNAVAILABLE, deadlines, 5xx or "
                          "connection errors, after the retries): an outage, not bad texts; "
                          "0 never stops (default: %(default)s)")
  group.add_argument("--nl_language", default=c.language,
                     help="--ner cloud: ISO-639-1 language hint (default: detected)")
  bool_flag(group, "dry_run", False,
            "--ner cloud: only plan the API requests (units, cache hits, cost) and write "
            f"{PLAN_FILE}; no call, no records")
  group.add_argument("--max_api_units", type=int, default=d.max_api_units,
                     help="--ner cloud: billable units this run may spend; documents beyond "
                          "become dead letters with reason budget (default: 0, no limit)")
  group.add_argument("--price_per_1000_units", type=float, default=d.price_per_1000_units,
                     help="--ner cloud: price of 1,000 units for the cost estimate (check the "
                          "current price list) (default: %(default)s)")


def annotation_config_from_args(args) -> "AnnotationConfig":
  """The :class:`~pipelines.beam.annotate.AnnotationConfig` of the annotation flags."""
  from pipelines.beam.annotate import AnnotationConfig  # pylint: disable=g-import-not-at-top
  from pipelines.entities.cloud_nl import CloudConfig  # pylint: disable=g-import-not-at-top
  cloud = CloudConfig(
      cache_dir=args.nl_cache_dir, endpoint=args.nl_endpoint,
      insecure_channel=args.nl_insecure_channel, requests_per_minute=args.nl_requests_per_minute,
      threads=args.nl_threads, timeout_s=args.nl_timeout_s, max_attempts=args.nl_max_attempts,
      initial_backoff_s=args.nl_initial_backoff_s, max_backoff_s=args.nl_max_backoff_s,
      max_request_chars=args.nl_max_request_chars,
      mention_types=tuple(t.strip().upper() for t in args.nl_mention_types.split(",")
                          if t.strip()), language=args.nl_language)
  return AnnotationConfig(ner=args.ner, spacy_model=args.spacy_model, linker=args.linker,
                          entities_dir=args.entities_dir, linker_min_count=args.linker_min_count,
                          linker_min_probability=args.linker_min_probability,
                          ruler_patterns=args.ruler_patterns, batch_size=args.annotate_batch_size,
                          cloud=cloud, dry_run=args.dry_run, max_api_units=args.max_api_units,
                          price_per_1000_units=args.price_per_1000_units,
                          nl_max_consecutive_failures=args.nl_max_consecutive_failures)
