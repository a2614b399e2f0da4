"""The read stage, ``ReadJsonRecords``: its outputs (records, dead letters, input counts, stats,
counters, progress) over every kind of file and damage, compressed files included.  The events
of the JSON readers alone are tested in ``tests/pipelines/sources/``."""

import bz2
import gzip
import json
import logging

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.read import INPUT_COUNT, STATS, ReadJsonRecords
from pipelines.sources.json_events import Item, Unreadable
from pipelines.sources.json_items import read_json_stream
from tests.pipelines.sources.helpers import GOOD, ITEMS, json_list, obj_file


def stats(records=0, invalid_json=0, invalid_utf8=0, uncertain=0, nbytes=0, missing=0,
          compression=0):
  return {"read/files": 1, "read/bytes": nbytes, "read/records": records,
          "read/invalid_json": invalid_json, "read/invalid_utf8": invalid_utf8,
          "read/invalid_compression": compression, "read/uncertain_regions": uncertain,
          "read/missing_separators": missing, "read/lone_surrogates": 0}


def run_read(path, records, dead, input_count, expected_stats=None, chunk_size=7, **kw):
  """Runs ReadJsonRecords on one file and checks every output exactly.

  ``records``: ``[(index or ":line", value)]``; ``dead``: ``[(reason, index or ":line")]``.
  """
  path = str(path)
  sid = lambda k: f"{path}{k}" if str(k).startswith(":") else f"{path}#{k}"
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([path], chunk_size=chunk_size, **kw)
    assert_that(out.records, equal_to([(sid(k), v) for k, v in records]), label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["stage"], d["reason"], d["source_id"])),
                equal_to([("read", r, sid(k)) for r, k in dead]), label="dead")
    assert_that(out[INPUT_COUNT], equal_to([input_count]), label="input_count")
    if expected_stats is not None:
      assert_that(out[STATS], equal_to([expected_stats]), label="stats")


# -- the two regressions of issue 8 (old reader: 2 + 1 and 0 + 1) --------------------------------
# These use only what the old reader had (ReadJsonRecords(paths), records, dead_letter,
# input_count), so they run, and fail, against it as well.

def test_issue8_corrupt_item_in_the_middle_of_five_loses_nothing(tmp_path):
  path = tmp_path / "five.json"
  data = json_list(GOOD[:2] + ['{"_id": "c", "v": 2, "s": tex}'] + GOOD[3:]).encode()
  path.write_bytes(data)
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)])
    assert_that(out.records, equal_to([(f"{path}#{k}", ITEMS[k]) for k in (0, 1, 3, 4)]),
                label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["stage"], d["reason"], d["source_id"])),
                equal_to([("read", "invalid_json", f"{path}#2")]), label="dead")
    assert_that(out[INPUT_COUNT], equal_to([5]), label="input_count")


def test_issue8_jsonl_with_invalid_utf8_in_one_of_five_lines_loses_nothing(tmp_path):
  path = tmp_path / "five.jsonl"
  lines = [g.encode() for g in GOOD]
  lines[2] = lines[2].replace(b"text c", b"t\xe9xt \xff c")
  path.write_bytes(b"\n".join(lines) + b"\n")
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)])
    assert_that(out.records, equal_to([(f"{path}:{k + 1}", ITEMS[k]) for k in (0, 1, 3, 4)]),
                label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["stage"], d["reason"], d["source_id"])),
                equal_to([("read", "invalid_utf8", f"{path}:3")]), label="dead")
    assert_that(out[INPUT_COUNT], equal_to([5]), label="input_count")


# -- one corrupt item costs exactly that item ---------------------------------------------------

CORRUPT_THIRD = {
    "invalid_token": '{"_id": "c", "v": tru, "s": "text c"}',
    "missing_comma_inside": '{"_id": "c" "v": 2, "s": "text c"}',
    "unbalanced_quote": '{"_id": "c, "v": 2, "s": "text c"}',
    "truncated_object": '{"_id": "c", "v": 2, "s": "tex',
    "truncated_nested": '{"_id": "c", "v": [1, 2, {"x": 1}',
    "missing_brace": '{"_id": "c", "v": 2, "s": "text c"',
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CORRUPT_THIRD))
def test_corrupt_middle_item_costs_only_that_item(tmp_path, kind):
  path = tmp_path / "in.json"
  data = json_list(GOOD[:2] + [CORRUPT_THIRD[kind]] + GOOD[3:]).encode()
  path.write_bytes(data)
  run_read(path, [(0, ITEMS[0]), (1, ITEMS[1]), (3, ITEMS[3]), (4, ITEMS[4])],
           [("invalid_json", 2)], 5, stats(4, invalid_json=1, nbytes=len(data)))


def test_corrupt_first_item(tmp_path):
  path = tmp_path / "in.json"
  path.write_text(json_list(['{"_id": "a", "v": x}'] + GOOD[1:]))
  run_read(path, [(k, ITEMS[k]) for k in range(1, 5)], [("invalid_json", 0)], 5)


@pytest.mark.slow
def test_two_adjacent_corrupt_items_are_one_uncertain_region(tmp_path):
  path = tmp_path / "in.json"
  data = json_list(GOOD[:1] + ['{"_id": "b", x}', '{"_id": "c", y}'] + GOOD[3:]).encode()
  path.write_bytes(data)
  # The region holds a second item-like start that did not parse: one dead letter, flagged.
  run_read(path, [(0, ITEMS[0]), (2, ITEMS[3]), (3, ITEMS[4])], [("invalid_json", 1)], 4,
           stats(3, invalid_json=1, uncertain=1, nbytes=len(data)))


@pytest.mark.slow
def test_list_truncated_at_eof(tmp_path):
  path = tmp_path / "in.json"
  data = json_list(GOOD)[:-12].encode()  # inside item 4
  path.write_bytes(data)
  run_read(path, [(k, ITEMS[k]) for k in range(4)], [("invalid_json", 4)], 5,
           stats(4, invalid_json=1, uncertain=1, nbytes=len(data)))


@pytest.mark.slow
def test_trailing_garbage_is_one_dead_letter(tmp_path):
  path = tmp_path / "in.json"
  data = (json_list(GOOD[:2]) + ' junk\n').encode()
  path.write_bytes(data)
  run_read(path, [(0, ITEMS[0]), (1, ITEMS[1])], [("invalid_json", 2)], 3,
           stats(2, invalid_json=1, nbytes=len(data)))


@pytest.mark.slow
def test_trailing_items_after_the_list_are_one_uncertain_dead_letter(tmp_path):
  """Text after ``]`` that may hold items (here a second list appended) cannot be counted."""
  path = tmp_path / "in.json"
  data = (json_list(GOOD[:2]) + "\n" + json_list(GOOD[2:])).encode()
  path.write_bytes(data)
  run_read(path, [(0, ITEMS[0]), (1, ITEMS[1])], [("invalid_json", 2)], 3,
           stats(2, invalid_json=1, uncertain=1, nbytes=len(data)))


@pytest.mark.slow
def test_missing_comma_between_whole_items_loses_nothing(tmp_path):
  path = tmp_path / "in.json"
  data = ("[" + GOOD[0] + ", " + GOOD[1] + " " + GOOD[2] + ", " + GOOD[3] + ", " + GOOD[4]
          + "]").encode()
  path.write_bytes(data)
  run_read(path, [(k, ITEMS[k]) for k in range(5)], [], 5, stats(5, missing=1, nbytes=len(data)))


# -- UTF-8 ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_jsonl_invalid_utf8_costs_one_line(tmp_path):
  path = tmp_path / "in.jsonl"
  data = b"\n".join([GOOD[0].encode(), b'{"_id": "b", "s": "caf\xe9"}', b"", GOOD[2].encode(),
                     b"{oops"]) + b"\n"
  path.write_bytes(data)
  run_read(path, [(":1", ITEMS[0]), (":4", ITEMS[2])],
           [("invalid_utf8", ":2"), ("invalid_json", ":5")], 4,
           stats(2, invalid_json=1, invalid_utf8=1, nbytes=len(data)))


def test_list_invalid_utf8_costs_one_item(tmp_path):
  path = tmp_path / "in.json"
  bad = b'{"_id": "c", "v": 2, "s": "caf\xe9 \xff"}'
  data = b"[" + b", ".join(g.encode() for g in GOOD[:2]) + b", " + bad + b", " + b", ".join(
      g.encode() for g in GOOD[3:]) + b"]"
  path.write_bytes(data)
  run_read(path, [(0, ITEMS[0]), (1, ITEMS[1]), (3, ITEMS[3]), (4, ITEMS[4])],
           [("invalid_utf8", 2)], 5, stats(4, invalid_utf8=1, nbytes=len(data)))


@pytest.mark.slow
def test_json_escapes_of_surrogates_are_not_flagged(tmp_path):
  """A ``\\udc80`` escape is ASCII in the file, not an invalid byte: the record is read.  A lone
  surrogate cannot be UTF-8 encoded (Beam's coder, the tokenizer, TFRecords), so it becomes
  U+FFFD and is counted; an escaped surrogate pair is one character and stays."""
  text = '[{"_id": "a", "s": "\\udc80\\udcff"}, {"_id": "b", "s": "\\ud83d\\ude00 \\\\udc80"}]'
  path = tmp_path / "in.json"
  path.write_text(text)
  run_read(path, [(0, {"_id": "a", "s": "\ufffd\ufffd"}),
                  (1, {"_id": "b", "s": "\U0001F600 \\udc80"})], [], 2,
           dict(stats(2, nbytes=len(text)), **{"read/lone_surrogates": 2}))
  lines = tmp_path / "in.jsonl"
  lines.write_text('{"\\udc80": ["x\\ud800"]}\n')
  run_read(lines, [(":1", {"\ufffd": ["x\ufffd"]})], [], 1)


def test_multibyte_character_on_the_chunk_boundary_in_beam(tmp_path):
  path = tmp_path / "in.json"
  data = '[{"_id": "😀"}]'.encode()
  assert data.index("😀".encode()) == 10
  path.write_bytes(data)
  run_read(path, [(0, {"_id": "😀"})], [], 1, chunk_size=12)  # the 4 bytes are split 2 + 2


def test_item_larger_than_the_chunk(tmp_path):
  path = tmp_path / "in.json"
  big = {"_id": "big", "s": "ü" * 5000, "n": list(range(300))}
  path.write_text(json_list([GOOD[0], json.dumps(big, ensure_ascii=False), '{"_id": "x", ]',
                             GOOD[1]]), encoding="utf-8")
  run_read(path, [(0, ITEMS[0]), (1, big), (3, ITEMS[1])], [("invalid_json", 2)], 4,
           chunk_size=64)


def test_json_line_larger_than_the_chunk(tmp_path):
  path = tmp_path / "in.jsonl"
  big = {"_id": "big", "s": "ü" * 5000}
  path.write_text("\n".join([GOOD[0], json.dumps(big, ensure_ascii=False), GOOD[1]]) + "\n",
                  encoding="utf-8")
  run_read(path, [(":1", ITEMS[0]), (":2", big), (":3", ITEMS[1])], [], 3, chunk_size=64)


# -- file forms -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_bom_list_and_jsonl(tmp_path):
  bom = b"\xef\xbb\xbf"
  (tmp_path / "l.json").write_bytes(bom + json_list(GOOD[:2]).encode())
  run_read(tmp_path / "l.json", [(0, ITEMS[0]), (1, ITEMS[1])], [], 2, chunk_size=2)
  (tmp_path / "j.jsonl").write_bytes(bom + "\n".join(GOOD[:2]).encode())
  run_read(tmp_path / "j.jsonl", [(":1", ITEMS[0]), (":2", ITEMS[1])], [], 2, chunk_size=2)
  # JSON-lines files with BOMs, concatenated: the BOM at the start of a later line is skipped.
  (tmp_path / "c.jsonl").write_bytes(bom + GOOD[0].encode() + b"\n" + bom + GOOD[1].encode())
  run_read(tmp_path / "c.jsonl", [(":1", ITEMS[0]), (":2", ITEMS[1])], [], 2, chunk_size=2)


@pytest.mark.slow
@pytest.mark.parametrize("text", ["[]", " \n[ \n ]\n"])
def test_empty_list(tmp_path, text):
  path = tmp_path / "in.json"
  path.write_text(text)
  run_read(path, [], [], 0, stats(nbytes=len(text)))


@pytest.mark.slow
def test_gzip_and_bz2_inputs(tmp_path):
  data = json_list(GOOD[:2] + ['{"_id": "c", x}'] + GOOD[3:]).encode()
  gz, bz = tmp_path / "in.json.gz", tmp_path / "in.json.bz2"
  gz.write_bytes(gzip.compress(data))
  bz.write_bytes(bz2.compress(data))
  expected = [(0, ITEMS[0]), (1, ITEMS[1]), (3, ITEMS[3]), (4, ITEMS[4])]
  # read/bytes counts the decompressed bytes.
  run_read(gz, expected, [("invalid_json", 2)], 5, stats(4, invalid_json=1, nbytes=len(data)))
  run_read(bz, expected, [("invalid_json", 2)], 5, chunk_size=1 << 20)


def test_stats_and_input_counts_over_several_files(tmp_path):
  a, b = tmp_path / "a.json", tmp_path / "b.jsonl"
  da = json_list(GOOD[:1] + ['{"_id": "b", x}', '{"_id": "c", y}'] + GOOD[3:4]).encode()
  db = b"\n".join([GOOD[0].encode(), b"\xff", b"[1"])
  a.write_bytes(da)
  b.write_bytes(db)
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(a), str(b)], chunk_size=4)
    assert_that(out[INPUT_COUNT], equal_to([3, 3]), label="counts")
    assert_that(out[STATS], equal_to([stats(2, invalid_json=1, uncertain=1, nbytes=len(da)),
                                      stats(1, invalid_json=1, invalid_utf8=1, nbytes=len(db))]),
                label="stats")


def test_beam_counters(tmp_path):
  path = tmp_path / "in.json"
  path.write_text(json_list(GOOD[:2] + ['{"_id": "c", x}'] + GOOD[3:]))
  p = beam.Pipeline(runner=FnApiRunner())
  _ = p | ReadJsonRecords([str(path)])
  result = p.run()
  result.wait_until_finish()
  counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]
              if c.key.metric.namespace == "readtwice.read"}
  assert counters["records"] == 4 and counters["invalid_json"] == 1
  assert counters["dead_letters"] == 1 and counters["files"] == 1


def test_progress_lines(tmp_path, caplog):
  path = tmp_path / "in.json"
  data = json_list(GOOD).encode()
  path.write_bytes(data)
  with caplog.at_level(logging.INFO, logger="pipelines"):
    run_read(path, [(k, ITEMS[k]) for k in range(5)], [], 5, chunk_size=64, progress_every_s=0)
  lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("read: ")]
  assert any(l.startswith(f"read: {path} ") and "% (" in l and "MB/s)" in l for l in lines)
  assert lines[-1].startswith(f"read: {path}: 5 records, 0 dead letters, ")


# -- list damage: more shapes ---------------------------------------------------------------------

def test_three_adjacent_corrupt_items(tmp_path):
  path = tmp_path / "in.json"
  data = json_list(GOOD[:1] + ['{"_id": "b", x}', '{"_id": "c", y}', '{"_id": "d", z}']
                   + GOOD[4:]).encode()
  path.write_bytes(data)
  run_read(path, [(0, ITEMS[0]), (2, ITEMS[4])], [("invalid_json", 1)], 3,
           stats(2, invalid_json=1, uncertain=1, nbytes=len(data)))


def test_corrupt_last_item_is_one_certain_dead_letter(tmp_path):
  path = tmp_path / "in.json"
  data = json_list(GOOD[:4] + ['{"_id": "e", "v": 4, "s": tex}']).encode() + b"\n"
  path.write_bytes(data)
  run_read(path, [(k, ITEMS[k]) for k in range(4)], [("invalid_json", 4)], 5,
           stats(4, invalid_json=1, nbytes=len(data)))


@pytest.mark.slow
def test_truncated_list_keeps_every_whole_item(tmp_path):
  for cut in ('{"_id": "e", "v": 4, "s": "te', ', ', ""):
    path = tmp_path / "in.json"
    data = ("[" + ", ".join(GOOD[:4]) + (", " + cut if cut != ", " else cut)).encode()
    path.write_bytes(data)
    run_read(path, [(k, ITEMS[k]) for k in range(4)], [("invalid_json", 4)], 5,
             stats(4, invalid_json=1, uncertain=1, nbytes=len(data)))


# -- whole files that are not JSON ----------------------------------------------------------------

@pytest.mark.parametrize("data,reason,words", [
    (b"hello world\nthis is not json\nat all\n", "invalid_json", "none of its 3 non-blank lines"),
    (gzip.compress(b"[1, 2]", mtime=0), "invalid_json", "gzip-compressed data"),
    (bz2.compress(b"[1, 2]"), "invalid_json", "bzip2-compressed data"),
    ('[{"a": 1}]'.encode("utf-16"), "invalid_utf8", "UTF-16-LE text"),
    ('[{"a": 1}]'.encode("utf-16-be"), "invalid_json", "NUL bytes"),
    (b"\xc3\x28 x\n\xfe\xfd\n", "invalid_utf8", "none of its 2 non-blank lines"),
    (b'{\n  "data": [\n    {"_id": "a"},\n    2\n  ]\n}\n', "invalid_json",
     "one JSON value spread over several lines"),
])
def test_a_file_that_is_not_json_is_one_dead_letter(tmp_path, data, reason, words):
  path = tmp_path / "in.json"  # no compression extension: the bytes are taken as they are
  path.write_bytes(data)
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], chunk_size=3)
    assert_that(out.records, equal_to([]), label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(
        lambda d: (d["stage"], d["reason"], d["source_id"], words in d["detail"])),
        equal_to([("read", reason, str(path), True)]), label="dead")
    assert_that(out[INPUT_COUNT], equal_to([1]), label="input_count")
    assert_that(out[STATS] | beam.Map(lambda s: (s["read/records"], s[f"read/{reason}"],
                                                 s["read/uncertain_regions"])),
                equal_to([(0, 1, 1)]), label="stats")


@pytest.mark.slow
def test_one_line_json_files(tmp_path):
  """A non-list file is JSON lines: a one-line top-level object is one record; one bad line
  is that line's dead letter."""
  path = tmp_path / "obj.json"
  path.write_text('{"data": [1, 2]}')
  run_read(path, [(":1", {"data": [1, 2]})], [], 1)
  path = tmp_path / "page.json"
  path.write_text("<html><body>Not found</body></html>\n")
  run_read(path, [], [("invalid_json", ":1")], 1)


@pytest.mark.parametrize("text", ["", " \n\n ", "\ufeff", "\ufeff\n"])
def test_empty_and_blank_files_have_no_records(tmp_path, text):
  path = tmp_path / "in.json"
  path.write_bytes(text.encode())
  run_read(path, [], [], 0, stats(nbytes=len(text.encode())), chunk_size=2)


@pytest.mark.slow
def test_long_leading_blanks_keep_offsets_and_line_numbers(tmp_path):
  blanks = "\n" * 50 + " " * 200 + "\n"
  jl = tmp_path / "in.jsonl"
  jl.write_text(blanks + GOOD[0] + "\n{x\n" + GOOD[1] + "\n")
  run_read(jl, [(":52", ITEMS[0]), (":54", ITEMS[1])], [("invalid_json", ":53")], 3, chunk_size=16)


# -- compressed files -----------------------------------------------------------------------------

def test_concatenated_gzip_members(tmp_path):
  path = tmp_path / "in.json.gz"
  data = json_list(GOOD).encode()
  path.write_bytes(gzip.compress(data[:40]) + gzip.compress(data[40:]))
  run_read(path, [(k, ITEMS[k]) for k in range(5)], [], 5, stats(5, nbytes=len(data)))


def test_truncated_gzip_is_one_uncertain_dead_letter(tmp_path):
  lines = "\n".join(json.dumps(dict(ITEMS[0], _id=f"q{i}", pad="x" * i)) for i in range(300))
  blob = gzip.compress(lines.encode())
  path = tmp_path / "in.jsonl.gz"
  path.write_bytes(blob[:len(blob) // 2])
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], chunk_size=512)
    n = out.records | beam.combiners.Count.Globally()
    dead = out[DEAD_LETTER] | beam.Map(lambda d: (d["reason"], "truncated" in d["detail"]))
    assert_that(dead, equal_to([("invalid_compression", True)]), label="dead")
    assert_that((n, out[INPUT_COUNT], out[STATS]) | beam.Flatten() | beam.combiners.ToList()
                | beam.Map(lambda xs: _check_counts(xs)), equal_to([True]), label="counts")


def _check_counts(xs):
  (st,) = [x for x in xs if isinstance(x, dict)]
  ints = sorted(x for x in xs if isinstance(x, int))
  n = st["read/records"]
  assert 0 < n < 300 and ints == [n, n + 1], (ints, st)
  assert st["read/invalid_compression"] == 1 and st["read/uncertain_regions"] == 1, st
  return True


@pytest.mark.parametrize("blob", [b"", gzip.compress(json_list(GOOD).encode(), mtime=0)[:-4]])
def test_empty_or_cut_gzip_trailer_is_flagged(tmp_path, blob):
  path = tmp_path / "in.json.gz"
  path.write_bytes(blob)
  records = [(k, ITEMS[k]) for k in range(5)] if blob else []
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)])
    assert_that(out.records | beam.Map(lambda kv: kv[1]), equal_to([v for _, v in records]),
                label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["reason"], d["source_id"])),
                equal_to([("invalid_compression", str(path))]), label="dead")


def test_corrupt_gzip_data_is_a_dead_letter_not_a_crash(tmp_path):
  blob = bytearray(gzip.compress(json_list(GOOD * 50).encode(), compresslevel=1))
  blob[30:60] = b"\x00" * 30
  path = tmp_path / "in.json.gz"
  path.write_bytes(bytes(blob))
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], chunk_size=64)
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["reason"], "damaged" in d["detail"])),
                equal_to([("invalid_compression", True)]), label="dead")


def test_storage_errors_are_raised_not_dead_lettered(tmp_path, monkeypatch):
  from pipelines.sources import byte_stream
  path = tmp_path / "in.json.gz"
  path.write_bytes(gzip.compress(json_list(GOOD).encode()))

  class Broken:
    def __init__(self, *a, **k):
      pass
    def read(self, n):
      raise OSError("connection reset")
    def close(self):
      pass
    def __enter__(self):
      return self
    def __exit__(self, *a):
      return False

  monkeypatch.setattr(byte_stream, "open_file", lambda p, n: (Broken(), Broken()))
  with pytest.raises(Exception, match="connection reset"):
    with TestPipeline(runner=FnApiRunner()) as p:
      _ = p | ReadJsonRecords([str(path)])


# -- a JSON object holding the records under a key (list_key; TriviaQA's {"Data": [...]}) --------

def test_object_file_streams_the_list_under_the_key(tmp_path):
  path = tmp_path / "in.json"
  data = json.dumps({"Data": ITEMS, "Domain": "Web", "Split": "dev", "VerifiedEval": False,
                     "Version": 1.0}, indent=2).encode()
  path.write_bytes(data)
  run_read(path, [(k, ITEMS[k]) for k in range(5)], [], 5, stats(5, nbytes=len(data)),
           list_key="Data")


@pytest.mark.parametrize("data", [
    b'{"Domain": "Web", "Version": 1.0}', b'{"Data": {"a": 1}, "Domain": "Web"}',
    b'{"Data": "x"}', b'{"Domain": "Web", "Split": oops, "Data": [1]}', b'{"Domain": "Web", ',
    b'{"a": 1}\n{"a": 2}\n'])
@pytest.mark.slow
def test_object_file_without_the_list_is_one_dead_letter(tmp_path, data):
  path = tmp_path / "in.json"
  path.write_bytes(data)
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], chunk_size=3, list_key="Data")
    assert_that(out.records, equal_to([]), label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["stage"], d["reason"], d["source_id"])),
                equal_to([("read", "invalid_json", str(path))]), label="dead")
    assert_that(out[INPUT_COUNT], equal_to([1]), label="input_count")


def test_object_file_damage_costs_what_it_costs_in_a_list(tmp_path):
  """A corrupt item in the middle: one certain dead letter, the others read."""
  data = obj_file(GOOD[:1] + ['{"_id": "b", "v": x}'] + GOOD[2:]).encode()
  path = tmp_path / "in.json"
  path.write_bytes(data)
  run_read(path, [(k, ITEMS[k]) for k in (0, 2, 3, 4)], [("invalid_json", 1)], 5,
           stats(4, invalid_json=1, nbytes=len(data)), list_key="Data")


def _pairs(source_id, value):
  """An expand for tests: one record per element of ``value["p"]``; fails on non-objects."""
  return [(source_id, {"_id": value["_id"], "p": p}) for p in value["p"]]


def test_expand_splits_items_into_records_that_count_as_inputs(tmp_path):
  path = tmp_path / "in.json"
  items = [{"_id": "a", "p": [1, 2, 3]}, {"_id": "b", "p": []}, 7, {"_id": "c", "p": [4]}]
  data = ('{"Data": [' + ", ".join(json.dumps(x) for x in items[:3]) + ', {"_id": oops}, '
          + json.dumps(items[3]) + "]}").encode()
  path.write_bytes(data)
  sid = f"{path}#"
  expected = ([(0, {"_id": "a", "p": p}) for p in (1, 2, 3)]
              + [(1, items[1]), (2, 7), (4, {"_id": "c", "p": 4})])
  # 6 records from 4 readable items (b expands to nothing and 7 makes it fail: passed on as
  # they are), plus one dead letter.
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], chunk_size=7, list_key="Data", expand=_pairs)
    assert_that(out.records, equal_to([(f"{sid}{k}", v) for k, v in expected]), label="rec")
    assert_that(out[INPUT_COUNT], equal_to([7]), label="input_count")
    assert_that(out[STATS], equal_to([dict(stats(6, invalid_json=1, nbytes=len(data)),
                                           **{"read/items": 4})]), label="stats")


# -- byte ranges (issue 29) ------------------------------------------------------------------

def _sum_stats(dicts):
  total = {}
  for d in dicts:
    for k, v in d.items():
      total[k] = total.get(k, 0) + v
  return total


@pytest.mark.parametrize("compress", [False, True])
def test_a_large_file_is_read_in_ranges_with_the_whole_reads_outputs(tmp_path, compress):
  items = [{"_id": f"q{k}", "text": "word " * (k % 7 * 20)} for k in range(300)]
  texts = [json.dumps(x) for x in items]
  texts[40] = texts[40].replace('"text"', '"text" ?')  # corrupt items
  texts[41] = texts[41][:-1]
  texts[200] = "[]"
  data = json_list(texts).encode()
  path = tmp_path / ("big.json.gz" if compress else "big.json")
  path.write_bytes(gzip.compress(data) if compress else data)
  # The expectation: the sources reader over the whole file, outside Beam.
  events = list(read_json_stream([data], str(path)))
  records = [(e.source_id, e.value) for e in events if isinstance(e, Item)]
  dead = [(e.reason, e.source_id, e.detail) for e in events if isinstance(e, Unreadable)]
  assert len(records) == 298 and len(dead) == 1
  uncertain = sum(e.uncertain for e in events if isinstance(e, Unreadable))
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], split_bytes=2000)
    assert_that(out.records, equal_to(records), label="records")
    assert_that(out[DEAD_LETTER] | beam.Map(lambda d: (d["reason"], d["source_id"],
                                                       d["detail"])),
                equal_to(dead), label="dead")
    assert_that(out[INPUT_COUNT] | beam.CombineGlobally(sum), equal_to([299]), label="count")
    assert_that(out[STATS] | beam.combiners.ToList() | beam.Map(_split_summary),
                equal_to([(stats(records=298, invalid_json=1, uncertain=uncertain,
                                 nbytes=len(data)),
                           0 if compress else "n", 1 if compress else "n")]), label="stats")


def _split_summary(dicts):
  """(the summed stats without ``read/splits``, ``read/splits``, how many dicts), the two counts
  as "n" when they are equal and above 20 (a file split into ranges, one dict per range)."""
  total = _sum_stats(dicts)
  splits = total.pop("read/splits", 0)
  if splits == len(dicts) > 20:
    return total, "n", "n"
  return total, splits, len(dicts)


def test_the_file_size_is_asked_once_per_file_not_once_per_range(tmp_path, monkeypatch):
  # On gs:// each size is a metadata request: the planner's answer travels in the ranges.
  from pipelines.beam import read  # pylint: disable=g-import-not-at-top
  data = json_list([json.dumps({"_id": f"q{k}", "text": "word " * 30}) for k in range(200)])
  path = tmp_path / "big.json"
  path.write_text(data)
  asked = []
  real = read.file_size
  monkeypatch.setattr(read, "file_size", lambda p: asked.append(p) or real(p))
  with TestPipeline(runner=FnApiRunner()) as p:
    out = p | ReadJsonRecords([str(path)], split_bytes=1000)
    assert_that(out[STATS] | beam.Map(lambda d: d.get("read/splits", 0))
                | beam.CombineGlobally(sum) | beam.Map(lambda n: n > 20), equal_to([True]),
                label="ranges")
  assert asked == [str(path)]
