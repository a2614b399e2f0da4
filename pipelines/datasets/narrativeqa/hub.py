"""NarrativeQA as the Hugging Face Hub stores it (``deepmind/narrativeqa``; Parquet, one row per
question, the story inside it) -> the rows the official CSV path joins: a ``qaps.csv`` question
row, a ``documents.csv`` story row and a ``summaries.csv`` summary, so that the story is cleaned
and cut by :func:`.reader.story_text` exactly as a ``tmp/<document_id>.content`` file is.

The Hub's rows are made by its loading script (``huggingface/datasets``,
``datasets/narrativeqa/narrativeqa.py``): ``document: {id, kind, url, file_size, word_count,
start, end, summary: {text, tokens, url, title}, text}``, ``question: {text, tokens}``,
``answers: [{text, tokens}, {text, tokens}]`` (answer1, answer2), where ``start`` / ``end`` are
``story_start`` / ``story_end`` of ``documents.csv`` and ``text`` is the whole
``<document_id>.content`` file read as Latin-1 text (universal newlines), neither cut nor
cleaned.  :func:`story_bytes` turns it back into the file's bytes (Latin-1 maps each byte to
one character; CRLF has become LF, which :func:`.reader.story_text` makes of it anyway), so the
same decoding (UTF-8 with or without BOM, cp1252, ...), HTML stripping and cutting apply.

The split: a Hub file holds one split and its rows do not say which.  Every row of a Parquet
input is taken as a question of ``--split``; a file named by the Hub's layout
(``train-*``, ``validation-*``, ``test-*``) must match it (``validation`` is ``valid``), else the
job stops with a usage error (:func:`split_of_file`).  Question ids are ``<document_id>:<k>``
with ``k`` the question's position among its story's rows (file order), as in ``qaps.csv``.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Dict, Optional

REQUIRED = ("document.id", "document.kind", "document.start", "document.end", "document.text",
            "document.summary.text", "question.text", "answers.text")
COLUMNS = ("document", "question", "answers")
_HUB_SPLITS = {"train": "train", "validation": "valid", "valid": "valid", "test": "test"}
_SPLIT_NAME = re.compile(r"^(train|validation|valid|test)(?:[-_.]|$)")


def split_of_file(path: str) -> Optional[str]:
  """The NarrativeQA split a Hub file's name says (``train-00000-of-00024.parquet`` ->
  ``train``, ``validation-...`` -> ``valid``); None if the name does not say."""
  m = _SPLIT_NAME.match(posixpath.basename(path.replace("\\", "/")))
  return _HUB_SPLITS[m.group(1)] if m else None


def story_bytes(text: str) -> bytes:
  """The ``.content`` file's bytes of the Hub's ``document.text`` (module docstring); a text
  that is not Latin-1 (a re-encoded copy) is taken as UTF-8."""
  try:
    return text.encode("latin-1")
  except UnicodeEncodeError:
    return text.encode("utf-8")


def question_row(row: Dict[str, Any], split: str) -> Dict[str, str]:
  """A Hub row -> its ``qaps.csv`` row."""
  answers = [a.get("text") or "" for a in (row.get("answers") or []) if a]
  answers += [""] * (2 - len(answers))
  return {"document_id": row["document"]["id"], "set": split,
          "question": row["question"]["text"] or "", "answer1": answers[0],
          "answer2": answers[1]}


def story_row(row: Dict[str, Any], split: str) -> Dict[str, Any]:
  """A Hub row -> its story's ``documents.csv`` row, with ``content``: the story file's bytes."""
  doc = row["document"]
  return {"document_id": doc["id"], "set": split, "kind": doc.get("kind") or "",
          "story_start": doc.get("start") or "", "story_end": doc.get("end") or "",
          "content": story_bytes(doc.get("text") or "")}


def summary(row: Dict[str, Any]) -> str:
  """A Hub row -> its story's ``summaries.csv`` summary."""
  return ((row["document"].get("summary") or {}).get("text")) or ""
