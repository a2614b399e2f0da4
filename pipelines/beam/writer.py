"""Deterministic sharded writes (in the manner of TFDS ``writer.py``).

Every element carries a string key.  The shard is a hash of the key (not of arrival order or
worker), elements are sorted by key inside a shard, each shard is written to a temporary file and
renamed into place, and every shard file exists even when empty.  The same input therefore gives
byte-identical files whatever the runner, worker count or bundle sizes, and a retried bundle
overwrites its shard instead of duplicating it.

Memory: one shard's elements are sorted in memory on one worker; raise ``num_shards`` so a shard
stays well below a worker's memory (e.g. ~1 GB of serialized segments per shard).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

# The shard names and atomic writes every writer uses (kept importable from here).
from pipelines.atomic_files import (  # noqa: F401
    COMPRESSIONS, GZIP_LEVEL, LOGGER, TMP_DIR, TMP_PREFIX, compressed_suffix, frame_line,
    frame_tfrecord, shard_name, shard_of, tmp_dir_of, write_atomically)
from schemas import safe_json

# encode_shard(shard_index, [(key, value), ...] sorted by key) -> (payloads, extra stats)
ShardEncoder = Callable[[int, List[Tuple[str, Any]]], Tuple[Iterable[bytes], Dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class ShardFile:
  """One kind of file written per shard: ``<output_dir>/<prefix>-SSSSS-of-NNNNN<suffix>``
  (``.gz`` appended with gzip compression), its payloads made by ``encode_shard`` from the
  shard's sorted items and framed by ``frame``."""
  output_dir: str
  prefix: str
  suffix: str
  encode_shard: ShardEncoder
  frame: Callable[[bytes], bytes]
  compression: str = "none"
  # Whether ``encode_shard`` takes the writer's side inputs (see WriteShards) after the items.
  takes_side_inputs: bool = False
  # Where the file is written before its rename (None: beside it, see write_atomically).
  tmp_dir: Optional[str] = None


class _WriteShardFn(beam.DoFn):
  """One shard's items -> one file per :class:`ShardFile` (all from the same grouping)."""

  def __init__(self, files: Sequence[ShardFile], namespace: str):
    self._files = tuple(files)
    self._namespace = namespace

  def setup(self):
    self._records = {f.prefix: Metrics.counter(self._namespace, f"{f.prefix}_records_written")
                     for f in self._files}
    self._bytes = {f.prefix: Metrics.counter(self._namespace, f"{f.prefix}_bytes_written")
                   for f in self._files}

  def process(self, element: Tuple[int, Iterable[Optional[Tuple[str, Any]]]], num_shards: int,
              *side_values):
    shard, items = element
    items = sorted((kv for kv in items if kv is not None), key=lambda kv: kv[0])
    for (a, _), (b, _) in zip(items, items[1:]):
      if a == b:  # deduplication (or its refusal) runs before the write: this is a bug
        raise ValueError(f"Duplicate key {a!r} in shard {shard}: keys must be unique.")
    for f in self._files:
      yield self._write(f, shard, num_shards, items, side_values if f.takes_side_inputs else ())

  def _write(self, f: ShardFile, shard: int, num_shards: int, items,
             side_values: Sequence[Any] = ()) -> Dict[str, Any]:
    payloads, stats = f.encode_shard(shard, items, *side_values)
    name = shard_name(f.prefix, shard, num_shards, f.suffix + compressed_suffix(f.compression))
    count = 0

    def framed():
      nonlocal count
      for p in payloads:
        count += 1
        yield f.frame(p)

    path = FileSystems.join(f.output_dir, name)
    size = write_atomically(path, framed(), f.compression, f.tmp_dir)
    self._records[f.prefix].inc(count)
    self._bytes[f.prefix].inc(size)
    if "rows" in stats:  # one payload holding a table (e.g. a Parquet file)
      LOGGER.info("wrote %s: %d rows, %.1f MB", path, stats["rows"], size / 1e6)
    else:
      LOGGER.info("wrote %s: %d %s, %.1f MB", path, count,
                  "records" if f.suffix.startswith(".tfrecord") else "lines", size / 1e6)
    return dict(stats, path=name, records=count, bytes=size, kind=f.prefix)


class WriteShards(beam.PTransform):
  """Writes ``(key, value)`` pairs to ``num_shards`` deterministic files; emits shard stats.

  ``num_shards`` is an int or a singleton PCollection holding one (computed from the data,
  e.g. from the total segment count, which is still deterministic for a given input).

  ``encode_shard`` turns one shard's sorted pairs into payloads (it may combine several
  elements into one payload, as packing does); ``frame`` is ``frame_tfrecord`` or
  ``frame_line``.  ``compression`` "gzip" gzips each file (``.gz`` appended to its name).
  ``also`` lists further :class:`ShardFile`s written from the same grouping (e.g. the
  documents side file next to the records), so the items cross the shuffle once.
  ``side_inputs`` (e.g. ``beam.pvalue.AsDict(...)``) are passed to the main file's
  ``encode_shard`` after the items (the entity table of a corpus, for the records).
  ``tmp_dir``: where the main file is written before its rename (the job's ``.tmp/``).
  """

  def __init__(self, output_dir: str, prefix: str, suffix: str,
               num_shards: Union[int, beam.PCollection], encode_shard: ShardEncoder,
               frame: Callable[[bytes], bytes], namespace: str = "readtwice.write",
               compression: str = "none", also: Sequence[ShardFile] = (),
               side_inputs: Sequence[Any] = (), tmp_dir: Optional[str] = None):
    super().__init__()
    if isinstance(num_shards, int) and num_shards < 1:
      raise ValueError("num_shards must be >= 1")
    files = [ShardFile(output_dir, prefix, suffix, encode_shard, frame, compression,
                       takes_side_inputs=bool(side_inputs), tmp_dir=tmp_dir)]
    self._fn = _WriteShardFn(files + list(also), namespace)
    self._num_shards = num_shards
    self._side_inputs = tuple(side_inputs)

  def expand(self, pairs: beam.PCollection) -> beam.PCollection:
    n = self._num_shards
    if isinstance(n, int):
      n = pairs.pipeline | "NumShards" >> beam.Create([n])
    n_side = beam.pvalue.AsSingleton(n)
    keyed = pairs | "ShardKey" >> beam.Map(lambda kv, n: (shard_of(kv[0], n), kv), n_side)
    # One empty marker per shard, so that every shard file is written even when empty.
    markers = n | "Markers" >> beam.FlatMap(lambda n: [(s, None) for s in range(n)])
    return ((keyed, markers) | "Flatten" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(self._fn, n_side, *self._side_inputs))


def encode_lines(shard: int, items: List[Tuple[str, Any]]) -> Tuple[List[bytes], Dict]:
  """Encoder for text values (one line each)."""
  del shard
  return [v.encode("utf-8") for _, v in items], {}


# What a job writes under its output directory (see schemas/manifest.py); ``_spill/`` is where
# jobs before ``.tmp/`` kept their temporary files.
OUTPUT_PATTERNS = ("records-*-of-*", "documents/documents-*-of-*",
                   "dead_letter/dead_letter-*-of-*", "skipped/skipped-*-of-*", "_spill/*",
                   "manifest.json", "COMPLETED")
# The mark of a directory a job wrote (``{"job": ...}``): ``--overwrite`` deletes only there.
OWNER_FILE = ".readtwice_output.json"
# Directories a job writes into, where a temporary file of write_atomically may be left.
_OUTPUT_SUBDIRS = ("documents", "dead_letter", "skipped", "entities")


def is_file(path: str) -> bool:
  """Whether ``path`` is a local regular file (object stores have no such conflict)."""
  return "://" not in path and os.path.isfile(path)


def is_own_output_dir(output_dir: str) -> bool:
  """Whether a job of this project wrote ``output_dir``: it holds :data:`OWNER_FILE`, or (a
  dir written before the marker existed) a ``manifest.json`` that is a records manifest."""
  if FileSystems.exists(FileSystems.join(output_dir, OWNER_FILE)):
    return True
  path = FileSystems.join(output_dir, "manifest.json")
  if not FileSystems.exists(path):
    return False
  try:
    with FileSystems.open(path) as f:
      head = f.read(1 << 20).decode("utf-8", "replace")
    manifest = safe_json.loads(head, source=path)
  except (ValueError, OSError):
    return False
  return isinstance(manifest, dict) and "schema_version" in manifest and "job" in manifest


def owner_job(output_dir: str) -> Optional[str]:
  """The job named by ``output_dir``'s mark (:data:`OWNER_FILE`), or None (no mark, or one
  that is not a job's mark)."""
  path = FileSystems.join(output_dir, OWNER_FILE)
  try:
    if not FileSystems.exists(path):
      return None
    with FileSystems.open(path) as f:
      mark = safe_json.loads(f.read(1 << 16).decode("utf-8", "replace"), source=path)
  except (ValueError, OSError):
    return None
  job = mark.get("job") if isinstance(mark, dict) else None
  return job if isinstance(job, str) and job else None


def _relative_names(output_dir: str, paths: Sequence[str], shown: int = 3) -> str:
  base = output_dir.rstrip("/") + "/"
  names = sorted(p[len(base):] if p.startswith(base) else p for p in paths)
  return ", ".join(names[:shown]) + (f", ... ({len(names) - shown} more)"
                                     if len(names) > shown else "")


def prepare_output_dir(output_dir: str, overwrite: bool, extra_patterns: Sequence[str] = (),
                       job: str = "") -> bool:
  """Refuses to mix a new run's shards with an earlier run's, unless ``overwrite``.

  With a different shard count the old ``-of-NNNNN`` files would otherwise stay next to the
  new ones.  ``overwrite`` deletes exactly the files a job writes (nothing else), and only in
  a directory a job wrote (:func:`is_own_output_dir`): files that merely match those names in
  someone else's directory are refused, not deleted.  Without ``overwrite``, the output of an
  earlier run of the same ``job`` that did not complete (the directory's mark names ``job``,
  no ``COMPLETED``: it failed, e.g. on ``--max_error_fraction``, or was killed) is replaced
  too, with one warning naming what was deleted; a ``COMPLETED`` output, or one another job
  wrote, still needs ``overwrite``.  Then marks the directory as a job's
  (:data:`OWNER_FILE`).  Returns whether ``output_dir`` existed.  Call it holding the
  directory's claim (:mod:`pipelines.beam.claim`): it also deletes a crashed run's temporary
  files.
  """
  delete_tmp(output_dir)
  found = [m.path for pattern in tuple(OUTPUT_PATTERNS) + tuple(extra_patterns)
           for m in FileSystems.match([FileSystems.join(output_dir, pattern)])[0].metadata_list]
  completed = bool(found) and FileSystems.exists(FileSystems.join(output_dir, "COMPLETED"))
  marked_by = owner_job(output_dir) if found else None
  # An incomplete output of this same job (its mark): a rerun replaces it without --overwrite.
  rerun = bool(found) and not overwrite and not completed and bool(job) and marked_by == job
  replace = overwrite or rerun
  if found and replace and "://" not in output_dir and os.path.islink(
      output_dir.rstrip(os.sep) or os.sep):
    raise FileExistsError(
        f"{output_dir} is a symlink (to {os.path.realpath(output_dir)}); --overwrite never "
        "deletes through a symlink: give the real path as --output_dir")
  if found and replace and not is_own_output_dir(output_dir):
    raise FileExistsError(
        f"{output_dir} holds files named like a job's output (e.g. {found[0]}) but no job of "
        f"this project wrote it (no {OWNER_FILE} or records manifest.json); --overwrite "
        "deletes only a job's own output: choose another --output_dir")
  if found and not replace:
    if completed:
      what = "the output of a run"
    elif marked_by and job and marked_by != job:
      what = (f"the output of a {marked_by} run that did not complete (no COMPLETED), not of "
              f"this {job} job")
    else:
      what = ("the output of an earlier run that did not complete (no COMPLETED: killed, or it "
              "failed)")
    raise FileExistsError(
        f"{output_dir} already holds {what} ({len(found)} files, e.g. "
        f"{found[0]}); pass --overwrite to replace it, or choose another --output_dir.")
  if found:
    if rerun:
      LOGGER.warning(
          "%s held the output of an earlier %s run that did not complete (no COMPLETED: it "
          "failed or was killed); deleted its %d file(s) (%s) and running again",
          output_dir, job, len(found), _relative_names(output_dir, found))
    FileSystems.delete(found)
  existed = FileSystems.exists(output_dir)
  write_atomically(FileSystems.join(output_dir, OWNER_FILE),
                   [(json.dumps({"job": job, "written_by": "readtwice"}) + "\n").encode()])
  return existed


def delete_tmp(output_dir: str) -> int:
  """Deletes the job's temporary files: ``.tmp/`` (spill files, shards being written) and any
  ``.tmp-*`` file beside the outputs; returns how many files."""
  patterns = [FileSystems.join(output_dir, TMP_DIR, "**"),
              FileSystems.join(output_dir, TMP_PREFIX + "*")]
  patterns += [FileSystems.join(output_dir, d, TMP_PREFIX + "*") for d in _OUTPUT_SUBDIRS]
  paths = sorted({m.path for r in FileSystems.match(patterns) for m in r.metadata_list})
  if paths:
    FileSystems.delete(paths)
  directory = tmp_dir_of(output_dir)
  if "://" not in directory and os.path.isdir(directory):
    shutil.rmtree(directory, ignore_errors=True)
  return len(paths)


def clean_up_failed_run(output_dir: str, existed: bool,
                        own_outputs: Optional[Sequence[str]] = None) -> None:
  """After a failed job: deletes its temporary files, and ``output_dir`` itself if the job
  created it and left nothing else in it (a refusal before any write leaves no trace).
  ``own_outputs`` (the job's extra output patterns, as for :func:`prepare_output_dir`): also
  delete the output files this run wrote (an interrupted run, a full disk): call it only when
  none was there before the run (after :func:`prepare_output_dir`)."""
  try:
    delete_tmp(output_dir)
    if own_outputs is not None:
      found = [m.path for pattern in tuple(OUTPUT_PATTERNS) + tuple(own_outputs)
               for m in FileSystems.match([FileSystems.join(output_dir, pattern)])[0].metadata_list]
      if found:
        FileSystems.delete(found)
        LOGGER.info("deleted the %d output file(s) this run had written under %s", len(found),
                    output_dir)
      marker = FileSystems.join(output_dir, OWNER_FILE)
      if FileSystems.exists(marker):  # no output of a job is left: nor its mark
        FileSystems.delete([marker])
    remove_if_empty(output_dir, existed)
  except Exception:  # pylint: disable=broad-except  # never hide the job's own error
    LOGGER.warning("could not clean up %s after the failure", output_dir, exc_info=True)


def remove_if_empty(output_dir: str, existed: bool) -> None:
  """Removes a local ``output_dir`` that the job created (``existed`` False) and left empty,
  empty subdirectories included."""
  if existed or "://" in output_dir or not os.path.isdir(output_dir):
    return
  if any(f for _, _, files in os.walk(output_dir) for f in files if f != OWNER_FILE):
    return
  shutil.rmtree(output_dir, ignore_errors=True)
