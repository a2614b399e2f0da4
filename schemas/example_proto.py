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


def encode_example(features: Mapping[str, Value], dtypes: Mapping[str, str]) -> bytes:
  """Serialises ``{name: values}``; ``dtypes[name]`` is 'int64', 'bytes' or 'float'.

  Keys are written in sorted order, so equal inputs give byte-identical output.
  """
  ex = Example()
  fmap = ex.features.feature
  for name in sorted(features):
    dtype = dtypes[name]
    values = features[name]
    if dtype == "int64":
      fmap[name].int64_list.value.extend(values)
    elif dtype == "bytes":
      fmap[name].bytes_list.value.extend(
          v.encode("utf-8") if isinstance(v, str) else v for v in values)
    elif dtype == "float":
      fmap[name].float_list.value.extend(values)
    else:
      raise ValueError(f"Unknown dtype {dtype!r} for feature {name!r}.")
  return ex.SerializeToString(deterministic=True)


def decode_example(data: bytes) -> Dict[str, List]:
  """Parses serialised Example bytes into ``{name: list of values}``."""
  ex = Example.FromString(data)
  out: Dict[str, List] = {}
  for name, feature in ex.features.feature.items():
    kind = feature.WhichOneof("kind")
    out[name] = list(getattr(feature, kind).value) if kind else []
  return out
