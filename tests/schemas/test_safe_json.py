"""schemas.safe_json: JSON from user files with a nesting limit (one line, not RecursionError)."""

import json
import time

import pytest

from schemas import safe_json


@pytest.mark.parametrize("text, depth", [
    ("1", 0), ("[]", 1), ("[[1], {\"a\": [2]}]", 3), ('{"a": "[[[[[[", "b": ["]"]}', 2),
    ('["\\"[[[", [[]]]', 3), ('"\\\\"', 0), ('["\\\\", [1]]', 2)])
def test_depth_counts_brackets_outside_strings(text, depth):
  assert safe_json.depth(text) == depth
  json.loads(text)  # each case is valid JSON


def test_the_limit_is_inclusive_and_the_error_names_the_file():
  at_limit = "[" * safe_json.MAX_DEPTH + "]" * safe_json.MAX_DEPTH
  assert safe_json.loads(at_limit, "f.json") == json.loads(at_limit)
  deeper = "[" * (safe_json.MAX_DEPTH + 1) + "]" * (safe_json.MAX_DEPTH + 1)
  with pytest.raises(safe_json.JsonTooDeepError) as e:
    safe_json.loads(deeper, "f.json")
  assert str(e.value).startswith(f"f.json: JSON nested {safe_json.MAX_DEPTH + 1} levels deep, "
                                 f"more than the {safe_json.MAX_DEPTH} levels")
  assert "\n" not in str(e.value)


def test_200k_nested_brackets_are_refused_fast_and_before_parsing(tmp_path):
  """json.loads raises RecursionError on these; the scan refuses them in milliseconds."""
  with pytest.raises(RecursionError):
    json.loads("[" * 200_000)
  path = tmp_path / "deep.json"
  path.write_text('{"x": ' + "[" * 200_000)
  start = time.perf_counter()
  with pytest.raises(safe_json.JsonTooDeepError, match=f"^{path}: JSON nested 200001 levels"):
    safe_json.load_file(str(path))
  assert time.perf_counter() - start < 1.0


def test_brackets_inside_strings_do_not_count_and_invalid_json_stays_a_decode_error():
  value = {"text": "[" * 10_000, "list": [1, [2, [3]]]}
  assert safe_json.loads(json.dumps(value)) == value
  assert safe_json.loads(json.dumps(value).encode("utf-8-sig")) == value  # bytes with a BOM
  with pytest.raises(json.JSONDecodeError):
    safe_json.loads("[1, 2", "f.json")
  with pytest.raises(ValueError):  # what callers catch for either
    safe_json.loads("[" * 300, "f.json")


def test_keyword_arguments_reach_json_loads():
  pairs = safe_json.loads('{"a": 1, "b": 2}', object_pairs_hook=list)
  assert pairs == [("a", 1), ("b", 2)]
