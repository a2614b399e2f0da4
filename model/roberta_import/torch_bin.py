"""A torch-free reader of ``pytorch_model.bin`` (a ``torch.save``d state dict), for RoBERTa
checkpoints that ship no safetensors file.

torch is not a dependency of this project, so the file is parsed here with ``zipfile``,
``pickle`` and numpy.  Every access goes through ``tf.io.gfile`` (local or ``gs://``).

What it reads -- the subset of the format ``torch.save`` writes for a state dict since torch
1.6:

* a zip archive holding one ``data.pkl`` (at the top or one folder down, ``<name>/data.pkl``),
  an optional ``<name>/byteorder`` (``little`` or ``big``) and one raw storage per tensor
  storage, ``<name>/data/<key>``;
* a pickle whose top level is a mapping (``dict`` / ``OrderedDict``) of string keys to tensors
  built by ``torch._utils._rebuild_tensor_v2`` (any size, stride and offset inside their
  storage: views and shared storages are read as numpy copies), other values ignored;
* storages of ``torch.{Double,Float,Half,BFloat16,Long,Int,Short,Char,Byte,Bool}Storage``
  (floats come back as float32, bfloat16 widened exactly).

What it refuses, with a :class:`TorchBinError` whose one-line message names the file: the
legacy pre-1.6 (non-zip) format; a truncated or damaged zip; a pickle that resolves any
global other than the tensor rebuild, the storage types and ``collections.OrderedDict`` (so
``os.system`` and the like are never called), or is otherwise not a valid pickle; tensors
with metadata (conjugate / negative bits), invalid layouts or views past their storage; a
top level that is not a state dict or has non-string keys; storages missing from the archive
or whose size differs from what the pickle declares.  All of that is checked by
:func:`plan_torch_bin` before any storage is read.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import pickle
import zipfile
import zlib
from typing import Any, Callable, Dict, Mapping, Tuple

import numpy as np
import tensorflow as tf

# dtype code (safetensors' names, used in messages) -> numpy dtype of the stored little-endian
# bytes; "BF16" is read as uint16 and widened to float32.
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
_TORCH_STORAGES = {"DoubleStorage": "F64", "FloatStorage": "F32", "HalfStorage": "F16",
                   "BFloat16Storage": "BF16", "LongStorage": "I64", "IntStorage": "I32",
                   "ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
                   "BoolStorage": "BOOL"}


class TorchBinError(ValueError):
  """A ``pytorch_model.bin`` this reader refuses; the message is one line naming the file."""


def _short(value: Any, limit: int = 80) -> str:
  """``repr(value)``, cut to ``limit`` characters (file contents go into one-line messages)."""
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def _is_count(value: Any) -> bool:
  """A non-negative int (not a bool)."""
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _decode(raw: bytes, code: str, big_endian: bool) -> np.ndarray:
  """One storage's raw bytes -> a 1-D numpy array (floats widened to float32, integers in
  native byte order)."""
  dtype = np.dtype(_DTYPES[code])
  if big_endian:
    dtype = dtype.newbyteorder(">")
  array = np.frombuffer(raw, dtype=dtype)
  if code == "BF16":
    return (array.astype(np.uint32) << 16).view(np.float32)
  if array.dtype.kind == "f":
    return array.astype(np.float32)
  return array.astype(array.dtype.newbyteorder("="))


@dataclasses.dataclass(frozen=True)
class TorchBinPlan:
  """A ``pytorch_model.bin`` whose pickle and storages have been checked: its tensor names,
  and ``load()`` to read them (``name -> array``)."""
  names: Tuple[str, ...]
  load: Callable[[], Dict[str, np.ndarray]]


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
      raise TorchBinError(f"{path}: a truncated or damaged zip archive (no end of central "
                          "directory record)")
    raise TorchBinError(f"{path}: not a zip-format torch checkpoint (the legacy pre-1.6 "
                        "format is not supported; re-save it, or convert it to safetensors)")
  f.seek(0)
  try:
    return zipfile.ZipFile(f)
  except _ZIP_ERRORS as e:
    raise TorchBinError(f"{path}: a damaged zip archive ({_short(str(e))})") from e


def _read_member(archive: zipfile.ZipFile, member: str, path: str) -> bytes:
  try:
    return archive.read(member)
  except _ZIP_ERRORS as e:
    raise TorchBinError(f"{path}: cannot read {member} from the archive "
                        f"({type(e).__name__}: {_short(str(e))})") from e


def plan_torch_bin(path: str) -> TorchBinPlan:
  """Unpickles the ``data.pkl`` of a ``torch.save``d state dict (zip format, torch >= 1.6) and
  checks every storage it uses against the archive; reads no storage.

  Raises:
    TorchBinError: the file is outside the subset this module reads (see its docstring).
  """
  file_bytes = int(tf.io.gfile.stat(path).length)
  with tf.io.gfile.GFile(path, "rb") as f:
    with _open_zip(f, path, file_bytes) as archive:
      names = archive.namelist()
      pickles = [n for n in names
                 if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
      if len(pickles) != 1:
        raise TorchBinError(f"{path}: expected one data.pkl in the archive, found "
                            f"{_short(pickles)}")
      prefix = pickles[0][:-len("data.pkl")]
      order = "little"
      if prefix + "byteorder" in names:
        order = _read_member(archive, prefix + "byteorder", path).decode("ascii", "replace")
        order = order.strip()
        if order not in ("little", "big"):
          raise TorchBinError(f"{path}: byteorder {_short(order)} is not little or big")
      unpickler = _TorchUnpickler(_read_member(archive, pickles[0], path))
      try:
        state = unpickler.load()
      except _Refused as e:
        raise TorchBinError(f"{path}: {e}") from None
      except Exception as e:  # a hostile or damaged pickle may fail in any way
        raise TorchBinError(f"{path}: {pickles[0]} is not a valid torch pickle "
                            f"({type(e).__name__}: {_short(str(e))})") from e
      if not isinstance(state, Mapping):
        raise TorchBinError(f"{path}: expected a state dict, got {type(state).__name__}")
      refs = {k: v for k, v in state.items() if isinstance(v, _TensorRef)}
      if not all(isinstance(k, str) for k in refs):
        raise TorchBinError(f"{path}: the state dict has keys that are not strings")
      storages = {ref.storage.key: ref.storage for ref in refs.values()}
      for storage in storages.values():
        member = f"{prefix}data/{storage.key}"
        if member not in archive.NameToInfo:
          raise TorchBinError(f"{path}: storage {storage.key!r} is missing from the archive "
                              f"({member})")
        info = archive.getinfo(member)
        if info.file_size != storage.nbytes:
          raise TorchBinError(
              f"{path}: storage {storage.key!r} declares {storage.numel} {storage.code} values "
              f"({storage.nbytes} bytes) but {member} has {info.file_size} bytes")
        if info.header_offset + info.compress_size > file_bytes:
          raise TorchBinError(f"{path}: {member} extends past the end of the file")

  def load() -> Dict[str, np.ndarray]:
    arrays = {}
    with tf.io.gfile.GFile(path, "rb") as f, _open_zip(f, path, file_bytes) as archive:
      for storage in storages.values():
        member = f"{prefix}data/{storage.key}"
        raw = _read_member(archive, member, path)
        if len(raw) != storage.nbytes:
          raise TorchBinError(f"{path}: {member} has {len(raw)} bytes, not "
                              f"{storage.nbytes} (the file changed while being read?)")
        arrays[storage.key] = _decode(raw, storage.code, big_endian=order == "big")
    return {name: _view(arrays[ref.storage.key], ref) for name, ref in refs.items()}

  return TorchBinPlan(tuple(refs), load)
