"""``read_json_stream`` (no Beam): ``ijson`` for whole files and the re-read of what it cannot
decide by the tolerant reader, chunk boundaries and laziness, and the strict
``iter_json_list``.  Damage itself: ``test_json_list_recovery.py``, ``test_json_lines.py``."""

import json
import random

import pytest

from pipelines.sources import json_items
from pipelines.sources.json_events import LONE_SURROGATE_ESCAPE, Item, Repaired
from pipelines.sources.json_items import iter_json_list, read_json_stream
from tests.pipelines.sources.helpers import (GOOD, ITEMS, events, events_key, json_list, obj_file,
                                             split, summary)


class Source:
  """Chunks that can be read again, like a ``ByteSource``; counts how often they are read."""

  def __init__(self, data: bytes, chunk_size: int):
    self.chunks = split(data, chunk_size)
    self.reads = 0

  def __iter__(self):
    self.reads += 1
    return iter(self.chunks)


def tolerant(data: bytes, chunk_size: int, **kw):
  """The tolerant reader's events alone (a one-shot iterator cannot be read twice)."""
  return list(read_json_stream(iter(split(data, chunk_size)), "f", chunk_size, **kw))


# -- ijson, and the re-read of what it cannot read as the tolerant reader would --------------------

@pytest.mark.parametrize("data,key", [
    (json.dumps(ITEMS, indent=1, ensure_ascii=False).encode(), None),
    (json.dumps([{"s": "é€😀 \U0001F600", "n": [1.5, -0.0, 1e300, 2 ** 62, None, True]}, 3,
                 "x"]).encode(), None),
    (b"\xef\xbb\xbf\n\n  []  \n", None),
    (obj_file(GOOD, before='"Domain": "Web", "Meta": {"Data": [7]}, ').encode(), "Data"),
    (b'{"Data": [], "Version": 1.0}', "Data"),
])
def test_whole_files_are_read_by_ijson_alone(monkeypatch, data, key):
  def refuse(*_a, **_k):
    raise AssertionError("the tolerant reader was used")
  monkeypatch.setattr(json_items, "JsonListReader", refuse)
  expected = json.loads(data.decode("utf-8-sig"))
  expected = expected["Data"] if key else expected
  for chunk_size in (1, 5, 1 << 20):
    source = Source(data, chunk_size)
    got = list(read_json_stream(source, "f", chunk_size, list_key=key))
    assert got == [Item(f"f#{k}", v) for k, v in enumerate(expected)]
    assert source.reads == 1


@pytest.mark.parametrize("data,key", [
    (json_list(GOOD[:3] + ['{"_id": "c", "v": tru}'] + GOOD[3:]).encode(), None),  # corrupt
    (json_list(GOOD[:3]).encode()[:-20], None),                                   # truncated
    (json_list(GOOD[:3]).encode().replace(b"text b", b"t\xffxt b"), None),      # not UTF-8
    (b'[1, NaN, Infinity, -Infinity, 2]', None),           # Python's json reads these
    (b'[1, 1e400, 2]', None),                              # yajl: overflow; json: inf
    (b'[1, 1180591620717411303424]', None),                # yajl: integer overflow
    (b'[{"s": "\\udc80"}, {"s": "\\ud83d\\u0041"}]', None),  # lone surrogate escapes
    (json_list(GOOD).encode() + b" [1]", None),            # text after the list
    (b'{"Data": [1, 2], "Data": [3]}', "Data"),            # a second list_key
    (b'{"Data": {"a": 1}, "Domain": "Web"}', "Data"),      # not a list
    (b'{"Domain": "Web"}', "Data"),                        # no list_key
    (b'{"a": 1}\n{"a": 2}\n', "Data"),                     # JSON lines read as an object
])
def test_what_ijson_cannot_decide_is_read_again_by_the_tolerant_reader(data, key):
  for chunk_size in (1, 3, 7, 1 << 20):
    source = Source(data, chunk_size)
    got = list(read_json_stream(source, "f", chunk_size, list_key=key))
    assert got == tolerant(data, chunk_size, list_key=key), (data, chunk_size)
    assert source.reads == 2


def test_items_yielded_before_the_re_read_are_not_repeated():
  data = json_list(GOOD * 40 + ['{"_id": "z", x}'] + GOOD).encode()
  got = list(read_json_stream(Source(data, 64), "f", 64))
  assert [e.source_id for e in got] == [f"f#{k}" for k in range(206)]
  assert summary(got)[200] == ("invalid_json", "f#200", False)


@pytest.mark.parametrize("max_item_chars", [40, 60, 100, 1000])
def test_items_near_the_size_limit_are_decided_by_the_tolerant_reader(max_item_chars):
  items = [{"_id": "a" * n} for n in (10, 30, 50, 70, 90, 20)]
  data = json.dumps(items).encode()
  for chunk_size in (1, 16, 64, len(data)):
    got = list(read_json_stream(Source(data, chunk_size), "f", chunk_size,
                                max_item_chars=max_item_chars))
    assert got == tolerant(data, chunk_size, max_item_chars=max_item_chars)


def test_lone_surrogate_escapes_are_told_from_pairs():
  for text in [r"\ud83d\ude00", r"\uD83D\uDE00", r"x\u00e9\u4e2d"]:
    assert not LONE_SURROGATE_ESCAPE.search(text), text
  for text in [r"\ud83d", r"\ude00", r"\udc80\udcff", r"\ud83d\u0041", r"\ude00\ud83d"]:
    assert LONE_SURROGATE_ESCAPE.search(text), text
  # A lone surrogate escape on any chunk boundary is seen before its item is yielded.
  data = json_list(GOOD[:2] + ['{"_id": "c", "s": "\\udc80"}'] + GOOD[3:]).encode()
  for chunk_size in range(1, 20):
    got = list(read_json_stream(Source(data, chunk_size), "f", chunk_size))
    assert got[2] == Item("f#2", {"_id": "c", "s": "\udc80"}, True)
    assert got == tolerant(data, chunk_size)


def test_the_ijson_pass_is_lazy():
  pulled = []

  class Lazy:
    def __iter__(self):
      yield b"[" + GOOD[0].encode()
      for i in range(1000):
        pulled.append(i)
        yield b", " + GOOD[1].encode()
      yield b"]"

  it = read_json_stream(Lazy(), "f", 64)
  assert next(it) == Item("f#0", ITEMS[0])
  assert len(pulled) <= 2
  assert sum(1 for _ in it) == 1000


@pytest.mark.parametrize("key", [None, "Data"])
def test_the_re_read_gives_the_tolerant_readers_events_whatever_the_damage(key):
  rng = random.Random(3)
  base = [{"_id": f"q{i}", "s": rng.choice(["é€😀", "plain", 'a"b', "x, {y ]}", "\U0001F600"]),
           "ctx": [["T", ["s1", "s2"]]], "n": rng.choice([i, 1.5, -2e-3])} for i in range(6)]
  for _ in range(150):
    text = json.dumps({"Data": base, "Version": 1.0} if key else base,
                      ensure_ascii=rng.random() < 0.5)
    data = bytearray(text.encode())
    for _ in range(rng.randint(0, 2)):
      k = rng.randrange(1, len(data))
      op = rng.random()
      if op < 0.3:
        del data[k:k + rng.randint(1, 5)]
      elif op < 0.8:
        data[k:k] = bytes([rng.choice(b'{}[],:" x\xff\\')])
      else:
        data = data[:k]
    data = bytes(data)
    for chunk_size in (1, 7, 64, len(data) + 1):
      got = list(read_json_stream(Source(data, chunk_size), "f", chunk_size, list_key=key))
      assert got == tolerant(data, chunk_size, list_key=key), data


# -- the strict helper -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["[]", " [ ] \n", '[{"a": [1, 2]}, 3, "x" ]',
                                  '[\n {"s": "]"},\n {"t": ","}\n]\n'])
@pytest.mark.parametrize("chunk_size", [1, 3, 1 << 20])
def test_streaming_json_list_equals_json_loads(text, chunk_size):
  assert list(iter_json_list(text, chunk_size)) == json.loads(text)


@pytest.mark.parametrize("text", ["[1, 2", "[1 2]", "[1,]", "[1] x", "{}", "[", "[{]"])
def test_streaming_json_list_rejects_what_json_loads_rejects(text):
  with pytest.raises(json.JSONDecodeError):
    list(iter_json_list(text))



def test_strict_helper_keeps_lone_surrogates():
  text = '[{"_id": "a", "s": "\\udc80\\udcff"}, {"_id": "b", "s": "\\ud83d\\ude00 \\\\udc80"}]'
  assert list(iter_json_list(text)) == [{"_id": "a", "s": "\udc80\udcff"},
                                        {"_id": "b", "s": "\U0001F600 \\udc80"}]


# -- chunk boundaries and laziness -----------------------------------------------------------------

@pytest.mark.parametrize("chunk_size", range(1, 9))
def test_multibyte_characters_split_across_chunks(chunk_size):
  text = "é€😀 ñ"
  prefix = '[{"_id": "'
  for pad in range(8):  # puts every byte of every character on a chunk boundary somewhere
    data = (prefix + "x" * pad + text + '"}]').encode()
    assert summary(events(data, chunk_size)) == [("item", "f#0", {"_id": "x" * pad + text})]


def test_numbers_cut_by_a_chunk_boundary():
  """A number item or value whose fraction / exponent starts in the next chunk ("1." + "5")."""
  data = ("[" + ", ".join(f"{i}.5e{i % 3}" for i in range(60)) + "]").encode()
  for chunk_size in (1, 2, 3, 5, 7):
    assert [e.value for e in events(data, chunk_size)] == [float(f"{i}.5e{i % 3}")
                                                            for i in range(60)]
  data = ('{"Data": [' + ", ".join(GOOD) + '], "Domain": "Web", "Version": 1.0}').encode()
  for chunk_size in range(1, 12):
    assert summary(events_key(data, chunk_size)) == [("item", f"f#{k}", ITEMS[k])
                                                       for k in range(5)]


def test_reading_is_lazy():
  """The reader pulls chunks as it goes: the first record comes after a few of 1,000."""
  pulled = []
  def chunks():
    yield b"[" + GOOD[0].encode()
    for i in range(1000):
      pulled.append(i)
      yield b", " + GOOD[1].encode()
    yield b"]"
  it = read_json_stream(chunks(), "f", 64)
  assert next(it) == Item("f#0", ITEMS[0])
  assert len(pulled) <= 2
  assert sum(1 for _ in it) == 1000


def test_results_do_not_depend_on_chunking_and_ids_are_contiguous():
  rng = random.Random(7)
  base = [{"_id": f"q{i}", "s": rng.choice(["é€😀", "plain", 'a"b', "x, {y"]),
           "ctx": [["T", ["s1", "s2"]]], "n": rng.randint(-5, 10**6)} for i in range(6)]
  for _ in range(150):
    data = bytearray(json.dumps(base, ensure_ascii=rng.random() < 0.5).encode())
    for _ in range(rng.randint(1, 3)):
      k = rng.randrange(1, len(data))
      op = rng.random()
      if op < 0.3:
        del data[k:k + rng.randint(1, 5)]
      elif op < 0.7:
        data[k:k] = bytes([rng.choice(b'{}[],:" x\xff\xc3')])
      elif op < 0.9:
        data[k] = rng.choice(b'{}[],:" x\xff')
      else:
        data = data[:k]
    data = bytes(data)
    reference = list(read_json_stream([data], "f", len(data) + 1))
    for chunk_size in (1, 2, 3, 7, 64):
      assert events(data, chunk_size) == reference, data
    limited = list(read_json_stream([data], "f", len(data) + 1, max_item_chars=60))
    for chunk_size in (1, 5):
      chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)]
      assert list(read_json_stream(chunks, "f", chunk_size, max_item_chars=60)) == limited, data
    if data.lstrip().startswith(b"["):
      ids = [int(e.source_id.split("#")[1]) for e in reference if not isinstance(e, Repaired)]
      assert ids == list(range(len(ids))), data
