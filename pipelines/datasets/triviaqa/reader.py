r"""TriviaQA (reading comprehension, version 1.0 JSON; Wikipedia and web) -> document plans ->
Documents.

A question file is ``{"Data": [datum, ...], "Domain": ..., "Split": ..., ...}``; a datum holds
``Question``, ``QuestionId``, ``Answer`` (absent in the test files: ``Aliases``,
``NormalizedAliases``, ``Value``, ...), ``EntityPages`` (``Filename``, ``Title``: files under
``evidence/wikipedia/``) and, in web files only, ``SearchResults`` (``Filename``, ``Title``, ...:
files under ``evidence/web/``).  A datum with ``SearchResults`` is a web question, any other a
Wikipedia one (the file's ``Domain`` is not needed).

The unit, one input record of the job, is the unit of the official evaluation
(``model.evaluation.triviaqa.key_to_answer``):

* Wikipedia, by default: one document per question, ``document_id = QuestionId``: its entity
  pages in file order, separated by a blank line, one paragraph per page (``title`` = the page
  ``Title``).
* Web, and Wikipedia with ``per_document``: one document per question-document pair, over
  ``EntityPages`` then ``SearchResults``, ``document_id = "<QuestionId>--<Filename>"``
  (:mod:`schemas.documents`); a Filename repeated within a question is one pair (the first).

:func:`split_question` (the read stage's ``expand``) turns a datum into its units (a unit of a
pair is the datum with ``"_page": k``, the index into ``EntityPages + SearchResults``);
:func:`parse_record` (the parse stage) turns a unit into a :class:`Plan`: the document's id,
its question and the evidence files to read; :func:`build_document` (the evidence stage, on the
workers) makes the Document from the texts read.  Document texts are the evidence texts as
read (see :func:`decode_evidence`), never with titles added, so answer offsets point into the
evidence itself.

Answers: the question's answer strings are ``Value``, ``Aliases``, ``NormalizedAliases`` and
``HumanAnswers`` (where present), in that order, without repeats; answer type SPAN.  Without
``Answer`` (test files) there are none and the answer type is NONE: the documents are still
written, for predictions.
"""

from __future__ import annotations

import codecs
import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

from schemas import records
from pipelines.document import BadInput, Document, Paragraph, Question

PAGE_SEPARATOR = "\n\n"
KEY_SEPARATOR = "--"  # document_id = QuestionId--Filename (schemas/documents.py)
WIKIPEDIA, WEB = "wikipedia", "web"  # evidence sub-directories (and page origins)
PAGE_KEY = "_page"  # a unit of a question-document pair: the datum with its page's index
ANSWER_LISTS = ("Aliases", "NormalizedAliases", "HumanAnswers")
TEXT_KEY = "_text"  # a page's evidence text inside the datum (Hub Parquet rows, .hub)


@dataclasses.dataclass(frozen=True)
class Page:
  """One evidence file: ``<evidence_dir>/<origin>/<filename>``, or its ``text`` where the
  datum holds it (:data:`TEXT_KEY`)."""
  origin: str  # WIKIPEDIA (EntityPages) or WEB (SearchResults)
  filename: str
  title: str
  text: Optional[str] = None

  @property
  def relative_path(self) -> str:
    return f"{self.origin}/{self.filename}"


@dataclasses.dataclass(frozen=True)
class Plan:
  """What the evidence stage needs to build one document."""
  document_id: str
  source_id: str
  question: Question
  pages: Tuple[Page, ...]
  per_question: bool  # Wikipedia per-question document (pages joined); else one page


def document_id(question_id: str, filename: str) -> str:
  return f"{question_id}{KEY_SEPARATOR}{filename}"


def is_web(datum: Dict[str, Any]) -> bool:
  return "SearchResults" in datum


def _pages(datum: Dict[str, Any]) -> List[Tuple[str, Any]]:
  """``(origin, page)`` over EntityPages then SearchResults; BadInput unless both are lists."""
  out = []
  for key, origin in (("EntityPages", WIKIPEDIA), ("SearchResults", WEB)):
    pages = datum.get(key, [])
    if not isinstance(pages, list):
      raise BadInput(f"bad_{key}", f"{key!r} is {type(pages).__name__}, not a list")
    out.extend((origin, p) for p in pages)
  return out


def _filename(origin: str, page: Any, k: int) -> str:
  if not isinstance(page, dict):
    raise BadInput("bad_page", f"page {k} is {type(page).__name__}, not an object")
  name = page.get("Filename")
  if not isinstance(name, str) or not name.strip():
    raise BadInput("bad_filename", f"page {k} has no Filename string")
  # A Filename that leaves <evidence_dir>/<origin>/ is refused where it would be read, by the
  # one path policy of schemas.data_paths (--allow_read_root opts in): evidence.py.
  return name


def _page(origin: str, page: Any, k: int) -> Page:
  name = _filename(origin, page, k)
  title = page.get("Title")
  if title is None:
    title = name[:-4] if name.endswith(".txt") else name
  if not isinstance(title, str):
    raise BadInput("bad_title", f"page {k} ({name!r}) Title is {type(title).__name__}")
  text = page.get(TEXT_KEY)
  if text is not None and not isinstance(text, str):
    raise BadInput("bad_evidence", f"page {k} ({name!r}) text is {type(text).__name__}")
  return Page(origin, name, title, text)


def _repeated_pages(pages: List[Tuple[str, Any]]) -> int:
  """Pages whose Filename an earlier page of the question has."""
  names = [p.get("Filename") for _, p in pages if isinstance(p, dict)]
  names = [n for n in names if isinstance(n, str)]
  return len(names) - len(set(names))


def split_question(source_id: str, record: Any, per_document: bool = False
                   ) -> List[Tuple[str, Any]]:
  """The read stage's ``expand``: the units of one datum (see the module docstring).

  A web datum (or any with ``per_document``) is one unit per distinct page Filename (a page
  without a usable Filename is a unit too, which the parse stage rejects); a Wikipedia datum
  (per question) is itself.  A datum that cannot be split (not an object, page lists that are
  not lists, no pages) is passed on whole: the parse stage then says what is wrong with it.
  """
  if not isinstance(record, dict) or PAGE_KEY in record:
    return [(source_id, record)]
  if not (per_document or is_web(record)):
    return [(source_id, record)]
  try:
    pages = _pages(record)
  except BadInput:
    return [(source_id, record)]
  seen = set()
  units = []
  for k, (origin, page) in enumerate(pages):
    try:
      name = _filename(origin, page, k)
    except BadInput:  # a unit of its own, which the parse stage rejects
      name = None
    if name is None or name not in seen:
      seen.add(name)
      units.append((source_id, dict(record, **{PAGE_KEY: k})))
  return units or [(source_id, record)]


def _string(record: Dict[str, Any], key: str) -> str:
  if key not in record:
    raise BadInput(f"missing_{key}", f"record has no {key!r}")
  value = record[key]
  if not isinstance(value, str):
    raise BadInput(f"bad_{key}", f"{key!r} is {type(value).__name__}, not a string")
  return value


def answers_of(answer: Any) -> Tuple[str, ...]:
  """The answer strings of an ``Answer`` object: Value, Aliases, NormalizedAliases and
  HumanAnswers, in that order, without repeats or blank strings."""
  if not isinstance(answer, dict):
    raise BadInput("bad_Answer", f"'Answer' is {type(answer).__name__}, not an object")
  out: List[str] = []
  value = answer.get("Value")
  if value is not None:
    if not isinstance(value, str):
      raise BadInput("bad_Answer", f"Answer 'Value' is {type(value).__name__}, not a string")
    out.append(value)
  for key in ANSWER_LISTS:
    values = answer.get(key)
    if values is None:
      continue
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
      raise BadInput("bad_Answer", f"Answer {key!r} is not a list of strings")
    out.extend(values)
  out = [a for a in dict.fromkeys(out) if a.strip()]
  if not out:
    raise BadInput("empty_answer", "'Answer' has no non-blank Value, Aliases or "
                   "NormalizedAliases")
  return tuple(out)


def parse_record(record: Any, source_id: str, per_document: bool = False
                 ) -> Tuple[Plan, Dict[str, int]]:
  """One unit (a datum, or a datum with ``_page``) -> its Plan and reader counters; raises
  BadInput for unusable records."""
  if not isinstance(record, dict):
    raise BadInput("not_an_object", f"record is {type(record).__name__}")
  qid = _string(record, "QuestionId")
  if not qid.strip():
    raise BadInput("bad_QuestionId", "empty 'QuestionId'")
  question = _string(record, "Question")
  if not question.strip():
    raise BadInput("empty_question")
  if "Answer" in record and record["Answer"] is not None:
    answers, answer_type = answers_of(record["Answer"]), records.ANSWER_TYPE_SPAN
  else:
    answers, answer_type = (), records.ANSWER_TYPE_NONE
  q = Question(id=qid, text=question, answers=answers, answer_type=answer_type)
  pages = _pages(record)
  stats: Dict[str, int] = {}
  web = is_web(record)
  stats["web_documents" if web else "wikipedia_documents"] = 1
  k = record.get(PAGE_KEY)
  if k is not None:
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(pages):
      raise BadInput("bad_page", f"no page {k!r} in a question with {len(pages)} pages")
    origin, page = pages[k]
    p = _page(origin, page, k)
    if k == 0:  # the question's first unit counts the repeated pages left out by the split
      repeated = _repeated_pages(pages)
      if repeated:
        stats["duplicate_pages"] = repeated
    return Plan(document_id(qid, p.filename), source_id, q, (p,), per_question=False), stats
  if not pages:
    raise BadInput("no_evidence_pages", f"question {qid!r} has no EntityPages or SearchResults")
  if web or per_document:
    # split_question passes a datum on whole only when it cannot be split: find why.
    for k, (origin, page) in enumerate(pages):
      _page(origin, page, k)
    raise BadInput("bad_page", "the question's pages could not be split into documents")
  chosen: List[Page] = []
  seen = set()
  for k, (origin, page) in enumerate(pages):
    p = _page(origin, page, k)
    if p.filename in seen:
      continue
    seen.add(p.filename)
    chosen.append(p)
  duplicates = len(pages) - len(chosen)
  if duplicates:
    stats["duplicate_pages"] = duplicates
  return Plan(qid, source_id, q, tuple(chosen), per_question=True), stats


def decode_evidence(data: bytes) -> Tuple[str, Dict[str, int]]:
  """An evidence file's text: UTF-8 (a byte that is not UTF-8 becomes U+FFFD), without a BOM,
  with CRLF and lone CR line ends as LF (what Python's universal newlines, hence the official
  TriviaQA code, reads).  Returns the text and counters (``invalid_utf8_pages``,
  ``bom_stripped``, ``newlines_normalised``)."""
  stats: Dict[str, int] = {}
  if data.startswith(codecs.BOM_UTF8):
    data = data[len(codecs.BOM_UTF8):]
    stats["bom_stripped"] = 1
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError:
    text = data.decode("utf-8", errors="replace")
    stats["invalid_utf8_pages"] = 1
  if "\r" in text:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    stats["newlines_normalised"] = 1
  return text, stats


def build_document(plan: Plan, texts: Sequence[Optional[str]]) -> Document:
  """The Document of ``plan`` from its pages' texts (None: the file was not read; blank texts
  are left out).  Raises BadInput if no page has text."""
  pieces: List[str] = []
  paragraphs: List[Paragraph] = []
  pos = 0
  for page, text in zip(plan.pages, texts):
    if text is None or not text.strip():
      continue
    if pieces:
      pieces.append(PAGE_SEPARATOR)
      pos += len(PAGE_SEPARATOR)
    pieces.append(text)
    paragraphs.append(Paragraph(title=page.title, begin=pos, end=pos + len(text)))
    pos += len(text)
  if not pieces:
    raise BadInput("empty_evidence", f"no evidence text for {plan.document_id!r}")
  return Document(id=plan.document_id, text="".join(pieces), source_id=plan.source_id,
                  paragraphs=tuple(paragraphs), question=plan.question)

