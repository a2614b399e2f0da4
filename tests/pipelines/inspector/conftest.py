"""Fixtures of the inspector tests."""

from __future__ import annotations

import pytest

from pipelines.text.tokenizer import Tokenizer
from tests.pipelines.inspector.builders import make_pack, write_output


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
  return Tokenizer()


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory, tokenizer) -> str:
  """Glob of a records directory with a manifest, holding one hand-built pack."""
  return write_output(tmp_path_factory.mktemp("insp") / "out", [make_pack(tokenizer)],
                       tokenizer.describe())
