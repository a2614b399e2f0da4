"""Input checks and file access shared by the metric modules (pure Python).

Files: local paths are read and written with the built-in `open` (so the scorer CLI never
imports TensorFlow for them); paths with a URL scheme (`gs://...`, `ram://...`) go through
`tf.io.gfile`, with TensorFlow imported only then. Failures of either are raised as `OSError`.
"""

import errno
import io
import json
import os
from typing import IO, Any, Iterable, Iterator, Mapping, Optional, Tuple

from schemas import safe_json

# Metrics key, in every task's `evaluate` result, of the number of prediction ids (keys) that are
# not among the scored gold ids: they are ignored by the official metrics, and the CLI can warn.
IGNORED_KEY = 'n_ignored'


def count_ignored(prediction_ids: Iterable[Any], gold_ids: Any) -> int:
  """Number of distinct `prediction_ids` not in `gold_ids` (a set or mapping)."""
  return sum(1 for key in set(prediction_ids) if key not in gold_ids)


def is_url(path: str) -> bool:
  """Whether `path` names a file of a `tf.io.gfile` filesystem other than the local one."""
  return '://' in path


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


def open_text(path: str, encoding: str = 'utf-8',
              newline: Optional[str] = None) -> IO[str]:
  """Opens `path` for reading text (`encoding`/`newline` as for `open`).

  Raises:
    OSError: The file is missing or cannot be read (FileNotFoundError when missing).
  """
  if not is_url(path):
    return open(path, encoding=encoding, newline=newline)
  tf = _gfile()
  try:
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    with tf.io.gfile.GFile(path, 'rb') as f:
      data = f.read()
  except tf.errors.OpError as e:
    raise OSError(f'{type(e).__name__}: {e.message or path}') from e
  return io.TextIOWrapper(io.BytesIO(data), encoding=encoding, newline=newline)


class InputError(ValueError):
  """An input file that cannot be read or parsed; the message names the file and its role."""


def load_json(path: str, role: str) -> Any:
  """Reads a JSON file (`role`: what it is, 'predictions' or 'gold', for messages).

  Raises:
    InputError: The file cannot be read, or is not valid UTF-8 JSON.
  """
  try:
    with open_text(path) as f:
      return safe_json.loads(f.read(), f'{role} file {path}')
  except OSError as e:
    raise InputError(f'cannot read {role} file {path}: {e}') from e
  except safe_json.JsonTooDeepError as e:
    raise InputError(str(e)) from None
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise InputError(f'{role} file {path} is not valid JSON: {e}') from e


def write_text(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path`, replacing it whole: a local file is written beside it
  and renamed over it, so a full disk or a signal leaves the old file (or none), never half
  of the new one.

  Raises:
    OSError: The file cannot be written.
  """
  if not is_url(path):
    tmp = f'{path}.tmp-{os.getpid()}'
    try:
      with open(tmp, 'w', encoding='utf-8') as f:
        f.write(text)
      os.replace(tmp, path)
    finally:
      if os.path.exists(tmp):
        os.remove(tmp)
    return
  tf = _gfile()
  try:
    with tf.io.gfile.GFile(path, 'wb') as f:
      f.write(text.encode('utf-8'))
  except tf.errors.OpError as e:
    raise OSError(f'{type(e).__name__}: {e.message or path}') from e


def check_answer_map(predictions: Any, source: str, expected: str) -> None:
  """Raises ValueError unless `predictions` is a mapping of keys to answer strings."""
  if not isinstance(predictions, Mapping):
    raise ValueError(f'{source}: top level is {type(predictions).__name__}; '
                     f'{expected}')
  for key, answer in predictions.items():
    if not isinstance(answer, str):
      raise ValueError(f'{source}: answer for {key!r} is '
                       f'{type(answer).__name__}, expected a string; '
                       f'{expected}')


def iter_gold_items(gold: Any, source: str, expected: str,
                    item: str = 'item') -> Iterator[Tuple[int, Mapping]]:
  """Yields `(index, mapping)` of a non-empty gold list; ValueError otherwise."""
  if not isinstance(gold, list):
    raise ValueError(f'{source}: top level is {type(gold).__name__}; '
                     f'{expected}')
  if not gold:
    raise ValueError(f'{source}: no gold questions; {expected}')
  for i, example in enumerate(gold):
    if not isinstance(example, Mapping):
      raise ValueError(f'{source}: {item} {i} is {type(example).__name__}; '
                       f'{expected}')
    yield i, example
