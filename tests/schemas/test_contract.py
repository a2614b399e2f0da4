"""The record contract: Example wire format, TFRecord framing, versions, manifest rules."""

import io

import numpy as np
import pytest

from schemas import example_proto, manifest, records, tfrecord_io


def test_example_round_trip_is_deterministic():
  feats = {"b": [1, -2, 3], "a": [b"x", "é".encode()], "f": [0.5]}
  dtypes = {"a": "bytes", "b": "int64", "f": "float"}
  data = example_proto.encode_example(feats, dtypes)
  assert data == example_proto.encode_example(dict(reversed(list(feats.items()))), dtypes)
  assert example_proto.decode_example(data) == {"a": [b"x", "é".encode()], "b": [1, -2, 3],
                                                "f": [0.5]}


@pytest.mark.parametrize("low,high", [(0, 2), (0, 200), (-1, 600), (-1, 50_265), (0, 1 << 21),
                                      (-1, (1 << 28) - 1), (-1, 1 << 28), (-9, 5),
                                      (-(1 << 62), 1 << 62)])
def test_int64_features_are_byte_for_byte_what_protobuf_serialises(low, high):
  # Every width and sign path of the vectorised varints, against the protobuf runtime itself.
  rng = np.random.default_rng(high % 1000)
  for n in (1, 7, 1000):
    values = rng.integers(low, high, n, endpoint=True, dtype=np.int64)
    values[0] = low
    values[-1] = high
    expected = example_proto.Example()
    expected.features.feature["v"].int64_list.value.extend(values.tolist())
    assert (example_proto.encode_example({"v": values}, {"v": "int64"})
            == expected.SerializeToString(deterministic=True)), (low, high, n)


@pytest.mark.parametrize("high", [1, 127, 128, 50_265, (1 << 21) + 5, (1 << 28) - 1])
def test_int64_features_with_runs_of_minus_one_are_what_protobuf_serialises(high):
  # -1 (padding: ten bytes each) at the ends, alone and in runs, between values of every width.
  rng = np.random.default_rng(high)
  for n in (1, 2, 5, 300):
    for share in (0.0, 0.1, 0.5, 0.95, 1.0):
      values = rng.integers(0, high, n, endpoint=True, dtype=np.int64)
      runs = rng.random(n) < share
      values[runs | np.roll(runs, 1) & (rng.random(n) < 0.5)] = -1
      expected = example_proto.Example()
      expected.features.feature["v"].int64_list.value.extend(values.tolist())
      assert (example_proto.encode_example({"v": values}, {"v": "int64"})
              == expected.SerializeToString(deterministic=True)), (high, n, share, values)


def test_tfrecord_framing_round_trip_and_corruption():
  payloads = [b"", b"abc", bytes(range(256)) * 3]
  blob = b"".join(tfrecord_io.encode_record(p) for p in payloads)
  assert list(tfrecord_io.iter_records(io.BytesIO(blob))) == payloads
  broken = bytearray(blob)
  broken[-1] ^= 1
  with pytest.raises(tfrecord_io.CorruptRecordError, match="checksum"):
    list(tfrecord_io.iter_records(io.BytesIO(bytes(broken))))
  with pytest.raises(tfrecord_io.CorruptRecordError, match="truncated"):
    list(tfrecord_io.iter_records(io.BytesIO(blob[:-2])))


def test_other_major_version_is_refused_with_a_clear_error():
  records.check_version("1.7.0")
  with pytest.raises(records.SchemaVersionError, match=r"2\.0\.0.*1\.x"):
    records.check_version(b"2.0.0", "records in x.tfrecord")
  with pytest.raises(records.SchemaVersionError, match="Malformed"):
    records.check_version("v1")


def test_validate_record_checks_lengths():
  N, L = 2, 3
  rec = {f.name: [0] * (records.expected_lengths(N, L)[f.name] or 0) for f in records.FEATURES}
  rec["schema_version"] = [records.SCHEMA_VERSION.encode()]
  records.validate_record(rec, N, L)
  rec["answer_begin"] = [1]
  with pytest.raises(ValueError, match="Ragged answer"):
    records.validate_record(rec, N, L)
  rec["answer_begin"] = []
  rec["token_ids"] = [0] * 5
  with pytest.raises(ValueError, match="token_ids"):
    records.validate_record(rec, N, L)


def _manifest(**counts):
  m = {"schema_version": records.SCHEMA_VERSION, "tokenizer": {}, "config": {}, "shards": [],
       "counts": {"input": 5, "written": 3, "skipped": 1, "rejected": 1},
       "rejected_by_reason": {"parse/x": 1}, "skipped_by_reason": {"dedup/y": 1}}
  m["counts"].update(counts)
  return m


def test_manifest_counts_must_reconcile():
  assert manifest.loads(manifest.dumps(_manifest()))["counts"]["input"] == 5
  with pytest.raises(manifest.ManifestError, match="reconcile"):
    manifest.dumps(_manifest(input=6))
  bad = _manifest()
  bad["rejected_by_reason"] = {}
  with pytest.raises(manifest.ManifestError, match="rejected_by_reason"):
    manifest.dumps(bad)
  old = _manifest()
  old["schema_version"] = "0.9"
  with pytest.raises(records.SchemaVersionError):
    manifest.dumps(old)


def _protobuf_reference(feats, dtypes):
  ex = example_proto.Example()
  for name, values in feats.items():
    f = ex.features.feature[name]
    kind = {"int64": f.int64_list, "bytes": f.bytes_list, "float": f.float_list}[dtypes[name]]
    kind.value.extend(values)
    if not values:
      kind.SetInParent()
  return ex.SerializeToString(deterministic=True)


def test_fast_encoder_equals_protobuf_serialisation():
  import random
  rng = random.Random(0)
  edge = [0, 1, -1, 127, 128, 16383, 16384, 2**31 - 1, -2**31, 2**63 - 1, -2**63, 300, -300]
  for trial in range(50):
    feats, dtypes = {}, {}
    for i in range(rng.randint(1, 6)):
      name = f"f{rng.randint(0, 99)}_é"
      dtype = rng.choice(["int64", "bytes", "float"])
      n = rng.choice([0, 1, 3, 200])
      if dtype == "int64":
        values = [rng.choice(edge + [rng.randint(-2**40, 2**40)]) for _ in range(n)]
      elif dtype == "bytes":
        values = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))) for _ in range(n)]
      else:
        values = [float(rng.randint(-1000, 1000)) / 8 for _ in range(n)]
      feats[name], dtypes[name] = values, dtype
    assert example_proto.encode_example(feats, dtypes) == _protobuf_reference(feats, dtypes)
