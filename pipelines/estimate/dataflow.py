"""``--estimate``'s Dataflow model: machine types, the workers a run would use, prices."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

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
# HotpotQA (2026-11-30, idle machine; 2026-11-27 under other load: 0.96, min 0.88, max 1.03).
MULTIPROCESS_CPU_FACTOR = 1.09  # median of 3 (min 1.09, max 1.26)
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

