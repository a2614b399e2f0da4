"""Fixtures shared by the pipeline tests."""

import pytest


@pytest.fixture(scope="session")
def entities_dir(tmp_path_factory):
  """The output dir of the Wikipedia job over the hand-made pages of
  ``tests.pipelines.datasets.wikipedia.test_dataset`` (entity vocabulary and alias table: Paris, France, Seine, ...)."""
  from pipelines.datasets.wikipedia import fake_input as synth  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  from tests.pipelines.datasets.wikipedia.test_dataset import (  # pylint: disable=g-import-not-at-top
      PAGES, SMALL)
  base = tmp_path_factory.mktemp("wiki")
  dump = str(base / "tiny-pages-articles.xml.bz2")
  synth.write_dump(PAGES, dump)
  out = str(base / "out")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out] + SMALL) == 0
  return out


@pytest.fixture
def small_input(tmp_path):
  """A HotpotQA file of three questions on one paragraph (the job command-line tests)."""
  from tests.pipelines.helpers import (  # pylint: disable=g-import-not-at-top
      PARAS, hotpot_record, write_json)
  return write_json(tmp_path / "in.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS) for i in range(3)])
