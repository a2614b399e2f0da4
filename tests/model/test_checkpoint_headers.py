"""Hostile and damaged checkpoint files (model.roberta's readers): every one is refused with a
one-line :class:`model.roberta.CheckpointError` naming the file, before any tensor is read, and
``python -m model.roberta`` reports it as one error line (exit status 1), no traceback.

The files are written by hand (no torch needed): safetensors headers, and ``pytorch_model.bin``
zips whose ``data.pkl`` is assembled from pickle opcodes.
"""

import json
import os
import pathlib
import pickle
import re
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from model.roberta_import import checkpoint as roberta

REPO = pathlib.Path(__file__).resolve().parents[2]
WORDS = "embeddings.word_embeddings.weight"
# What the CLI needs to get as far as reading the weights (preset tiny_cls: one BERT_1 layer,
# so no note about the layer count is printed).
HF_CONFIG = dict(vocab_size=5, hidden_size=32, num_attention_heads=2, num_hidden_layers=1,
                 intermediate_size=64, max_position_embeddings=10, layer_norm_eps=1e-12)
# Lines TensorFlow's native start-up may print to stderr whatever TF_CPP_MIN_LOG_LEVEL says.
TF_BANNER = re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called"
                       r"|^[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")


def _checkpoint_dir(tmp_path, name="hf"):
  d = tmp_path / name
  d.mkdir()
  (d / "config.json").write_text(json.dumps(HF_CONFIG))
  return d


def _safetensors(path, header, data=b"", length=None):
  """Writes ``length`` (default: the header's), the header (a dict as JSON, or raw bytes), then
  ``data``."""
  raw = header if isinstance(header, bytes) else json.dumps(header).encode()
  path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)


def _unicode(text):
  raw = text.encode()
  return b"X" + struct.pack("<I", len(raw)) + raw  # BINUNICODE


def _torch_pickle(numel, size, name="w"):
  """Protocol-2 ``data.pkl`` of ``{name: tensor}`` as torch writes it: the tensor is
  ``torch._utils._rebuild_tensor_v2(storage, 0, (size,), (1,), False, OrderedDict())`` with the
  storage the persistent id ``("storage", torch.FloatStorage, "0", "cpu", numel)``."""
  return (b"\x80\x02}" + _unicode(name) + b"ctorch._utils\n_rebuild_tensor_v2\n(("
          + _unicode("storage") + b"ctorch\nFloatStorage\n" + _unicode("0") + _unicode("cpu")
          + b"J" + struct.pack("<i", numel) + b"tQK\x00J" + struct.pack("<i", size)
          + b"\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtRs.")


def _torch_bin(path, data_pkl, storage=None):
  with zipfile.ZipFile(path, "w") as z:
    z.writestr("archive/data.pkl", data_pkl)
    z.writestr("archive/byteorder", "little")
    if storage is not None:
      z.writestr("archive/data/0", storage)


def _exploit_pickle(marker):
  class Exploit:
    def __reduce__(self):
      return os.system, (f"touch {marker}",)

  return pickle.dumps({"w": Exploit()}, protocol=2)


def _refused(directory, match):
  """The reader raises CheckpointError (one line, matching ``match``) and writes nothing."""
  before = sorted(os.listdir(directory))
  with pytest.raises(roberta.CheckpointError, match=match) as e:
    roberta.load_hf_checkpoint(str(directory))
  assert "\n" not in str(e.value)
  assert sorted(os.listdir(directory)) == before
  return str(e.value)


def _run_cli(hf_dir, model_dir):
  """``python -m model.roberta`` on ``hf_dir``: ``(returncode, stdout, stderr lines that are
  not TensorFlow's start-up banner)``."""
  env = dict(os.environ)
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user runs it: no banner either way
  proc = subprocess.run(
      [sys.executable, "-m", "model.roberta", "--hf_dir", str(hf_dir), "--model_dir",
       str(model_dir), "--preset", "tiny_cls", "--same_vocab"],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
  assert "Traceback" not in proc.stderr, proc.stderr
  lines = [x for x in proc.stderr.splitlines() if x.strip()]
  assert not any(TF_BANNER.match(x) for x in lines), lines
  return proc.returncode, proc.stdout, lines


def _assert_cli_error(tmp_path, hf_dir, file_name):
  model_dir = tmp_path / "out"
  model_dir.mkdir()
  before = sorted(os.listdir(hf_dir))
  rc, out, err = _run_cli(hf_dir, model_dir)
  assert rc == 1, (out, err)
  assert len(err) == 1 and err[0].startswith("python -m model.roberta: error: "), err
  assert file_name in err[0]
  assert out.strip() == ""
  assert os.listdir(model_dir) == [] and sorted(os.listdir(hf_dir)) == before
  return err[0]


# --------------------------------------------------------------------------- safetensors


HOSTILE_SAFETENSORS = {
    "offsets_beyond_file": (
        lambda p: _safetensors(p, {WORDS: {"dtype": "F32", "shape": [2 ** 40],
                                           "data_offsets": [0, 2 ** 42]}}, b"\0" * 1234),
        re.escape(f"model.safetensors: tensor '{WORDS}' claims bytes [0, 4398046511104) but "
                  "the data section has 1234 bytes")),
    "dtype_times_shape_is_not_the_length": (
        lambda p: _safetensors(p, {WORDS: {"dtype": "F32", "shape": [3],
                                           "data_offsets": [0, 8]}}, b"\0" * 8),
        r"model.safetensors: tensor .* is F32 \[3\] \(12 bytes\) but its data_offsets "
        r"\[0, 8\) hold 8 bytes"),
    "header_length_beyond_file": (
        lambda p: _safetensors(p, {}, length=10 ** 9),
        r"model.safetensors: the header length 1000000000 exceeds the 2 bytes"),
    "header_length_over_64_bits_of_nonsense": (
        lambda p: _safetensors(p, b"{}", length=2 ** 64 - 1),
        r"model.safetensors: the header length \d+ exceeds"),
    "header_not_json": (
        lambda p: _safetensors(p, b"{'not': json"),
        r"model.safetensors: the safetensors header is not valid JSON"),
    "header_not_utf8": (
        lambda p: _safetensors(p, b'{"\xff\xfe": 1}'),
        r"model.safetensors: the safetensors header is not valid UTF-8"),
    "header_not_an_object": (
        lambda p: _safetensors(p, [1, 2]),
        r"model.safetensors: the safetensors header is a JSON list, not an object"),
    "unknown_dtype": (
        lambda p: _safetensors(p, {WORDS: {"dtype": "F8_E9M9", "shape": [2],
                                           "data_offsets": [0, 2]}}, b"\0" * 2),
        r"model.safetensors: tensor .* has unknown dtype 'F8_E9M9'"),
    "overlapping_offsets": (
        lambda p: _safetensors(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
                               b"\0" * 12),
        r"model.safetensors: tensors 'a' \[0, 8\) and 'b' \[4, 12\) overlap"),
    "negative_offset": (
        lambda p: _safetensors(p, {"a": {"dtype": "F32", "shape": [1],
                                         "data_offsets": [-4, 0]}}, b"\0" * 4),
        r"model.safetensors: tensor 'a' has invalid data_offsets"),
    "duplicate_tensor": (
        lambda p: _safetensors(p, b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},'
                                  b' "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}',
                               b"\0" * 2),
        r"model.safetensors: the safetensors header has the key 'a' twice"),
    "shorter_than_the_length_field": (
        lambda p: p.write_bytes(b"\x01\x02"),
        r"model.safetensors: not a safetensors file"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SAFETENSORS))
def test_hostile_safetensors_are_refused(case, tmp_path):
  write, match = HOSTILE_SAFETENSORS[case]
  d = _checkpoint_dir(tmp_path)
  write(d / "model.safetensors")
  _refused(d, match)


def test_a_valid_safetensors_still_reads(tmp_path):
  d = _checkpoint_dir(tmp_path)
  values = np.arange(6, dtype="<f4")
  _safetensors(d / "model.safetensors",
               {"__metadata__": {"format": "pt"},
                "b": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]},
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "empty": {"dtype": "F32", "shape": [0, 3], "data_offsets": [24, 24]}},
               values.tobytes())
  _, tensors = roberta.load_hf_checkpoint(str(d))
  np.testing.assert_array_equal(tensors["a"], values[:2])
  np.testing.assert_array_equal(tensors["b"], values[2:].reshape(2, 2))
  assert tensors["empty"].shape == (0, 3)


def test_every_shard_header_is_checked_before_any_tensor_is_read(tmp_path, monkeypatch):
  d = _checkpoint_dir(tmp_path)
  good = {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}
  _safetensors(d / "model-1.safetensors", good, b"\1")
  _safetensors(d / "model-2.safetensors", {"b": {"dtype": "F32", "shape": [1],
                                                 "data_offsets": [0, 4]}}, b"\0")
  (d / "model.safetensors.index.json").write_text(json.dumps(
      {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}))
  monkeypatch.setattr(roberta, "_decode", lambda *a, **k: pytest.fail("a tensor was read"))
  _refused(d, r"model-2.safetensors: tensor 'b' claims bytes \[0, 4\) but the data section "
              r"has 1 bytes")


def test_an_index_may_only_name_files_next_to_it(tmp_path):
  d = _checkpoint_dir(tmp_path)
  _safetensors(tmp_path / "outside.safetensors", {})
  (d / "model.safetensors.index.json").write_text(json.dumps(
      {"weight_map": {"a": "../outside.safetensors"}}))
  _refused(d, r"model.safetensors.index.json: tensor 'a' maps to '../outside.safetensors', "
              r"not a weights file next to the index")


@pytest.mark.slow
def test_cli_reports_offsets_beyond_the_file_in_one_line(tmp_path):
  """It used to die with a segmentation fault (rc 139, no output)."""
  hf = _checkpoint_dir(tmp_path)
  HOSTILE_SAFETENSORS["offsets_beyond_file"][0](hf / "model.safetensors")
  line = _assert_cli_error(tmp_path, hf, "model.safetensors")
  assert line.endswith(f"tensor '{WORDS}' claims bytes [0, 4398046511104) but the data "
                       "section has 1234 bytes")


@pytest.mark.slow
def test_pretrain_init_roberta_reports_a_hostile_checkpoint_and_leaves_no_model_dir(tmp_path):
  """``model.pretrain --init_roberta`` used to die the same way and leave a config.json."""
  from tests.model import packs  # pylint: disable=g-import-not-at-top
  records = packs.qa_output_dir(str(tmp_path / "records"), num_packs=1)
  hf = _checkpoint_dir(tmp_path)
  (hf / "config.json").write_text(json.dumps(dict(HF_CONFIG, max_position_embeddings=64)))
  HOSTILE_SAFETENSORS["offsets_beyond_file"][0](hf / "model.safetensors")
  # A complete dir but for the weights (--init_roberta checks for vocab.json first).
  (hf / "vocab.json").write_text(json.dumps({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3,
                                              "<mask>": 4}))
  env = dict(os.environ)
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  proc = subprocess.run(
      [sys.executable, "-m", "model.pretrain", "--records_dir", records, "--model_dir",
       str(tmp_path / "pre"), "--preset", "tiny", "--init_roberta", str(hf), "--steps", "2"],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert proc.stderr.splitlines() == [
      f"python -m model.pretrain: error: --init_roberta: {hf / 'model.safetensors'}: tensor "
      f"'{WORDS}' claims bytes [0, 4398046511104) but the data section has 1234 bytes"]
  assert not (tmp_path / "pre").exists()


# --------------------------------------------------------------------------- pytorch_model.bin


def test_pickle_calling_os_system_is_refused_and_not_run(tmp_path):
  marker = tmp_path / "pwned"
  d = _checkpoint_dir(tmp_path)
  _torch_bin(d / "pytorch_model.bin", _exploit_pickle(marker))
  message = _refused(d, r"pytorch_model.bin: refused to load: the pickle calls os.system "
                        r"\(only tensors and plain containers are allowed\)$")
  assert message.startswith(str(d / "pytorch_model.bin"))
  assert not marker.exists()


@pytest.mark.slow
def test_cli_reports_a_refused_pickle_in_one_line(tmp_path):
  marker = tmp_path / "pwned"
  hf = _checkpoint_dir(tmp_path)
  _torch_bin(hf / "pytorch_model.bin", _exploit_pickle(marker))
  line = _assert_cli_error(tmp_path, hf, "pytorch_model.bin")
  assert line.endswith("pytorch_model.bin: refused to load: the pickle calls os.system (only "
                       "tensors and plain containers are allowed)")
  assert not marker.exists()


def test_a_valid_hand_written_torch_bin_reads(tmp_path):
  """The opcode-built pickle below is what the hostile variants change."""
  d = _checkpoint_dir(tmp_path)
  values = np.arange(3, dtype="<f4")
  _torch_bin(d / "pytorch_model.bin", _torch_pickle(3, 3), values.tobytes())
  _, tensors = roberta.load_hf_checkpoint(str(d))
  np.testing.assert_array_equal(tensors["w"], values)


HOSTILE_BINS = {
    "storage_shorter_than_declared": (
        lambda p: _torch_bin(p, _torch_pickle(numel=10, size=10), b"\0" * 8),
        r"pytorch_model.bin: storage '0' declares 10 F32 values \(40 bytes\) but "
        r"archive/data/0 has 8 bytes"),
    "storage_of_2_to_the_30_values": (
        lambda p: _torch_bin(p, _torch_pickle(numel=2 ** 30, size=2 ** 30), b"\0" * 8),
        r"pytorch_model.bin: storage '0' declares 1073741824 F32 values"),
    "tensor_past_its_storage": (
        lambda p: _torch_bin(p, _torch_pickle(numel=2, size=3), b"\0" * 8),
        r"pytorch_model.bin: a tensor of size=\(3,\) stride=\(1,\) offset=0 reads past its "
        r"storage '0' of 2 values"),
    "storage_missing": (
        lambda p: _torch_bin(p, _torch_pickle(numel=2, size=2)),
        r"pytorch_model.bin: storage '0' is missing from the archive"),
    "not_a_pickle": (
        lambda p: _torch_bin(p, b"this is not a pickle"),
        r"pytorch_model.bin: archive/data.pkl is not a valid torch pickle"),
    "truncated_pickle": (
        lambda p: _torch_bin(p, _torch_pickle(2, 2)[:-9], b"\0" * 8),
        r"pytorch_model.bin: archive/data.pkl is not a valid torch pickle"),
    "not_a_zip": (
        lambda p: p.write_bytes(b"\x80\x02 legacy or garbage"),
        r"pytorch_model.bin: not a zip-format torch checkpoint"),
    "empty_file": (
        lambda p: p.write_bytes(b""),
        r"pytorch_model.bin: not a zip-format torch checkpoint"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_BINS))
def test_hostile_torch_bins_are_refused(case, tmp_path):
  write, match = HOSTILE_BINS[case]
  d = _checkpoint_dir(tmp_path)
  write(d / "pytorch_model.bin")
  _refused(d, match)


def test_truncated_zip_is_refused(tmp_path):
  d = _checkpoint_dir(tmp_path)
  path = d / "pytorch_model.bin"
  _torch_bin(path, _torch_pickle(64, 64), b"\0" * 256)
  raw = path.read_bytes()
  path.write_bytes(raw[:len(raw) // 2])
  _refused(d, r"pytorch_model.bin: a truncated or damaged zip archive")
