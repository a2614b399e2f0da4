"""model.roberta_import.checkpoint's safetensors reading (the ``safetensors`` library behind our
header checks), without torch: files written by ``safetensors.numpy.save_file`` read back
exactly, locally, through ``tf.io.gfile`` and sharded; truncated, corrupt or non-conforming
files are one-line :class:`CheckpointError` s naming the file, also from the CLI."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file

from model import roberta
from model.roberta_import import checkpoint as roberta_checkpoint

KNOWN = {
    "f32": np.array([[0.5, -1.25, 3.0], [1e-8, 65504.0, -0.0]], np.float32),
    "f16": np.array([0.5, -1.25, 65504.0, 6e-5], np.float16),
    "bf16": np.array([[1.5, -2.25], [3.0e30, -1.0e-30]], ml_dtypes.bfloat16),
    "f64": np.array([0.1, -2.5], np.float64),
    "i64": np.array([-(2 ** 40), 7], np.int64),
    "i32": np.array([[1, -2]], np.int32),
    "u8": np.array([0, 255], np.uint8),
    "bool": np.array([True, False]),
    "empty": np.zeros([0, 3], np.float32),
    "scalar": np.array(2.0, np.float32),
}


def _checkpoint_dir(tmp_path, name="hf"):
  d = tmp_path / name
  d.mkdir()
  (d / "config.json").write_text("{}")
  return d


def _assert_known(tensors, names=tuple(KNOWN)):
  assert sorted(tensors) == sorted(names)
  for name in names:
    want = KNOWN[name]
    got = tensors[name]
    assert got.shape == want.shape, name
    if want.dtype.kind in "fV":  # floats (bfloat16 included) come back as float32
      assert got.dtype == np.float32, name
      np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=name)
    else:
      assert got.dtype == want.dtype, name
      np.testing.assert_array_equal(got, want, err_msg=name)


def test_save_file_tensors_read_back_exactly(tmp_path):
  d = _checkpoint_dir(tmp_path)
  save_file(KNOWN, str(d / "model.safetensors"), metadata={"format": "np"})
  _, tensors = roberta_checkpoint.load_hf_checkpoint(str(d))
  _assert_known(tensors)
  assert all(t.flags.writeable for t in tensors.values())


def test_reads_through_gfile(tmp_path):
  """A non-local path (TF's ram://, standing in for gs://) is copied for the library."""
  d = _checkpoint_dir(tmp_path)
  save_file(KNOWN, str(d / "model.safetensors"))
  remote = "ram://roberta_checkpoint_test"
  tf.io.gfile.makedirs(remote)
  for name in ("config.json", "model.safetensors"):
    tf.io.gfile.copy(str(d / name), f"{remote}/{name}", overwrite=True)
  _, tensors = roberta_checkpoint.load_hf_checkpoint(remote)
  _assert_known(tensors)


def test_sharded_index(tmp_path):
  d = _checkpoint_dir(tmp_path)
  first, second = ("f32", "bf16", "i64"), ("f16", "u8")
  save_file({k: KNOWN[k] for k in first}, str(d / "model-1.safetensors"))
  save_file({k: KNOWN[k] for k in second}, str(d / "model-2.safetensors"))
  weight_map = {**{k: "model-1.safetensors" for k in first},
                **{k: "model-2.safetensors" for k in second}}
  (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
  _, tensors = roberta_checkpoint.load_hf_checkpoint(str(d))
  _assert_known(tensors, first + second)


def test_roberta_prefix_and_old_layer_norm_names_are_normalised(tmp_path):
  d = _checkpoint_dir(tmp_path)
  gamma = np.arange(4, dtype=np.float32)
  save_file({"roberta.embeddings.LayerNorm.gamma": gamma, "lm_head.bias": gamma[:2]},
            str(d / "model.safetensors"))
  _, tensors = roberta_checkpoint.load_hf_checkpoint(str(d))
  assert sorted(tensors) == ["embeddings.LayerNorm.weight", "lm_head.bias"]
  np.testing.assert_array_equal(tensors["embeddings.LayerNorm.weight"], gamma)


def _refused(directory, match):
  with pytest.raises(roberta_checkpoint.CheckpointError, match=match) as e:
    roberta_checkpoint.load_hf_checkpoint(str(directory))
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith(str(directory / "model.safetensors") + ": ")
  return message


def _saved(tmp_path):
  d = _checkpoint_dir(tmp_path)
  save_file({"a": np.arange(6, dtype=np.float32), "b": np.ones(2, np.float16)},
            str(d / "model.safetensors"))
  return d, d / "model.safetensors"


def test_truncated_data_is_refused(tmp_path):
  d, path = _saved(tmp_path)
  raw = path.read_bytes()
  path.write_bytes(raw[:-3])  # the last tensor ("b", 4 bytes after "a"'s 24) loses 3 bytes
  _refused(d, r"tensor 'b' claims bytes \[24, 28\) but the data section has 25 bytes$")


def test_truncated_header_is_refused(tmp_path):
  d, path = _saved(tmp_path)
  (length,) = struct.unpack("<Q", path.read_bytes()[:8])
  path.write_bytes(path.read_bytes()[:8 + length // 2])
  _refused(d, rf"the header length {length} exceeds the {length // 2} bytes that follow it$")


def test_corrupt_header_is_refused(tmp_path):
  d, path = _saved(tmp_path)
  raw = bytearray(path.read_bytes())
  raw[8] = 0xFF  # the header's opening brace
  path.write_bytes(bytes(raw))
  _refused(d, r"the safetensors header is not valid UTF-8 \(byte 0\)$")
  raw[8] = ord("[")
  path.write_bytes(bytes(raw))
  _refused(d, r"the safetensors header is not valid JSON")


def _hand_written(path, header, data):
  raw = json.dumps(header).encode()
  path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("header, data, match", [
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8,
     r"bytes \[0, 4\) of the data section belong to no tensor"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 6,
     r"the tensors cover 4 of the data section's 6 bytes"),
    ({"__metadata__": {"format": 1}}, b"",
     r"__metadata__ 'format' is a JSON int, not a string"),
], ids=["hole", "trailing_bytes", "metadata_not_a_string"])
def test_what_the_library_would_refuse_is_refused_first(tmp_path, header, data, match):
  d = _checkpoint_dir(tmp_path)
  _hand_written(d / "model.safetensors", header, data)
  _refused(d, match)


def test_a_file_changed_after_its_header_was_read_is_refused(tmp_path):
  d, path = _saved(tmp_path)
  plan = roberta_checkpoint._plan_safetensors(str(path))
  save_file({"c": np.zeros(3, np.float32)}, str(path))
  with pytest.raises(roberta_checkpoint.CheckpointError,
                     match="the file changed while being read"):
    plan.load()


def test_cli_reports_a_truncated_file_in_one_line(tmp_path, capsys):
  d, path = _saved(tmp_path)
  (d / "config.json").write_text(json.dumps(dict(
      vocab_size=5, hidden_size=32, num_attention_heads=2, num_hidden_layers=1,
      intermediate_size=64, max_position_embeddings=10, layer_norm_eps=1e-12)))
  path.write_bytes(path.read_bytes()[:-3])
  out = tmp_path / "out"
  assert roberta.main(["--hf_dir", str(d), "--model_dir", str(out), "--preset", "tiny_cls",
                       "--same_vocab"]) == 1
  captured = capsys.readouterr()
  assert captured.out == ""
  assert captured.err.splitlines() == [
      f"python -m model.roberta: error: {path}: tensor 'b' claims bytes [24, 28) but the data "
      "section has 25 bytes"]
  assert not out.exists()
