"""Side output of the QA pipelines: the texts that record offsets point into.

Records carry token char offsets (``char_begin``/``char_end``) but not the text.  Decoding maps a
predicted token span back to the original string through these offsets and the texts written
here, as JSON lines under ``<output_dir>/documents/documents-SSSSS-of-NNNNN.jsonl`` (same shard
assignment as the records, sorted by ``document_id`` inside a shard).  One line per source
document (not per sub-document)::

  {"document_id": str, "question_id": str, "question": str, "text": str,
   "answers": [str], "answer_type": int (schemas.records.ANSWER_TYPE_*),
   "paragraphs": [{"title": str, "begin": int, "end": int, "supporting": bool,
                   "sentences": [[begin, end], ...]}],
   "source_id": str}

Offsets are Python string (code point) offsets into ``text``; ``question`` offsets of question
tokens index ``question``.

Document ids of TriviaQA: one document per question-document pair, with
``document_id = "<QuestionId>--<Filename>"`` (``question_id = "<QuestionId>"``), which is exactly
the key of the official per-document (Web) evaluation, so per-document predictions are keyed by
``document_id`` as is (``model.decoding.triviaqa_predictions(..., per_document=True)``).  This is
the one place where the convention is stated.
"""

import glob
import json
import os

DOCUMENTS_DIR = "documents"
DOCUMENT_FIELDS = ("document_id", "question_id", "question", "text", "answers", "answer_type",
                   "paragraphs", "source_id")


def load(records_dir: str) -> dict:
  """``{document_id: document}`` from ``<records_dir>/documents/*.jsonl`` (local files)."""
  docs = {}
  for path in sorted(glob.glob(os.path.join(records_dir, DOCUMENTS_DIR, "*.jsonl"))):
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip():
          d = json.loads(line)
          docs[d["document_id"]] = d
  return docs
