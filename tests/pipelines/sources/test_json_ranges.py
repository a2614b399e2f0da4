"""Byte ranges of a JSON file (``json_ranges``): the ranges' events, read one after the other,
are exactly the whole-file read's (items, dead letters with their detail and offsets, source
ids), on random range sizes, chunk sizes and damaged files, damage at range edges included."""

from __future__ import annotations

import json
import random
from typing import List

import pytest

from pipelines.sources.json_events import Item, Repaired, Unreadable
from pipelines.sources.json_items import read_json_stream
from pipelines.sources.json_ranges import JsonRange, plan_ranges, read_range
from pipelines.sources.json_lines import LineCheckpoint
from pipelines.sources.json_list_recovery import ListCheckpoint
from tests.pipelines.sources.helpers import split


def _whole(data: bytes, chunk: int, list_key=None) -> list:
  return list(read_json_stream(split(data, chunk), "f", chunk, list_key=list_key))


def _ranges(data: bytes, every: int, chunk: int, list_key=None) -> List[JsonRange]:
  return plan_ranges(split(data, chunk), "f", every, chunk, list_key=list_key)


def _read(data: bytes, ranges: List[JsonRange], chunk: int, list_key=None) -> list:
  out = []
  for rng in ranges:
    out += list(read_range(split(data[rng.start_byte:], chunk), rng, chunk, list_key=list_key))
  return out


def _item(rng: random.Random, k: int) -> dict:
  return {"_id": f"q{k}", "answer": "x" * rng.randrange(0, 30),
          "context": [[f"t{k}", ["a, {\"_id\": 1}, [", "é" * rng.randrange(3)]]],
          "n": [{"_id": k, "sub": [1, 2]}]}  # nested objects of the items' first key


def _damaged_list(seed: int, n: int = 40) -> bytes:
  """A JSON list of ``n`` items with every kind of damage the reader recovers from, at random
  places (so that some fall on range edges)."""
  rng = random.Random(seed)
  parts: List[bytes] = []
  for k in range(n):
    text = json.dumps(_item(rng, k), ensure_ascii=rng.random() < 0.5).encode("utf-8")
    roll = rng.random()
    if roll < 0.08:
      text = text[:len(text) // 2] + b"#" + text[len(text) // 2:]  # a corrupt item
    elif roll < 0.12:
      text = text[:20] + b"\xff\xfe" + text[20:]  # invalid UTF-8 inside
    elif roll < 0.15:
      text = b"junk " + text  # damage in front of an item
    elif roll < 0.18:
      text = text + b" }} "  # text after a good item
    parts.append(text)
  out = b"[" + parts[0]
  for p in parts[1:]:
    roll = rng.random()
    sep = b", " if roll > 0.1 else (b" " if roll > 0.05 else b",,")  # missing / empty slot
    out += sep + b"\n" * rng.randrange(2) + p
  return out + b"]\n"


def _check(data: bytes, seed: int, list_key=None) -> int:
  rng = random.Random(seed)
  whole = _whole(data, 64, list_key)
  split_count = 0
  for _ in range(12):
    every = rng.randrange(1, max(2, len(data) // 2))
    chunk = rng.choice([1, 7, 64, 4096])
    ranges = _ranges(data, every, chunk, list_key)
    assert [r.number for r in ranges] == list(range(len(ranges)))
    assert all(r.count == len(ranges) for r in ranges)
    assert [r.start_byte for r in ranges] == sorted({r.start_byte for r in ranges})
    assert [r.stop_byte for r in ranges[:-1]] == [r.start_byte for r in ranges[1:]]
    split_count += len(ranges) > 1
    assert _read(data, ranges, rng.choice([1, 5, 64, 4096]), list_key) == whole, every
  return split_count


@pytest.mark.parametrize("seed", range(12))
def test_damaged_lists_read_in_random_ranges_equal_the_whole_read(seed):
  data = _damaged_list(seed)
  whole = _whole(data, 64)
  kinds = {type(e) for e in whole}
  assert Item in kinds and Unreadable in kinds
  assert _check(data, seed) >= 10


@pytest.mark.slow
def test_the_damage_lies_on_range_edges():
  """Every damaged region's start, and the byte after it, is a range edge in some plan."""
  data = _damaged_list(3)
  whole = _whole(data, 64)
  bad = [e for e in whole if isinstance(e, (Unreadable, Repaired))]
  assert len(bad) >= 4
  starts = set()
  for every in range(1, len(data) // 2):
    ranges = _ranges(data, every, 4096)
    starts.update(r.start_byte for r in ranges)
    assert _read(data, ranges, 4096) == whole
  assert len(starts) > 30  # every item start is some range's start


def test_object_file_and_its_damage_split_like_a_list():
  rng = random.Random(5)
  items = [json.dumps({"Answer": {"Value": k}, "EntityPages": [{"DocSource": "x"}],
                       "Question": "q" * rng.randrange(40)}) for k in range(30)]
  items[7] = items[7].replace('{"Value"', '{"Value" @')  # a corrupt item
  items[19] = "[1, 2]"  # an item of another kind (read)
  data = ('{"Domain": "Web", "Data": [' + ", ".join(items)
          + '], "Split": "dev", "Version": 1.0}').encode()
  assert _check(data, 5, list_key="Data") >= 10
  whole = _whole(data, 64, "Data")
  assert sum(isinstance(e, Item) for e in whole) == 29
  assert [e.source_id for e in whole if isinstance(e, Unreadable)] == ["f#7"]


def test_truncated_list_and_trailer_errors_stay_in_the_last_range():
  data = _damaged_list(1)[:-3]  # the list never closes
  assert _check(data, 1) >= 10
  data = _damaged_list(2) + b'[{"_id": 9}]'  # a second list appended
  assert _check(data, 2) >= 10


def test_json_lines_split_after_the_first_record():
  rng = random.Random(9)
  lines = ["not json", ""]  # held back until the first record
  for k in range(60):
    roll = rng.random()
    lines.append("{bad" if roll < 0.1 else "" if roll < 0.15
                 else json.dumps({"_id": k, "t": "é" * rng.randrange(50)}, ensure_ascii=False))
  data = ("\ufeff" + "\n".join(lines) + "\n" + "\ufeff{\"_id\": 99}").encode()
  data = data.replace(b'"t": "', b'"t": "\xff', 1)  # one line with invalid UTF-8
  assert _check(data, 9) >= 10
  ranges = _ranges(data, 40, 7)
  assert all(isinstance(r.start, LineCheckpoint) for r in ranges[1:])
  first_record = data.index(b"{")
  assert ranges[1].start_byte > first_record


def test_not_json_lines_is_not_split_and_stays_one_dead_letter():
  data = ("\n".join(["x y z"] * 3000)).encode()
  assert len(_ranges(data, 100, 4096)) == 1
  assert _read(data, _ranges(data, 100, 4096), 64) == _whole(data, 64)


def test_range_starts_are_item_starts_with_the_reader_state():
  data = b"[" + b", ".join(json.dumps({"_id": k, "v": "x" * 50}).encode()
                           for k in range(20)) + b"]"
  ranges = _ranges(data, 200, 64)
  assert len(ranges) > 5
  for r in ranges[1:]:
    assert isinstance(r.start, ListCheckpoint)
    assert data[r.start.byte:r.start.byte + 2] == b'{"'
    assert r.start.byte >= 200 * (r.number)  # the first item start at or after k * every
    assert r.start.kinds == (("{", r.start.index),) and r.start.keys == ("_id",)
    first = next(iter(read_range(split(data[r.start.byte:], 64), r, 64)))
    assert first.source_id == f"f#{r.start.index}"
  # Ranges hold the items that start inside them: about every/size items each.
  counts = [len(_read(data, [r], 64)) for r in ranges]
  assert sum(counts) == 20 and max(counts) <= 4


def test_no_split_below_two_boundaries_and_when_disabled():
  data = b'[{"_id": 1}, {"_id": 2}]'
  assert _ranges(data, 10 ** 6, 64) == [JsonRange("f")]
  assert plan_ranges([data], "f", 0) == [JsonRange("f")]


def test_a_short_last_range_joins_the_one_before():
  data = b"[" + b", ".join(json.dumps({"_id": k, "v": "x" * 80}).encode()
                           for k in range(50)) + b"]"
  every = 1000
  ranges = _ranges(data, every, 64)
  last = len(data) - ranges[-1].start_byte
  assert last >= every / 2 and ranges[-2].stop_byte - ranges[-2].start_byte <= 2 * every
  # Without the merge the last checkpoint would have left a tail under half a range.
  starts = [r.start_byte for r in _ranges(data, every, 64)]
  assert all(b - a >= every / 2 for a, b in zip(starts, starts[1:] + [len(data)]))
  assert _read(data, ranges, 64) == _whole(data, 64)
