"""``read_json_stream`` (no Beam): clean files give ``json.loads``'s values, which items are
flagged for surrogate escapes, chunk boundaries and laziness, and the strict
``iter_json_list``.  Damage itself: ``test_json_list_recovery.py``, ``test_json_lines.py``."""

import json
import random

import pytest

from pipelines.sources.json_events import Item, Repaired
from pipelines.sources.json_items import iter_json_list, read_json_stream
from tests.pipelines.sources.helpers import (GOOD, ITEMS, events, events_key, json_list, obj_file,
                                             split, summary)


# -- clean files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("data,key", [
    (json.dumps(ITEMS, indent=1, ensure_ascii=False).encode(), None),
    (json.dumps([{"s": "é€😀 \U0001F600", "n": [1.5, -0.0, 1e300, 2 ** 62, None, True]}, 3,
                 "x"]).encode(), None),
    # What Python's json reads beyond strict JSON, and numbers beyond 64 bits.
    (b'[1, NaN, Infinity, -Infinity, 1e400, 1180591620717411303424, -1e-400]', None),
    (b"\xef\xbb\xbf\n\n  []  \n", None),
    (obj_file(GOOD, before='"Domain": "Web", "Meta": {"Data": [7]}, ').encode(), "Data"),
    (b'{"Data": [], "Version": 1.0}', "Data"),
])
def test_clean_files_give_the_values_of_json_loads(data, key):
  expected = json.loads(data.decode("utf-8-sig"))
  expected = expected["Data"] if key else expected
  for chunk_size in (1, 5, 1 << 20):
    got = list(read_json_stream(split(data, chunk_size), "f", chunk_size, list_key=key))
    assert [e.source_id for e in got] == [f"f#{k}" for k in range(len(expected))]
    assert all(isinstance(e, Item) for e in got)
    # json.dumps compares NaN as text (NaN != NaN).
    assert json.dumps([e.value for e in got]) == json.dumps(expected)


def test_items_with_surrogate_escapes_are_flagged():
  """A ``\\udc80`` escape is valid JSON for a lone surrogate, which UTF-8 cannot encode: the
  item is read as ``json.loads`` reads it and flagged, for the read stage to replace it.  Any
  surrogate escape flags the item (an escaped pair decodes to one character: nothing to
  replace); other escapes do not."""
  values = ['{"s": "\\udc80"}', '{"\\uDFFF": 1}', '{"s": "\\ud83d\\ude00"}',
            '{"s": "\\u00e9 \\u4e2d"}', '{"s": "plain"}']
  flags = [True, True, True, False, False]
  data = json_list(values).encode()
  lines = "\n".join(values).encode()
  for chunk_size in (1, 3, 1 << 20):
    for got in (events(data, chunk_size), events(lines, chunk_size)):
      assert [e.value for e in got] == [json.loads(v) for v in values]
      assert [e.escapes for e in got] == flags


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
