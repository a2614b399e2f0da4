"""``--estimate``'s flags: ``--estimate`` itself and the ``--price_*`` flags, added to every
job's parser by :mod:`pipelines.runner`."""

from __future__ import annotations

import argparse
from typing import Sequence

from pipelines.estimate import dataflow
from schemas.cli import bool_flag


def add_flags(parser) -> None:
  """``--estimate`` and its prices, a group of ``parser``."""
  group = parser.add_argument_group("cost estimate")
  bool_flag(group, "estimate", False,
            "run nothing: resolve the inputs as a run would, then print what the run would "
            "cost (input files and sizes, CPU hours, Dataflow workers, wall time and USD for "
            "vCPU, memory and disk, time on this machine by stage at its current load; with "
            "--ner, spaCy's CPU or Cloud NL's requests, units and USD) and one JSON line; "
            "writes nothing, "
            "and an output dir holding an earlier run is fine. The Dataflow workers are Beam's "
            "--machine_type, --num_workers, --max_num_workers, --disk_size_gb, "
            f"--worker_disk_type, else Dataflow's batch defaults "
            f"({dataflow.DEFAULT_MACHINE_TYPE}, {dataflow.DEFAULT_DISK_GB} GB "
            f"{dataflow.DEFAULT_DISK_TYPE}, autoscaling)")
  group.add_argument("--price_vcpu_hour", type=float, default=dataflow.PRICES["vcpu_hour"],
                     help="--estimate: USD per Dataflow batch vCPU hour (default: %(default)s, "
                          "the us-central1 list price)")
  group.add_argument("--price_memory_gb_hour", type=float,
                     default=dataflow.PRICES["memory_gb_hour"],
                     help="--estimate: USD per Dataflow batch GB-hour of worker memory "
                          "(default: %(default)s, the us-central1 list price)")
  disk = dataflow.PRICES["disk_gb_hour"]
  group.add_argument("--price_disk_gb_hour", type=float, default=None,
                     help="--estimate: USD per GB-hour of worker persistent disk (default: the "
                          "us-central1 list price of --worker_disk_type, "
                          + ", ".join(f"{v:.6f} for {k}" for k, v in disk.items()) + ")")


def prices_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                    beam_args: Sequence[str]) -> dict:
  """The ``--price_*`` flags of ``--estimate``, checked with the Beam worker options it reads;
  a bad value or combination is a usage error."""
  if getattr(args, "dry_run", False):
    parser.error("--estimate runs nothing and --dry_run runs the annotation planner: give one "
                 "(--dry_run gives the exact Cloud NL units and cost)")
  prices = {"vcpu_hour": args.price_vcpu_hour, "memory_gb_hour": args.price_memory_gb_hour,
            "disk_gb_hour": args.price_disk_gb_hour}
  for name, value in prices.items():
    if value is not None and not value >= 0:
      parser.error(f"--price_{name} must be >= 0, got {value}")
  try:
    dataflow.workers_from_args(list(beam_args))
  except ValueError as e:
    parser.error(str(e))
  return prices
