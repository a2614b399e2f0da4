"""JSON lines: a bad line costs that line; a file that is not JSON lines is one dead letter;
results do not depend on the chunking."""

import json
import random

from pipelines.sources.json_items import read_json_stream
from tests.pipelines.sources.helpers import GOOD, ITEMS, events, split, summary


def test_not_json_lines_is_decided_after_a_bounded_number_of_lines():
  data = b"no json here\n" * 1500 + GOOD[0].encode() + b"\n"
  (bad,) = events(data, 64)
  assert (bad.source_id, bad.reason, bad.uncertain) == ("f", "invalid_json", True)
  assert "none of the first 1000 non-blank lines is JSON" in bad.detail


def test_bad_leading_lines_then_records_are_read_line_by_line():
  data = b"oops\n\n{\n" + b"\n".join(g.encode() for g in GOOD[:2]) + b"\n"
  assert summary(events(data, 2)) == [("invalid_json", "f:1", False),
                                      ("invalid_json", "f:3", False),
                                      ("item", "f:4", ITEMS[0]), ("item", "f:5", ITEMS[1])]


def test_jsonl_invalid_utf8_names_the_byte():
  data = b"\n".join([GOOD[0].encode(), b'{"_id": "b", "s": "caf\xe9"}', b"", GOOD[2].encode(),
                     b"{oops"]) + b"\n"
  assert summary(events(data)) == [("item", "f:1", ITEMS[0]), ("invalid_utf8", "f:2", False),
                                   ("item", "f:4", ITEMS[2]), ("invalid_json", "f:5", False)]
  (bad,) = [e for e in events(data) if e.source_id == "f:2"]
  at = data.index(b"\xe9")
  assert f"byte 0xe9 at byte {at}" in bad.detail


def test_json_line_longer_than_the_chunk_or_the_limit():
  big = {"_id": "big", "s": "ü" * 5000}
  data = ("\n".join([GOOD[0], json.dumps(big, ensure_ascii=False), GOOD[1]]) + "\n").encode()
  got = summary(events(data, 64))
  assert got == [("item", "f:1", ITEMS[0]), ("item", "f:2", big), ("item", "f:3", ITEMS[1])]
  got = list(read_json_stream(split(data, 64), "f", 64, max_item_chars=1000))
  assert summary(got) == [("item", "f:1", ITEMS[0]), ("invalid_json", "f:2", False),
                          ("item", "f:3", ITEMS[1])]
  assert "line 2 is longer than 1000 bytes" in got[1].detail


def test_json_lines_and_file_heads_do_not_depend_on_chunking():
  rng = random.Random(11)
  lines = [json.dumps({"_id": f"q{i}", "s": rng.choice(["é€😀", "plain", "x, {y"])})
           for i in range(5)]
  heads = [b"", b"\xef\xbb\xbf", b"\n" * 70, b" " * 100, b"\xef\xbb\xbf \n" * 30, b"\xff\xfe",
           b"\x1f\x8b", b"{\n"]
  for _ in range(100):
    data = bytearray("\n".join(lines).encode())
    for _ in range(rng.randint(0, 3)):
      k = rng.randrange(0, len(data))
      data[k:k] = bytes([rng.choice(b'{}[],:"\n x\xff\xc3')])
    data = rng.choice(heads) + bytes(data)
    reference = list(read_json_stream([data], "f", len(data) + 1))
    for chunk_size in (1, 2, 5, 64):
      assert events(data, chunk_size) == reference, data
    # Whatever the damage, every non-blank line is a record or a dead letter, or the whole
    # file is one dead letter.
    if len(reference) != 1 or reference[0].source_id != "f":
      assert {e.source_id for e in reference} <= {f"f:{n}" for n in range(1, 200)}, data
