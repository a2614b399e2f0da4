"""The jsonl_qa reader: exact documents and labels, and one dead-letter reason per way a line
can be wrong."""

from __future__ import annotations

import os

import pytest

from schemas import records
from pipelines.datasets.jsonl_qa import reader
from pipelines.document import BadInput, Paragraph

CONTEXT = "Ada Penrose kept the lamp. In 1859 the gale came; Ada Penrose saved three ships."
FILES = {
    os.path.join("/data", "books", "mill.txt"): "The mill on the Alde was built by Jonas Hale.",
    os.path.join("/data", "bad.txt"): b"caf\xe9"}


def read_file(root, name):
  path = os.path.normpath(os.path.join(root, name))
  data = FILES.get(path)
  return path, (data.encode("utf-8") if isinstance(data, str) else data)


def parse(record, source_id="/data/qa.jsonl:3"):
  return reader.parse_record(record, source_id, read_file)


def test_string_answers_are_labelled_at_every_occurrence():
  doc, stats = parse({"id": "q1", "question": "Who kept the lamp?", "context": CONTEXT,
                      "answers": ["Ada Penrose"], "title": "Carrow Point"})
  assert doc.id == "q1" and doc.text == CONTEXT and doc.source_id == "/data/qa.jsonl:3"
  assert doc.paragraphs == (Paragraph(title="Carrow Point", begin=0, end=len(CONTEXT)),)
  q = doc.question
  assert (q.id, q.text, q.answers, q.answer_type) == ("q1", "Who kept the lamp?",
                                                      ("Ada Penrose",), records.ANSWER_TYPE_SPAN)
  assert q.answer_spans == ((0, 11), (50, 61))
  assert stats == {"span_answers": 0, "string_answers": 1, "string_answers_exact": 1,
                   "inline_contexts": 1}


def test_span_answers_are_labelled_at_their_spans_only():
  doc, stats = parse({"id": "q2", "question": "Who?", "context": CONTEXT, "answers": [
      {"text": "Ada Penrose", "start": 50, "end": 61}, {"start": 30, "end": 34},
      {"text": "gale", "start": 39}]})
  assert doc.question.answer_spans == ((30, 34), (39, 43), (50, 61))  # not (0, 11)
  assert doc.question.answers == ("Ada Penrose", "1859", "gale")
  assert doc.paragraphs[0].title == ""
  assert stats["span_answers"] == 3 and stats["string_answers"] == 0


def test_mixed_answers_and_a_string_found_nowhere():
  doc, stats = parse({"id": "q3", "question": "Who?", "context": CONTEXT,
                      "answers": ["Grace Darling", {"start": 30, "end": 34}]})
  assert doc.question.answer_spans == ((30, 34),)
  assert stats["string_answers_not_found"] == 1
  doc, _ = parse({"id": "q4", "question": "Who?", "context": CONTEXT, "answers": []})
  assert doc.question.answer_type == records.ANSWER_TYPE_NONE
  assert doc.question.answers == () and doc.question.answer_spans == ()


def test_context_file_is_read_relative_to_the_jsonl_file():
  doc, stats = parse({"id": "m", "question": "Who built the mill?",
                      "context_file": "books/mill.txt", "answers": ["Jonas Hale"]})
  assert doc.text == "The mill on the Alde was built by Jonas Hale."
  assert doc.question.answer_spans == ((34, 44),)
  assert stats["context_files"] == 1


@pytest.mark.parametrize("record,reason", [
    ({"question": "Q?", "context": CONTEXT}, "missing_field"),
    ({"id": "x", "context": CONTEXT}, "missing_field"),
    ({"id": "x", "question": "Q?"}, "missing_field"),
    ({"id": 7, "question": "Q?", "context": CONTEXT}, "bad_field"),
    ({"id": "x", "question": "Q?", "context": CONTEXT, "answers": "Ada"}, "bad_field"),
    (["not", "an", "object"], "bad_field"),
    ({"id": "x", "question": "Q?", "context": CONTEXT, "answers": [3]}, "bad_answer"),
    ({"id": "x", "question": "Q?", "context": CONTEXT,
      "answers": [{"start": 70, "end": 200}]}, "span_out_of_range"),
    ({"id": "x", "question": "Q?", "context": CONTEXT,
      "answers": [{"text": "Grace", "start": 0, "end": 5}]}, "span_text_mismatch"),
    ({"id": "x", "question": "Q?", "context_file": "nope.txt"}, "missing_context_file"),
    ({"id": "x", "question": "Q?", "context_file": "bad.txt"}, "invalid_context_file"),
    ({"id": "x", "question": "Q?", "context": " \n"}, "empty_context"),
])
def test_bad_lines_raise_bad_input_with_their_reason(record, reason):
  with pytest.raises(BadInput) as e:
    parse(record)
  assert e.value.reason == reason
