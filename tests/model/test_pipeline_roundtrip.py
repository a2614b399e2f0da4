"""Pipeline -> TFRecords -> tf.data reader: the two halves agree on every feature."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from schemas import documents as documents_schema
from schemas import example_proto, records, tfrecord_io
from model.data import pack_reader as input_lib
from pipelines import runner
from pipelines.beam.config import RecordsConfig
from pipelines.text.segmenter import SegmenterConfig

N, L = 6, 40
CONFIG = RecordsConfig(segmenter=SegmenterConfig(seq_length=L, overlap=8,
                                                 max_segments_per_document=N,
                                                 max_question_tokens=10),
                       segments_per_pack=N, num_shards=2)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("roundtrip")
  ctx = [["Zürich", ["Zürich is the largest city in Switzerland.",
                     " Zürich hosts ETH, founded in 1855."]],
         ["Bern", ["Bern is the capital.", " It is smaller than Zürich."] +
          [f" Sentence number {i} about Bern." for i in range(8)]]]
  data = [{"_id": "a", "question": "Which city hosts ETH?", "answer": "Zürich",
           "supporting_facts": [["Zürich", 1]], "context": ctx},
          {"_id": "b", "question": "Is Bern the capital?", "answer": "yes",
           "supporting_facts": [["Bern", 0]], "context": ctx[1:]}]
  path = tmp / "in.json"
  path.write_text(json.dumps(data))
  out = str(tmp / "out")
  runner.run_dataset("hotpotqa", str(path), out, CONFIG)
  return out


def _python_records(out):
  recs = []
  for path in sorted(glob.glob(os.path.join(out, "records-*.tfrecord"))):
    recs += [example_proto.decode_example(p) for p in tfrecord_io.read_records(path)]
  return recs


@pytest.mark.slow
def test_reader_matches_python_decoding(out_dir):
  ds = input_lib.dataset_from_output_dir(out_dir)
  packs = list(ds.as_numpy_iterator())
  py = _python_records(out_dir)
  assert len(packs) == len(py) > 0
  py_by_id = {r["pack_id"][0]: r for r in py}
  for pack in packs:
    ref = py_by_id[pack["pack_id"]]
    for f in records.features_of_kind("token"):
      np.testing.assert_array_equal(pack[f.name], np.array(ref[f.name]).reshape(N, L), f.name)
    for f in records.features_of_kind("segment"):
      if f.dtype == "int64":
        np.testing.assert_array_equal(pack[f.name], ref[f.name], f.name)
      else:
        assert list(pack[f.name]) == ref[f.name], f.name
    begin = np.zeros((N, L), np.int32)
    end = np.zeros((N, L), np.int32)
    for s, b, e in zip(ref["answer_segment"], ref["answer_begin"], ref["answer_end"]):
      begin[s, b] = 1
      end[s, e] = 1
    np.testing.assert_array_equal(pack["answer_begin_labels"], begin)
    np.testing.assert_array_equal(pack["answer_end_labels"], end)


@pytest.mark.slow
def test_labels_point_at_the_answer_text(out_dir):
  docs = documents_schema.load(out_dir)
  found = 0
  for pack in input_lib.dataset_from_output_dir(out_dir).as_numpy_iterator():
    for s, t in zip(*np.nonzero(pack["answer_begin_labels"])):
      e = t + int(np.argmax(pack["answer_end_labels"][s, t:]))
      text = docs[pack["document_id"][s].decode()]["text"]
      assert text[pack["char_begin"][s, t]:pack["char_end"][s, e]] == "Zürich"
      found += 1
    yes = pack["answer_type"][pack["document_id"] == b"b"]
    assert set(yes.tolist()) <= {records.ANSWER_TYPE_YES}
  assert found >= 3


def test_reader_refuses_pipeline_records_of_another_major_version(out_dir, tmp_path):
  path = sorted(glob.glob(os.path.join(out_dir, "records-*.tfrecord")))[0]
  rec = example_proto.decode_example(next(tfrecord_io.read_records(path)))
  rec["schema_version"] = [b"2.0.0"]
  dtypes = {f.name: f.dtype for f in records.FEATURES}
  bad = tmp_path / "bad.tfrecord"
  bad.write_bytes(tfrecord_io.encode_record(example_proto.encode_example(rec, dtypes)))
  with pytest.raises(records.SchemaVersionError, match="2.0.0"):
    input_lib.make_dataset(str(bad), L, N)
  # The in-graph check also stops records that slip past the eager check.
  ds = input_lib.make_dataset(str(bad), L, N, check_versions=False)
  with pytest.raises(tf.errors.InvalidArgumentError):
    list(ds)
