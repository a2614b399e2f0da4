"""Settings declared once: a frozen dataclass field that is also a command-line flag, its help
beside the field (:func:`setting`); :func:`add_flags` adds a config class's flags to a parser
and :func:`from_args` builds the config from the parsed flags.

  @dataclasses.dataclass(frozen=True)
  class Config:
    batch_size: int = setting(64, flag="annotate_batch_size",
                              help="documents per call (default: %(default)s)")
    cloud: CloudConfig = setting(CloudConfig(), prefix="nl_")  # its own settings, prefixed

The flag is ``--<flag>`` (default: the field's name, after the nested fields' ``prefix``); its
type is the default's (``int``, ``float``, ``str``; a ``bool`` is ``--x`` / ``--nox``, see
:func:`schemas.cli.bool_flag`); ``parse`` turns the flag's text into the field's value and
``show`` the field's default into the flag's (e.g. a tuple as one comma-separated value); any
other keyword goes to ``add_argument`` (``choices``, ``io``).  A field declared with
:func:`dataclasses.field` or a plain default is no flag.  The config's ``__post_init__`` checks
the values, and its ValueError is the command's usage error.  TF-free and Beam-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

from schemas import cli

_KEY = "readtwice.setting"


def setting(default: Any, *, help: str = "", flag: str = "",  # pylint: disable=redefined-builtin
            prefix: str = "", parse: Optional[Callable[[str], Any]] = None,
            show: Optional[Callable[[Any], Any]] = None, **add_argument: Any) -> Any:
  """A dataclass field with ``default`` that is the flag ``--<flag>`` (see the module doc); a
  default that is itself a config with settings (``prefix``: before its flags' names) adds its
  flags in its place."""
  meta = {"help": help, "flag": flag, "prefix": prefix, "parse": parse, "show": show,
          "add_argument": add_argument}
  return dataclasses.field(default=default, metadata={_KEY: meta})


def _settings(cls: Type) -> list:
  return [(f, f.metadata[_KEY]) for f in dataclasses.fields(cls) if _KEY in f.metadata]


def _nested(field: dataclasses.Field) -> bool:
  return dataclasses.is_dataclass(field.default) and bool(_settings(type(field.default)))


def _flags(cls: Type, prefix: str = "") -> Iterator[Tuple[dataclasses.Field, Dict, str]]:
  """``(field, its setting, its flag name)`` of every flag of ``cls``, in field order, nested
  configs' in their place."""
  for f, meta in _settings(cls):
    if _nested(f):
      yield from _flags(type(f.default), prefix + meta["prefix"])
    else:
      yield f, meta, prefix + (meta["flag"] or f.name)


def add_flags(group, cls: Type) -> None:
  """``--<flag>`` of every setting of the config class ``cls`` (in field order, nested
  configs' in their place) on the argparse parser or group ``group``."""
  for f, meta, name in _flags(cls):
    default = f.default if meta["show"] is None else meta["show"](f.default)
    if isinstance(f.default, bool):
      cli.bool_flag(group, name, default, meta["help"])
      continue
    kwargs: Dict[str, Any] = dict(meta["add_argument"])
    if type(f.default) in (int, float):  # pylint: disable=unidiomatic-typecheck
      kwargs.setdefault("type", type(f.default))
    group.add_argument(f"--{name}", default=default, help=meta["help"], **kwargs)


def from_args(cls: Type, args: Any, prefix: str = "") -> Any:
  """The config ``cls`` of the parsed flags ``args`` (an argparse Namespace); its fields
  without a flag, and those whose flag is None (unset, its ``show`` default None), keep their
  defaults."""
  values: Dict[str, Any] = {}
  for f, meta in _settings(cls):
    if _nested(f):
      values[f.name] = from_args(type(f.default), args, prefix + meta["prefix"])
      continue
    value = getattr(args, prefix + (meta["flag"] or f.name))
    if value is None:  # a flag left unset whose default shows as none: the field's default
      values[f.name] = f.default
    else:
      values[f.name] = value if meta["parse"] is None else meta["parse"](value)
  return cls(**values)


def flag_names(cls: Type) -> List[str]:
  """The flags (without ``--``) of the config class ``cls``, in the order :func:`add_flags`
  adds them."""
  return [name for _, _, name in _flags(cls)]
