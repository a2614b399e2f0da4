"""HotpotQA records (distractor or fullwiki; train, dev or test) -> Document.

The official JSON layout and the Hugging Face ``datasets`` export (columnar ``context`` /
``supporting_facts``, ``id``) are both accepted.

One document per question: its context paragraphs in file order, each rendered as
``title\\n`` followed by the concatenated sentences, paragraphs separated by a blank line.
Sentence char spans are kept for supporting-fact prediction.  Test files have no ``answer`` /
``supporting_facts``: the answer type and supporting flags are then unknown (-1).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from schemas import records
from pipelines.document import BadInput, Document, Paragraph, Question

PARAGRAPH_SEPARATOR = "\n\n"


def answer_type_of(answer: str) -> int:
  norm = answer.strip().lower()
  if norm == "yes":
    return records.ANSWER_TYPE_YES
  if norm == "no":
    return records.ANSWER_TYPE_NO
  return records.ANSWER_TYPE_SPAN


def _string(record: Dict[str, Any], key: str, required: bool = True) -> str | None:
  if key not in record:
    if required:
      raise BadInput(f"missing_{key.strip('_')}", f"record has no {key!r}")
    return None
  value = record[key]
  if not isinstance(value, str):
    raise BadInput(f"bad_{key.strip('_')}", f"{key!r} is {type(value).__name__}, not a string")
  return value


def _from_hf_layout(record: Dict[str, Any]) -> Dict[str, Any]:
  """Accepts the Hugging Face ``datasets`` export of HotpotQA too: ``id`` instead of ``_id``,
  ``context = {"title": [...], "sentences": [[...]]}`` and ``supporting_facts = {"title": [...],
  "sent_id": [...]}`` (columns instead of rows)."""
  context, facts = record.get("context"), record.get("supporting_facts")
  if "_id" in record and not isinstance(context, dict) and not isinstance(facts, dict):
    return record
  record = dict(record)
  if "_id" not in record and "id" in record:
    record["_id"] = record.pop("id")
  for key, columns in (("context", ("title", "sentences")),
                       ("supporting_facts", ("title", "sent_id"))):
    value = record.get(key)
    if isinstance(value, dict):
      cols = [value.get(c) for c in columns]
      if not all(isinstance(c, list) for c in cols) or len(cols[0]) != len(cols[1]):
        raise BadInput(f"bad_{key}", f"{key!r} columns {columns} must be lists of equal length")
      record[key] = [list(row) for row in zip(*cols)]
  return record


def parse_record(record: Any, source_id: str) -> Tuple[Document, Dict[str, int]]:
  """Returns the document and reader counters; raises BadInput for unusable records."""
  if not isinstance(record, dict):
    raise BadInput("not_an_object", f"record is {type(record).__name__}")
  record = _from_hf_layout(record)
  qid = _string(record, "_id")
  if not qid.strip():
    raise BadInput("bad_id", "empty '_id'")
  question = _string(record, "question")
  if not question.strip():
    raise BadInput("empty_question")
  answer = _string(record, "answer", required=False)
  context = record.get("context")
  if not isinstance(context, list) or not context:
    raise BadInput("bad_context", "'context' must be a non-empty list of [title, sentences]")

  stats: Dict[str, int] = {}
  sp_titles = None
  if "supporting_facts" in record:
    facts = record["supporting_facts"]
    if not isinstance(facts, list) or not all(
        isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) for f in facts):
      raise BadInput("bad_supporting_facts", "expected a list of [title, sentence_id]")
    sp_titles = {f[0] for f in facts}

  pieces: List[str] = []
  paragraphs: List[Paragraph] = []
  pos = 0
  for i, para in enumerate(context):
    if (not isinstance(para, list) or len(para) != 2 or not isinstance(para[0], str)
        or not isinstance(para[1], list) or not all(isinstance(s, str) for s in para[1])):
      raise BadInput("bad_context", f"paragraph {i} is not [title, [sentence, ...]]")
    title, sentences = para
    if i:
      pieces.append(PARAGRAPH_SEPARATOR)
      pos += len(PARAGRAPH_SEPARATOR)
    begin = pos
    head = title + "\n"
    pieces.append(head)
    pos += len(head)
    spans = []
    for s in sentences:
      pieces.append(s)
      spans.append((pos, pos + len(s)))
      pos += len(s)
    paragraphs.append(Paragraph(title=title, begin=begin, end=pos, sentences=tuple(spans),
                                supporting=None if sp_titles is None else title in sp_titles))
  if sp_titles is not None:
    missing = sp_titles - {p.title for p in paragraphs}
    if missing:
      stats["supporting_titles_not_in_context"] = len(missing)
  text = "".join(pieces)
  if not text.strip():
    raise BadInput("empty_context")
  q = Question(id=qid, text=question, answers=(answer,) if answer is not None else (),
               answer_type=(records.ANSWER_TYPE_NONE if answer is None
                            else answer_type_of(answer)))
  return Document(id=qid, text=text, source_id=source_id, paragraphs=tuple(paragraphs),
                  question=q), stats
