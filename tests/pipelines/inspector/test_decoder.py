"""Tests of pipelines/inspector/decoder.py: the records' tokenizer, checked."""

from __future__ import annotations

import pytest

from pipelines.inspector import decoder, inspect_error, record_io
from tests.pipelines.inspector.builders import make_pack, write_output

def test_tokenizer_mismatch_and_missing_vocab_fail(tmp_path, tokenizer):
  desc = dict(tokenizer.describe(), fingerprint="sha256:" + "0" * 64)
  paths = record_io.match_paths(write_output(tmp_path / "fp", [make_pack(tokenizer)], desc))
  with pytest.raises(inspect_error.InspectError, match="fingerprint"):
    decoder.build_tokenizer(record_io.read_manifest(paths))
  desc = dict(tokenizer.describe(), name="/data/roberta/vocab.json")
  paths = record_io.match_paths(write_output(tmp_path / "roberta", [make_pack(tokenizer)], desc))
  with pytest.raises(inspect_error.InspectError, match="--vocab_file"):
    decoder.build_tokenizer(record_io.read_manifest(paths))
  # The error says what matched nothing (it used to name the job's --input).
  with pytest.raises(inspect_error.InspectError, match=r"^records '.*nothing-\*\.tfrecord' matches no file"):
    record_io.match_paths(str(tmp_path / "nothing-*.tfrecord"))
