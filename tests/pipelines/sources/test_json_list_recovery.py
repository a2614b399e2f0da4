"""The tolerant reader (through ``read_json_stream``): what one dead letter covers in a
damaged JSON list, or in the list under a key of a JSON object, and what it says."""

import json
import random

import pytest

from pipelines.sources.json_events import Item, Repaired, Unreadable
from pipelines.sources.json_items import read_json_stream
from tests.pipelines.sources.helpers import (GOOD, ITEMS, events, events_key, json_list, obj_file,
                                             summary)


# -- damage in a list: what one dead letter covers, and what it says ------------------------------

def test_corrupt_item_dead_letter_names_the_error_and_offsets():
  data = json_list(GOOD[:2] + ['{"_id": "c", "v": tru, "s": "text c"}'] + GOOD[3:]).encode()
  bad = [e for e in events(data) if isinstance(e, Unreadable)]
  start = data.index(b'{"_id": "c"')
  assert [(e.source_id, e.reason, e.uncertain) for e in bad] == [("f#2", "invalid_json", False)]
  assert f"Expecting value at byte {data.index(b'tru')}" in bad[0].detail
  assert f"starts at byte {start} (char {start})" in bad[0].detail
  assert f"reading resumes at byte {data.index(GOOD[3].encode())}" in bad[0].detail


@pytest.mark.parametrize("tail,expected", [
    ("", ["item 0", "item 1", ("invalid_json", "f#2", True)]),      # no ']'
    (",", ["item 0", "item 1", ("invalid_json", "f#2", True)]),     # ends after ','
    (", ]", ["item 0", "item 1", ("invalid_json", "f#2", False)]),  # trailing comma
])
def test_list_end_faults(tail, expected):
  data = (json_list(GOOD[:2])[:-1] + tail).encode()
  got = [f"item {int(s[1].split('#')[1])}" if s[0] == "item" else s for s in summary(events(data))]
  assert got == expected


def test_junk_between_items_is_one_uncertain_dead_letter():
  data = ("[" + GOOD[0] + "}}, " + GOOD[1] + "]").encode()
  assert summary(events(data)) == [("item", "f#0", ITEMS[0]), ("invalid_json", "f#1", True),
                                   ("item", "f#2", ITEMS[1])]


def test_nested_objects_with_other_keys_are_not_taken_for_items():
  nested = '{"_id": "b", "kids": [{"k": 1}, {"k": 2}], "v": oops}'
  data = json_list([GOOD[0], nested, GOOD[2]]).encode()
  assert summary(events(data)) == [("item", "f#0", ITEMS[0]), ("invalid_json", "f#1", False),
                                   ("item", "f#2", ITEMS[2])]


def test_list_of_non_objects_resyncs_on_the_same_kind():
  data = b'[[1, 2], [3, x], [5, 6], [7]]'
  assert summary(events(data, 3)) == [("item", "f#0", [1, 2]), ("invalid_json", "f#1", False),
                                      ("item", "f#2", [5, 6]), ("item", "f#3", [7])]


def test_invalid_utf8_outside_strings_is_one_region():
  data = b"[" + GOOD[0].encode() + b", {\"_id\": \"b\", \"v\": \xff}, " + GOOD[2].encode() + b"]"
  assert summary(events(data)) == [("item", "f#0", ITEMS[0]), ("invalid_utf8", "f#1", False),
                                   ("item", "f#2", ITEMS[2])]


@pytest.mark.parametrize("data,expected", [
    # ',,': the empty slot is one dead letter, the next item is read.
    (b'[{"a": 1},, {"a": 2}]', [("item", "f#0", {"a": 1}), ("invalid_json", "f#1", False),
                                ("item", "f#2", {"a": 2})]),
    (b'[, {"a": 1}]', [("invalid_json", "f#0", False), ("item", "f#1", {"a": 1})]),
    # Damage in front of an item, with no ',' between it and the item.
    (b'[{"a": 1},\xff {"a": 2}, {"a": 3}]',
     [("item", "f#0", {"a": 1}), ("invalid_utf8", "f#1", True), ("item", "f#2", {"a": 2}),
      ("item", "f#3", {"a": 3})]),
    (b'[{"a": 1} xx {"a": 2}]', [("item", "f#0", {"a": 1}), ("invalid_json", "f#1", True),
                                 ("item", "f#2", {"a": 2})]),
    (b'[{"a": 1}, x{"a": 2}]', [("item", "f#0", {"a": 1}), ("invalid_json", "f#1", True),
                                ("item", "f#2", {"a": 2})]),
    # A region's reason is its own: the invalid UTF-8 of an earlier item does not leak into it.
    (b'[{"a": "\xff"}, {"a": x}', [("invalid_utf8", "f#0", False), ("invalid_json", "f#1", True)]),
    # A corrupt item is not split at a nested object with another first key.
    (b'[{"a": 1}, {"a": {"b": 1}, x}, {"a": 3}]',
     [("item", "f#0", {"a": 1}), ("invalid_json", "f#1", False), ("item", "f#2", {"a": 3})]),
])
def test_separator_faults_and_damage_before_an_item(data, expected):
  for chunk_size in (1, 4, 1 << 20):
    assert summary(events(data, chunk_size)) == expected


def test_item_longer_than_the_limit_is_dead_lettered():
  data = json_list([GOOD[0], json.dumps({"_id": "big", "s": "y" * 500}), GOOD[1]]).encode()
  got = [e for e in read_json_stream([data], "f", 16, max_item_chars=200)]
  assert summary(got) == [("item", "f#0", ITEMS[0]), ("invalid_json", "f#1", False),
                          ("item", "f#2", ITEMS[1])]
  assert "item longer than 200 characters" in got[1].detail


def test_item_nested_deeper_than_the_recursion_limit_costs_that_item():
  """Python's json decoder cannot read it (RecursionError): a certain dead letter, not read."""
  deep = '{"_id": "b", "v": ' + "[" * 5000 + "]" * 5000 + "}"
  data = json_list([GOOD[0], deep, GOOD[2]]).encode()
  for chunk_size in (64, 1 << 20):
    got = events(data, chunk_size)
    assert summary(got) == [("item", "f#0", ITEMS[0]), ("invalid_json", "f#1", False),
                            ("item", "f#2", ITEMS[2])]
    assert "RecursionError" in got[1].detail


def test_adjacent_corrupt_items_say_how_many_items_they_may_hold():
  for n in (2, 3):
    corrupt = [f'{{"_id": "{k}", x}}' for k in "bcd"[:n]]
    data = json_list(GOOD[:1] + corrupt + GOOD[n + 1:]).encode()
    (bad,) = [e for e in events(data) if isinstance(e, Unreadable)]
    assert (bad.source_id, bad.uncertain) == ("f#1", True)
    assert f"may hold up to {n} items" in bad.detail


def test_corrupt_last_item_says_so():
  data = json_list(GOOD[:4] + ['{"_id": "e", "v": 4, "s": tex}']).encode() + b"\n"
  (bad,) = [e for e in events(data, 3) if isinstance(e, Unreadable)]
  assert (bad.source_id, bad.uncertain) == ("f#4", False)
  assert "it was the last item of the list" in bad.detail


def test_item_like_text_after_the_list_is_uncertain():
  data = (json_list(GOOD[:2]) + '\n, {"_id": "z"}] junk').encode()
  assert summary(events(data))[2:] == [("invalid_json", "f#2", True)]


def test_long_leading_blanks_keep_offsets():
  blanks = "\n" * 50 + " " * 200 + "\n"
  data = (blanks + json_list([GOOD[0], '{"_id": "b", x}', GOOD[2]])).encode()
  (bad,) = [e for e in events(data, 16) if isinstance(e, Unreadable)]
  start = data.index(b'{"_id": "b"')
  assert f"starts at byte {start} (char {start})" in bad.detail


# -- a JSON object holding the records under a key (list_key; TriviaQA's {"Data": [...]}) --------

def test_object_file_streams_the_list_under_the_key():
  # The key anywhere: values before it (nested, with ']' and '"Data"' inside strings) skipped.
  before = ('"Domain": "Web", "Meta": {"x": [1, {"y": "]}\\"Data\\": ["}], "Data2": []}, '
            '"Version": 1.0, ')
  data = obj_file(GOOD, before=before, after="").encode()
  for chunk_size in (1, 3, 64):
    assert summary(events_key(data, chunk_size)) == [("item", f"f#{k}", ITEMS[k])
                                                       for k in range(5)]
  # A BOM, blank lines, escapes in the key, an empty list.
  assert summary(events_key(b'\xef\xbb\xbf\n\n {"D\\u0061ta": [1, 2]}')) == [
      ("item", "f#0", 1), ("item", "f#1", 2)]
  assert events_key(b'{"Data": [], "Version": 1.0}') == []
  # A top-level list and JSON lines are read as before.
  assert summary(events_key(json_list(GOOD[:2]).encode())) == [("item", "f#0", ITEMS[0]),
                                                               ("item", "f#1", ITEMS[1])]


@pytest.mark.parametrize("data,words", [
    (b'{"Domain": "Web", "Version": 1.0}', "has no 'Data' key (its keys: 'Domain', 'Version')"),
    (b'{"Data": {"a": 1}, "Domain": "Web"}', "'Data' is an object, not a list"),
    (b'{"Data": "x"}', "'Data' is a string, not a list"),
    (b'{"Domain": "Web", "Split": oops, "Data": [1]}', "unreadable value of the key 'Split'"),
    (b'{"Domain": "Web", ', "the file ends inside the top-level object"),
    (b'{"a": 1}\n{"a": 2}\n', "has no 'Data' key"),  # JSON lines are read as one object
])
def test_object_file_without_the_list_is_one_dead_letter(data, words):
  for chunk_size in (1, 4, 1 << 20):
    (bad,) = events_key(data, chunk_size)
    assert (bad.source_id, bad.reason, bad.uncertain) == ("f", "invalid_json", True)
    assert words in bad.detail, bad.detail


def test_object_file_damage_costs_what_it_costs_in_a_list():
  # A corrupt item in the middle: one certain dead letter, the others read.
  items = GOOD[:1] + ['{"_id": "b", "v": x}'] + GOOD[2:]
  data = obj_file(items).encode()
  expected = [("item", "f#0", ITEMS[0]), ("invalid_json", "f#1", False)] + [
      ("item", f"f#{k}", ITEMS[k]) for k in range(2, 5)]
  for chunk_size in (1, 4, 1 << 20):
    assert summary(events_key(data, chunk_size)) == expected
  # A corrupt last item, followed by the rest of the object: certain, "the last item".
  data = obj_file(GOOD[:4] + ['{"_id": "e", "v": 4, "s": tex}']).encode()
  for chunk_size in (1, 4, 1 << 20):
    evs = events_key(data, chunk_size)
    assert summary(evs)[-1] == ("invalid_json", "f#4", False)
    assert "it was the last item of the list" in evs[-1].detail
  # Truncated inside the list: uncertain, as for a list.
  data = obj_file(GOOD)[:-70].encode()
  assert summary(events_key(data))[-1] == ("invalid_json", "f#4", True)
  # A missing ',' costs nothing; invalid UTF-8 costs its item.
  data = ('{"Data": [' + GOOD[0] + " " + GOOD[1] + "]}").encode()
  assert [s[0] for s in summary(events_key(data))] == ["item", "repaired", "item"]
  data = obj_file(GOOD[:2]).encode().replace(b"text b", b"text \xff")
  assert summary(events_key(data)) == [("item", "f#0", ITEMS[0]), ("invalid_utf8", "f#1", False)]


@pytest.mark.parametrize("after,words,uncertain", [
    (', "Domain": "Web"} junk', "text after the top-level object's closing '}'", False),
    (', "Domain": "Web"', "the file ends before the top-level object is closed", False),
    (', "Domain" "Web"}', "expecting ':' after the key 'Domain'", False),
    (', "Data": [{"_id": "z"}]}', "a second 'Data' key (not read", True),
])
def test_object_file_damage_after_the_list_is_one_dead_letter(after, words, uncertain):
  data = ('{"Data": ' + json_list(GOOD[:2]) + after).encode()
  for chunk_size in (1, 4, 1 << 20):
    evs = events_key(data, chunk_size)
    assert summary(evs) == [("item", "f#0", ITEMS[0]), ("item", "f#1", ITEMS[1]),
                            ("invalid_json", "f#2", uncertain)]
    assert words in evs[-1].detail


def test_object_file_results_do_not_depend_on_chunking():
  rng = random.Random(5)
  base = {"Data": [{"_id": f"q{i}", "s": rng.choice(["é€😀", "plain", 'a"b', "x, {y ]}"]),
                    "pages": [{"f": "a.txt"}], "n": i} for i in range(5)],
          "Domain": "Web", "Split": "dev", "VerifiedEval": False, "Version": 1.0}
  text = json.dumps(base, ensure_ascii=False)
  for _ in range(150):
    data = bytearray(text.encode())
    for _ in range(rng.randint(0, 3)):
      k = rng.randrange(1, len(data))
      op = rng.random()
      if op < 0.3:
        del data[k:k + rng.randint(1, 5)]
      elif op < 0.8:
        data[k:k] = bytes([rng.choice(b'{}[],:" x\xff')])
      else:
        data = data[:k]
    data = bytes(data)
    reference = list(read_json_stream([data], "f", len(data) + 1, list_key="Data"))
    for chunk_size in (1, 2, 7, 64):
      assert events_key(data, chunk_size) == reference, data
    ids = [e.source_id for e in reference if not isinstance(e, Repaired)]
    if ids != ["f"]:
      assert ids == [f"f#{k}" for k in range(len(ids))], data
    if data == text.encode():
      assert [e.value for e in reference] == base["Data"]


def test_object_file_is_read_lazily():
  pulled = []
  def chunks():
    yield b'{"Domain": "Web", "Data": [' + GOOD[0].encode()
    for i in range(1000):
      pulled.append(i)
      yield b", " + GOOD[1].encode()
    yield b'], "Version": 1.0}'
  it = read_json_stream(chunks(), "f", 64, list_key="Data")
  assert next(it) == Item("f#0", ITEMS[0])
  assert len(pulled) <= 2
  assert sum(1 for _ in it) == 1000
