"""``--estimate``'s figure: CPU, Dataflow workers, hours and USD, local hours by stage, and the
assumptions behind them (:func:`estimate`)."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Dict, Optional, Tuple

from pipelines.errors import UserError
from pipelines.estimate.annotation import annotation_estimate
from pipelines.estimate.costs import (CHARS_PER_WORD, CLOUD_NL_PRICE_SOURCE,
                                      DECOMPRESS_CPU_S_PER_MB, JOB_PARALLELISM, MB,
                                      SHARE_BOUNDS, DatasetCost, dataset_cost, measured_costs,
                                      process_share)
from pipelines.estimate.dataflow import (DATAFLOW_OVERHEAD, DATAFLOW_STARTUP_MIN,
                                         DEFAULT_DISK_TYPE, DEFAULT_MAX_WORKERS,
                                         HOURS_PER_WORKER, MULTIPROCESS_CPU_FACTOR, PRICE_SOURCE,
                                         PRICES, SHUFFLE_PRICE_PER_GB, Workers)
from pipelines.estimate.render import price_text
from pipelines.estimate.sizing import SAMPLE_BYTES, Work

def _cost_for(job: str) -> Tuple[DatasetCost, Optional[str]]:
  """``(its DatasetCost, substitute note)`` of ``job``; a dataset without one gets the dearest
  measured cost per MB of plain input bytes, said so in the note."""
  cost = dataset_cost(job)
  if cost is not None:
    return cost, None
  known = measured_costs()
  if not known:
    raise UserError("--estimate: no measured costs (a dataset's cost.py holds them: run "
                    "python -m benchmarks.job_cost)")
  name, measured = max(known.items(), key=lambda kv: kv[1].cpu_s_per_mb)
  return (DatasetCost(measured=measured, work="input bytes"),
          f"no measured cost for {job}: {name}'s (the dearest per MB) is used")


def estimate(job: str, work: Work, workers: Workers, options: Any = None,
             prices: Optional[Dict[str, Optional[float]]] = None,
             share: Optional[float] = None) -> Dict[str, Any]:
  """The estimate's JSON: inputs, work, CPU, annotation (``--ner``), Dataflow (workers, hours,
  USD by vCPU, memory and disk with the prices used; Cloud NL units and USD), local hours by
  stage and the assumptions.  ``share``: the CPU s per wall s a run would get here (default
  :func:`process_share`, this process' own)."""
  dataset, substitute = _cost_for(job)
  cost = dataset.measured
  prices = dict(prices or {})
  mb = work.work_bytes / MB
  decompress_s = sum(DECOMPRESS_CPU_S_PER_MB.get(f.kind, 0.0) * f.bytes / MB
                     for f in work.inputs if f.kind != dataset.measured_on_kind)
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
        f"${price_text(annotation['price_per_1000_units'])} per 1,000 ({CLOUD_NL_PRICE_SOURCE}); "
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
      "work": {"bytes": work.work_bytes, "mb": mb, "measure": dataset.work},
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
