"""Fixtures shared by the pipeline tests."""

import pytest


@pytest.fixture(scope="session")
def entities_dir(tmp_path_factory):
  """The output dir of the Wikipedia job over the hand-made pages of
  ``test_wikipedia_pipeline`` (entity vocabulary and alias table: Paris, France, Seine, ...)."""
  from demo import synthetic_wikipedia as synth  # pylint: disable=g-import-not-at-top
  from pipelines import wikipedia  # pylint: disable=g-import-not-at-top
  from tests.pipelines.test_wikipedia_pipeline import PAGES, SMALL  # pylint: disable=g-import-not-at-top
  base = tmp_path_factory.mktemp("wiki")
  dump = str(base / "tiny-pages-articles.xml.bz2")
  synth.write_dump(PAGES, dump)
  out = str(base / "out")
  assert wikipedia.main(["--input", dump, "--output_dir", out] + SMALL) == 0
  return out
