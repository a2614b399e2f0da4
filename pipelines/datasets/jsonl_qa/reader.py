"""Users' own long-document QA data (JSON lines, :mod:`schemas.jsonl_qa`) -> labelled Document.

One document per example: its text is the context exactly as given (inline ``context``, or the
UTF-8 file ``context_file`` names, under the JSONL file's folder), so that the answer
offsets of the file are offsets into the document; id ``id``; one paragraph spanning the text,
titled ``title`` (or ``""``); the question ``question`` (the segmenter puts it in front of every
segment, as for the other QA datasets).  The answers are labelled here, where the context is at
hand: a string answer at every word-bounded occurrence (:func:`pipelines.text.answers.
find_answer_spans`, as HotpotQA's labeller finds them), a span answer exactly at its span.  An
example without answers is unlabelled (a test file).

A line that breaks the format raises :class:`~pipelines.document.BadInput` with the reason of
:class:`schemas.jsonl_qa.FormatError` (``missing_field``, ``bad_field``, ``bad_answer``,
``span_out_of_range``, ``span_text_mismatch``), or ``missing_context_file``,
``invalid_context_file`` (not UTF-8), ``empty_context``, and the refusals of
:mod:`schemas.data_paths` (a ``context_file`` outside the JSONL file's folder, not a regular
file, or over ``--max_input_file_bytes``).  Pure Python: files are read through
the ``read_file`` callable the caller passes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from schemas import data_paths, jsonl_qa, records
from pipelines import keys
from pipelines.document import BadInput, Document, Paragraph, Question
from pipelines.text.answers import find_answer_spans

# read_file(root, name) -> (path, the file's bytes or None when there is no such file); raises
# schemas.data_paths.DataPathError for a name it refuses (outside root, not a regular file, ...).
ReadFile = Callable[[str, str], Tuple[str, Optional[bytes]]]


def context_of(example: jsonl_qa.Example, jsonl_path: str, read_file: ReadFile) -> str:
  """The example's context: inline, or its ``context_file`` decoded as UTF-8 (exactly: no
  newline or BOM normalisation, so that the file's offsets hold).  A ``context_file`` that
  :mod:`schemas.data_paths` refuses is BadInput with its reason (``path_outside_root``,
  ``absolute_path``, ``not_a_regular_file``, ``file_too_large``, ``invalid_path``)."""
  if example.context is not None:
    return example.context
  try:
    path, data = read_file(jsonl_qa.context_root(jsonl_path), example.context_file)
  except data_paths.DataPathError as e:
    raise BadInput(e.reason, str(e)) from e
  if data is None:
    raise BadInput("missing_context_file", f"context_file {example.context_file!r}: {path} "
                                           f"does not exist")
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise BadInput("invalid_context_file", f"{path} is not UTF-8: byte 0x{data[e.start]:02x} "
                                           f"at byte {e.start}") from e


def label(example: jsonl_qa.Example, context: str) -> Tuple[List[Tuple[int, int]], Dict[str, int]]:
  """The answer spans of ``example`` in ``context`` (sorted, distinct) and counters: span
  answers at their spans, string answers at every occurrence."""
  spans = set(jsonl_qa.answer_spans(example, context))
  strings = [a.text for a in example.answers if a.start is None]
  stats = {"span_answers": len(example.answers) - len(strings),
           "string_answers": len(strings)}
  if strings:
    found, how = find_answer_spans(context, strings)
    stats[f"string_answers_{how}"] = 1
    spans.update(found)
  return sorted(spans), stats


def parse_record(record: Any, source_id: str,
                 read_file: ReadFile) -> Tuple[Document, Dict[str, int]]:
  """One decoded line (``source_id``: ``<jsonl path>:<line>``) -> (Document, counters)."""
  try:
    example = jsonl_qa.parse(record)
    jsonl_path = keys.split_source_id(source_id)[0]
    context = context_of(example, jsonl_path, read_file)
    if not context.strip():
      raise BadInput("empty_context", "the context is empty")
    spans, stats = label(example, context)
    answers = tuple(jsonl_qa.answer_texts(example, context))
  except jsonl_qa.FormatError as e:
    raise BadInput(e.reason, str(e)) from e
  stats["context_files" if example.context_file is not None else "inline_contexts"] = 1
  question = Question(id=example.id, text=example.question, answers=answers,
                      answer_type=(records.ANSWER_TYPE_SPAN if answers
                                   else records.ANSWER_TYPE_NONE),
                      answer_spans=tuple(spans))
  return Document(id=example.id, text=context, source_id=source_id,
                  paragraphs=(Paragraph(title=example.title or "", begin=0, end=len(context)),),
                  question=question), stats
