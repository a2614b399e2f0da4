"""Reader round trip and schema-version refusal."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from model.data import pack_reader as input_lib
from schemas import records
from tests.model import packs

N, L = 3, 10


def _pack(version=records.SCHEMA_VERSION, pack_id="00000-0"):
  p = packs.empty_pack(N, L, pack_id=pack_id, version=version)
  packs.fill_segment(p, 0, 0, "docA", "qA", [5], [11, 12, 13, 14], [[0, 3], [4, 7], [8, 9],
                                                                     [10, 15]],
                     segment_index=0, num_segments=2, supporting=1)
  packs.fill_segment(p, 2, 0, "docA", "qA", [5], [21, 22], [[16, 18], [19, 20]],
                     segment_index=1, num_segments=2, supporting=0)
  packs.add_answer(p, 0, 3, 4)
  packs.add_answer(p, 2, 4, 5)
  packs.add_answer(p, 0, 3, 3)  # duplicate begin -> still 1 in the multi-hot map
  packs.add_mention(p, 2, 4, 4, 42)
  packs.add_mention(p, 0, 1, 2, 2**40)  # entity ids beyond int32 survive
  return p


def test_round_trip_exact(tmp_path):
  p = _pack()
  path = packs.write_records(str(tmp_path / "r.tfrecord"), [p])
  (x,) = list(input_lib.make_dataset(path, L, N))
  for name in ("token_ids", "input_mask", "word_start", "token_kind", "char_begin", "char_end"):
    np.testing.assert_array_equal(x[name].numpy(), p[name], err_msg=name)
    assert x[name].dtype == tf.int32
  for name in ("segment_mask", "document_index", "segment_index", "num_segments",
               "question_length", "context_char_begin", "context_char_end", "answer_type",
               "supporting"):
    np.testing.assert_array_equal(x[name].numpy(), p[name], err_msg=name)
  assert x["document_index"].numpy().tolist() == [0, -1, 0]
  assert [s.decode() for s in x["document_id"].numpy()] == ["docA", "", "docA"]
  assert x["schema_version"].numpy() == b"1.0.0" and x["pack_id"].numpy() == b"00000-0"
  assert x["answer_begin"].numpy().tolist() == [3, 4, 3]
  begin = np.zeros([N, L], np.int32)
  begin[0, 3] = begin[2, 4] = 1
  end = np.zeros([N, L], np.int32)
  end[0, 4] = end[2, 5] = end[0, 3] = 1
  np.testing.assert_array_equal(x["answer_begin_labels"].numpy(), begin)
  np.testing.assert_array_equal(x["answer_end_labels"].numpy(), end)
  mention_begin = np.zeros([N, L], np.int32)
  mention_begin[2, 4] = mention_begin[0, 1] = 1
  mention_end = np.zeros([N, L], np.int32)
  mention_end[2, 4] = mention_end[0, 2] = 1
  np.testing.assert_array_equal(x["mention_begin_labels"].numpy(), mention_begin)
  np.testing.assert_array_equal(x["mention_end_labels"].numpy(), mention_end)
  entity = np.zeros([N, L], np.int64)
  entity[2, 4], entity[0, 1] = 42, 2**40
  np.testing.assert_array_equal(x["mention_entity_begin"].numpy(), entity)
  assert x["mention_entity_id"].dtype == tf.int64


def test_output_dir_uses_manifest(tmp_path):
  d = packs.qa_output_dir(str(tmp_path / "out"), seq_length=24, segments_per_pack=4,
                          num_packs=2)
  xs = list(input_lib.dataset_from_output_dir(d))
  assert len(xs) == 2
  assert xs[0]["token_ids"].shape == (4, 24)
  assert [x["pack_id"].numpy() for x in xs] == [b"00000-0", b"00000-1"]


def test_refuses_other_major_version_eagerly(tmp_path):
  path = packs.write_records(str(tmp_path / "v2.tfrecord"), [_pack(version="2.0.0")])
  with pytest.raises(records.SchemaVersionError) as e:
    input_lib.make_dataset(path, L, N)
  msg = str(e.value)
  assert "v2.tfrecord" in msg and "'2.0.0'" in msg and "1.x" in msg


def test_minor_version_accepted(tmp_path):
  path = packs.write_records(str(tmp_path / "v11.tfrecord"), [_pack(version="1.1.0")])
  assert len(list(input_lib.make_dataset(path, L, N))) == 1


def test_refuses_other_major_version_in_graph(tmp_path):
  # The first record is fine (passes the eager check); the second one is not.
  path = packs.write_records(str(tmp_path / "mixed.tfrecord"),
                             [_pack(), _pack(version="2.0.0", pack_id="00000-1")])
  ds = input_lib.make_dataset(path, L, N)
  it = iter(ds)
  next(it)
  with pytest.raises(tf.errors.InvalidArgumentError, match="SchemaVersionError.*2.0.0"):
    next(it)


def test_manifest_version_refused(tmp_path):
  d = packs.qa_output_dir(str(tmp_path / "out"), num_packs=1)
  mpath = os.path.join(d, "manifest.json")
  m = json.load(open(mpath))
  m["schema_version"] = "3.0.0"
  json.dump(m, open(mpath, "w"))
  with pytest.raises(records.SchemaVersionError, match="3.0.0"):
    input_lib.dataset_from_output_dir(d)
