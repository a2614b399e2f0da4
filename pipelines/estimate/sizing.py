"""``--estimate``'s input sizes: the input files (compressed ones sampled, Parquet by its footer)
and the files they name (a dataset's ``side_inputs``), in MB of work (:class:`Work`)."""

from __future__ import annotations

import bz2
import collections
import dataclasses
import lzma
import os
import zlib
from concurrent import futures
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from pipelines.estimate.costs import MB, dataset_cost

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

  def add_side(self, role: str, side: Dict[str, Any], missing: str) -> None:
    """Adds the side input ``side`` (a :func:`size_referenced` dict) as ``role``: its bytes
    count in the work, and its missing files in a note, ``missing`` formatted with ``n`` (their
    count, as ``1,234``)."""
    self.side[role] = side
    self.extra_bytes += side["bytes"]
    if side["missing"]:
      self.notes.append(missing.format(n=f"{side['missing']:,}"))

  @property
  def work_bytes(self) -> int:
    return (sum(f.bytes for f in self.inputs) if self.inputs_in_work else 0) + self.extra_bytes


def allowed(named: "collections.Counter[Tuple[str, str]]", work: Work, what: str
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


def json_items(path: str, list_key: Optional[str] = None) -> Iterable[Any]:
  """The records of a JSON list / object-with-list / JSON-lines file, streamed (decompressed
  by extension); unreadable items are skipped (a run makes them dead letters)."""
  from pipelines.sources.byte_stream import ByteSource  # pylint: disable=g-import-not-at-top
  from pipelines.sources.json_events import Item  # pylint: disable=g-import-not-at-top
  from pipelines.sources.json_items import read_json_stream  # pylint: disable=g-import-not-at-top
  with ByteSource(path) as source:
    for event in read_json_stream(source, path, list_key=list_key):
      if isinstance(event, Item):
        yield event.value



def measure(job: str, inputs: Sequence[Dict[str, Any]], options: Any = None,
            data_paths: Any = None) -> Work:
  """The :class:`Work` of ``job`` on ``inputs`` (``describe_inputs``' list) with the dataset's
  ``options``; reads the question / JSONL / qaps files of the datasets whose side inputs they
  name, and sizes those a run would read (``data_paths``: the run's
  :class:`schemas.data_paths.DataPathPolicy`, default the default one)."""
  work = Work(size_files(inputs), data_paths=data_paths)
  cost = dataset_cost(job)
  if cost is not None and cost.side_inputs is not None:
    cost.side_inputs(work, options)
  return work

