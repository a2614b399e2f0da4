"""The job runner: runs a registered dataset's Beam job (``python -m pipelines <dataset>``, or
:func:`dataset_main` / :func:`run_dataset` from Python) from its command line to its summary.

* The job's flags are :mod:`pipelines.flags`'s; the manifest header records the code revision,
  the tokenizer, the config, the inputs (and the model task when it is not the dataset's name).
* Locally (no ``--runner`` or ``--runner=DirectRunner``) the FnApiRunner is used directly: the
  DirectRunner would first try to download the Prism runner, which fails offline.
  ``--direct_running_mode=multi_processing --direct_num_workers=N`` parallelise a local run.
* A missing input or an output dir holding an earlier run is one ``<prog>: error: ...`` line
  on stderr and exit status 1; Ctrl-C is exit 130, SIGTERM 143.  Tracebacks are for bugs.
* ``--estimate`` (:func:`estimate_job`, :mod:`pipelines.estimate`) resolves the inputs and
  builds the job's graph as a run would (the same errors), then prints what the run would cost
  instead of running it, writing nothing.
* Logging: the ``pipelines`` logger (progress, what is read and written) and Beam's Dataflow
  runner (job id and monitoring-console URL) log at INFO on stderr, everything else at WARNING
  (``--log_level`` changes the level of ours).  The last stdout line is the JSON summary.

Why this module is over 500 lines: a job's life from its command line to its summary is one
path (options, local workers, stop signals, errors), and the stop-signal handlers must reach
the local worker processes that the pipeline started (their process group).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

from pipelines import flags
from pipelines.beam.config import RecordsConfig
from pipelines.beam.inputs import describe_inputs
from pipelines.estimate import arguments as estimate_flags
from pipelines.errors import (MARKER, UserError, disk_full_message,
                             exit_quietly_on_stop_signals, is_disk_full, user_error_message)
from pipelines.provenance import git_revision
from pipelines.text.tokenizer import Tokenizer, TokenizerSpec, shared_tokenizer

LOGGER = logging.getLogger("pipelines")
# Loggers shown at INFO besides ours: the Dataflow runner's "Submitted job" / console URL lines.
_INFO_LOGGERS = ("apache_beam.runners.dataflow",)
def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
  """The tokenizer of ``spec``; unreadable vocabulary files are a user error."""
  try:
    return shared_tokenizer(spec)
  except (OSError, ValueError) as e:  # missing or malformed --vocab_file / --merges_file
    raise UserError(f"cannot load the tokenizer (--vocab_file={spec.vocab_path}, "
                    f"--merges_file={spec.merges_path}): {e}") from e


def manifest_header(job: str, config: RecordsConfig, input_pattern: str,
                    inputs: Optional[List[Dict[str, Any]]] = None,
                    task: Optional[str] = None) -> dict:
  """The manifest's job, code revision, tokenizer, config and input files (with sizes); and
  the model ``task`` its records are for, when that is not the job's name."""
  config_d = config.describe()
  config_d["input"] = input_pattern
  header = {"job": job, "git_revision": git_revision(),
            "tokenizer": load_tokenizer(config.tokenizer).describe(), "config": config_d,
            "inputs": inputs if inputs is not None else describe_inputs(input_pattern)}
  if task and task != job:
    header["task"] = task
  return header


_LOCAL_RUNNERS = (None, "DirectRunner", "direct", "FnApiRunner")
# Allocations (less deallocations) between two young-generation garbage collections during a
# local run; CPython's default is 700.
GC_YOUNG_THRESHOLD = 50_000


@contextlib.contextmanager
def fewer_gc_passes():
  """Runs the body with the cyclic garbage collector's young threshold at least
  :data:`GC_YOUNG_THRESHOLD`, then restores the thresholds.

  A local run allocates millions of short-lived objects (parsed JSON, token arrays, records)
  while it holds many long-lived ones (documents in flight, Beam's graph); at the default 700
  the collector ran ~1,200 young, ~110 middle and ~5 full passes in a HotpotQA run of 8,000
  questions, ~0.7 s of its ~14 s on the one Python thread every stage shares; at 50,000, a few
  young passes and 0.05 s.  Reference counting frees nearly everything the stages make (the
  peak memory did not change); only cycles wait for the less frequent passes.  The thresholds
  are process-wide, hence restored after the run (a caller's own setting is kept if higher).
  """
  old = gc.get_threshold()
  gc.set_threshold(max(old[0], GC_YOUNG_THRESHOLD), *old[1:])
  try:
    yield
  finally:
    gc.set_threshold(*old)


def is_local(beam_args: Optional[Sequence[str]]) -> bool:
  """Whether ``beam_args`` run the job in this process (the FnApiRunner)."""
  from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

  return PipelineOptions(list(beam_args or [])).view_as(StandardOptions).runner in _LOCAL_RUNNERS


def local_workers(beam_args: Optional[Sequence[str]]) -> int:
  """How many workers a local run of ``beam_args`` has: 1 in the default in-memory mode (the
  FnApiRunner runs every bundle in this thread), else ``--direct_num_workers`` (0: one per
  CPU)."""
  from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

  direct = PipelineOptions(list(beam_args or [])).view_as(DirectOptions)
  if direct.direct_running_mode == "in_memory":
    return 1
  return direct.direct_num_workers or os.cpu_count() or 1


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
# steps to the pipeline (a dataset's ``DatasetSpec.build``, :mod:`pipelines.datasets`).
JobBuilder = Callable[[Any, List[str], str, RecordsConfig, Dict[str, Any], bool], Any]


def run_job(job: str, build: JobBuilder, input_pattern: str, output_dir: str,
            config: RecordsConfig, beam_args: Optional[Sequence[str]] = None,
            overwrite: bool = False, options: Any = None,
            outputs: Sequence[str] = (), wait: bool = True,
            task: Optional[str] = None) -> Dict[str, Any]:
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
  besides the common ones (for ``--overwrite``); ``task``: the model task of the records
  (recorded in the manifest when it is not ``job``).
  """
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from pipelines.beam import claim as claim_lib  # pylint: disable=g-import-not-at-top
  from schemas import fault_hook as faults  # pylint: disable=g-import-not-at-top
  from pipelines.beam import manifest as manifest_lib  # pylint: disable=g-import-not-at-top
  from pipelines.beam import writer  # pylint: disable=g-import-not-at-top
  from schemas import manifest as manifest_schema  # pylint: disable=g-import-not-at-top

  inputs = describe_inputs(input_pattern)
  _check_output_dir_not_a_file(output_dir)
  LOGGER.info("reading %d file(s), %.1f MB: %s", len(inputs),
              sum(i["bytes"] for i in inputs) / 1e6,
              ", ".join(f"{i['path']} ({i['bytes'] / 1e6:,.1f} MB)" for i in inputs[:5])
              + (f", ... ({len(inputs) - 5} more)" if len(inputs) > 5 else ""))
  local = is_local(beam_args)
  if local:
    _check_spacy_model(options)
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
      writer.prepare_output_dir(output_dir, overwrite, outputs, job=job)
    header = _header_with_options(job, config, input_pattern, inputs, task, options)
    if options is not None:
      build = functools.partial(build, options=options)
    if submit_only:
      header[manifest_lib.RELEASE_CLAIM_KEY] = held.token
    if dry_run_file:
      LOGGER.info("dry run: writing only %s", FileSystems.join(output_dir, dry_run_file))
    else:
      LOGGER.info("writing records, documents/, dead_letter/, skipped/ and manifest.json to %s",
                  output_dir)
    p = make_pipeline(beam_args)
    build(p, [i["path"] for i in inputs], output_dir, _build_config(config, beam_args, local),
          header, not local)
    try:
      faults.arm()
      faults.fault_point("start")  # test-only (READTWICE_FAULT_AT)
      with (fewer_gc_passes() if local else contextlib.nullcontext()), _quiet_dead_workers(), \
          _workers_in_their_own_process_group():
        result = p.run()
        if not submit_only:
          result.wait_until_finish()
          global _finished
          _finished = not dry_run_file  # a signal from here on finds the output COMPLETED
    except BaseException as e:
      # A local run stopped by a signal or a full disk: what this run wrote is deleted too
      # (none of the job's output files was there when it started: prepare_output_dir refused
      # them or, with --overwrite, deleted them), so that an identical rerun needs no
      # --overwrite.  Other failures keep theirs for diagnosis (e.g. the dead letters); so
      # does a remote job, which may still be running when its launcher stops.
      discard = local and not dry_run_file and (_stop_signal(e) is not None
                                                or is_disk_full(e))
      writer.clean_up_failed_run(output_dir, existed,
                                 own_outputs=outputs if discard else None)
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


def _check_spacy_model(options: Any) -> None:
  """A local run with ``--ner spacy`` and a ``--spacy_model`` package that is not installed is
  one line before any work (else every worker fails in its setup with a traceback).  Remote
  runs are not checked: their workers' container may hold the model."""
  from pipelines.entities import ner  # pylint: disable=g-import-not-at-top
  annotation = options if hasattr(options, "spacy_model") else getattr(options, "annotation",
                                                                       None)
  if getattr(annotation, "ner", None) != "spacy":
    return
  model = annotation.spacy_model
  if model.startswith(ner.SPACY_BLANK_PREFIX) or importlib.util.find_spec(model) is not None:
    return
  raise UserError(f"--spacy_model {model!r} is not installed: spaCy models are installed as "
                  "Python packages (e.g. pip install en-core-web-sm), never downloaded at run "
                  f"time; use {ner.SPACY_BLANK_PREFIX}<lang> for a blank pipeline")


def _build_config(config: RecordsConfig, beam_args: Optional[Sequence[str]],
                  local: bool) -> RecordsConfig:
  """The config the job's steps are built with: ``config``, but JSON files read whole when
  the run has one worker (planning byte ranges costs a decode of each large file, ~0.3 s per
  46 MB, and one worker would read the ranges one after the other anyway; the records are the
  same)."""
  if local and config.json_split_bytes and local_workers(beam_args) == 1:
    return dataclasses.replace(config, json_split_bytes=0)
  return config


def _check_output_dir_not_a_file(output_dir: str) -> None:
  from pipelines.beam import writer  # pylint: disable=g-import-not-at-top
  if writer.is_file(output_dir):
    raise UserError(f"--output_dir {output_dir} is a file, not a directory; choose a directory "
                    f"(it is created if missing)")


def _header_with_options(job: str, config: RecordsConfig, input_pattern: str,
                         inputs: List[Dict[str, Any]], task: Optional[str],
                         options: Any) -> Dict[str, Any]:
  """The manifest header, its ``config`` holding the job's own ``options`` too."""
  header = manifest_header(job, config, input_pattern, inputs, task)
  if options is not None:
    described = (options.describe() if hasattr(options, "describe")
                 else dataclasses.asdict(options))
    clash = sorted(k for k in described if k in header["config"]
                   and described[k] != header["config"][k])
    if clash:  # one key, two meanings: the manifest would record only one (a bug)
      raise ValueError(f"the options of {job} redefine the config entries {clash}")
    header["config"].update(described)
  return header


def estimate_job(job: str, build: JobBuilder, input_pattern: str, output_dir: str,
                 config: RecordsConfig, beam_args: Optional[Sequence[str]] = None,
                 options: Any = None, task: Optional[str] = None,
                 prices: Optional[Dict[str, Optional[float]]] = None,
                 out=None) -> Dict[str, Any]:
  """``--estimate``: what a run of the job would cost (:mod:`pipelines.estimate`), printing its
  table on ``out`` (default stdout) and returning its JSON.  Nothing is written.

  The inputs are resolved as :func:`run_job` resolves them (the same globs and errors: a
  missing input, a directory, an output dir that is a file, an unreadable tokenizer), and the
  job's graph is built on a pipeline that never runs, so that the dataset's own checks (an
  evidence dir, a stories dir, an index, a split) raise as in a run; the output dir is neither
  claimed nor checked for an earlier run.
  """
  from pipelines import estimate as estimate_lib  # pylint: disable=g-import-not-at-top
  inputs = describe_inputs(input_pattern)
  _check_output_dir_not_a_file(output_dir)
  header = _header_with_options(job, config, input_pattern, inputs, task, options)
  check_graph(build, [i["path"] for i in inputs], output_dir, config, header, beam_args, options)
  work = estimate_lib.measure(job, inputs, options, config.data_paths)
  e = estimate_lib.estimate(job, work, estimate_lib.workers_from_args(list(beam_args or [])),
                            options, prices)
  print(estimate_lib.render(e), file=out or sys.stdout, flush=True)
  return e


def check_graph(build: JobBuilder, paths: List[str], output_dir: str, config: RecordsConfig,
                header: Dict[str, Any], beam_args: Optional[Sequence[str]] = None,
                options: Any = None) -> None:
  """Builds the job's graph on a local pipeline that is never run, so that its checks raise as
  in a run.  Nothing is written: Beam's ``Pipeline`` makes a local temporary directory when it
  is constructed (used when it runs, and deleted then); this one gets none."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam import pipeline as beam_pipeline  # pylint: disable=g-import-not-at-top
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=g-import-not-at-top
  from apache_beam.runners.portability.fn_api_runner import FnApiRunner  # pylint: disable=g-import-not-at-top

  real_tempfile = beam_pipeline.tempfile
  beam_pipeline.tempfile = _NoTempDir(real_tempfile)
  try:
    p = beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(list(beam_args or [])))
  finally:
    beam_pipeline.tempfile = real_tempfile
  if options is not None:
    build = functools.partial(build, options=options)
  build(p, paths, output_dir, config, header, not is_local(beam_args))


class _NoTempDir:
  """The ``tempfile`` module as ``Pipeline.__init__`` sees it in :func:`check_graph`:
  ``mkdtemp`` makes nothing (the pipeline never runs)."""

  def __init__(self, real):
    self._real = real

  def mkdtemp(self, *args, **kwargs) -> str:
    del args, kwargs
    return ""

  def __getattr__(self, name):
    return getattr(self._real, name)


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
             outputs: Sequence[str] = (), task: Optional[str] = None) -> int:
  """A job's whole command line: flags, logging, :func:`run_job`, the final log line and the
  JSON summary; returns the exit status.

  A job with flags of its own adds them with ``add_flags(parser)``; ``job_options(args)``
  turns them into an options object (a ValueError is a usage error naming the flag), passed
  to ``build`` as ``options=`` and recorded in the manifest's config (``describe()``, or its
  dataclass fields).
  """
  if argv is None:  # the command line: Ctrl-C or SIGTERM while parsing flags is one line
    exit_quietly_on_stop_signals(prog)
  parser = flags.new_parser(prog, description, example)
  estimate_flags.add_flags(parser)
  flags.add_run_flags(parser)
  if add_flags is not None:
    add_flags(parser.add_argument_group(f"{job} settings"))
  args, beam_args = flags.parse(parser, argv)
  config = flags.records_config(parser, args)
  options = None
  if job_options is not None:
    try:
      options = job_options(args)
    except ValueError as e:
      parser.error(str(e))
  prices = estimate_flags.prices_from_args(parser, args, beam_args) if args.estimate else None
  setup_logging(args.log_level)
  if args.estimate:
    return run_main(parser.prog, lambda: estimate_job(
        job, build, args.input, args.output_dir, config, beam_args, options, task, prices))

  def body():
    m = run_job(job, build, args.input, args.output_dir, config, beam_args, args.overwrite,
                options, outputs, wait=args.wait, task=task)
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

  return run_main(parser.prog, body)


def dataset_main(name: str, argv: Optional[Sequence[str]] = None,
                 prog: Optional[str] = None) -> int:
  """The generic job's command line for the registered dataset ``name``
  (:mod:`pipelines.datasets`); ``prog``: how it was invoked (default ``python -m pipelines
  <name>``)."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  spec = datasets.get(name)
  return job_main(prog or f"python -m pipelines {name}", spec.description, spec.example, name,
                  spec.build, argv, add_flags=spec.add_flags,
                  job_options=spec.options_from_args, outputs=spec.outputs,
                  task=spec.model_task)


def run_dataset(name: str, input_pattern: str, output_dir: str, config: RecordsConfig,
                options: Any = None, beam_args: Optional[Sequence[str]] = None,
                overwrite: bool = False) -> Dict[str, Any]:
  """Runs the registered dataset ``name``'s job to completion; returns the manifest (see
  :func:`run_job`).  ``options``: the dataset's options object (None: its ``build``'s
  default, not recorded in the manifest)."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  spec = datasets.get(name)
  return run_job(name, spec.build, input_pattern, output_dir, config, beam_args, overwrite,
                 options, spec.outputs, task=spec.model_task)


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
    if _stopped_by is not None:  # stopping after SIGINT / SIGTERM: the job prints one line
      return False
    exc = record.exc_info[1] if record.exc_info else None
    message = record.getMessage()
    return not ((exc is not None and (user_error_message(exc) is not None
                                      or _interrupted(exc) or is_disk_full(exc)))
                or MARKER in message
                or message.startswith("KeyboardInterrupt")  # Ctrl-C: one line
                # a local worker process's own report of the Ctrl-C it received
                or ("Python sdk harness failed" in message and "KeyboardInterrupt" in message))


class _PopenInOwnGroup:
  """``subprocess`` as Beam's local job service sees it during a run: its ``Popen`` (which
  starts the ``multi_processing`` worker processes) puts each worker in a process group of its
  own."""

  def __init__(self, real):
    self._real = real

  def Popen(self, *args, **kwargs):  # noqa: N802  # pylint: disable=invalid-name
    kwargs.setdefault("process_group", 0)
    process = self._real.Popen(*args, **kwargs)
    _local_workers.append(process)
    return process

  def __getattr__(self, name):
    return getattr(self._real, name)


# The running local job's worker processes (started through _PopenInOwnGroup).
_local_workers: list = []


def _kill_local_workers() -> None:
  """Kills the running local job's worker processes at once (on a stop signal): a worker left
  to notice its closed control channel may be in the middle of a bundle and print Beam's
  traceback of the race (``KeyError: 'bundle_4'``) on the shared stderr."""
  for process in _local_workers:
    try:  # the group: Beam starts a worker through a shell (shell=True)
      os.killpg(process.pid, signal.SIGKILL)
    except OSError:  # already gone
      pass


@contextlib.contextmanager
def _workers_in_their_own_process_group():
  """Local ``multi_processing`` workers start in process groups of their own, so that a
  Ctrl-C in a terminal (or a SIGTERM to the job's process group) reaches the launcher only:
  each worker would otherwise die printing its own KeyboardInterrupt traceback (or die of
  SIGTERM in the middle of a bundle, before the launcher knows why).  The launcher's stop
  handler kills them at once (:func:`_kill_local_workers`); if the launcher itself is killed,
  they exit when their channel breaks."""
  try:
    from apache_beam.runners.portability import local_job_service  # pylint: disable=g-import-not-at-top
  except ImportError:  # pragma: no cover
    yield
    return
  real = local_job_service.subprocess
  if isinstance(real, _PopenInOwnGroup):  # nested (a job run from a job's test)
    yield
    return
  local_job_service.subprocess = _PopenInOwnGroup(real)
  _local_workers.clear()
  try:
    yield
  finally:
    local_job_service.subprocess = real
    _local_workers.clear()


@contextlib.contextmanager
def _quiet_dead_workers():
  """While a local run runs: a worker process that a signal ended (a Ctrl-C or SIGTERM sent
  to the job's process group reaches its workers too) is no traceback from the thread that
  watched it (Beam's ``Worker subprocess exited with return code -15``): the job prints its
  own one line for that signal, and so is any thread's error once a stop signal arrived (the
  killed workers' data and control channels break); any other thread error is printed as
  before."""
  previous = threading.excepthook

  def hook(args):
    text = str(args.exc_value)
    if _stopped_by is not None or (  # stopping: the killed workers' channels break
        args.exc_type is RuntimeError
        and text.startswith("Worker subprocess exited with return code -")):
      LOGGER.debug("%s", text)
      return
    previous(args)

  threading.excepthook = hook
  try:
    yield
  finally:
    threading.excepthook = previous


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
  previous = _handle_stop_signals()
  try:
    result = body()
  except BaseException as e:  # pylint: disable=broad-except
    if isinstance(e, BrokenPipeError) and flags.schema_cli.output_closed():  # ``| head``
      return flags.schema_cli.closed_pipe()
    stop = _stop_signal(e)
    if stop is not None and _finished:  # the signal came after the job's last step
      print(f"{prog}: error: {_STOP_WORDS[stop]} after the job had completed; its output is "
            f"in place (COMPLETED)", file=sys.stderr, flush=True)
      return _STOP_CODES[stop]
    if stop is not None:  # Ctrl-C / SIGTERM, also one a runner re-raised as another type
      print(f"{prog}: error: {_STOP_WORDS[stop]}; the job stopped, deleted its temporary "
            f"files and partial output (nothing is COMPLETED); rerun the same command to start "
            f"over", file=sys.stderr, flush=True)
      return _exit_now_if_command(_STOP_CODES[stop])
    if not isinstance(e, Exception):
      raise
    # A UserError, also one raised on a worker and re-wrapped by the runner; or a missing
    # input / an existing output, whose message is the line to show; or a full disk.
    message = user_error_message(e)
    if message is None and isinstance(e, (FileNotFoundError, FileExistsError)):
      message = e.args[0] if e.args else str(e)
    if message is None and is_disk_full(e):
      message = _disk_full_line(e)
    if message is None:
      raise
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return flags.EXIT_FAILURE
  finally:
    _restore_stop_signals(previous)
  try:
    print(json.dumps(result, sort_keys=True), flush=True)
  except BrokenPipeError:  # ``... | head -1``: quiet, exit 1 (the output is in place)
    return flags.schema_cli.closed_pipe()
  return 0


def _exit_now_if_command(code: int) -> int:
  """``code``; but as ``python -m pipelines ...`` (not a call from Python) the process ends
  here: the cleanup is done, and a runner thread the signal left blocked must not keep the
  process alive after its one line (seen under load: the line printed, the process hanging)."""
  if flags.schema_cli.module_command("pipelines") is None:
    return code
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


class _Terminated(BaseException):
  """SIGTERM, raised in the main thread so that ``finally`` blocks (the output dir's claim, the
  temporary files) run as for Ctrl-C."""


_STOP_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
_STOP_WORDS = {signal.SIGINT: "interrupted (SIGINT)", signal.SIGTERM: "terminated (SIGTERM)"}
# The first SIGINT / SIGTERM of the running job (None: none).  Later ones are ignored, so that
# the cleanup after the first (workers stopped, temporary files and partial output deleted,
# claim released) runs to its end; wherever the first one surfaced (a runner may re-raise it
# as a RuntimeError, or as a worker that died of it), the job's outcome is that signal.
_stopped_by: Optional[int] = None
_finished = False  # whether the running job's pipeline finished (its output COMPLETED)


def _on_stop_signal(signum, frame):
  del frame
  global _stopped_by
  if _stopped_by is not None:
    return
  _stopped_by = signum
  _kill_local_workers()
  raise KeyboardInterrupt() if signum == signal.SIGINT else _Terminated()


def _handle_stop_signals():
  """Installs :func:`_on_stop_signal` for SIGTERM and SIGINT (not where SIGINT is ignored, as
  in a background job: it stays ignored); returns the previous handlers (None off the main
  thread, where Python cannot set handlers)."""
  global _stopped_by, _finished
  _stopped_by, _finished = None, False
  if threading.current_thread() is not threading.main_thread():
    return None
  previous = {}
  for signum in (signal.SIGTERM, signal.SIGINT):
    current = signal.getsignal(signum)
    if signum == signal.SIGINT and current is signal.SIG_IGN:
      continue
    previous[signum] = signal.signal(signum, _on_stop_signal)
  return previous


def _restore_stop_signals(previous) -> None:
  for signum, handler in (previous or {}).items():
    try:
      signal.signal(signum, handler)
    except (ValueError, TypeError):
      pass


def _stop_signal(exc: BaseException) -> Optional[int]:
  """The signal that stopped the job, if one did: the first one received, else one that
  ``exc`` is (or a runner's re-raise of, found in its chain or text)."""
  if _stopped_by is not None:
    return _stopped_by
  if isinstance(exc, KeyboardInterrupt) or _interrupted(exc):
    return signal.SIGINT
  seen = set()
  e: Optional[BaseException] = exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, _Terminated) or f"{__name__}._Terminated" in str(e):
      return signal.SIGTERM
    e = e.__cause__ or e.__context__
  return None


def _disk_full_line(exc: BaseException) -> str:
  """The line of a full disk met outside :func:`~pipelines.atomic_files.write_atomically`
  (which names its file itself): the file, when the error names one."""
  seen = set()
  e: Optional[BaseException] = exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, OSError) and e.filename:
      return disk_full_message(str(e.filename))
    e = e.__cause__ or e.__context__
  return f"no space left on device ({exc}); free space and rerun"
