"""``--estimate``: what a job's run would cost, before it runs, on every job
(``python -m pipelines <dataset> ... --estimate``).

The job resolves its inputs exactly as a run does (the same globs, checks and one-line errors:
:func:`pipelines.runner.estimate_job` builds the job's Beam graph without running it), sizes
them, and prints a short table and, as the last stdout line, one JSON object.  Nothing is
written: no output dir, no claim file, no temporary file; an output dir holding an earlier run
is fine.

How the figure is made.

* **Work.**  Each dataset's cost grows with one measure of its input, in MB (:data:`WORK`):
  the uncompressed bytes of its input files, plus for TriviaQA the evidence files its questions
  name (counted once per reference: the job reads a file once per question, or per page
  document, naming it), for NarrativeQA the story (or summary) of every question of ``--split``
  (counted per question: each question is one document holding the whole story), for
  ``jsonl_qa`` the ``context_file`` of every line naming one.  Compressed inputs (``.gz``,
  ``.bz2``, ``.xz``, ``.zst``, ``.deflate``) count as their uncompressed size, taken from the
  first 4 MiB of the file (:data:`SAMPLE_BYTES`; exact when the file is shorter) on a few files
  per kind, the others at the ratio found; Parquet files as the uncompressed size of their row
  groups (the footer).  Referenced files are sized one by one on a local disk, from a sample
  of :data:`SAMPLE_FILES` of them on ``gs://``.
* **CPU.**  ``fixed_cpu_s + cpu_s_per_mb * MB`` (+ decompression of compressed inputs,
  :data:`DECOMPRESS_CPU_S_PER_MB`), all measured (not assumed) by ``python -m
  benchmarks.job_cost``: user + system CPU seconds of the job's whole process (children
  included) on a tiny and on a larger generated input (:data:`COSTS`, with the date, the
  machine and the command of the measurement).
* **Dataflow.**  A Dataflow vCPU is taken as one core of the measuring machine;
  the per-MB work is multiplied by :data:`DATAFLOW_OVERHEAD` and spread over the workers; each
  job waits :data:`DATAFLOW_STARTUP_MIN` minutes for its workers, billed.  The worker type,
  count and disk are Beam's options (``--machine_type`` / ``--worker_machine_type``,
  ``--num_workers``, ``--max_num_workers``, ``--disk_size_gb``, ``--worker_disk_type``) or
  Dataflow's batch defaults; the prices are the ``--price_*`` flags, by default Dataflow's batch
  list prices in us-central1 (:data:`PRICES`).
* **Local.**  The in-memory runner (no Beam flags), stage by stage: start-up (the table's
  fixed CPU), the per-MB work at :data:`JOB_PARALLELISM` cores, decompression, annotation;
  every CPU figure divided by the share of a core this process got while starting
  (:func:`process_share`: the same imports as the run, so the load a run meets now;
  ``--direct_running_mode multi_processing`` was measured no faster on 2 cores, and is timed
  the same).
* **Annotation** (``--ner``, :func:`annotation_estimate`).  spaCy: a start per worker process
  (importing spaCy; the ``--entities_dir`` alias table, every row; the EntityRuler's patterns)
  and CPU per word (more with more patterns; an installed model far more), measured by
  ``python -m benchmarks.annotation_cost`` (:data:`ANNOTATION`); the words from the MB of work
  (:data:`WORDS_PER_MB`, measured on the real-format samples).  Cloud NL: the requests, the
  billable units (one per started 1,000 characters of a request) and their price at
  ``--price_per_1000_units`` (:data:`CLOUD_NL_PRICE_SOURCE`), before cache hits; the rate
  limit's wait; ``--dry_run`` plans them exactly from every text.
"""

from __future__ import annotations

import bz2
import collections
import dataclasses
import lzma
import math
import os
import time
import zlib
from concurrent import futures
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from pipelines.errors import UserError

MB = 1e6

# ------------------------------------------------------------------------------ measured costs


@dataclasses.dataclass(frozen=True)
class Cost:
  """The measured CPU cost of one dataset's job (``python -m benchmarks.job_cost``)."""
  fixed_cpu_s: float  # CPU s of a run on a tiny input: interpreter, imports, graph, tokenizer
  cpu_s_per_mb: float  # median slope: CPU s per MB of work (WORK[dataset])
  slope_spread: Tuple[float, float, float]  # min, median, max slope over the repetitions
  cpu_per_wall: float  # CPU s per wall s of the local in-memory runner on the larger input
                       # (the largest over the repetitions: the least slowed by other load)
  measured_on: str  # the inputs: kind and MB of work, tiny and larger
  date: str
  machine: str
  command: str


MACHINE = ("2-core AMD EPYC VM, 24 GiB, Python 3.11, Beam 2.77 (the project's dev machine; "
           "load average 3-5 from other work during the measurement)")
COMMAND = "python -m benchmarks.job_cost --reps 5"
# From ``python -m benchmarks.job_cost --reps 5`` (it prints these entries), 2026-11-27.  The
# wall-time ratio (cpu_per_wall) is depressed by the machine's load at the time: on an idle
# machine a local run may be up to ~1.5x faster than the local estimate.
COSTS: Dict[str, Cost] = {
    "hotpotqa": Cost(fixed_cpu_s=3.59, cpu_s_per_mb=0.6074,
                     slope_spread=(0.5747, 0.6074, 0.6322), cpu_per_wall=0.68,
                     measured_on="0.09 MB and 17.37 MB of question JSON, 5 reps",
                     date="2026-11-27", machine=MACHINE, command=COMMAND),
    "wikipedia": Cost(fixed_cpu_s=4.54, cpu_s_per_mb=1.1256,
                      slope_spread=(1.0246, 1.1256, 1.1633), cpu_per_wall=0.63,
                      measured_on="multistream .bz2 dumps of 0.07 MB and 16.07 MB of XML "
                                  "(0.02 MB and 3.25 MB stored), 5 reps",
                      date="2026-11-27", machine=MACHINE, command=COMMAND),
    "books": Cost(fixed_cpu_s=3.38, cpu_s_per_mb=1.0442,
                  slope_spread=(0.9616, 1.0442, 1.0871), cpu_per_wall=0.72,
                  measured_on="1 book of 0.09 MB and 40 books, 22.01 MB, 5 reps",
                  date="2026-11-27", machine=MACHINE, command=COMMAND),
    "triviaqa": Cost(fixed_cpu_s=3.76, cpu_s_per_mb=0.8817,
                     slope_spread=(0.8538, 0.8817, 0.9564), cpu_per_wall=0.62,
                     measured_on="0.01 MB and 16.93 MB of work (question files 0.18 MB, "
                                 "evidence per reference), 5 reps",
                     date="2026-11-27", machine=MACHINE, command=COMMAND),
    "narrativeqa": Cost(fixed_cpu_s=3.90, cpu_s_per_mb=0.1212,
                        slope_spread=(0.1130, 0.1212, 0.1399),
                        cpu_per_wall=0.70,
                        measured_on="0.56 MB and 100.33 MB of work (1 and 8 stories, 30 "
                                    "questions each), 5 reps",
                        date="2026-11-27", machine=MACHINE, command=COMMAND),
    "jsonl_qa": Cost(fixed_cpu_s=3.67, cpu_s_per_mb=0.5760,
                     slope_spread=(0.5257, 0.5760, 0.6266), cpu_per_wall=0.66,
                     measured_on="0.07 MB and 14.21 MB of work (10.77 MB of JSONL, a quarter "
                                 "of the lines with a context_file), 5 reps",
                     date="2026-11-27", machine=MACHINE, command=COMMAND),
}

# CPU s per uncompressed MB to decompress an input of each kind (python -m benchmarks.job_cost,
# 2026-11-27, same machine; zstd and deflate taken as gzip), added for compressed inputs: the
# slopes were measured on plain files, except Wikipedia's on bz2 dumps (included there).
DECOMPRESS_CPU_S_PER_MB = {"gz": 0.0030, "deflate": 0.0030, "zst": 0.0030, "bz2": 0.0510,
                           "xz": 0.0098}
MEASURED_ON_KIND = {"wikipedia": "bz2"}

# ------------------------------------------------------------------------------ local wall time

# CPU s per wall s the job's per-MB work gets from an idle 2-core machine: the in-memory runner
# keeps ~1.43 cores busy (the Rust tokenizer's threads beside Python): HotpotQA, 50.5 MB, 25-27
# CPU s in 17.9 s (docs/cost.md, "Measured scale-out", 2026-11-27).  Start-up and spaCy are
# one thread: 1 core.  Both are scaled by the share of a core this process got (below).
JOB_PARALLELISM = 1.43
SHARE_BOUNDS = (0.1, 1.0)


def process_share() -> Optional[float]:
  """CPU s per wall s this process has had since it started (its start-up: the interpreter and
  the same imports a run makes, so the share of a core a run would get now on this machine);
  None where ``/proc`` does not say when the process started, or it started < 0.5 s ago."""
  try:
    with open("/proc/self/stat", encoding="ascii") as f:
      start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
    with open("/proc/uptime", encoding="ascii") as f:
      uptime = float(f.read().split()[0])
    wall = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
  except (OSError, ValueError, IndexError):
    return None
  if wall < 0.5:
    return None
  return time.process_time() / wall


# ------------------------------------------------------------------------------ annotation

# ``python -m benchmarks.annotation_cost --reps 3`` (2026-11-29, the same 2-core machine, load
# average 7-11 from other work): CPU seconds, medians.  ``start_cpu_s``: importing spaCy and
# building a blank pipeline in a books job (with minus without --ner spacy on a tiny input,
# 1.20-1.40); ``cpu_s_per_word``: the annotate stage per word of a blank:en pipeline without
# patterns (books job, 5 MB of generated books, with minus without: 1.05-1.96 us); per alias
# row of the --entities_dir table (read, AliasLinker, ranking the ruler's patterns); per
# EntityRuler pattern (building the ruler); per word per 1,000 patterns (matching).
ANNOTATION = {"start_cpu_s": 1.36, "cpu_s_per_word": 1.76e-6, "cpu_s_per_alias_row": 1.78e-5,
              "cpu_s_per_pattern": 3.59e-5, "cpu_s_per_word_per_1k_patterns": 6.4e-8,
              "date": "2026-11-29", "command": "python -m benchmarks.annotation_cost --reps 3"}
# An installed spaCy model (--spacy_model other than blank:<lang>): not installed here, so not
# measured by the benchmark; en-core-web-sm's full pipeline ran ~3.5k words/s on this machine
# kind (the project's FACTS, measured in a fresh virtualenv); its loading is taken as 2 CPU s.
MODEL_WORDS_PER_CPU_S = 3500.0
MODEL_LOAD_CPU_S = 2.0
# Words the annotate stage counts per MB of work (manifest stages.annotate.words over the
# estimate's work MB), measured on the real-format samples of ../shared/samples with
# --ner spacy (2026-11-29): HotpotQA dev head 20 (149k), NarrativeQA's Time Machine (173k),
# the jsonl_qa sample (183k), the PG-19 books (178k); TriviaQA (evidence per reference) and
# others at the median.  Characters per word (Cloud NL bills characters): 5.5 (the PG-19
# sample: 73,331 characters, 13,257 words).
WORDS_PER_MB = {"hotpotqa": 149_000, "narrativeqa": 173_000, "jsonl_qa": 183_000,
                "books": 178_000}
DEFAULT_WORDS_PER_MB = 176_000
CHARS_PER_WORD = 5.5
# Texts the stage annotates (one request each at least, with --ner cloud) per MB of work where
# the estimate cannot count them: HotpotQA one per question (the sample: 20 in 0.14 MB).
TEXTS_PER_MB = {"hotpotqa": 143.0}
# Cloud Natural Language, analyzeEntities: one unit per started 1,000 characters of each
# request; Entity Analysis list price per 1,000 units per month: first 5,000 units free, $1.00
# to 1M, $0.50 to 5M, $0.25 above (https://cloud.google.com/natural-language/pricing, looked
# up 2026-11-29).  The estimate prices every unit at --price_per_1000_units (default $1.00).
CLOUD_NL_PRICE_SOURCE = ("Cloud Natural Language pricing, Entity Analysis: per 1,000 units of "
                         "1,000 characters, first 5,000 units a month free, $1.00 to 1M, $0.50 "
                         "to 5M, $0.25 above (https://cloud.google.com/natural-language/pricing, "
                         "looked up 2026-11-29)")

# What each dataset's MB of work is (the x of the slope).
WORK = {
    "hotpotqa": "question files, uncompressed (Parquet: uncompressed row groups)",
    "wikipedia": "dump XML, uncompressed (the bz2 ratio sampled from each dump)",
    "books": "book files, uncompressed",
    "triviaqa": "question files plus the evidence files each question names, per reference",
    "narrativeqa": "qaps.csv plus each question's story (--context summary: summary), per "
                   "question of --split",
    "jsonl_qa": "JSONL files plus each line's context_file, per line",
}

# ------------------------------------------------------------------------------ Dataflow model

# Dataflow batch list prices, us-central1, USD (looked up 2026-11-27 with the search tool;
# https://cloud.google.com/dataflow/pricing -- its stored copies do not render the price table,
# these are the us-central1 batch figures as publicly quoted, e.g. a cost script carrying
# VCPU_HR = 0.056, MEM_GB_HR = 0.003557, PD_GB_HR = 0.000054, SSD_GB_HR = 0.000298 and
# Shuffle 0.011 per GB; check the current price list).  Override with --price_vcpu_hour,
# --price_memory_gb_hour, --price_disk_gb_hour.
PRICES = {"vcpu_hour": 0.056, "memory_gb_hour": 0.003557,
          "disk_gb_hour": {"pd-standard": 0.000054, "pd-ssd": 0.000298}}
PRICE_SOURCE = ("Dataflow batch list prices, us-central1 (https://cloud.google.com/dataflow/"
                "pricing, looked up 2026-11-27)")
SHUFFLE_PRICE_PER_GB = 0.011  # Dataflow Shuffle data processed (batch): not estimated

# Dataflow's batch defaults (docs: "Dataflow shuffle for batch jobs": boot disk 25 GB with the
# service shuffle, the batch default; "Horizontal Autoscaling": --max_num_workers defaults to
# 2,000; the default batch worker is n1-standard-1).
DEFAULT_MACHINE_TYPE = "n1-standard-1"
DEFAULT_DISK_GB = 25
DEFAULT_DISK_TYPE = "pd-standard"
DEFAULT_MAX_WORKERS = 2000
# Without --num_workers, the autoscaler picks the count; planned as enough workers for about
# this many hours of work each (it scales sublinearly with the work).
HOURS_PER_WORKER = 1.0
# CPU per MB of the local multi_processing runner (every element crosses processes through the
# Fn API, as on Dataflow's workers) over the in-memory runner's, measured by the benchmark on
# HotpotQA: no penalty to carry over to Dataflow.
MULTIPROCESS_CPU_FACTOR = 0.96  # median of 5 (min 0.88, max 1.03), 2026-11-27
# Per-MB CPU on Dataflow over the measured local figure: NOT measured (no Dataflow bill was
# compared): Dataflow's worker harness beside the SDK harness on the same vCPUs, Cloud Storage
# reads and writes, the shuffle's encoding and uneven work between workers.
DATAFLOW_OVERHEAD = 1.5
DATAFLOW_STARTUP_MIN = 3.5  # job start: worker VMs booting and pulling the SDK container

# Memory per vCPU (GB) of Compute Engine machine families ("<family>-<class>-<vCPUs>").
_MEMORY_PER_VCPU = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "n2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "n2d": {"standard": 4, "highmem": 8, "highcpu": 1},
    "n4": {"standard": 4, "highmem": 8, "highcpu": 2},
    "e2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "c2": {"standard": 4},
    "c2d": {"standard": 4, "highmem": 8, "highcpu": 2},
    "c3": {"standard": 4, "highmem": 8, "highcpu": 2},
    "c3d": {"standard": 4, "highmem": 8, "highcpu": 2},
    "t2d": {"standard": 4},
    "t2a": {"standard": 4},
    "m1": {"megamem": 14.93, "ultramem": 24.02},
}
_SHARED_CORE = {"e2-micro": (2, 1.0), "e2-small": (2, 2.0), "e2-medium": (2, 4.0),
                "n1-standard-1": (1, 3.75), "f1-micro": (1, 0.6), "g1-small": (1, 1.7)}


def machine_shape(machine_type: str) -> Tuple[int, float]:
  """``(vCPUs, memory GB)`` of a Compute Engine machine type; ValueError if unknown."""
  name = machine_type.rsplit("/", 1)[-1]
  if name in _SHARED_CORE:
    return _SHARED_CORE[name]
  parts = name.split("-")
  if "custom" in parts:  # custom-4-16384, n2-custom-4-16384, ...-ext
    k = parts.index("custom")
    try:
      return int(parts[k + 1]), int(parts[k + 2]) / 1024
    except (IndexError, ValueError):
      pass
  elif len(parts) == 3 and parts[2].isdigit():
    per_vcpu = _MEMORY_PER_VCPU.get(parts[0], {}).get(parts[1])
    if per_vcpu is not None:
      return int(parts[2]), int(parts[2]) * per_vcpu
  raise ValueError(f"--machine_type {machine_type}: unknown machine type for --estimate (known: "
                   f"{', '.join(sorted(_MEMORY_PER_VCPU))} families as <family>-<class>-<vCPUs>, "
                   f"custom-<vCPUs>-<MB>, {', '.join(sorted(_SHARED_CORE))})")


@dataclasses.dataclass(frozen=True)
class Workers:
  """The Dataflow workers a run would use (Beam's worker options, else Dataflow's defaults)."""
  machine_type: str
  vcpus: int
  memory_gb: float
  disk_gb: int
  disk_type: str
  num_workers: Optional[int]  # --num_workers
  max_num_workers: Optional[int]  # --max_num_workers
  runner: Optional[str]
  direct_running_mode: str
  direct_num_workers: int


def workers_from_args(beam_args: Sequence[str]) -> Workers:
  """The worker shape of ``beam_args``; ValueError (one line) for an unknown machine type or a
  worker count below 1."""
  from apache_beam.options.pipeline_options import (  # pylint: disable=g-import-not-at-top
      DirectOptions, PipelineOptions, StandardOptions, WorkerOptions)
  options = PipelineOptions(list(beam_args))
  w = options.view_as(WorkerOptions)
  machine_type = w.machine_type or DEFAULT_MACHINE_TYPE
  vcpus, memory_gb = machine_shape(machine_type)
  for flag, value in (("--num_workers", w.num_workers), ("--max_num_workers", w.max_num_workers)):
    if value is not None and value < 1:
      raise ValueError(f"{flag} must be >= 1 for --estimate, got {value}")
  disk_type = (w.disk_type or DEFAULT_DISK_TYPE).rsplit("/", 1)[-1]
  d = options.view_as(DirectOptions)
  return Workers(machine_type=machine_type, vcpus=vcpus, memory_gb=memory_gb,
                 disk_gb=w.disk_size_gb or DEFAULT_DISK_GB, disk_type=disk_type,
                 num_workers=w.num_workers, max_num_workers=w.max_num_workers,
                 runner=options.view_as(StandardOptions).runner,
                 direct_running_mode=d.direct_running_mode or "in_memory",
                 direct_num_workers=d.direct_num_workers or 1)


# ------------------------------------------------------------------------------ input sizes

SAMPLE_BYTES = 4 << 20  # stored bytes decompressed to find a compressed file's ratio
SAMPLE_FILES = 256  # referenced files sized on remote storage (the rest at their mean)
_SAMPLED_PER_KIND = 3  # compressed input files sampled per kind (the rest at their ratio)
_CHUNK = 1 << 16


def file_kind(path: str) -> str:
  """plain, gz, bz2, xz, zst, deflate or parquet, as the jobs' readers tell them."""
  from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=g-import-not-at-top
  from pipelines.sources import parquet_rows  # pylint: disable=g-import-not-at-top
  if path.lower().endswith(parquet_rows.PARQUET_SUFFIX):
    return "parquet"
  kind = {CompressionTypes.GZIP: "gz", CompressionTypes.BZIP2: "bz2", CompressionTypes.LZMA: "xz",
          CompressionTypes.ZSTD: "zst", CompressionTypes.DEFLATE: "deflate"}.get(
              CompressionTypes.detect_compression_type(path), "plain")
  if kind == "plain" and parquet_rows.is_parquet(path):  # PAR1 magic without the suffix
    return "parquet"
  return kind


@dataclasses.dataclass
class FileSize:
  path: str
  kind: str
  stored: int  # bytes as stored
  bytes: int  # uncompressed (Parquet: row groups' uncompressed size)
  how: str  # how ``bytes`` was found


def _decompressor(kind: str):
  """``decompress(data, max_length) -> bytes`` objects for ``kind`` (one stream/member)."""
  if kind == "gz":
    return zlib.decompressobj(wbits=47)
  if kind == "deflate":
    return zlib.decompressobj(wbits=-15)
  if kind == "bz2":
    return bz2.BZ2Decompressor()
  if kind == "xz":
    return lzma.LZMADecompressor()
  raise ValueError(kind)


def _feed(d, data: bytes, kind: str) -> Tuple[int, Optional[bytes]]:
  """Feeds ``data`` to the decompressor ``d`` and drains it (1 MiB of output at a time, so a
  highly compressed file costs no memory): ``(bytes out, None)``, or at the end of a stream /
  member ``(bytes out, the input left after it)``."""
  out = 0
  while True:
    block = d.decompress(data, 1 << 20)
    out += len(block)
    if d.eof:
      return out, d.unused_data
    if kind in ("gz", "deflate"):
      data = d.unconsumed_tail
      if not data and len(block) < (1 << 20):
        return out, None
    else:
      data = b""
      if d.needs_input:
        return out, None


def sample_ratio(path: str, kind: str) -> Tuple[int, int, bool]:
  """``(stored bytes decompressed, bytes they gave, whole file)`` from the first
  :data:`SAMPLE_BYTES` of a compressed file; concatenated streams / members are followed.  The
  stored count stops at the chunk that gave the last output, so input a decompressor still
  holds (a bz2 block not yet complete) is not counted."""
  from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
    if kind == "zst":
      import zstandard  # pylint: disable=g-import-not-at-top
      data = raw.read(SAMPLE_BYTES)
      whole = not raw.read(1)
      out = 0
      try:
        with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as r:
          for block in iter(lambda: r.read(1 << 20), b""):
            out += len(block)
      except zstandard.ZstdError:
        pass
      return len(data), out, whole
    fed = fed_at_output = out = 0
    d = _decompressor(kind)
    while fed < SAMPLE_BYTES:
      data = raw.read(_CHUNK)
      if not data:
        return fed, out, True
      fed += len(data)
      try:
        while True:
          got, rest = _feed(d, data, kind)
          out += got
          if got:
            fed_at_output = fed
          if rest is None:
            break
          d = _decompressor(kind)  # the next stream / member
          if not rest.strip(b"\0"):
            break
          data = rest
      except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return fed_at_output, out, False  # damaged: a run says so; the sample so far
    return fed_at_output, out, False


def _parquet_bytes(path: str) -> int:
  from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    meta = pq.ParquetFile(f).metadata
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def size_files(files: Sequence[Dict[str, Any]]) -> List[FileSize]:
  """:class:`FileSize` of each ``{"path", "bytes"}`` (as :func:`pipelines.beam.inputs.
  describe_inputs` gives them): plain files as stored; compressed ones sampled (the largest
  :data:`_SAMPLED_PER_KIND` of each kind; the others at their ratio); Parquet by its footer."""
  out = [FileSize(f["path"], file_kind(f["path"]), int(f["bytes"]), int(f["bytes"]), "as stored")
         for f in files]
  by_kind: Dict[str, List[FileSize]] = collections.defaultdict(list)
  for f in out:
    by_kind[f.kind].append(f)
  for kind, group in by_kind.items():
    if kind == "plain":
      continue
    if kind == "parquet":
      for f in group:
        try:
          f.bytes, f.how = _parquet_bytes(f.path), "Parquet footer (uncompressed row groups)"
        except Exception as e:  # pylint: disable=broad-except  # a run makes it a dead letter
          f.bytes, f.how = f.stored, f"as stored (unreadable footer: {type(e).__name__})"
      continue
    sampled_in = sampled_out = 0
    ranked = sorted(group, key=lambda f: -f.stored)
    for f in ranked[:_SAMPLED_PER_KIND]:
      fed, got, whole = sample_ratio(f.path, kind)
      if whole:
        f.bytes, f.how = got, "decompressed whole"
      elif fed:
        f.bytes = round(f.stored * got / fed)
        f.how = f"ratio {got / fed:.2f} of its first {fed / MB:.1f} MB"
      sampled_in, sampled_out = sampled_in + fed, sampled_out + got
    ratio = sampled_out / sampled_in if sampled_in else 1.0
    for f in ranked[_SAMPLED_PER_KIND:]:
      f.bytes, f.how = round(f.stored * ratio), f"ratio {ratio:.2f} of sampled {kind} files"
  return out


def size_referenced(refs: "collections.Counter[str]") -> Dict[str, Any]:
  """Sizes of files named ``refs[path]`` times: ``{"files", "references", "bytes" (read,
  per reference), "missing", "sized"}``.  Local files are all sized (``os.stat``), remote ones
  from a sample of :data:`SAMPLE_FILES`."""
  unique = sorted(refs)
  total_refs = sum(refs.values())
  if not unique:
    return {"files": 0, "references": 0, "bytes": 0, "missing": 0, "sized": "none named"}
  remote = [p for p in unique if "://" in p]
  local = [p for p in unique if "://" not in p]
  sizes: Dict[str, Optional[int]] = {}
  for p in local:
    try:
      sizes[p] = os.stat(p).st_size
    except OSError:
      sizes[p] = None
  if remote:
    step = max(1, len(remote) // SAMPLE_FILES)
    sample = remote[::step][:SAMPLE_FILES]
    from pipelines.sources.byte_stream import file_size  # pylint: disable=g-import-not-at-top
    with futures.ThreadPoolExecutor(16) as pool:
      sizes.update(zip(sample, pool.map(file_size, sample)))
  sized = [p for p in unique if p in sizes]
  found = [p for p in sized if sizes[p] is not None]
  missing_refs = sum(refs[p] for p in sized if sizes[p] is None)
  sized_refs = sum(refs[p] for p in sized)
  read = sum(sizes[p] * refs[p] for p in found)
  if len(sized) < len(unique):  # a sample: scale to every reference
    scale = total_refs / sized_refs if sized_refs else 0.0
    read, missing_refs = round(read * scale), round(missing_refs * scale)
    how = f"sample of {len(sized)} of {len(unique)} files"
  else:
    how = "every file"
  return {"files": len(unique), "references": total_refs, "bytes": int(read),
          "missing": int(missing_refs), "sized": how}


# ------------------------------------------------------------------------------ work per dataset


@dataclasses.dataclass
class Work:
  """What a job would read: its inputs, its side inputs and the MB of work of its cost."""
  inputs: List[FileSize]
  side: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
  extra_bytes: int = 0  # side-input bytes counted in the work
  notes: List[str] = dataclasses.field(default_factory=list)
  inputs_in_work: bool = True
  # Which files the data may name (schemas.data_paths.DataPathPolicy; None: the default).
  data_paths: Any = None

  @property
  def work_bytes(self) -> int:
    return (sum(f.bytes for f in self.inputs) if self.inputs_in_work else 0) + self.extra_bytes


def _allowed(named: "collections.Counter[Tuple[str, str]]", work: Work, what: str
             ) -> "collections.Counter[str]":
  """``{path: references}`` of the ``(root, name)`` references a run would read: those the
  run's :class:`schemas.data_paths.DataPathPolicy` refuses (absolute, outside the root, not a
  regular file, over --max_input_file_bytes) are not sized but counted in a note (their
  documents are dead letters in a run).  Remote files are only normalised here (their sizes
  are sampled)."""
  from schemas import data_paths  # pylint: disable=g-import-not-at-top
  policy = work.data_paths or data_paths.DataPathPolicy()
  refs: "collections.Counter[str]" = collections.Counter()
  refused: "collections.Counter[str]" = collections.Counter()
  for (root, name), n in named.items():
    try:
      path = policy.resolve(root, name, what)
      if not data_paths.is_url(path):
        policy.size(root, name, None, what)
    except data_paths.DataPathError as e:
      refused[e.reason] += n
      continue
    except OSError:  # missing: size_referenced counts it
      pass
    refs[path] += n
  if refused:
    work.notes.append(f"{sum(refused.values()):,} {what} references refused, not read (dead "
                      "letters in a run: " + ", ".join(f"{k} {v:,}" for k, v in
                                                        sorted(refused.items())) + ")")
  return refs


def _json_items(path: str, list_key: Optional[str] = None) -> Iterable[Any]:
  """The records of a JSON list / object-with-list / JSON-lines file, streamed (decompressed
  by extension); unreadable items are skipped (a run makes them dead letters)."""
  from pipelines.sources.byte_stream import ByteSource  # pylint: disable=g-import-not-at-top
  from pipelines.sources.json_events import Item  # pylint: disable=g-import-not-at-top
  from pipelines.sources.json_items import read_json_stream  # pylint: disable=g-import-not-at-top
  with ByteSource(path) as source:
    for event in read_json_stream(source, path, list_key=list_key):
      if isinstance(event, Item):
        yield event.value


def _triviaqa(work: Work, options: Any) -> None:
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  evidence_dir = getattr(options, "evidence_dir", "") or ""
  named: "collections.Counter[Tuple[str, str]]" = collections.Counter()
  questions = 0
  for f in work.inputs:
    if f.kind == "parquet":  # Hub rows hold the evidence texts
      continue
    for datum in _json_items(f.path, "Data"):
      if not isinstance(datum, dict):
        continue
      questions += 1
      for key, origin in (("EntityPages", "wikipedia"), ("SearchResults", "web")):
        pages = datum.get(key)
        for page in pages if isinstance(pages, list) else ():
          name = page.get("Filename") if isinstance(page, dict) else None
          if isinstance(name, str) and name and evidence_dir:
            named[(FileSystems.join(evidence_dir, origin), name)] += 1
  refs = _allowed(named, work, "evidence Filename")
  if refs or evidence_dir:
    side = size_referenced(refs)
    side.update(dir=evidence_dir, questions=questions)
    work.side["evidence"] = side
    work.extra_bytes += side["bytes"]
    if side["missing"]:
      work.notes.append(f"{side['missing']:,} evidence references name missing files (dead "
                        f"letters missing_evidence in a run)")


def _narrativeqa(work: Work, options: Any) -> None:
  from pipelines.beam import read_parquet  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.narrativeqa import reader, stages  # pylint: disable=g-import-not-at-top
  paths = [f.path for f in work.inputs]
  if read_parquet.all_parquet(paths) or len(paths) != 1:
    return  # Hub rows hold each question's story; the run itself refuses several qaps.csv
  where = options.paths(paths[0])
  per_story: "collections.Counter[str]" = collections.Counter()
  for _, row in stages.read_csv(paths[0], reader.QUESTION_COLUMNS):
    if isinstance(row, dict) and row.get("set") == options.split:
      per_story[row["document_id"]] += 1
  if options.context == "summary":
    texts: Dict[str, int] = {}
    for _, row in stages.read_csv(where["summaries"], reader.SUMMARY_COLUMNS):
      if isinstance(row, dict) and row.get("set") == options.split:
        texts[row["document_id"]] = len(row["summary"].encode("utf-8"))
    read = sum(texts.get(k, 0) * n for k, n in per_story.items())
    side = {"files": 1, "path": where["summaries"], "stories": len(per_story),
            "questions": sum(per_story.values()), "bytes": read,
            "missing": sum(n for k, n in per_story.items() if k not in texts),
            "sized": "summaries.csv read"}
    work.side["summaries"] = side
  else:
    refs = _allowed(collections.Counter({(where["stories_dir"], f"{k}.content"): n
                                         for k, n in per_story.items()}),
                    work, "document_id's story")
    side = size_referenced(refs)
    side.update(dir=where["stories_dir"], stories=len(per_story))
    side["questions"] = side.pop("references")
    work.side["stories"] = side
  work.extra_bytes += side["bytes"]
  if side["missing"]:
    work.notes.append(f"{side['missing']:,} questions of --split {options.split} have no "
                      f"{options.context} (dead letters in a run)")


def _jsonl_qa(work: Work, options: Any) -> None:
  del options
  from schemas import jsonl_qa  # pylint: disable=g-import-not-at-top
  named: "collections.Counter[Tuple[str, str]]" = collections.Counter()
  for f in work.inputs:
    for obj in _json_items(f.path):
      name = obj.get("context_file") if isinstance(obj, dict) else None
      if isinstance(name, str) and name.strip():
        named[(jsonl_qa.context_root(f.path), name)] += 1
  refs = _allowed(named, work, "context_file")
  if refs:
    side = size_referenced(refs)
    work.side["context_files"] = side
    work.extra_bytes += side["bytes"]
    if side["missing"]:
      work.notes.append(f"{side['missing']:,} lines name a missing context_file (dead letters "
                        f"missing_context_file in a run)")


def _wikipedia(work: Work, options: Any) -> None:
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  from pipelines.datasets.wikipedia.dump import index_path_for  # pylint: disable=g-import-not-at-top
  index = getattr(options, "index", None)
  found = [index] if index else [p for p in (index_path_for(f.path) for f in work.inputs) if p]
  sizes = [m.size_in_bytes for p in found for m in FileSystems.match([p])[0].metadata_list]
  work.side["multistream_index"] = {"files": len(found), "bytes": int(sum(sizes)),
                                    "in_work": False}


SIDE_INPUTS: Dict[str, Callable[[Work, Any], None]] = {
    "triviaqa": _triviaqa, "narrativeqa": _narrativeqa, "jsonl_qa": _jsonl_qa,
    "wikipedia": _wikipedia}


def measure(job: str, inputs: Sequence[Dict[str, Any]], options: Any = None,
            data_paths: Any = None) -> Work:
  """The :class:`Work` of ``job`` on ``inputs`` (``describe_inputs``' list) with the dataset's
  ``options``; reads the question / JSONL / qaps files of the datasets whose side inputs they
  name, and sizes those a run would read (``data_paths``: the run's
  :class:`schemas.data_paths.DataPathPolicy`, default the default one)."""
  work = Work(size_files(inputs), data_paths=data_paths)
  add = SIDE_INPUTS.get(job)
  if add is not None:
    add(work, options)
  return work


# ------------------------------------------------------------------------------ the estimate


def _annotation_config(options: Any) -> Any:
  """The job's :class:`pipelines.beam.annotate.AnnotationConfig` (None: the job has none)."""
  if options is not None and hasattr(options, "ner") and hasattr(options, "spacy_model"):
    return options
  return getattr(options, "annotation", None)


def _alias_rows(entities_dir: str) -> int:
  """Rows of a Wikipedia job's alias table (the Parquet footers: nothing else is read)."""
  from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  try:
    paths = tables.alias_paths(entities_dir)
  except FileNotFoundError as e:
    raise UserError(f"--entities_dir {entities_dir}: {e} (the output dir of python -m "
                    f"pipelines.wikipedia holds them)") from None
  rows = 0
  for path in paths:
    try:
      with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        rows += pq.ParquetFile(f).metadata.num_rows
    except Exception as e:  # pylint: disable=broad-except
      raise UserError(f"--entities_dir: {path} is not a readable Parquet alias file "
                      f"({type(e).__name__}); rerun python -m pipelines.wikipedia") from None
  return rows


def annotation_estimate(job: str, work: Work, options: Any, local: bool = True
                        ) -> Optional[Dict[str, Any]]:
  """What ``--ner`` adds (None without it): words and texts annotated, the per-process start
  (spaCy, the alias table, the EntityRuler's patterns) and per-word CPU seconds, or with
  ``--ner cloud`` the requests, billable units and their price (before cache hits).  ``local``:
  the run would be on this machine, so a ``--spacy_model`` not installed here is an error (a
  Dataflow worker's container may hold it: a note then)."""
  config = _annotation_config(options)
  ner = getattr(config, "ner", None) or "none"
  if ner == "none":
    return None
  mb = work.work_bytes / MB
  words_per_mb = WORDS_PER_MB.get(job, DEFAULT_WORDS_PER_MB)
  words = mb * words_per_mb
  out: Dict[str, Any] = {
      "ner": ner, "words": round(words), "words_per_mb": words_per_mb,
      "words_from": ("work MB x words per MB measured on the real-format samples"
                     + ("" if job in WORDS_PER_MB else " (median of the datasets)"))}
  uses_table = bool(config.entities_dir) and ner == "spacy" and (
      config.linker == "alias" or (config.spacy_model.startswith("blank:")
                                   and config.ruler_patterns))
  rows = _alias_rows(config.entities_dir) if config.entities_dir and (
      uses_table or config.linker == "alias") else 0
  if ner == "spacy":
    blank = config.spacy_model.startswith("blank:")
    if not blank and not os.path.isdir(config.spacy_model):
      import importlib.util  # pylint: disable=g-import-not-at-top
      try:
        installed = importlib.util.find_spec(config.spacy_model) is not None
      except (ImportError, ValueError):
        installed = False
      missing = (f"--spacy_model {config.spacy_model!r} is not installed: spaCy models are "
                 f"installed as Python packages (e.g. pip install en-core-web-sm); use "
                 f"blank:<lang> for a blank pipeline")
      if not installed and local:  # the run would fail to load it: say so now
        raise UserError(missing)
      if not installed:
        work.notes.append(missing.replace(" is not installed", " is not installed here (the "
                                          "workers' container must hold it)"))
    patterns = min(rows, config.ruler_patterns) if blank else 0
    start = (ANNOTATION["start_cpu_s"] + (0.0 if blank else MODEL_LOAD_CPU_S)
             + rows * ANNOTATION["cpu_s_per_alias_row"]
             + patterns * ANNOTATION["cpu_s_per_pattern"])
    per_word = (ANNOTATION["cpu_s_per_word"] + patterns / 1000
                * ANNOTATION["cpu_s_per_word_per_1k_patterns"])
    if not blank:
      per_word += 1.0 / MODEL_WORDS_PER_CPU_S
    out.update(spacy_model=config.spacy_model, linker=config.linker, alias_rows=rows,
               patterns=patterns, start_cpu_s=start, cpu_s_per_word=per_word,
               cpu_s=start + per_word * words,
               measured=(f"{ANNOTATION['command']}, {ANNOTATION['date']}" if blank else
                         f"{config.spacy_model}: ~{MODEL_WORDS_PER_CPU_S:,.0f} words per CPU s "
                         f"(en-core-web-sm's full pipeline on this machine kind; not measured "
                         f"by the benchmark), {MODEL_LOAD_CPU_S:g} CPU s to load (assumed)"))
    return out
  # --ner cloud: requests of at most --nl_max_request_chars characters, one per text at least.
  cloud = config.cloud
  characters = words * CHARS_PER_WORD
  texts: float
  if job == "books":
    texts, texts_from = len(work.inputs), "one per book file"
  elif job == "narrativeqa" and "stories" in work.side:
    # Every question holds its whole story, but a story is sent once (the cache answers the
    # other questions): the characters of each story once.
    side = work.side["stories"]
    texts, texts_from = side["stories"], "one per story, each sent once"
    characters *= side["files"] / side["questions"] if side["questions"] else 0.0
  elif job == "triviaqa" and "evidence" in work.side:
    texts, texts_from = work.side["evidence"]["questions"], "one per question"
  else:
    texts = mb * TEXTS_PER_MB.get(job, 143.0)
    texts_from = "per MB of work, as measured on the HotpotQA sample"
  requests = max(texts, characters / cloud.max_request_chars) if characters else 0.0
  units = characters / 1000 + requests / 2  # each request's last unit half used, on average
  price = config.price_per_1000_units
  out.update(characters=round(characters), texts=round(texts), texts_from=texts_from,
             requests=math.ceil(requests), units=math.ceil(units),
             price_per_1000_units=price, usd=units / 1000 * price,
             requests_per_minute=cloud.requests_per_minute,
             rate_limited_s=requests * 60 / cloud.requests_per_minute,
             start_cpu_s=rows * ANNOTATION["cpu_s_per_alias_row"], cpu_s_per_word=0.0,
             cpu_s=rows * ANNOTATION["cpu_s_per_alias_row"], alias_rows=rows,
             price_source=CLOUD_NL_PRICE_SOURCE,
             note=("before cache hits (--nl_cache_dir): --dry_run reads every text and plans "
                   "the exact requests, units and cost"))
  return out


def _cost_for(job: str) -> Tuple[Cost, Optional[str]]:
  """The measured cost of ``job``; a dataset without one gets the dearest per MB, said so."""
  if job in COSTS:
    return COSTS[job], None
  if not COSTS:
    raise UserError("--estimate: no measured costs in pipelines/estimate.py (run python -m "
                    "benchmarks.job_cost)")
  name, cost = max(COSTS.items(), key=lambda kv: kv[1].cpu_s_per_mb)
  return cost, f"no measured cost for {job}: {name}'s (the dearest per MB) is used"


def estimate(job: str, work: Work, workers: Workers, options: Any = None,
             prices: Optional[Dict[str, Optional[float]]] = None,
             share: Optional[float] = None) -> Dict[str, Any]:
  """The estimate's JSON: inputs, work, CPU, annotation (``--ner``), Dataflow (workers, hours,
  USD by vCPU, memory and disk with the prices used; Cloud NL units and USD), local hours by
  stage and the assumptions.  ``share``: the CPU s per wall s a run would get here (default
  :func:`process_share`, this process' own)."""
  cost, substitute = _cost_for(job)
  prices = dict(prices or {})
  mb = work.work_bytes / MB
  decompress_s = sum(DECOMPRESS_CPU_S_PER_MB.get(f.kind, 0.0) * f.bytes / MB
                     for f in work.inputs if f.kind != MEASURED_ON_KIND.get(job))
  annotation = annotation_estimate(job, work, options,
                                   local="dataflow" not in (workers.runner or "").lower())
  ann_start_s = annotation["start_cpu_s"] if annotation else 0.0
  ann_words_s = annotation["cpu_s_per_word"] * annotation["words"] if annotation else 0.0
  variable_s = cost.cpu_s_per_mb * mb + decompress_s + ann_words_s
  cpu_s = cost.fixed_cpu_s + ann_start_s + variable_s
  assumptions = [
      f"CPU = {cost.fixed_cpu_s:.1f} s + {cost.cpu_s_per_mb:.3f} s per MB of work, measured "
      f"{cost.date} on the 2-core dev machine with {cost.command} (slope min/median/max "
      + "/".join(f"{s:.3f}" for s in cost.slope_spread) + "; see cost_model)",
      "compressed inputs count as their uncompressed size (ratio from each file's first "
      f"{SAMPLE_BYTES >> 20} MiB, a few files per kind), plus their measured decompression "
      "CPU (inside the slope for Wikipedia's bz2 dumps); Parquet as its uncompressed row "
      "groups, at the dataset's JSON slope",
      "a Dataflow vCPU does the work of one core of the measuring machine; the per-MB CPU is "
      f"multiplied by {DATAFLOW_OVERHEAD} on Dataflow (not measured: worker harness, Cloud "
      "Storage I/O, shuffle encoding, uneven work; the local multi-process runner measured "
      f"x{MULTIPROCESS_CPU_FACTOR} of in-memory) and spread evenly over the workers; each job "
      f"waits {DATAFLOW_STARTUP_MIN} min for its workers, billed",
      "an uncompressed JSON file is read in byte ranges by all workers (--json_split_mb), "
      "after one planning pass over it on one worker; a compressed file, a book or a CSV is "
      "read by one worker: with few large such files the wall time is longer than the even "
      "spread says",
      f"Dataflow Shuffle (${SHUFFLE_PRICE_PER_GB}/GB processed), Cloud Storage and network "
      "charges are not included",
  ]
  if substitute:
    assumptions.insert(0, substitute)
  if annotation and annotation["ner"] == "spacy":
    assumptions.append(
        f"--ner spacy: {annotation['words']:,} words at {annotation['words_per_mb']:,} per MB "
        f"of work; per process {annotation['start_cpu_s']:.1f} CPU s to start (spaCy, "
        f"{annotation['alias_rows']:,} alias rows, {annotation['patterns']:,} EntityRuler "
        f"patterns: paid by every Dataflow worker) and "
        f"{annotation['cpu_s_per_word'] * 1e6:.2f} CPU us per word ({annotation['measured']})")
  elif annotation:
    assumptions.append(
        f"--ner cloud: {annotation['characters']:,} characters ({CHARS_PER_WORD} per word) in "
        f"~{annotation['requests']:,} requests ({annotation['texts_from']}; at most "
        f"--nl_max_request_chars each), {annotation['units']:,} units priced at "
        f"${_price(annotation['price_per_1000_units'])} per 1,000 ({CLOUD_NL_PRICE_SOURCE}); "
        f"{annotation['note']}")

  # Dataflow.
  work_vcpu_h = variable_s / 3600 * DATAFLOW_OVERHEAD
  cap = workers.max_num_workers or DEFAULT_MAX_WORKERS
  if workers.num_workers:
    count, count_from = workers.num_workers, "--num_workers"
  else:
    count = max(1, min(cap, math.ceil(work_vcpu_h / workers.vcpus / HOURS_PER_WORKER)))
    count_from = (f"autoscaling: ~{HOURS_PER_WORKER:g} h of work per worker, at most "
                  f"{cap} (--max_num_workers{'' if workers.max_num_workers else ', Dataflow default'})")
  startup_h = DATAFLOW_STARTUP_MIN / 60
  # Every worker process (one per vCPU) loads spaCy and the alias table; Cloud NL requests are
  # rate-limited per worker process (--nl_requests_per_minute).
  ann_start_h = ann_start_s / 3600
  cloud_h = (annotation["rate_limited_s"] / 3600 / (count * workers.vcpus)
             if annotation and annotation["ner"] == "cloud" else 0.0)
  wall_h = startup_h + ann_start_h + max(work_vcpu_h / (count * workers.vcpus), cloud_h)
  worker_h = count * wall_h
  disk_price = prices.get("disk_gb_hour")
  if disk_price is None:
    disk_price = PRICES["disk_gb_hour"].get(workers.disk_type)
    if disk_price is None:
      disk_price = PRICES["disk_gb_hour"][DEFAULT_DISK_TYPE]
      assumptions.append(f"disk type {workers.disk_type}: priced as pd-standard (set "
                         f"--price_disk_gb_hour)")
  used = {"vcpu_hour": prices.get("vcpu_hour") if prices.get("vcpu_hour") is not None
          else PRICES["vcpu_hour"],
          "memory_gb_hour": prices.get("memory_gb_hour") if prices.get("memory_gb_hour")
          is not None else PRICES["memory_gb_hour"],
          "disk_gb_hour": disk_price}
  usd = {"vcpu": worker_h * workers.vcpus * used["vcpu_hour"],
         "memory": worker_h * workers.memory_gb * used["memory_gb_hour"],
         "disk": worker_h * workers.disk_gb * used["disk_gb_hour"]}
  usd["total"] = usd["vcpu"] + usd["memory"] + usd["disk"]
  if annotation and annotation["ner"] == "cloud":
    usd["cloud_nl"] = annotation["usd"]
    usd["total_with_cloud_nl"] = usd["total"] + annotation["usd"]
  default_prices = (used["vcpu_hour"] == PRICES["vcpu_hour"]
                    and used["memory_gb_hour"] == PRICES["memory_gb_hour"]
                    and used["disk_gb_hour"] == PRICES["disk_gb_hour"].get(workers.disk_type))

  # Local (this machine).
  cores = os.cpu_count() or 1
  measured_share = process_share() if share is None else share
  share_now = min(max(measured_share if measured_share is not None else 1.0, SHARE_BOUNDS[0]),
                  SHARE_BOUNDS[1])
  parallel = min(cores, share_now * JOB_PARALLELISM)
  stages_s = {
      "start-up (interpreter, imports, graph, manifest, stats report)":
          cost.fixed_cpu_s / share_now,
      "read, parse, tokenize, segment, write": cost.cpu_s_per_mb * mb / parallel,
  }
  if decompress_s:
    stages_s["decompression"] = decompress_s / share_now
  if annotation:
    stages_s["annotation start (spaCy, alias table, ruler)"] = ann_start_s / share_now
    if ann_words_s:
      stages_s["annotation per word"] = ann_words_s / share_now
    if annotation["ner"] == "cloud":
      stages_s["Cloud NL requests (rate limit, one worker process)"] = annotation[
          "rate_limited_s"]
  local_h = sum(stages_s.values()) / 3600
  mode = (f"in-memory FnApiRunner; this process got {share_now:.2f} CPU s per wall s "
          + ("while starting (the share a run gets now)" if measured_share is not None and
             share is None else "(given)" if share is not None else "(not measurable: 1 taken)")
          + f", the per-MB work x{JOB_PARALLELISM} of that (tokenizer threads)")
  if workers.direct_running_mode == "multi_processing":
    # Measured by the benchmark on HotpotQA: 2 worker processes on 2 cores were not faster
    # than the in-memory runner (the same wall time within the noise).
    mode = (f"multi_processing x{workers.direct_num_workers}: timed as the in-memory runner "
            f"(measured no faster on 2 cores), at {share_now:.2f} CPU s per wall s a core")
  elif mb > 100:
    assumptions.append("the local in-memory runner holds grouped collections in memory: a "
                       "524 MB HotpotQA file peaked at 12.1 GB RSS on this project; mind the "
                       "machine's memory")
  local = {"cores": cores, "mode": mode, "cpu_hours": cpu_s / 3600, "hours": local_h,
           "share": share_now, "parallelism": parallel,
           "stages_s": {k: round(v, 2) for k, v in stages_s.items()}}

  kinds: Dict[str, Dict[str, int]] = {}
  for f in work.inputs:
    k = kinds.setdefault(f.kind, {"files": 0, "bytes": 0, "uncompressed_bytes": 0})
    k["files"] += 1
    k["bytes"] += f.stored
    k["uncompressed_bytes"] += f.bytes
  result: Dict[str, Any] = {
      "estimate": True, "job": job,
      "inputs": {"files": len(work.inputs), "bytes": sum(f.stored for f in work.inputs),
                 "uncompressed_bytes": sum(f.bytes for f in work.inputs), "by_kind": kinds,
                 "paths": [{"path": f.path, "kind": f.kind, "bytes": f.stored,
                            "uncompressed_bytes": f.bytes, "sized": f.how}
                           for f in work.inputs[:20]]},
      "side_inputs": work.side,
      "work": {"bytes": work.work_bytes, "mb": mb, "measure": WORK.get(job, "input bytes")},
      "cost_model": dataclasses.asdict(cost),
      "cpu_hours": cpu_s / 3600, "decompression_cpu_hours": decompress_s / 3600,
      "annotation": annotation,
      "dataflow": {
          "machine_type": workers.machine_type, "vcpus_per_worker": workers.vcpus,
          "memory_gb_per_worker": workers.memory_gb, "disk_gb_per_worker": workers.disk_gb,
          "disk_type": workers.disk_type, "workers": count, "workers_from": count_from,
          "overhead_factor": DATAFLOW_OVERHEAD, "startup_minutes": DATAFLOW_STARTUP_MIN,
          "vcpu_hours_of_work": work_vcpu_h, "wall_hours": wall_h, "worker_hours": worker_h,
          "vcpu_hours": worker_h * workers.vcpus,
          "memory_gb_hours": worker_h * workers.memory_gb,
          "disk_gb_hours": worker_h * workers.disk_gb,
          "cost_usd": usd, "prices_usd": used,
          "prices_source": PRICE_SOURCE if default_prices else "--price_* flags (others: "
                           + PRICE_SOURCE + ")"},
      "local": local,
      "assumptions": assumptions + work.notes,
  }
  if annotation and annotation["ner"] == "cloud":
    result["cloud_nl"] = {k: annotation[k] for k in (
        "requests", "units", "characters", "price_per_1000_units", "usd", "note")}
  return result


def _mb(n: float) -> str:
  return f"{n / MB:,.1f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB"


def _h(hours: float) -> str:
  return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:,.2f} h"


def _s(seconds: float) -> str:
  return f"{seconds:.1f} s" if seconds < 90 else _h(seconds / 3600)


def _usd(x: float) -> str:
  return f"{x:,.2f}" if x >= 1 else f"{x:.3f}"


def _price(x: float) -> str:
  return format(x, ".6f").rstrip("0").rstrip(".")


def render(e: Dict[str, Any]) -> str:
  """The human-readable table of an :func:`estimate`."""
  i, d, loc, usd = e["inputs"], e["dataflow"], e["local"], e["dataflow"]["cost_usd"]
  kinds = ", ".join(f"{k} {v['files']} file(s) {_mb(v['bytes'])}"
                    + (f" ({_mb(v['uncompressed_bytes'])} uncompressed)" if k != "plain" else "")
                    for k, v in sorted(i["by_kind"].items()))
  lines = [f"estimate for {e['job']} (nothing was run or written)",
           f"  input        {i['files']} file(s), {_mb(i['bytes'])}: {kinds}"]
  for role, s in e["side_inputs"].items():
    if not s["files"]:
      continue
    refs = f", {s['references']:,} references" if "references" in s else ""
    refs += f", {s['questions']:,} questions" if "questions" in s else ""
    missing = f", {s['missing']:,} missing" if s.get("missing") else ""
    read = " (not in the work)" if s.get("in_work") is False else " read"
    lines.append(f"  {role:<12} {s['files']:,} file(s){refs}, {_mb(s['bytes'])}{read}"
                 f"{missing}" + (f" (sized: {s['sized']})" if "sized" in s else ""))
  lines += [
      f"  work         {_mb(e['work']['bytes'])} ({e['work']['measure']})",
      f"  CPU          {e['cpu_hours']:.3f} h on this machine's cores",
      f"  local        {_s(loc['hours'] * 3600)} wall on {loc['cores']} cores, {loc['mode']}",
      "  local stages " + "; ".join(f"{k} {_s(v)}" for k, v in loc["stages_s"].items()),
      f"  Dataflow     {d['workers']} x {d['machine_type']} ({d['vcpus_per_worker']} vCPU, "
      f"{d['memory_gb_per_worker']:g} GB, {d['disk_gb_per_worker']} GB {d['disk_type']}); "
      f"{d['vcpu_hours_of_work']:.3f} vCPU-h of work; wall {_h(d['wall_hours'])} incl. "
      f"{d['startup_minutes']:g} min start-up; {d['worker_hours']:.2f} worker-h",
      f"  Dataflow USD {_usd(usd['total'])} = vCPU {_usd(usd['vcpu'])} + memory "
      f"{_usd(usd['memory'])} + disk {_usd(usd['disk'])} (at ${_price(d['prices_usd']['vcpu_hour'])}"
      f"/vCPU-h, ${_price(d['prices_usd']['memory_gb_hour'])}/GB-h, "
      f"${_price(d['prices_usd']['disk_gb_hour'])}/disk GB-h)"]
  a = e.get("annotation")
  if a and a["ner"] == "spacy":
    lines.append(f"  annotation   --ner spacy ({a['spacy_model']}, linker {a['linker']}): "
                 f"{a['words']:,} words, {a['alias_rows']:,} alias rows, {a['patterns']:,} "
                 f"ruler patterns: {a['cpu_s']:.1f} CPU s ({a['start_cpu_s']:.1f} s of it to "
                 f"start, per worker process)")
  if "cloud_nl" in e:
    c = e["cloud_nl"]
    lines.append(f"  Cloud NL     ~{c['requests']:,} requests, {c['units']:,} units "
                 f"({c['characters']:,} characters), USD {_usd(c['usd'])} at "
                 f"${_price(c['price_per_1000_units'])} per 1,000 units; {c['note']}")
  lines.append("  assumptions:")
  lines += [f"    - {a}" for a in e["assumptions"]]
  return "\n".join(lines)
