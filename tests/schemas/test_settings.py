"""Settings declared once (:mod:`schemas.settings`): a dataclass field is a flag, with its help
beside it."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Optional, Tuple

import pytest

from schemas import settings
from schemas.settings import setting


@dataclasses.dataclass(frozen=True)
class Inner:
  threads: int = setting(8, help="threads (default: %(default)s)")
  kinds: Tuple[str, ...] = setting(("A",), help="kinds", show=",".join,
                                   parse=lambda t: tuple(t.split(",")))


@dataclasses.dataclass(frozen=True)
class Outer:
  name: str = setting("x", choices=("x", "y"), help="a name")
  size: float = setting(0.5, flag="outer_size", help="a size")
  path: Optional[str] = setting(None, help="a path")
  inner: Inner = setting(Inner(), prefix="in_")
  loud: bool = setting(False, help="be loud")
  internal: int = 3  # no flag

  def __post_init__(self):
    if self.size < 0:
      raise ValueError("--outer_size must be >= 0")


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="t", allow_abbrev=False)
  settings.add_flags(p, Outer)
  return p


def test_every_setting_is_a_flag_in_field_order_nested_in_place():
  assert settings.flag_names(Outer) == ["name", "outer_size", "path", "in_threads", "in_kinds",
                                        "loud"]
  options = [a.option_strings for a in parser()._actions[1:]]  # pylint: disable=protected-access
  assert options == [["--name"], ["--outer_size"], ["--path"], ["--in_threads"], ["--in_kinds"],
                     ["--loud"], ["--noloud"]]


def test_the_defaults_round_trip_and_flags_set_the_fields():
  assert settings.from_args(Outer, parser().parse_args([])) == Outer()
  got = settings.from_args(Outer, parser().parse_args(
      ["--name", "y", "--outer_size", "2", "--in_threads", "3", "--in_kinds", "A,B", "--loud",
       "--path", "p"]))
  assert got == Outer(name="y", size=2.0, path="p", inner=Inner(threads=3, kinds=("A", "B")),
                      loud=True)
  assert isinstance(got.size, float) and got.internal == 3


def test_types_choices_and_help_come_from_the_field():
  p = parser()
  with pytest.raises(SystemExit):
    p.parse_args(["--in_threads", "many"])
  with pytest.raises(SystemExit):
    p.parse_args(["--name", "z"])
  text = p.format_help()
  assert "threads (default: 8)" in text and "--in_kinds IN_KINDS" in text
  assert "default: --noloud; --noloud turns it off" in " ".join(text.split())


def test_the_configs_own_check_is_the_error():
  with pytest.raises(ValueError, match="--outer_size"):
    settings.from_args(Outer, parser().parse_args(["--outer_size", "-1"]))


def test_the_annotation_flags_are_the_annotation_configs_settings():
  from pipelines.beam import annotation_config  # pylint: disable=g-import-not-at-top
  from schemas import cli  # pylint: disable=g-import-not-at-top
  p = cli.Parser("pipelines x", "d", "python -m pipelines x --input a")
  annotation_config.add_flags(p)
  names = [s[2:] for a in p._actions for s in a.option_strings  # pylint: disable=protected-access
           if s.startswith("--") and not s.startswith("--no") and s != "--help"]
  assert names == settings.flag_names(annotation_config.AnnotationConfig)
  assert names[:8] == ["ner", "spacy_model", "linker", "entities_dir", "linker_min_count",
                       "linker_min_probability", "ruler_patterns", "annotate_batch_size"]
  assert "nl_cache_dir" in names and "nl_mention_types" in names and len(names) == 24
  config = annotation_config.config_from_args
  assert config(p.parse_args([])) == annotation_config.AnnotationConfig()
  got = config(p.parse_args(["--ner", "cloud", "--nl_cache_dir", "c", "--nl_mention_types",
                             "proper,common"]))
  assert got.cloud.cache_dir == "c" and got.cloud.mention_types == ("PROPER", "COMMON")
