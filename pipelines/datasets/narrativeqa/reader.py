"""NarrativeQA (official layout) -> one Document per question, all of a story's questions
reading the same text object.  Pure Python: no Beam, no TensorFlow.

The layout (https://github.com/deepmind/narrativeqa): ``documents.csv`` (``document_id, set,
kind, story_url, ..., story_start, story_end``), ``qaps.csv`` (``document_id, set, question,
answer1, answer2, ...``), ``third_party/wikipedia/summaries.csv`` (``document_id, set,
summary, ...``) and the downloaded stories ``tmp/<document_id>.content`` (Gutenberg books and
movie scripts, some as HTML).

A story's text (:func:`story_text`):

1. bytes -> str with :func:`pipelines.text.plain_text.decode_text` (UTF-8 with or without a BOM,
   UTF-16 with a BOM, cp1252, Latin-1; CRLF and CR -> LF);
2. scripts (``kind == "movie"``) that hold HTML: tags removed (``<br>`` and block tags become
   line breaks) and entities decoded;
3. cut from the first occurrence of ``story_start`` to the end of the last occurrence of
   ``story_end``.  The markers in ``documents.csv`` are *tokenised* text ("new eBooks ." for
   "new eBooks."), so they are matched token by token with any whitespace, or none, between
   tokens.  A marker that is not found is a :class:`BadInput` (``missing_story_start`` /
   ``missing_story_end``): every question of that story becomes a dead letter with that reason;
4. paragraphs as :func:`pipelines.text.plain_text.paragraphs` makes them (hard-wrapped lines
   joined, runs of spaces collapsed), joined with a blank line.

``--context summary`` reads the story's Wikipedia summary from ``summaries.csv`` instead (a
standard NarrativeQA setting).

Questions have no id in ``qaps.csv``: a question's id (and its document's id) is
``<document_id>:<k>`` with ``k`` its position among the story's questions in file order (from
0), and its document's ``source_document_id`` is the story's ``document_id``, which with the
question text is the key of the official evaluation.
"""

from __future__ import annotations

import html
import re
from typing import Dict, List, Optional, Sequence, Tuple

from schemas import records
from pipelines.document import BadInput, Document, Paragraph, Question
from pipelines.text import plain_text

SPLITS = ("train", "valid", "test")
CONTEXTS = ("story", "summary")
KINDS = ("gutenberg", "movie")
DOCUMENT_COLUMNS = ("document_id", "set", "kind", "story_start", "story_end")
QUESTION_COLUMNS = ("document_id", "set", "question", "answer1", "answer2")
SUMMARY_COLUMNS = ("document_id", "set", "summary")

_TAG = re.compile(r"<[^<>]{0,2000}>")
_BREAK_TAG = re.compile(r"<\s*(?:br|/?p|/?pre|/?div|/?tr|/?h[1-6]|/?li)\b[^<>]{0,2000}>",
                        re.IGNORECASE)
_HTML_HINT = re.compile(r"<\s*(?:html|body|pre|b|br|p|div|td|font|head|title)\b", re.IGNORECASE)
_SCRIPT_STYLE = re.compile(r"<\s*(script|style)\b.*?<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)


def question_id(document_id: str, k: int) -> str:
  """The id of the ``k``-th question (from 0, in ``qaps.csv`` order) of a story."""
  return f"{document_id}:{k}"


def strip_html(text: str) -> str:
  """Script/style blocks and tags removed (line-breaking tags become newlines), entities
  decoded."""
  text = _SCRIPT_STYLE.sub(" ", text)
  text = _BREAK_TAG.sub("\n", text)
  text = _TAG.sub("", text)
  return html.unescape(text)


def looks_like_html(text: str) -> bool:
  return _HTML_HINT.search(text[:200_000]) is not None


def marker_pattern(marker: str) -> re.Pattern:
  """A ``documents.csv`` marker as a pattern: its tokens in order, any whitespace (or none)
  between them."""
  tokens = marker.split()
  if not tokens:
    raise ValueError("empty marker")
  return re.compile(r"\s*".join(re.escape(t) for t in tokens))


def cut_story(text: str, story_start: str, story_end: str) -> str:
  """``text`` from the first ``story_start`` to the end of the last ``story_end``."""
  if not story_start.strip():
    raise BadInput("missing_story_start", "documents.csv gives no story_start")
  if not story_end.strip():
    raise BadInput("missing_story_end", "documents.csv gives no story_end")
  m = marker_pattern(story_start).search(text)
  if m is None:
    raise BadInput("missing_story_start", f"story_start {story_start!r} not in the story")
  begin = m.start()
  last = None
  for last in marker_pattern(story_end).finditer(text, begin):
    pass
  if last is None:
    raise BadInput("missing_story_end",
                   f"story_end {story_end!r} not in the story after story_start")
  return text[begin:last.end()]


def _document(text_paragraphs: Sequence[str]) -> Tuple[str, Tuple[Paragraph, ...]]:
  pieces, paragraphs, pos = [], [], 0
  for i, p in enumerate(text_paragraphs):
    if i:
      pieces.append(plain_text.PARAGRAPH_SEPARATOR)
      pos += len(plain_text.PARAGRAPH_SEPARATOR)
    pieces.append(p)
    paragraphs.append(Paragraph(title="", begin=pos, end=pos + len(p)))
    pos += len(p)
  return "".join(pieces), tuple(paragraphs)


def story_text(data: bytes, kind: str, story_start: str, story_end: str
               ) -> Tuple[str, Tuple[Paragraph, ...], Dict[str, int]]:
  """The story of a ``.content`` file: (text, paragraphs, counters); BadInput when unusable."""
  stats: Dict[str, int] = {}
  text, encoding = plain_text.decode_text(data)
  stats[f"encoding_{encoding.replace('-', '_')}"] = 1
  if kind == "movie" and looks_like_html(text):
    text = strip_html(text)
    stats["html_stripped"] = 1
  body = cut_story(text, story_start, story_end)
  story, paragraphs = _document(plain_text.paragraphs(body))
  if not story.strip():
    raise BadInput("empty_story", "nothing between story_start and story_end")
  return story, paragraphs, stats


def summary_text(summary: str) -> Tuple[str, Tuple[Paragraph, ...]]:
  """A Wikipedia summary from ``summaries.csv`` as a document text."""
  story, paragraphs = _document(plain_text.paragraphs(summary.replace("\r\n", "\n").replace(
      "\r", "\n")))
  if not story.strip():
    raise BadInput("empty_summary", "the summary is empty")
  return story, paragraphs


def check_columns(header: Optional[Sequence[str]], required: Sequence[str], path: str) -> None:
  missing = [c for c in required if c not in (header or ())]
  if missing:
    raise ValueError(f"{path}: no column(s) {', '.join(missing)} (columns: "
                     f"{', '.join(header or ())}); is it the official NarrativeQA file?")


def make_question(row: Dict[str, str], document_id: str, k: int) -> Question:
  """A ``qaps.csv`` row -> Question (both reference answers; BadInput without a question)."""
  text = (row.get("question") or "").strip()
  if not text:
    raise BadInput("empty_question", "qaps.csv row has no question")
  answers = tuple(a.strip() for a in (row.get("answer1") or "", row.get("answer2") or "")
                  if a and a.strip())
  return Question(id=question_id(document_id, k), text=text, answers=answers,
                  answer_type=records.ANSWER_TYPE_SPAN if answers else records.ANSWER_TYPE_NONE)


def question_documents(document_id: str, text: str, paragraphs: Tuple[Paragraph, ...],
                       questions: Sequence[Tuple[str, Question]]) -> List[Document]:
  """One Document per ``(source id, question)``, all holding the same ``text`` object."""
  return [Document(id=q.id, text=text, source_id=source_id, paragraphs=paragraphs, question=q,
                   source_document_id=document_id) for source_id, q in questions]
