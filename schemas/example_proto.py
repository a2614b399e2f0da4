"""``tf.train.Example``-compatible protobuf messages without TensorFlow.

The messages are built from a descriptor at import time under the proto package
``readtwice.tfexample``: the wire format is identical to ``tensorflow.Example`` (same field
numbers and types), so TensorFlow parses what we write, but the symbols do not clash with
TensorFlow's own registration (the ``tfrecord`` package registers ``tensorflow.Example`` and
cannot share a process with TensorFlow).  Pipelines, tests and the inspector use these; the
trainer uses ``tf.io.parse_example`` on the same bytes.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Union

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "readtwice.tfexample"
_F = descriptor_pb2.FieldDescriptorProto


def _build_file() -> descriptor_pb2.FileDescriptorProto:
  f = descriptor_pb2.FileDescriptorProto(name="readtwice/tfexample.proto", package=_PACKAGE,
                                         syntax="proto3")

  def message(name, fields, nested=()):
    m = f.message_type.add(name=name)
    for fname, number, ftype, label, type_name in fields:
      field = m.field.add(name=fname, number=number, type=ftype, label=label)
      if type_name:
        field.type_name = type_name
      if ftype in (_F.TYPE_FLOAT, _F.TYPE_INT64) and label == _F.LABEL_REPEATED:
        field.options.packed = True
    for n in nested:
      m.nested_type.append(n)
    return m

  rep, opt = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
  message("BytesList", [("value", 1, _F.TYPE_BYTES, rep, None)])
  message("FloatList", [("value", 1, _F.TYPE_FLOAT, rep, None)])
  message("Int64List", [("value", 1, _F.TYPE_INT64, rep, None)])
  feature = message("Feature", [
      ("bytes_list", 1, _F.TYPE_MESSAGE, opt, f".{_PACKAGE}.BytesList"),
      ("float_list", 2, _F.TYPE_MESSAGE, opt, f".{_PACKAGE}.FloatList"),
      ("int64_list", 3, _F.TYPE_MESSAGE, opt, f".{_PACKAGE}.Int64List"),
  ])
  feature.oneof_decl.add(name="kind")
  for field in feature.field:
    field.oneof_index = 0
  entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
  entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=opt)
  entry.field.add(name="value", number=2, type=_F.TYPE_MESSAGE, label=opt,
                  type_name=f".{_PACKAGE}.Feature")
  entry.options.map_entry = True
  message("Features",
          [("feature", 1, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.Features.FeatureEntry")],
          nested=[entry])
  message("Example", [("features", 1, _F.TYPE_MESSAGE, opt, f".{_PACKAGE}.Features")])
  return f


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_build_file())
Example = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.Example"))

Value = Union[Sequence[int], Sequence[bytes], Sequence[float]]


def _varint(n: int) -> bytes:
  out = bytearray()
  while True:
    b = n & 0x7F
    n >>= 7
    if n:
      out.append(b | 0x80)
    else:
      out.append(b)
      return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
  """A length-delimited field (wire type 2) with a one-byte tag."""
  return bytes((tag,)) + _varint(len(payload)) + payload


_MINUS_ONE = b"\xff" * 9 + b"\x01"  # int64 -1 as a varint


def _packed_varints(values) -> bytes:
  """Protobuf varint encoding of an int64 sequence, vectorised with numpy.

  A record's features are mostly small non-negative ints with -1 as padding (character offsets,
  indices), so that case has its own path: the 7-bit groups of the values are laid out as a
  ``[n, width]`` uint8 table (``width`` <= 4 groups, from the largest value; a group carries
  the continuation bit when the value has a next group), compacted with one boolean mask, and
  each -1 -- encoded as a one-byte 0 there -- is then replaced by its fixed ten bytes.  Other
  values take :func:`_packed_varints_wide`.
  """
  v = np.asarray(values, dtype=np.int64).reshape(-1)
  if not v.size:
    return b""
  lo, hi = int(v.min()), int(v.max())
  if lo >= 0 and hi < 128:  # every value is one byte: the bytes are the values
    return v.astype(np.uint8).tobytes()
  if lo < -1 or hi >= 1 << 28:
    return _packed_varints_wide(v)
  u = v.astype(np.uint32)
  negative = None
  if lo < 0:
    negative = v < 0
    u[negative] = 0
  width = max(1, (max(hi, 0).bit_length() + 6) // 7)
  more = [u >= (1 << (7 * k)) for k in range(1, width)]  # more[k - 1]: has a (k+1)-th group
  table = np.empty((u.size, width), dtype=np.uint8)
  for k in range(width):
    group = (u >> (7 * k)) & 0x7F if k else u & 0x7F
    if k + 1 < width:
      group |= more[k].astype(np.uint32) << 7
    table[:, k] = group
  flat = table.reshape(-1)
  if width > 1:
    used = np.empty((u.size, width), dtype=bool)
    used[:, 0] = True
    for k in range(1, width):
      used[:, k] = more[k - 1]
    flat = flat[used.reshape(-1)]
  if negative is None:
    return flat.tobytes()
  nbytes = np.ones(u.size, dtype=np.int64)
  for m in more:
    nbytes += m
  data = flat.tobytes()
  pieces, previous = [], 0
  for at in (np.cumsum(nbytes) - 1)[negative].tolist():  # each -1's placeholder byte
    pieces.append(data[previous:at])
    previous = at + 1
  pieces.append(data[previous:])
  return _MINUS_ONE.join(pieces)


def _packed_varints_wide(v: np.ndarray) -> bytes:
  """:func:`_packed_varints` for any int64 values: a ``[n, 10]``-at-most table."""
  v = v.view(np.uint64)
  top = int(v.max())
  width = (top.bit_length() + 6) // 7
  nbytes = np.ones(v.shape, dtype=np.int64)
  for k in range(1, width):
    nbytes += v >= np.uint64(1 << (7 * k))
  shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
  groups = ((v[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
  position = np.arange(width)[None, :]
  groups[position < nbytes[:, None] - 1] |= 0x80
  return groups[position < nbytes[:, None]].tobytes()


def _feature(values, dtype: str, name: str) -> bytes:
  if dtype == "int64":
    body = _packed_varints(values)
    return _field(0x1A, _field(0x0A, body) if body else b"")
  if dtype == "bytes":
    return _field(0x0A, b"".join(
        _field(0x0A, v.encode("utf-8") if isinstance(v, str) else bytes(v)) for v in values))
  if dtype == "float":
    body = np.asarray(values, dtype="<f4").reshape(-1).tobytes()
    return _field(0x12, _field(0x0A, body) if body else b"")
  raise ValueError(f"Unknown dtype {dtype!r} for feature {name!r}.")


def encode_example(features: Mapping[str, Value], dtypes: Mapping[str, str]) -> bytes:
  """Serialises ``{name: values}``; ``dtypes[name]`` is 'int64', 'bytes' or 'float'.

  Writes the wire format directly (numpy-vectorised varints: a pack holds ~10^5 ints), byte
  for byte what ``Example.SerializeToString(deterministic=True)`` gives: map entries sorted by
  key, packed repeated scalars.  Equal inputs give byte-identical output.
  """
  entries = []
  for name in sorted(features):
    entry = _field(0x0A, name.encode("utf-8")) + _field(0x12, _feature(features[name],
                                                                       dtypes[name], name))
    entries.append(_field(0x0A, entry))
  return _field(0x0A, b"".join(entries))


def decode_example(data: bytes) -> Dict[str, List]:
  """Parses serialised Example bytes into ``{name: list of values}``."""
  ex = Example.FromString(data)
  out: Dict[str, List] = {}
  for name, feature in ex.features.feature.items():
    kind = feature.WhichOneof("kind")
    out[name] = list(getattr(feature, kind).value) if kind else []
  return out
