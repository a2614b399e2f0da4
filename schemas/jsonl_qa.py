"""The JSON-lines format of users' own extractive QA data (the ``jsonl_qa`` dataset).

One example per line, UTF-8::

  {"id": "q1", "question": "Who built the mill?",
   "context": "..."            # the document text, or
   "context_file": "books/mill.txt",   # a UTF-8 text file under the JSONL file's folder
   "answers": ["Jonas Hale",                       # a string: every occurrence is an answer
               {"text": "Hale", "start": 120, "end": 124},  # a span (end exclusive), text checked
               {"start": 300, "end": 310},                  # a span, text taken from the context
               {"text": "the miller", "start": 57}],        # a span given by its start and text
   "title": "The Mill"}        # optional

``answers`` may be empty or absent (a test file).  Character offsets are Python string offsets
into the context (code points, not bytes).  Both sides read this module: the pipeline
(``pipelines/datasets/jsonl_qa``) to label the records, the model (``extractive_qa`` task) to read
the gold answers, so the format is defined once.  Pure Python: no Beam, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
from typing import Any, List, Mapping, Optional, Tuple

from schemas import safe_json


class FormatError(ValueError):
  """A line that is not a valid example; ``reason`` is the dead-letter reason."""

  def __init__(self, reason: str, message: str):
    super().__init__(message)
    self.reason = reason


@dataclasses.dataclass(frozen=True)
class Answer:
  """A gold answer: a string (``start`` None: every occurrence), or a span (end exclusive)."""
  text: Optional[str] = None
  start: Optional[int] = None
  end: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Example:
  id: str
  question: str
  answers: Tuple[Answer, ...] = ()
  context: Optional[str] = None
  context_file: Optional[str] = None
  title: Optional[str] = None


_FIELDS = frozenset(("id", "question", "answers", "context", "context_file", "title"))


def _string(obj: Mapping[str, Any], key: str, required: bool) -> Optional[str]:
  value = obj.get(key)
  if value is None:
    if required:
      raise FormatError("missing_field", f"missing field {key!r}")
    return None
  if not isinstance(value, str):
    raise FormatError("bad_field", f"field {key!r} must be a string, got {type(value).__name__}")
  if required and not value.strip():
    raise FormatError("missing_field", f"field {key!r} is empty")
  return value


def _offset(value: Any, key: str, index: int) -> Optional[int]:
  if value is None:
    return None
  if isinstance(value, bool) or not isinstance(value, int):
    raise FormatError("bad_answer", f"answers[{index}].{key} must be an integer, got {value!r}")
  if value < 0:
    raise FormatError("bad_answer", f"answers[{index}].{key} must be >= 0, got {value}")
  return value


def _answer(value: Any, index: int) -> Answer:
  if isinstance(value, str):
    if not value.strip():
      raise FormatError("bad_answer", f"answers[{index}] is an empty string")
    return Answer(text=value)
  if not isinstance(value, Mapping):
    raise FormatError("bad_answer", f"answers[{index}] must be a string or an object with "
                      f"start/end/text, got {type(value).__name__}")
  unknown = sorted(set(value) - {"text", "start", "end"})
  if unknown:
    raise FormatError("bad_answer", f"answers[{index}] has unknown keys {unknown}")
  text = value.get("text")
  if text is not None and (not isinstance(text, str) or not text):
    raise FormatError("bad_answer", f"answers[{index}].text must be a non-empty string")
  start, end = _offset(value.get("start"), "start", index), _offset(value.get("end"), "end", index)
  if start is None:
    if end is not None:
      raise FormatError("bad_answer", f"answers[{index}] has end without start")
    if text is None:
      raise FormatError("bad_answer", f"answers[{index}] has neither text nor start")
  elif end is None:
    if text is None:
      raise FormatError("bad_answer", f"answers[{index}] has start without end or text")
    end = start + len(text)
  if start is not None and end <= start:
    raise FormatError("bad_answer", f"answers[{index}] is an empty span [{start}, {end})")
  if text is not None and end is not None and end - start != len(text):
    raise FormatError("span_text_mismatch", f"answers[{index}] text {text!r} has "
                      f"{len(text)} characters but its span [{start}, {end}) has {end - start}")
  return Answer(text=text, start=start, end=end)


def parse(obj: Any) -> Example:
  """Validates one decoded line; raises :class:`FormatError`."""
  if not isinstance(obj, Mapping):
    raise FormatError("bad_field", f"a line must be a JSON object, got {type(obj).__name__}")
  unknown = sorted(set(obj) - _FIELDS)
  if unknown:
    raise FormatError("bad_field", f"unknown fields {unknown} (expected {sorted(_FIELDS)})")
  example_id = _string(obj, "id", required=True)
  question = _string(obj, "question", required=True)
  context = _string(obj, "context", required=False)
  context_file = _string(obj, "context_file", required=False)
  if (context is None) == (context_file is None):
    raise FormatError("missing_field" if context is None else "bad_field",
                      "exactly one of 'context' and 'context_file' must be given")
  if context_file is not None and not context_file.strip():
    raise FormatError("missing_field", "field 'context_file' is empty")
  answers = obj.get("answers")
  if answers is None:
    answers = []
  if not isinstance(answers, list):
    raise FormatError("bad_field", f"field 'answers' must be a list, got "
                      f"{type(answers).__name__}")
  return Example(id=example_id, question=question,
                 answers=tuple(_answer(a, i) for i, a in enumerate(answers)),
                 context=context, context_file=context_file,
                 title=_string(obj, "title", required=False))


def parse_line(line: str | bytes) -> Example:
  """One line of the file -> :class:`Example`; raises :class:`FormatError`."""
  if isinstance(line, bytes):
    try:
      line = line.decode("utf-8")
    except UnicodeDecodeError as e:
      raise FormatError("invalid_json", f"not UTF-8: {e}") from e
  try:
    obj = safe_json.loads(line, "this line")
  except safe_json.JsonTooDeepError as e:
    raise FormatError("json_too_deep", str(e)) from None
  except json.JSONDecodeError as e:
    raise FormatError("invalid_json", f"not JSON: {e}") from e
  return parse(obj)


def context_root(jsonl_path: str) -> str:
  """The folder ``context_file`` names are relative to: that of ``jsonl_path`` (which may be a
  URL); names that leave it are refused (:mod:`schemas.data_paths`)."""
  if "://" in jsonl_path:
    scheme, rest = jsonl_path.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest)}"
  return os.path.dirname(jsonl_path) or "."


def context_path(example: Example, jsonl_path: str) -> str:
  """Where ``example.context_file`` points: absolute paths and URLs (``gs://...``) as given,
  relative ones against the folder of ``jsonl_path`` (which may itself be a URL).  Readers do
  not open it directly: they read ``context_file`` under :func:`context_root` through
  :mod:`schemas.data_paths`, which refuses names outside that folder."""
  name = example.context_file
  if name is None:
    raise ValueError(f"example {example.id!r} has its context inline")
  if "://" in name or name.startswith("/"):
    return name
  if "://" in jsonl_path:
    scheme, rest = jsonl_path.split("://", 1)
    return f"{scheme}://{posixpath.normpath(posixpath.join(posixpath.dirname(rest), name))}"
  return os.path.normpath(os.path.join(os.path.dirname(jsonl_path), name))


def answer_spans(example: Example, context: str) -> List[Tuple[int, int]]:
  """The answers given as spans, checked against ``context``: ``[(start, end), ...]``; raises
  :class:`FormatError` (``span_out_of_range``, ``span_text_mismatch``)."""
  spans = []
  for i, a in enumerate(example.answers):
    if a.start is None:
      continue
    if a.end > len(context):
      raise FormatError("span_out_of_range", f"answers[{i}] span [{a.start}, {a.end}) is past "
                        f"the end of the context ({len(context)} characters)")
    if a.text is not None and context[a.start:a.end] != a.text:
      raise FormatError("span_text_mismatch", f"answers[{i}] text {a.text!r} differs from the "
                        f"context at [{a.start}, {a.end}): {context[a.start:a.end]!r}")
    spans.append((a.start, a.end))
  return spans


def answer_texts(example: Example, context: Optional[str]) -> List[str]:
  """The gold answer strings (spans' text from ``context``, which may be None when every answer
  has its text), in order, without duplicates."""
  texts: List[str] = []
  needs_context = any(a.text is None for a in example.answers)
  if needs_context and context is None:
    raise ValueError(f"example {example.id!r} has a span answer without text: its context is "
                     f"needed")
  if context is not None:
    answer_spans(example, context)  # validates every span
  for a in example.answers:
    text = a.text if a.text is not None else context[a.start:a.end]
    if text not in texts:
      texts.append(text)
  return texts
