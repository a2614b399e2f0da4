"""The JSON-lines QA format (schemas/jsonl_qa.py): every answer form, every rejection reason."""

import json

import pytest

from schemas import jsonl_qa

CONTEXT = "Jonas Hale built the mill. Later, Hale sold it to the miller."


def _line(**kw):
  obj = {"id": "q1", "question": "Who built the mill?", "context": CONTEXT}
  obj.update(kw)
  return json.dumps({k: v for k, v in obj.items() if v is not ...})


def test_every_answer_form():
  ex = jsonl_qa.parse_line(_line(answers=[
      "Jonas Hale", {"text": "Hale", "start": 34, "end": 38}, {"start": 0, "end": 5},
      {"text": "the miller", "start": 50}], title="The Mill"))
  assert ex.id == "q1" and ex.title == "The Mill" and ex.context == CONTEXT
  assert ex.answers == (jsonl_qa.Answer("Jonas Hale"), jsonl_qa.Answer("Hale", 34, 38),
                        jsonl_qa.Answer(None, 0, 5), jsonl_qa.Answer("the miller", 50, 60))
  assert jsonl_qa.answer_spans(ex, CONTEXT) == [(34, 38), (0, 5), (50, 60)]
  assert jsonl_qa.answer_texts(ex, CONTEXT) == ["Jonas Hale", "Hale", "Jonas", "the miller"]


def test_no_answers_is_a_test_example():
  assert jsonl_qa.parse_line(_line()).answers == ()
  assert jsonl_qa.parse_line(_line(answers=[])).answers == ()
  assert jsonl_qa.answer_texts(jsonl_qa.parse_line(_line()), None) == []


@pytest.mark.parametrize("line, reason", [
    ("{not json", "invalid_json"),
    (b"\xff\xfe", "invalid_json"),
    ("[1, 2]", "bad_field"),
    (_line(id=...), "missing_field"),
    (_line(question="  "), "missing_field"),
    (_line(id=7), "bad_field"),
    (_line(context=...), "missing_field"),
    (_line(context_file="a.txt"), "bad_field"),
    (_line(extra=1), "bad_field"),
    (_line(answers="Hale"), "bad_field"),
    (_line(answers=[3]), "bad_answer"),
    (_line(answers=[""]), "bad_answer"),
    (_line(answers=[{"start": 3}]), "bad_answer"),
    (_line(answers=[{"end": 3}]), "bad_answer"),
    (_line(answers=[{"start": 5, "end": 5}]), "bad_answer"),
    (_line(answers=[{"start": -1, "end": 5}]), "bad_answer"),
    (_line(answers=[{"start": 1.5, "end": 5}]), "bad_answer"),
    (_line(answers=[{"text": "Hale", "start": 34, "end": 39}]), "span_text_mismatch"),
    (_line(answers=[{"text": "x", "start": 0, "end": 1, "score": 1}]), "bad_answer"),
])
def test_rejections(line, reason):
  with pytest.raises(jsonl_qa.FormatError) as e:
    jsonl_qa.parse_line(line)
  assert e.value.reason == reason


def test_spans_checked_against_the_context():
  ex = jsonl_qa.parse_line(_line(answers=[{"start": 55, "end": 99}]))
  with pytest.raises(jsonl_qa.FormatError) as e:
    jsonl_qa.answer_spans(ex, CONTEXT)
  assert e.value.reason == "span_out_of_range"
  ex = jsonl_qa.parse_line(_line(answers=[{"text": "Hall", "start": 34, "end": 38}]))
  with pytest.raises(jsonl_qa.FormatError) as e:
    jsonl_qa.answer_texts(ex, CONTEXT)
  assert e.value.reason == "span_text_mismatch"
  with pytest.raises(ValueError, match="context is needed"):
    jsonl_qa.answer_texts(jsonl_qa.parse_line(_line(answers=[{"start": 0, "end": 5}])), None)


def test_context_path():
  ex = jsonl_qa.parse_line(_line(context=..., context_file="books/mill.txt"))
  assert jsonl_qa.context_path(ex, "/data/qa/train.jsonl") == "/data/qa/books/mill.txt"
  assert jsonl_qa.context_path(ex, "gs://b/qa/train.jsonl") == "gs://b/qa/books/mill.txt"
  up = jsonl_qa.parse_line(_line(context=..., context_file="../texts/m.txt"))
  assert jsonl_qa.context_path(up, "gs://b/qa/train.jsonl") == "gs://b/texts/m.txt"
  for absolute in ("/abs/m.txt", "gs://other/m.txt"):
    ex = jsonl_qa.parse_line(_line(context=..., context_file=absolute))
    assert jsonl_qa.context_path(ex, "/data/qa/train.jsonl") == absolute
