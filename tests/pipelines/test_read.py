"""Streaming JSON-list reading."""

import json

import pytest

from pipelines.beam.read import iter_json_list


@pytest.mark.parametrize("text", ["[]", " [ ] \n", '[{"a": [1, 2]}, 3, "x" ]',
                                  '[\n {"s": "]"},\n {"t": ","}\n]\n'])
def test_streaming_json_list_equals_json_loads(text):
  assert list(iter_json_list(text)) == json.loads(text)


@pytest.mark.parametrize("text", ["[1, 2", "[1 2]", "[1,]", "[1] x", "{}"])
def test_streaming_json_list_rejects_what_json_loads_rejects(text):
  with pytest.raises(json.JSONDecodeError):
    list(iter_json_list(text))
