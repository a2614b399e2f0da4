"""Reading a Hugging Face RoBERTa checkpoint directory without torch: ``config.json`` and the
weights, as ``name -> numpy array``.

A checkpoint directory (local or ``gs://``; every access goes through ``tf.io.gfile``) holds
``config.json`` and the weights: ``model.safetensors`` or ``pytorch_model.bin`` (or a sharded
``*.index.json`` of either).  safetensors files are read with the ``safetensors`` library (its
numpy API; a file that is not local is first copied to a temporary local file);
``pytorch_model.bin`` with the torch-free reader :mod:`model.roberta_import.torch_bin`.

Every header is checked here before any tensor is read -- for safetensors: the header length
against the file, valid UTF-8 JSON without duplicate keys, known dtypes, dtype x shape = byte
length, offsets inside the data section, and tensors that cover it without overlaps, holes or
trailing bytes (rules the library enforces too, checked here first so that every refusal has
our message).  A file that fails raises :class:`CheckpointError` with a one-line message
naming it, which the CLIs print as their one error line (exit status 1).
"""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath
import struct
import tempfile
from typing import Any, Callable, Dict, List, Tuple

import ml_dtypes  # noqa: F401  (a tensorflow dependency: gives numpy the bfloat16 of BF16)
import numpy as np
import safetensors
import tensorflow as tf

from model.roberta_import import torch_bin as roberta_torch_bin
from schemas import safe_json

CONFIG_NAME = "config.json"
# Weight files in order of preference; an index maps tensor names to shard files.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's limit

# safetensors dtype codes read here -> bytes per value.
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U8": 1, "BOOL": 1}
_FLOATS = ("F64", "F32", "F16", "BF16")


class CheckpointError(ValueError):
  """A checkpoint file that is not what it claims to be: a damaged or hostile header, offsets
  or sizes that do not add up, an unknown dtype, a broken archive, a refused pickle.

  The message is one line that names the file.  Every header is checked before any tensor is
  read, and nothing is written.
  """


def _short(value: Any, limit: int = 80) -> str:
  """``repr(value)``, cut to ``limit`` characters (file contents go into one-line messages)."""
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def _is_count(value: Any) -> bool:
  """A non-negative int (not a bool)."""
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class _DuplicateKey(ValueError):
  pass


def _no_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
  out = {}
  for key, value in pairs:
    if key in out:
      raise _DuplicateKey(key)
    out[key] = value
  return out


def _parse_json(raw: bytes, path: str, what: str) -> Any:
  """UTF-8 JSON without duplicate keys, else :class:`CheckpointError`."""
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise CheckpointError(f"{path}: {what} is not valid UTF-8 (byte {e.start})") from None
  try:
    return safe_json.loads(text, f"{path}: {what}", object_pairs_hook=_no_duplicates)
  except safe_json.JsonTooDeepError as e:
    raise CheckpointError(str(e)) from None
  except _DuplicateKey as e:
    raise CheckpointError(f"{path}: {what} has the key {_short(e.args[0])} twice") from None
  except json.JSONDecodeError as e:
    raise CheckpointError(f"{path}: {what} is not valid JSON ({e.msg} at line {e.lineno} "
                          f"column {e.colno})") from None
  except RecursionError:
    raise CheckpointError(f"{path}: {what} is nested too deeply") from None


def read_json_object(path: str, what: str = "the file") -> Dict[str, Any]:
  """The JSON object in file ``path`` (``what`` names it in errors), else
  :class:`CheckpointError`."""
  with tf.io.gfile.GFile(path, "rb") as f:
    value = _parse_json(f.read(), path, what)
  if not isinstance(value, dict):
    raise CheckpointError(f"{path}: {what} is a JSON {type(value).__name__}, not an object")
  return value


def _decode(array: np.ndarray, code: str) -> np.ndarray:
  """A tensor as the file stores it -> ours: floats (bfloat16 included) widened to float32,
  other dtypes copied as they are."""
  return np.array(array, dtype=np.float32 if code in _FLOATS else array.dtype)


@dataclasses.dataclass(frozen=True)
class _Plan:
  """A weights file whose header has been validated: its tensor names, and ``load()`` to read
  them (``name -> array``)."""
  names: Tuple[str, ...]
  load: Callable[[], Dict[str, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class _Entry:
  """One tensor of a safetensors header, validated."""
  name: str
  code: str
  shape: Tuple[int, ...]
  begin: int
  end: int


def _check_metadata(path: str, info: Any) -> None:
  if not isinstance(info, dict):
    raise CheckpointError(f"{path}: __metadata__ is not a JSON object")
  for key, value in info.items():
    if not isinstance(value, str):
      raise CheckpointError(f"{path}: __metadata__ {_short(key)} is a JSON "
                            f"{type(value).__name__}, not a string")


def _safetensors_entries(path: str, header: Any, data_bytes: int) -> List[_Entry]:
  """The header's tensors in file order, after checking dtypes, shapes and that every tensor's
  bytes lie inside the data section, match dtype x shape and overlap no other tensor's, and
  that together they cover the data section."""
  if not isinstance(header, dict):
    raise CheckpointError(f"{path}: the safetensors header is a JSON {type(header).__name__}, "
                          "not an object")
  entries = []
  for name, info in header.items():
    if name == "__metadata__":
      _check_metadata(path, info)
      continue
    where = f"{path}: tensor {_short(name)}"
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
      raise CheckpointError(f"{where} is not an object with dtype, shape and data_offsets")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(code, str) or code not in _ITEMSIZE:
      raise CheckpointError(f"{where} has unknown dtype {_short(code)} (known: "
                            f"{', '.join(sorted(_ITEMSIZE))})")
    if not isinstance(shape, list) or not all(_is_count(n) for n in shape):
      raise CheckpointError(f"{where} has an invalid shape {_short(shape)}")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(_is_count(o) for o in offsets) and offsets[0] <= offsets[1]):
      raise CheckpointError(f"{where} has invalid data_offsets {_short(offsets)} (want "
                            "[begin, end], 0 <= begin <= end)")
    begin, end = offsets
    if end > data_bytes:
      raise CheckpointError(f"{where} claims bytes [{begin}, {end}) but the data section has "
                            f"{data_bytes} bytes")
    nbytes = math.prod(shape) * _ITEMSIZE[code]
    if end - begin != nbytes:
      raise CheckpointError(f"{where} is {code} {shape} ({nbytes} bytes) but its data_offsets "
                            f"[{begin}, {end}) hold {end - begin} bytes")
    entries.append(_Entry(name, code, tuple(shape), begin, end))
  entries.sort(key=lambda e: (e.begin, e.end))
  covered = 0
  for before, after in zip(entries, entries[1:]):
    if after.begin < before.end:
      raise CheckpointError(f"{path}: tensors {_short(before.name)} [{before.begin}, "
                            f"{before.end}) and {_short(after.name)} [{after.begin}, "
                            f"{after.end}) overlap")
  for e in entries:
    if e.begin > covered:
      raise CheckpointError(f"{path}: bytes [{covered}, {e.begin}) of the data section belong "
                            "to no tensor (safetensors allows no holes)")
    covered = e.end
  if covered != data_bytes:
    raise CheckpointError(f"{path}: the tensors cover {covered} of the data section's "
                          f"{data_bytes} bytes (safetensors allows no trailing bytes)")
  return entries


def _read_safetensors(path: str, entries: List[_Entry]) -> Dict[str, np.ndarray]:
  """The tensors of a local safetensors file whose header gave ``entries``."""
  tensors = {}
  try:
    with safetensors.safe_open(path, framework="np") as f:
      if sorted(f.keys()) != sorted(e.name for e in entries):
        raise CheckpointError(f"{path}: the tensors differ from the header read before (the "
                              "file changed while being read?)")
      for e in entries:
        array = f.get_tensor(e.name)
        if array.shape != e.shape:
          raise CheckpointError(f"{path}: tensor {_short(e.name)} has shape {array.shape}, "
                                f"not {e.shape} (the file changed while being read?)")
        tensors[e.name] = _decode(array, e.code)
  except safetensors.SafetensorError as e:
    raise CheckpointError(f"{path}: {' '.join(str(e).split())}") from None
  return tensors


def _plan_safetensors(path: str) -> _Plan:
  """Validates the header of a ``.safetensors`` file (8-byte little-endian length, UTF-8 JSON,
  then the data section) against the file's size; reads no tensor."""
  file_bytes = int(tf.io.gfile.stat(path).length)
  with tf.io.gfile.GFile(path, "rb") as f:
    head = f.read(8)
    if len(head) != 8:
      raise CheckpointError(f"{path}: not a safetensors file ({len(head)} bytes, shorter than "
                            "the 8-byte header length)")
    (size,) = struct.unpack("<Q", head)
    if size > file_bytes - 8:
      raise CheckpointError(f"{path}: the header length {size} exceeds the {file_bytes - 8} "
                            "bytes that follow it")
    if size > MAX_HEADER_BYTES:
      raise CheckpointError(f"{path}: a safetensors header of {size} bytes is implausibly "
                            f"large (limit {MAX_HEADER_BYTES})")
    raw = f.read(size)
  if len(raw) != size:
    raise CheckpointError(f"{path}: the header is truncated ({len(raw)} of {size} bytes)")
  entries = _safetensors_entries(path, _parse_json(raw, path, "the safetensors header"),
                                 file_bytes - 8 - size)

  def load() -> Dict[str, np.ndarray]:
    if "://" not in path:
      return _read_safetensors(path, entries)
    with tempfile.TemporaryDirectory() as tmp:  # the library reads local files only
      local = posixpath.join(tmp, posixpath.basename(path))
      tf.io.gfile.copy(path, local)
      tensors = _read_safetensors(local, entries)
    return tensors

  return _Plan(tuple(e.name for e in entries), load)


def _plan_torch_bin(path: str) -> _Plan:
  """:func:`model.roberta_import.torch_bin.plan_torch_bin`, its refusals as
  :class:`CheckpointError`."""
  try:
    plan = roberta_torch_bin.plan_torch_bin(path)
  except roberta_torch_bin.TorchBinError as e:
    raise CheckpointError(str(e)) from None

  def load() -> Dict[str, np.ndarray]:
    try:
      return plan.load()
    except roberta_torch_bin.TorchBinError as e:
      raise CheckpointError(str(e)) from None

  return _Plan(plan.names, load)


def _weight_files(path: str) -> List[str]:
  """``[path]``, or the shards an ``*.index.json`` names (plain file names next to it)."""
  if not path.endswith(".index.json"):
    return [path]
  weight_map = read_json_object(path, "the index").get("weight_map")
  if not isinstance(weight_map, dict) or not weight_map:
    raise CheckpointError(f"{path}: no weight_map object (tensor name -> shard file)")
  for name, shard in weight_map.items():
    if (not isinstance(shard, str) or shard in ("", ".", "..") or "/" in shard
        or "\\" in shard or shard.endswith(".index.json")):
      raise CheckpointError(f"{path}: tensor {_short(name)} maps to {_short(shard)}, not a "
                            "weights file next to the index")
  directory = posixpath.dirname(path)
  return [posixpath.join(directory, shard) for shard in sorted(set(weight_map.values()))]


def _read_weights(path: str) -> Dict[str, np.ndarray]:
  """All tensors of a weights file (or of the shards of an index), every header validated
  before any tensor is read."""
  plans = []
  seen = set()
  for file in _weight_files(path):
    plan = _plan_safetensors(file) if file.endswith(".safetensors") else _plan_torch_bin(file)
    for name in plan.names:
      if name in seen:
        raise CheckpointError(f"{file}: tensor {_short(name)} is also in another shard")
      seen.add(name)
    plans.append(plan)
  tensors = {}
  for plan in plans:
    tensors.update(plan.load())
  return tensors


def _normalise_key(key: str) -> str:
  """``roberta.embeddings...`` -> ``embeddings...``; old ``LayerNorm.gamma/beta`` names ->
  ``weight/bias``."""
  if key.startswith("roberta."):
    key = key[len("roberta."):]
  if ".LayerNorm." in key or ".layer_norm." in key:
    key = key.replace(".gamma", ".weight").replace(".beta", ".bias")
  return key


def weights_file(path: str) -> str:
  """The weights file of checkpoint directory ``path`` (see ``WEIGHT_FILES``)."""
  for name in WEIGHT_FILES:
    candidate = posixpath.join(path, name)
    if tf.io.gfile.exists(candidate):
      return candidate
  raise FileNotFoundError(f"{path}: no {' / '.join(WEIGHT_FILES)}")


def load_hf_checkpoint(path: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
  """Reads a Hugging Face RoBERTa checkpoint directory without torch.

  Args:
    path: directory (local or ``gs://``) with ``config.json`` and a weights file.

  Returns:
    ``(hf_config, tensors)``: the parsed ``config.json`` and ``name -> array`` (float32 for
    floating tensors) with the ``roberta.`` prefix removed (``lm_head.*`` keys kept).

  Raises:
    CheckpointError: a damaged or hostile file (checked before any tensor is read).
  """
  hf_config = read_hf_config(path)
  tensors = {}
  for key, value in _read_weights(weights_file(path)).items():
    name = _normalise_key(key)
    if name in tensors:
      raise CheckpointError(f"{path}: tensor {name!r} appears twice (with and without a "
                            "prefix)")
    tensors[name] = value
  return hf_config, tensors


def read_hf_config(path: str) -> Dict[str, Any]:
  """The ``config.json`` of checkpoint directory ``path``."""
  config_path = posixpath.join(path, CONFIG_NAME)
  if not tf.io.gfile.exists(config_path):
    raise FileNotFoundError(f"{path}: no {CONFIG_NAME} (not a Hugging Face checkpoint dir)")
  return read_json_object(config_path, CONFIG_NAME)
