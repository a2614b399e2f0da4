"""What a training run reads: pipeline records dirs as one parsed-pack dataset, or packs
generated in memory, and the one-line error for inputs that cannot be trained on.

Records dirs are read through :mod:`model.data.pack_reader` (``tf.io.gfile``, so local or
``gs://``); their manifests are checked with :mod:`schemas.records_dir` (a finished run that wrote
records; dirs trained together agree on segment geometry and tokenizer).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from model.data import pack_reader as input_lib
from schemas import records
from schemas import records_dir as records_dir_lib


class TrainingError(Exception):
  """A user-facing problem with the inputs of a run (printed as one line by the drivers)."""


def read_manifests(records_dirs: Sequence[str]) -> List[Dict]:
  """The manifests of ``records_dirs`` (schema version checked), which must agree on the
  segment geometry and the tokenizer."""
  if not records_dirs:
    raise TrainingError("no records directory given")
  manifests = []
  for d in records_dirs:
    try:
      manifests.append(input_lib.read_manifest(d))
    except (FileNotFoundError, ValueError) as e:
      raise TrainingError(str(e)) from None
  try:
    records_dir_lib.check_compatible(records_dirs, manifests)
  except records_dir_lib.IncompatibleRecordsError as e:
    raise TrainingError(str(e)) from None
  return manifests


def packs_per_epoch(manifests: Sequence[Mapping]) -> int:
  """Packs (= steps) in one pass over the records of ``manifests``."""
  return sum(int(m.get("examples", {}).get("packs") or
                 sum(int(s.get("packs", s.get("records", 0))) for s in m.get("shards", [])))
             for m in manifests)


def records_dataset(records_dirs: Sequence[str], manifests: Sequence[Mapping], *,
                    shuffle: bool, repeat: bool, seed: int,
                    max_mentions: Optional[int]) -> tf.data.Dataset:
  """Parsed packs of every shard of ``records_dirs`` (one dataset; file order shuffled too)."""
  files = []
  for d, m in zip(records_dirs, manifests):
    files += input_lib.record_files(d, m)
  cfg = manifests[0]["config"]
  try:  # records of another major schema version (checked per file) are the user's error
    return input_lib.make_dataset(files, int(cfg["seq_length"]), int(cfg["segments_per_pack"]),
                                  shuffle=shuffle, repeat=repeat, seed=seed,
                                  max_mentions=max_mentions, compression=None)
  except records.SchemaVersionError as e:
    raise TrainingError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class GeneratedPacks:
  """Packs made in memory instead of read from records (controlled tasks, benchmarks).

  ``packs`` is a dict of NumPy arrays with a leading pack axis, holding the parsed-pack
  features of :mod:`model.data.pack_reader` that the task reads (``token_ids`` ``[P, N, L]``,
  ``document_index`` ``[P, N]``, ``mentions_*`` ``[P, K]``, ...).  The trainer cycles through
  the P packs in order (shuffled per epoch when ``TrainConfig.shuffle``); the dataset is built
  with ``from_tensor_slices``, so its iterator checkpoints like the records' one.
  """
  packs: Mapping[str, object]
  seq_length: int
  segments_per_pack: int
  vocab_size: int

  def manifest(self) -> Dict:
    """A manifest-shaped dict of the packs' geometry (what
    :func:`model.training.trainer.check_compatible` reads)."""
    return {"config": {"seq_length": self.seq_length,
                       "segments_per_pack": self.segments_per_pack},
            "tokenizer": {"vocab_size": self.vocab_size}}

  def dataset(self, *, shuffle: bool, seed: int) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices(dict(self.packs))
    if shuffle:
      n = int(next(iter(self.packs.values())).shape[0])
      ds = ds.shuffle(n, seed=seed, reshuffle_each_iteration=True)
    return ds.repeat()
