"""The one in-memory document type every source reader produces.

All spans are character offsets into ``Document.text`` (Python string offsets, end exclusive)
until the segmenter turns them into token indices.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from schemas import records


@dataclasses.dataclass(frozen=True)
class Paragraph:
  title: str
  begin: int
  end: int
  sentences: Tuple[Tuple[int, int], ...] = ()
  supporting: Optional[bool] = None  # None: unknown (no labels, e.g. test sets)


class Mention(NamedTuple):
  """An entity mention: ``text[begin:end]`` (a NamedTuple: documents hold many, built fast).

  Its entity is either ``entity_id`` (0 = not linked), or ``entity``: a key (e.g. a Wikipedia
  title) that the job turns into an id when it writes the records, from an entity table it
  builds over the whole corpus (see ``pipelines.entities``); a non-empty ``entity`` wins.
  """
  begin: int
  end: int
  entity_id: int = 0  # 0 = not linked
  entity: str = ""


@dataclasses.dataclass(frozen=True)
class Question:
  id: str
  text: str
  answers: Tuple[str, ...] = ()
  answer_type: int = records.ANSWER_TYPE_NONE
  # Where the answers occur in the document text (char spans), set by the labelling stage
  # (``pipelines.beam.label_answers``: answer search; later a ROUGE-L oracle).
  answer_spans: Tuple[Tuple[int, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class Document:
  id: str
  text: str
  source_id: str  # where it came from, e.g. 'file.json#17'
  paragraphs: Tuple[Paragraph, ...] = ()
  mentions: Tuple[Mention, ...] = ()
  question: Optional[Question] = None
  # The id of the source document this one reads, when several documents read the same text
  # with different questions (NarrativeQA: one document per question, all with their story's
  # text object, so that stages can work once per text); "" = this document's own id.
  source_document_id: str = ""

  def side_record(self) -> Dict:
    """The documents side-file line (schemas/documents.py)."""
    return {**self._side_fields(), "text": self.text,
            "paragraphs": _paragraph_records(self.paragraphs)}

  def _side_fields(self) -> Dict:
    """:meth:`side_record` less the text and the paragraphs."""
    q = self.question
    extra = {"source_document_id": self.source_document_id} if self.source_document_id else {}
    return {**extra,
        "document_id": self.id,
        "question_id": q.id if q else "",
        "question": q.text if q else "",
        "answers": list(q.answers) if q else [],
        "answer_type": q.answer_type if q else records.ANSWER_TYPE_NONE,
        "source_id": self.source_id,
    }


def _paragraph_records(paragraphs: Tuple[Paragraph, ...]) -> List[Dict]:
  return [{"title": p.title, "begin": p.begin, "end": p.end, "supporting": p.supporting,
           "sentences": [list(s) for s in p.sentences]} for p in paragraphs]


class SideLines:
  """``json.dumps(doc.side_record(), ensure_ascii=False, sort_keys=True)``, the documents
  side-file line, with the text and paragraphs of consecutive documents that read one text (a
  story's questions: ``source_document_id`` set, the same text and paragraphs objects) encoded
  once, not once per question.

  The line is put together as ``json.dumps`` writes an object with the default separators: its
  members ``"key": value`` in key order, joined by ``", "`` inside ``{}``.
  """

  def __init__(self):
    self._last: Tuple[Any, Any, str, str] = (None, None, "", "")

  def __call__(self, doc: Document) -> str:
    if not doc.source_document_id:  # no other document reads this text
      return _dumps(doc.side_record())
    if self._last[0] is not doc.text or self._last[1] is not doc.paragraphs:
      self._last = (doc.text, doc.paragraphs, _dumps(doc.text),
                    _dumps(_paragraph_records(doc.paragraphs)))
    members = {k: _dumps(v) for k, v in doc._side_fields().items()}  # pylint: disable=protected-access
    members["text"], members["paragraphs"] = self._last[2], self._last[3]
    return "{" + ", ".join(f"{_dumps(k)}: {members[k]}" for k in sorted(members)) + "}"


def _dumps(value: Any) -> str:
  return json.dumps(value, ensure_ascii=False, sort_keys=True)


class BadInput(ValueError):
  """A record that cannot become a document; ``reason`` is a short stable slug."""

  def __init__(self, reason: str, detail: str = ""):
    super().__init__(f"{reason}: {detail}" if detail else reason)
    self.reason = reason
    self.detail = detail
