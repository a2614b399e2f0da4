"""Side output of the QA pipelines: the texts that record offsets point into.

Records carry token char offsets (``char_begin``/``char_end``) but not the text.  Decoding maps a
predicted token span back to the original string through these offsets and the texts written
here, as JSON lines under ``<output_dir>/documents/documents-SSSSS-of-NNNNN.jsonl`` (same shard
assignment as the records, sorted by ``document_id`` inside a shard), or gzip JSON lines
``documents-SSSSS-of-NNNNN.jsonl.gz`` when the run's ``config.compression`` is "gzip".  The
manifest's ``documents`` lists the files (relative to the output dir).  One line per source
document (not per sub-document)::

  {"document_id": str, "question_id": str, "question": str, "text": str,
   "answers": [str], "answer_type": int (schemas.records.ANSWER_TYPE_*),
   "paragraphs": [{"title": str, "begin": int, "end": int, "supporting": bool,
                   "sentences": [[begin, end], ...]}],
   "source_id": str}

Offsets are Python string (code point) offsets into ``text``; ``question`` offsets of question
tokens index ``question``.  Optional: ``"source_document_id": str``, the source document a line
reads when several lines read the same text with different questions (NarrativeQA: one document
per question, ``document_id = "<story id>:<k>"``, ``source_document_id = "<story id>"``, the
id the official evaluation keys predictions with).

Document ids of TriviaQA: one document per question-document pair, with
``document_id = "<QuestionId>--<Filename>"`` (``question_id = "<QuestionId>"``), which is exactly
the key of the official per-document (Web) evaluation, so per-document predictions are keyed by
``document_id`` as is (``model.decoding.triviaqa_predictions(..., per_document=True)``).  This is
the one place where the convention is stated.
"""

import glob
import gzip
import io
import json
import os
import zlib
from typing import Any, Dict, List, Mapping, Optional

from schemas import manifest as manifest_lib
from schemas import tfrecord_io

DOCUMENTS_DIR = "documents"
DOCUMENT_FIELDS = ("document_id", "question_id", "question", "text", "answers", "answer_type",
                   "paragraphs", "source_id")


def _read_manifest(records_dir: str) -> Optional[Dict[str, Any]]:
  path = os.path.join(records_dir, manifest_lib.MANIFEST_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def document_files(records_dir: str, manifest: Optional[Mapping[str, Any]] = None) -> List[str]:
  """The side files of ``records_dir``: the manifest's ``documents`` list when it has one, else
  ``documents/*.jsonl`` and ``documents/*.jsonl.gz`` (sorted)."""
  listed = (manifest or {}).get("documents")
  if listed:
    return [os.path.join(records_dir, p) for p in listed]
  ddir = os.path.join(records_dir, DOCUMENTS_DIR)
  return sorted(glob.glob(os.path.join(ddir, "*.jsonl")) +
                glob.glob(os.path.join(ddir, "*.jsonl.gz")))


def _text(raw, path: str, compression: Optional[str]):
  """UTF-8 text stream over the binary file ``raw``, gunzipped when ``compression`` says so."""
  if compression is None:  # the manifest does not say: a .gz name, else the gzip magic bytes
    compression = tfrecord_io.compression_of_path(path)
    if compression is None:
      head = raw.read(len(tfrecord_io.GZIP_MAGIC))
      raw.seek(0)
      compression = tfrecord_io.GZIP if head == tfrecord_io.GZIP_MAGIC else tfrecord_io.NONE
  if compression == tfrecord_io.GZIP:
    raw = gzip.GzipFile(filename="", mode="rb", fileobj=raw)
  return io.TextIOWrapper(raw, encoding="utf-8")


def load(records_dir: str, manifest: Optional[Mapping[str, Any]] = None) -> dict:
  """``{document_id: document}`` from the side files of ``records_dir`` (local files).

  The files and their compression come from ``manifest`` (default: ``<records_dir>/
  manifest.json`` if there is one): ``documents`` and ``config.compression``.  Without those
  (manifests written before them, or no manifest) ``documents/*.jsonl`` and ``*.jsonl.gz`` are
  read, each gzip when named ``.gz`` or starting with the gzip magic bytes.
  """
  if manifest is None:
    manifest = _read_manifest(records_dir)
  compression = tfrecord_io.manifest_compression(manifest)
  docs = {}
  for path in document_files(records_dir, manifest):
    with open(path, "rb") as raw, _text(raw, path, compression) as f:
      try:
        for line in f:
          if line.strip():
            d = json.loads(line)
            docs[d["document_id"]] = d
      except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"{path}: corrupt gzip documents file ({e}).") from e
  return docs
