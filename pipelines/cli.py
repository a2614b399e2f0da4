"""Flags, logging, errors and runner set-up shared by every ``python -m pipelines.<job>`` command.

Every job has the same command line: its own flags (``--input``, ``--output_dir`` and the
record settings below, plus any job-specific ones), then Beam pipeline options, so the same
command runs locally or on Dataflow (``--runner=DataflowRunner --project=... --region=...
--temp_location=gs://... --sdk_container_image=...``).

* An argument that is neither one of the job's flags nor an option some Beam
  ``PipelineOptions`` class defines is an error before any work, naming the closest real flag
  (``--seq_lenght`` -> "did you mean --seq_length?").  Abbreviations are not accepted.
* Every numeric flag is validated up front (:class:`RecordsConfig`); a bad value, a missing
  input or an output dir holding an earlier run is one ``<prog>: error: ...`` line on stderr and
  exit status 2 (usage) or 1 (inputs/outputs).  Tracebacks are for bugs.
* Locally (no ``--runner`` or ``--runner=DirectRunner``) the FnApiRunner is used directly: the
  DirectRunner would first try to download the Prism runner, which fails offline.
  ``--direct_running_mode=multi_processing --direct_num_workers=N`` parallelise a local run.
* Logging: the ``pipelines`` logger (progress, what is read and written) and Beam's Dataflow
  runner (job id and monitoring-console URL) log at INFO on stderr, everything else at WARNING
  (``--log_level`` changes the level of ours).  The last stdout line is the JSON summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from schemas import cli as schema_cli
from schemas import tfrecord_io
from pipelines.beam.config import RecordsConfig
from pipelines.beam.inputs import describe_inputs
from pipelines.errors import MARKER, UserError, user_error_message
from pipelines.provenance import git_revision
from pipelines.text.segmenter import SegmenterConfig
from pipelines.text.tokenizer import Tokenizer, TokenizerSpec, shared_tokenizer

LOGGER = logging.getLogger("pipelines")
# Loggers shown at INFO besides ours: the Dataflow runner's "Submitted job" / console URL lines.
_INFO_LOGGERS = ("apache_beam.runners.dataflow",)

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
  io.add_argument("--input", required=True,
                  help="input path, glob, or comma-separated list of them (local or gs://)")
  io.add_argument("--output_dir", required=True, help="output directory (local or gs://)")
  bool_flag(io, "overwrite", False,
             "replace the output of an earlier run in --output_dir (otherwise refused); "
             "--nooverwrite")
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
  rec.add_argument("--vocab_file", default=None,
                   help="byte-level BPE vocab.json (e.g. RoBERTa's); default: the packaged "
                        "GPT-2 BPE")
  rec.add_argument("--merges_file", default=None, help="merges.txt that goes with --vocab_file")
  rec.add_argument("--compression", default=d.compression, choices=tfrecord_io.COMPRESSIONS,
                   help="gzip the record shards (.tfrecord.gz, TFRecord GZIP as tf.data reads "
                        "it) and the documents side files (.jsonl.gz); readers follow the "
                        "manifest (default: %(default)s)")
  rec.add_argument("--max_error_fraction", type=float, default=d.max_error_fraction,
                   help="fail the job (exit 1, no COMPLETED; manifest.json and dead_letter/ "
                        "are still written) when more than this share of the input records "
                        "is rejected, in [0, 1]; 1 never fails (default: %(default)s)")
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
        allow_empty=getattr(args, "allow_empty", False))
  except ValueError as e:
    parser.error(str(e))
    raise  # unreachable: parser.error exits


def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
  """The tokenizer of ``spec``; unreadable vocabulary files are a user error."""
  try:
    return shared_tokenizer(spec)
  except (OSError, ValueError) as e:  # missing or malformed --vocab_file / --merges_file
    raise UserError(f"cannot load the tokenizer (--vocab_file={spec.vocab_path}, "
                    f"--merges_file={spec.merges_path}): {e}") from e


def manifest_header(job: str, config: RecordsConfig, input_pattern: str,
                    inputs: Optional[List[Dict[str, Any]]] = None) -> dict:
  """The manifest's job, code revision, tokenizer, config and input files (with sizes)."""
  config_d = config.describe()
  config_d["input"] = input_pattern
  return {"job": job, "git_revision": git_revision(),
          "tokenizer": load_tokenizer(config.tokenizer).describe(), "config": config_d,
          "inputs": inputs if inputs is not None else describe_inputs(input_pattern)}


_LOCAL_RUNNERS = (None, "DirectRunner", "direct", "FnApiRunner")


def is_local(beam_args: Optional[Sequence[str]]) -> bool:
  """Whether ``beam_args`` run the job in this process (the FnApiRunner)."""
  from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

  return PipelineOptions(list(beam_args or [])).view_as(StandardOptions).runner in _LOCAL_RUNNERS


def make_pipeline(beam_args: Optional[Sequence[str]]):
  """A Beam pipeline for ``beam_args``; local runs use the FnApiRunner (no Prism download)."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

  options = PipelineOptions(list(beam_args or []))
  runner = options.view_as(StandardOptions).runner
  if runner in _LOCAL_RUNNERS:
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    return beam.Pipeline(runner=FnApiRunner(), options=options)
  return beam.Pipeline(options=options)


# build(pipeline, input paths, output_dir, config, manifest header, reshuffle): adds a job's
# steps to the pipeline (see ``pipelines.hotpotqa.build``).
JobBuilder = Callable[[Any, List[str], str, RecordsConfig, Dict[str, Any], bool], Any]


def run_job(job: str, build: JobBuilder, input_pattern: str, output_dir: str,
            config: RecordsConfig, beam_args: Optional[Sequence[str]] = None,
            overwrite: bool = False, options: Any = None,
            outputs: Sequence[str] = (), wait: bool = True) -> Dict[str, Any]:
  """Runs a job to completion; returns the manifest (also written to ``output_dir``), or for
  a dry run (``options.dry_run_file`` set) that file's JSON, with nothing else written.  With
  ``wait=False`` on a remote runner the job is only submitted: returns ``{"submitted": True,
  "job", "dataflow_job_id", "output_dir", "writes"}``.

  Logs what is read and where it is written.  Before any work the job claims ``output_dir``
  (:mod:`pipelines.beam.claim`; a directory another live job holds is refused, ``overwrite``
  or not) and then refuses an output dir holding an earlier run's output (unless
  ``overwrite``).  The claim is released at the end, whatever the outcome (with ``wait=False``
  the job's last step releases it); after a failure the temporary files are deleted (and the
  output dir if the job created it and left it empty).  Raises FileNotFoundError if
  ``input_pattern`` matches no file, FileExistsError for an earlier run's output, UserError (or
  the runner's wrapping of it) if the input or the output dir is unusable or the run wrote no
  document (unless ``config.allow_empty``).  ``options``: the job's own settings (an object
  with ``describe()``, or a dataclass), passed to ``build`` as ``options=`` and recorded in the
  manifest's ``config``; ``outputs``: patterns (under ``output_dir``) of files the job writes
  besides the common ones (for ``--overwrite``).
  """
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from pipelines.beam import claim as claim_lib  # pylint: disable=g-import-not-at-top
  from pipelines.beam import manifest as manifest_lib  # pylint: disable=g-import-not-at-top
  from pipelines.beam import writer  # pylint: disable=g-import-not-at-top
  from schemas import manifest as manifest_schema  # pylint: disable=g-import-not-at-top

  inputs = describe_inputs(input_pattern)
  if writer.is_file(output_dir):
    raise UserError(f"--output_dir {output_dir} is a file, not a directory; choose a directory "
                    f"(it is created if missing)")
  LOGGER.info("reading %d file(s), %.1f MB: %s", len(inputs),
              sum(i["bytes"] for i in inputs) / 1e6,
              ", ".join(f"{i['path']} ({i['bytes'] / 1e6:,.1f} MB)" for i in inputs[:5])
              + (f", ... ({len(inputs) - 5} more)" if len(inputs) > 5 else ""))
  local = is_local(beam_args)
  submit_only = not wait and not local
  existed = FileSystems.exists(output_dir)
  held = claim_lib.claim(output_dir, job, local=local)
  handed_over = False  # with submit_only, the job's last step releases the claim
  try:
    # A dry run (options.dry_run_file) writes only that file: earlier output stays untouched.
    dry_run_file = getattr(options, "dry_run_file", None)
    if dry_run_file:
      writer.delete_tmp(output_dir)
    else:
      writer.prepare_output_dir(output_dir, overwrite, outputs)
    header = manifest_header(job, config, input_pattern, inputs)
    if options is not None:
      build = functools.partial(build, options=options)
      described = (options.describe() if hasattr(options, "describe")
                   else dataclasses.asdict(options))
      clash = sorted(k for k in described if k in header["config"]
                     and described[k] != header["config"][k])
      if clash:  # one key, two meanings: the manifest would record only one (a bug)
        raise ValueError(f"the options of {job} redefine the config entries {clash}")
      header["config"].update(described)
    if submit_only:
      header[manifest_lib.RELEASE_CLAIM_KEY] = held.token
    if dry_run_file:
      LOGGER.info("dry run: writing only %s", FileSystems.join(output_dir, dry_run_file))
    else:
      LOGGER.info("writing records, documents/, dead_letter/, skipped/ and manifest.json to %s",
                  output_dir)
    p = make_pipeline(beam_args)
    build(p, [i["path"] for i in inputs], output_dir, config, header, not local)
    try:
      result = p.run()
      if not submit_only:
        result.wait_until_finish()
    except BaseException:
      writer.clean_up_failed_run(output_dir, existed)
      raise
    if submit_only:
      handed_over = True
      job_id = result.job_id() if getattr(result, "has_job", False) else None
      writes = dry_run_file or "manifest.json and COMPLETED"
      LOGGER.info("submitted%s: the job writes %s to %s when it succeeds (and then releases "
                  "its claim %s)", f" (Dataflow job {job_id})" if job_id else "", writes,
                  output_dir, held.path)
      return {"submitted": True, "job": job, "dataflow_job_id": job_id,
              "output_dir": output_dir, "writes": writes}
    if dry_run_file:
      with FileSystems.open(FileSystems.join(output_dir, dry_run_file)) as f:
        return json.loads(f.read().decode("utf-8"))
    with FileSystems.open(FileSystems.join(output_dir, manifest_schema.MANIFEST_FILE)) as f:
      return manifest_schema.loads(f.read().decode("utf-8"))
  finally:
    if not handed_over:
      held.release()
      writer.remove_if_empty(output_dir, existed)


def summary(manifest: Dict[str, Any], output_dir: str) -> Dict[str, Any]:
  """The last stdout line: what was written, skipped and rejected, and where."""
  m = manifest
  return {"counts": m["counts"], "examples": m["examples"],
          "rejected_by_reason": m["rejected_by_reason"],
          "skipped_by_reason": m["skipped_by_reason"],
          "input_count_exact": m.get("input_count_exact", True), "output_dir": output_dir}


def job_main(prog: str, description: str, example: str, job: str, build: JobBuilder,
             argv: Optional[Sequence[str]] = None,
             add_flags: Optional[Callable[[argparse.ArgumentParser], None]] = None,
             job_options: Optional[Callable[[argparse.Namespace], Any]] = None,
             outputs: Sequence[str] = ()) -> int:
  """A job's whole command line: flags, logging, :func:`run_job`, the final log line and the
  JSON summary; returns the exit status.

  A job with flags of its own adds them with ``add_flags(parser)``; ``job_options(args)``
  turns them into an options object (a ValueError is a usage error naming the flag), passed
  to ``build`` as ``options=`` and recorded in the manifest's config (``describe()``, or its
  dataclass fields).
  """
  parser = new_parser(prog, description, example)
  add_run_flags(parser)
  if add_flags is not None:
    add_flags(parser.add_argument_group(f"{job} settings"))
  args, beam_args = parse(parser, argv)
  config = records_config(parser, args)
  options = None
  if job_options is not None:
    try:
      options = job_options(args)
    except ValueError as e:
      parser.error(str(e))
  setup_logging(args.log_level)

  def body():
    m = run_job(job, build, args.input, args.output_dir, config, beam_args, args.overwrite,
                options, outputs, wait=args.wait)
    if m.get("submitted"):
      return m
    if getattr(options, "dry_run_file", None):
      LOGGER.info("dry run: %s", ", ".join(f"{k} {v}" for k, v in sorted(m.items())
                                           if k != "dry_run"))
      return m
    c = m["counts"]
    LOGGER.info("done: %d input, %d written, %d skipped, %d rejected -> %s", c["input"],
                c["written"], c["skipped"], c["rejected"], args.output_dir)
    if not c["written"]:  # --allow_empty (else the job failed)
      LOGGER.warning("no document was written: %s", "the input holds no records" if not
                     c["input"] else f"see {args.output_dir}/dead_letter/ for why")
    return summary(m, args.output_dir)

  return run_main(prog, body)


def add_run_flags(parser: argparse.ArgumentParser) -> None:
  """Flags of every job that decide whether a run succeeds (beside :func:`new_parser`'s)."""
  group = next((g for g in parser._action_groups  # pylint: disable=protected-access
                if g.title == "input and output"), parser)
  bool_flag(group, "allow_empty", RecordsConfig().allow_empty,
            "accept a run that writes no document (otherwise it fails with exit 1 naming the "
            "top reject reasons, and writes no COMPLETED; manifest.json and dead_letter/ are "
            "still written)")


class _HideUserErrorTracebacks(logging.Filter):
  """Drops Beam's ERROR log of a user error (or a Ctrl-C) raised on a worker (message and
  traceback): the job prints that error itself, as one line; and local workers' warning about
  Dataflow's semi-persistent directory."""

  def filter(self, record: logging.LogRecord) -> bool:
    if not record.name.startswith("apache_beam"):
      return True
    if record.levelno < logging.ERROR:
      # Every local multi_processing worker warns that it has no semi-persistent directory
      # (a Dataflow worker setting): noise on every run.
      return "No semi_persistent_directory found" not in record.getMessage()
    exc = record.exc_info[1] if record.exc_info else None
    return not ((exc is not None and (user_error_message(exc) is not None
                                      or _interrupted(exc)))
                or MARKER in record.getMessage()
                or record.getMessage().startswith("KeyboardInterrupt"))  # Ctrl-C: one line


def setup_logging(level: str = "INFO") -> None:
  """Our log lines (and the Dataflow runner's job URL) on stderr; the rest at WARNING."""
  handler = logging.StreamHandler(sys.stderr)
  handler.addFilter(_HideUserErrorTracebacks())
  handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s",
                                         datefmt="%H:%M:%S"))
  root = logging.getLogger()
  root.handlers[:] = [handler]
  root.setLevel(logging.WARNING)
  LOGGER.setLevel(getattr(logging, level))
  for name in _INFO_LOGGERS:
    logging.getLogger(name).setLevel(logging.INFO)


def _interrupted(exc: BaseException) -> bool:
  """Whether ``exc`` is a KeyboardInterrupt that a Beam runner re-raised as another type
  (``RuntimeError: KeyboardInterrupt [while running '...']``), in its chain or its text."""
  seen = set()
  e: Optional[BaseException] = exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, KeyboardInterrupt) or str(e).startswith("KeyboardInterrupt"):
      return True
    e = e.__cause__ or e.__context__
  return False


def run_main(prog: str, body: Callable[[], Dict[str, Any]]) -> int:
  """Runs a job's ``body``, printing its summary as the last stdout line.

  User errors (bad inputs or outputs, also those raised on workers) print one
  ``<prog>: error: ...`` line on stderr and return 1; Ctrl-C (or SIGTERM) is one line too and
  returns 130 (143), after the job released its output dir and deleted its temporary files;
  anything else is a bug and propagates with its traceback.
  """
  previous = _raise_on_sigterm()
  try:
    result = body()
  except KeyboardInterrupt:
    print(f"{prog}: error: interrupted; the job stopped and its temporary files were deleted",
          file=sys.stderr, flush=True)
    return 130
  except _Terminated:
    print(f"{prog}: error: terminated (SIGTERM); the job stopped and its temporary files were "
          f"deleted", file=sys.stderr, flush=True)
    return 143
  except Exception as e:  # pylint: disable=broad-except
    if _interrupted(e):  # Ctrl-C that landed in a runner thread, re-raised by the runner
      print(f"{prog}: error: interrupted; the job stopped and its temporary files were "
            "deleted", file=sys.stderr, flush=True)
      return 130
    # A UserError, also one raised on a worker and re-wrapped by the runner; or a missing
    # input / an existing output, whose message is the line to show.
    message = user_error_message(e)
    if message is None and isinstance(e, (FileNotFoundError, FileExistsError)):
      message = e.args[0] if e.args else str(e)
    if message is None:
      raise
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return EXIT_FAILURE
  finally:
    _restore_sigterm(previous)
  print(json.dumps(result, sort_keys=True), flush=True)
  return 0


class _Terminated(BaseException):
  """SIGTERM, raised in the main thread so that ``finally`` blocks (the output dir's claim, the
  temporary files) run as for Ctrl-C."""


def _raise_on_sigterm():
  import signal  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  if threading.current_thread() is not threading.main_thread():
    return None

  def handler(signum, frame):
    del signum, frame
    raise _Terminated()

  try:
    return signal.signal(signal.SIGTERM, handler)
  except ValueError:
    return None


def _restore_sigterm(previous) -> None:
  if previous is None:
    return
  import signal  # pylint: disable=g-import-not-at-top
  try:
    signal.signal(signal.SIGTERM, previous)
  except ValueError:
    pass
