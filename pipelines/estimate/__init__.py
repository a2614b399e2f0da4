"""``--estimate``: what a job's run would cost, before it runs, on every job
(``python -m pipelines <dataset> ... --estimate``).

The job resolves its inputs exactly as a run does (the same globs, checks and one-line errors:
:func:`pipelines.runner.estimate_job` builds the job's Beam graph without running it), sizes
them, and prints a short table and, as the last stdout line, one JSON object.  Nothing is
written: no output dir, no claim file, no temporary file; an output dir holding an earlier run
is fine.

How the figure is made.

* **Work.**  Each dataset's cost grows with one measure of its input, in MB (its spec's ``cost.work``: :class:`pipelines.estimate.costs.DatasetCost`):
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
  included) on a tiny and on a larger generated input (each dataset's ``cost.py``, with the
  date, the machine and the command of the measurement).
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
  (the spec's ``cost.words_per_mb``, measured on the real-format samples).  Cloud NL: the requests, the
  billable units (one per started 1,000 characters of a request) and their price at
  ``--price_per_1000_units`` (:data:`CLOUD_NL_PRICE_SOURCE`), before cache hits; the rate
  limit's wait; ``--dry_run`` plans them exactly from every text.

The package, one job per module: :mod:`~pipelines.estimate.costs` (the measured figures that
are not one dataset's, and :class:`~pipelines.estimate.costs.DatasetCost`, what a dataset's
spec carries: its measured cost, what its MB of work is, its side inputs, its words per MB),
:mod:`~pipelines.estimate.dataflow` (machine types, workers, prices),
:mod:`~pipelines.estimate.sizing` (input files and the files they name, in MB of work),
:mod:`~pipelines.estimate.annotation` (``--ner``), :mod:`~pipelines.estimate.model` (the
figure) and :mod:`~pipelines.estimate.render` (the table); :mod:`~pipelines.estimate.arguments`
adds ``--estimate`` and its prices to a job's parser.  A dataset's numbers live in its own
folder (``pipelines/datasets/<name>/cost.py``).
"""

from pipelines.estimate.annotation import annotation_estimate
from pipelines.estimate.costs import (ANNOTATION, CHARS_PER_WORD, DECOMPRESS_CPU_S_PER_MB,
                                      JOB_PARALLELISM, MB, MODEL_LOAD_CPU_S,
                                      MODEL_WORDS_PER_CPU_S, SHARE_BOUNDS, Cost, DatasetCost,
                                      dataset_cost, measured_costs, process_share)
from pipelines.estimate.dataflow import (DATAFLOW_OVERHEAD, DATAFLOW_STARTUP_MIN,
                                         DEFAULT_DISK_GB, DEFAULT_DISK_TYPE,
                                         DEFAULT_MACHINE_TYPE, PRICES, Workers, machine_shape,
                                         workers_from_args)
from pipelines.estimate.model import estimate
from pipelines.estimate.render import render
from pipelines.estimate.sizing import FileSize, Work, measure, sample_ratio, size_files

__all__ = ["ANNOTATION", "CHARS_PER_WORD", "DATAFLOW_OVERHEAD", "DATAFLOW_STARTUP_MIN",
           "DECOMPRESS_CPU_S_PER_MB", "DEFAULT_DISK_GB", "DEFAULT_DISK_TYPE",
           "DEFAULT_MACHINE_TYPE", "JOB_PARALLELISM", "MB", "MODEL_LOAD_CPU_S",
           "MODEL_WORDS_PER_CPU_S", "PRICES", "SHARE_BOUNDS", "Cost",
           "DatasetCost", "FileSize", "Work", "Workers", "annotation_estimate", "dataset_cost",
           "estimate", "machine_shape", "measure", "measured_costs", "process_share", "render",
           "sample_ratio", "size_files", "workers_from_args"]
