"""Byte ranges of one large JSON source file, read by many workers with exactly the records
(and dead letters) of a whole-file read.  No Beam here; :mod:`pipelines.beam.read` plans and
reads them.

Planning.  One sequential pass of the tolerant readers (:func:`~pipelines.sources.json_items.
read_json_stream`) over the file, values decoded and dropped, leaves a checkpoint at the first
item (or line) starting at or after every multiple of ``split_bytes``: its byte and character
offsets, its index (line number) and the reader's state there (for a list, the resync
reference).  Range ``k`` runs from checkpoint ``k`` (range 0: the file's start) to the byte of
checkpoint ``k + 1``: it starts at the first item boundary at or after its nominal start and
ends with the item that crosses its nominal end.  A reader resumed at a checkpoint decides
everything as the whole-file reader does from there (the readers' decisions depend only on the
text ahead and that state), so every item, every dead letter and every source id
(``path#<index>``, ``path:<line>``) comes out exactly once, damaged items at range edges
included.

Why a planning pass and not a boundary found from the range's own start.  JSON does not
resynchronise: from an arbitrary byte nothing tells whether it is inside a string or at which
depth, and the heuristic the tolerant reader uses after damage (the items' kind and first key
after a ``,``) can be fooled by nested items of the same shape, so two neighbouring ranges
could disagree on their boundary (an item read twice or not at all); and the source ids count
items from the start of the file.  The pass costs one decode of the file on one worker (about
150 MB/s here, against the tokeniser's ~3 MB/s per core that the ranges then share).

Not split: compressed files (no seeking; read whole, as before), files smaller than twice
``split_bytes``, and files that are neither a JSON list (or ``list_key`` object) nor JSON lines.
JSON lines are split only after their first record (the lines before it decide whether the file
is JSON lines at all), and the planning pass does not parse the lines after it.
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, NamedTuple, Optional, Union

from pipelines.sources.json_events import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_ITEM_CHARS, Event
from pipelines.sources.json_items import read_json_stream
from pipelines.sources.json_lines import LineCheckpoint, read_lines
from pipelines.sources.json_list_recovery import JsonListReader, ListCheckpoint

DEFAULT_SPLIT_BYTES = 4 << 20  # nominal bytes per range

Checkpoint = Union[ListCheckpoint, LineCheckpoint]


class JsonRange(NamedTuple):
  """Range ``number`` of the ``count`` ranges of the file at ``path``: from ``start`` (None:
  the file's start) to ``stop_byte`` (None: its end).  ``file_size``: the whole file's size
  when the planner knew it (for progress lines; None: unknown)."""
  path: str
  number: int = 0
  count: int = 1
  start: Optional[Checkpoint] = None
  stop_byte: Optional[int] = None
  file_size: Optional[int] = None

  @property
  def start_byte(self) -> int:
    return 0 if self.start is None else self.start.byte

  @property
  def last(self) -> bool:
    return self.stop_byte is None


def plan_ranges(chunks: Iterable[bytes], path: str, split_bytes: int = DEFAULT_SPLIT_BYTES,
                chunk_size: int = DEFAULT_CHUNK_SIZE,
                max_item_chars: int = DEFAULT_MAX_ITEM_CHARS,
                list_key: Optional[str] = None) -> List[JsonRange]:
  """The ranges of the file given as byte chunks (all of it), about ``split_bytes`` each; one
  range (the whole file) if it has no item boundary past ``split_bytes``.  A last range shorter
  than half ``split_bytes`` joins the one before it."""
  if split_bytes <= 0:
    return [JsonRange(path)]
  checkpoints: List[Checkpoint] = []
  size = [0]

  def counted(data_chunks):
    for data in data_chunks:
      size[0] += len(data)
      yield data

  for _ in read_json_stream(counted(chunks), path, chunk_size, max_item_chars, list_key,
                            checkpoints=checkpoints, checkpoint_every=split_bytes):
    pass
  if checkpoints and size[0] - checkpoints[-1].byte < split_bytes / 2:
    checkpoints.pop()
  starts: List[Optional[Checkpoint]] = [None, *checkpoints]
  stops: List[Optional[int]] = [c.byte for c in checkpoints] + [None]
  return [JsonRange(path, k, len(starts), start, stop)
          for k, (start, stop) in enumerate(zip(starts, stops))]


def read_range(chunks: Iterable[bytes], rng: JsonRange, chunk_size: int = DEFAULT_CHUNK_SIZE,
               max_item_chars: int = DEFAULT_MAX_ITEM_CHARS,
               list_key: Optional[str] = None) -> Iterator[Event]:
  """The events of one range; ``chunks`` are the file's bytes from ``rng.start_byte`` on."""
  if rng.start is None:
    return read_json_stream(chunks, rng.path, chunk_size, max_item_chars, list_key,
                            stop_byte=rng.stop_byte)
  if isinstance(rng.start, ListCheckpoint):
    return iter(JsonListReader(chunks, rng.path, chunk_size, max_item_chars, list_key=list_key,
                               resume=rng.start, stop_byte=rng.stop_byte))
  return read_lines(chunks, rng.path, max_item_chars, resume=rng.start, stop_byte=rng.stop_byte)
