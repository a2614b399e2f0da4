"""RecordsConfig: everything that shapes a job's output records (the manifest's ``config``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Tuple

from schemas import tfrecord_io
from schemas.data_paths import DEFAULT_MAX_FILE_BYTES, DataPathPolicy
from pipelines.sources.json_ranges import DEFAULT_SPLIT_BYTES
from pipelines.text.segmenter import SegmenterConfig
from pipelines.text.tokenizer import TokenizerSpec


DEFAULT_MAX_ERROR_FRACTION = 0.1


def _at_least(name: str, value: int, low: int, note: str = "") -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < low:
    raise ValueError(f"--{name} must be an integer >= {low}{note}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class RecordsConfig:
  """Segmenting, packing and sharding settings; invalid combinations are refused up front
  with a message naming the command-line flag."""
  segmenter: SegmenterConfig = SegmenterConfig()
  tokenizer: TokenizerSpec = TokenizerSpec()
  segments_per_pack: int = 128
  num_shards: int = 0  # 0: ceil(total segments / segments_per_shard), at least 1
  segments_per_shard: int = 16384
  deduplicate: bool = True
  batch_size: int = 256
  compression: str = "none"  # records and documents side files: "none" or "gzip"
  # The job fails (no COMPLETED) when more than this share of its input records is rejected
  # (issue 41: every real-format sample's normal run rejects 0%; --max_error_fraction 1
  # accepts any share).
  max_error_fraction: float = DEFAULT_MAX_ERROR_FRACTION
  # A run that writes no document fails (no COMPLETED) unless this is set (--allow_empty).
  allow_empty: bool = False
  # JSON inputs of at least twice this many bytes are read in byte ranges of about this size by
  # all workers (--json_split_mb; 0: every file whole).  It does not change the records, so the
  # manifest's config does not record it.
  json_split_bytes: int = DEFAULT_SPLIT_BYTES
  # Files named by data (a context_file, a story id, an evidence Filename) are read only under
  # their dataset's root or these folders (--allow_read_root), and only up to this many bytes
  # (--max_input_file_bytes): schemas.data_paths.  Recorded in the manifest when not the default.
  allow_read_roots: Tuple[str, ...] = ()
  max_input_file_bytes: int = DEFAULT_MAX_FILE_BYTES

  def __post_init__(self):
    _at_least("segments_per_pack", self.segments_per_pack, 1)
    _at_least("num_shards", self.num_shards, 0, " (0 derives it from the segment count)")
    _at_least("segments_per_shard", self.segments_per_shard, 1)
    _at_least("batch_size", self.batch_size, 1)
    _at_least("json_split_mb", self.json_split_bytes, 0, " (in bytes; 0 reads every file whole)")
    if self.compression not in tfrecord_io.COMPRESSIONS:
      raise ValueError(f"--compression must be 'none' or 'gzip', got {self.compression!r}")
    f = self.max_error_fraction
    if (isinstance(f, bool) or not isinstance(f, (int, float)) or f != f
        or not 0.0 <= f <= 1.0):
      raise ValueError(f"--max_error_fraction must be a number in [0, 1], got {f!r}")
    object.__setattr__(self, "allow_read_roots", tuple(self.allow_read_roots or ()))
    DataPathPolicy(self.allow_read_roots, self.max_input_file_bytes)  # ValueError if invalid
    if self.segmenter.max_segments_per_document > self.segments_per_pack:
      raise ValueError(
          f"--max_segments_per_document={self.segmenter.max_segments_per_document} exceeds "
          f"--segments_per_pack={self.segments_per_pack}: a (sub-)document must fit one pack.")

  def describe(self) -> Dict[str, Any]:
    d = dataclasses.asdict(self.segmenter)
    d.update(segments_per_pack=self.segments_per_pack, num_shards=self.num_shards,
             segments_per_shard=self.segments_per_shard, deduplicate=self.deduplicate,
             batch_size=self.batch_size, compression=self.compression,
             max_error_fraction=self.max_error_fraction, allow_empty=self.allow_empty)
    if self.allow_read_roots:
      d["allow_read_roots"] = list(self.allow_read_roots)
    if self.max_input_file_bytes != DEFAULT_MAX_FILE_BYTES:
      d["max_input_file_bytes"] = self.max_input_file_bytes
    return d

  @property
  def data_paths(self) -> DataPathPolicy:
    """The policy for files named by data (:mod:`schemas.data_paths`)."""
    return DataPathPolicy(self.allow_read_roots, self.max_input_file_bytes)
