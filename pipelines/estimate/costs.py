"""The measured figures of ``--estimate`` that are not one dataset's, and what a dataset's spec
carries (:class:`DatasetCost`; each dataset's own numbers are in its folder's ``cost.py``)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Dict, Optional, Tuple

MB = 1e6

# ------------------------------------------------------------------------------ measured costs


@dataclasses.dataclass(frozen=True)
class Cost:
  """The measured CPU cost of one dataset's job (``python -m benchmarks.job_cost``)."""
  fixed_cpu_s: float  # CPU s of a run on a tiny input: interpreter, imports, graph, tokenizer
  cpu_s_per_mb: float  # median slope: CPU s per MB of work (DatasetCost.work)
  slope_spread: Tuple[float, float, float]  # min, median, max slope over the repetitions
  cpu_per_wall: float  # CPU s per wall s of the local in-memory runner on the larger input
                       # (the largest over the repetitions: the least slowed by other load)
  measured_on: str  # the inputs: kind and MB of work, tiny and larger
  date: str
  machine: str
  command: str



MACHINE = ("2-core AMD EPYC VM, 24 GiB, Python 3.11, Beam 2.77 (the project's dev machine, "
           "idle during the measurement)")
# (The figures of 2026-11-27, measured under a load average of 3-5 from other work, were
# 1.4-2.6x these per MB: a process's CPU time grows when others share the cores with it.)
COMMAND = "python -m benchmarks.job_cost --reps 3"

# The measured per-dataset figures (``python -m benchmarks.job_cost`` prints them) are
# in each dataset's ``pipelines/datasets/<name>/cost.py``.


@dataclasses.dataclass(frozen=True)
class DatasetCost:
  """What ``--estimate`` needs of one dataset: its spec's ``cost``.

  ``side_inputs(work, options)`` adds to :class:`pipelines.estimate.sizing.Work` the files the
  input names that a run would read (evidence, stories, context files); ``cloud_texts(work)``
  gives ``(texts, how they were counted, factor on the characters)`` sent to Cloud NL, or None
  for the default (``texts_per_mb`` texts per MB of work)."""
  measured: Cost
  work: str  # what the dataset's MB of work is (the x of the slope)
  side_inputs: Optional[Callable[[Any, Any], None]] = None
  words_per_mb: Optional[int] = None  # annotated words per MB of work (None: the median)
  texts_per_mb: float = 143.0  # texts per MB of work where they cannot be counted
  cloud_texts: Optional[Callable[[Any], Optional[Tuple[float, str, float]]]] = None
  measured_on_kind: Optional[str] = None  # compressed kind whose decompression the slope holds


def dataset_cost(job: str) -> Optional[DatasetCost]:
  """The registered dataset ``job``'s :class:`DatasetCost` (None: not registered, or no cost)."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  try:
    return datasets.get(job).cost
  except KeyError:
    return None


def measured_costs() -> Dict[str, Cost]:
  """Every registered dataset's measured :class:`Cost`, in registration order."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  return {name: spec.cost.measured for name, spec in datasets.specs().items()
          if spec.cost is not None}


# CPU s per uncompressed MB to decompress an input of each kind (python -m benchmarks.job_cost,
# 2026-11-30, same machine; zstd and deflate taken as gzip), added for compressed inputs: the
# slopes were measured on plain files, except Wikipedia's on bz2 dumps (included there).
DECOMPRESS_CPU_S_PER_MB = {"gz": 0.0036, "deflate": 0.0036, "zst": 0.0036, "bz2": 0.0267,
                           "xz": 0.0096}

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

# ``python -m benchmarks.annotation_cost --reps 3``, run twice (2026-11-30, the same 2-core
# machine, idle but for the benchmark: load average 1.2-2.6): CPU seconds, medians of the 6
# repetitions.  ``start_cpu_s``: importing spaCy and building a blank pipeline in a books job
# (with minus without --ner spacy on a tiny input: -0.09 to 0.55, a difference of two runs of
# ~3 CPU s each); ``cpu_s_per_word``: the annotate stage per word of a blank:en pipeline without
# patterns (books job, 5 MB of generated books, with minus without: 0.1-2.3 us); per alias row
# of the --entities_dir table (read, AliasLinker, ranking the ruler's patterns: 1.43-1.50e-5);
# per EntityRuler pattern (building the ruler: 2.97-3.04e-5); per word per 1,000 patterns
# (matching: 5.6-5.8e-8).  (2026-11-29, under a load average of 7-11: start 1.36 s, per word
# 1.76 us, per alias row 1.78e-5, per pattern 3.59e-5, per 1k patterns 6.4e-8.)
ANNOTATION = {"start_cpu_s": 0.26, "cpu_s_per_word": 1.4e-6, "cpu_s_per_alias_row": 1.47e-5,
              "cpu_s_per_pattern": 3.0e-5, "cpu_s_per_word_per_1k_patterns": 5.7e-8,
              "date": "2026-11-30", "command": "python -m benchmarks.annotation_cost --reps 3"}
# An installed spaCy model (--spacy_model other than blank:<lang>): not installed here, so not
# measured by the benchmark; en-core-web-sm's full pipeline ran ~3.5k words/s on this machine
# kind (the project's FACTS, measured in a fresh virtualenv); its loading is taken as 2 CPU s.
MODEL_WORDS_PER_CPU_S = 3500.0
MODEL_LOAD_CPU_S = 2.0
# Words the annotate stage counts per MB of work (manifest stages.annotate.words over the
# estimate's work MB), measured on the real-format samples of ../shared/samples with
# --ner spacy (2026-11-29): each dataset's ``words_per_mb`` (HotpotQA dev head 20 149k,
# NarrativeQA's Time Machine 173k, the jsonl_qa sample 183k, the PG-19 books 178k); TriviaQA
# (evidence per reference) and others at this median.  Characters per word (Cloud NL bills
# characters): 5.5 (the PG-19 sample: 73,331 characters, 13,257 words).
DEFAULT_WORDS_PER_MB = 176_000
CHARS_PER_WORD = 5.5
# Cloud Natural Language, analyzeEntities: one unit per started 1,000 characters of each
# request; Entity Analysis list price per 1,000 units per month: first 5,000 units free, $1.00
# to 1M, $0.50 to 5M, $0.25 above (https://cloud.google.com/natural-language/pricing, looked
# up 2026-11-29).  The estimate prices every unit at --price_per_1000_units (default $1.00).
CLOUD_NL_PRICE_SOURCE = ("Cloud Natural Language pricing, Entity Analysis: per 1,000 units of "
                         "1,000 characters, first 5,000 units a month free, $1.00 to 1M, $0.50 "
                         "to 5M, $0.25 above (https://cloud.google.com/natural-language/pricing, "
                         "looked up 2026-11-29)")

