"""Input checks shared by the metric modules (pure Python)."""

from typing import Any, Iterator, Mapping, Tuple


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
