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
``document_id`` as is (``model.tasks.triviaqa``, ``per_document=True``).  This is
the one place where the convention is stated.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import Any, Iterator, List, Mapping, Optional

from schemas import records_dir as records_dir_lib
from schemas import safe_json
from schemas import tfrecord_io

DOCUMENTS_DIR = "documents"
DOCUMENT_FIELDS = ("document_id", "question_id", "question", "text", "answers", "answer_type",
                   "paragraphs", "source_id")


def document_files(records_dir: str, manifest: Optional[Mapping[str, Any]] = None,
                   fs: records_dir_lib.FileSystem = records_dir_lib.LOCAL) -> List[str]:
  """The side files of ``records_dir``: the manifest's ``documents`` list when it has one, else
  ``documents/*.jsonl`` and ``documents/*.jsonl.gz`` (sorted)."""
  listed = (manifest or {}).get("documents")
  if listed:
    return [os.path.join(records_dir, p) for p in listed]
  ddir = os.path.join(records_dir, DOCUMENTS_DIR)
  return sorted(fs.glob(os.path.join(ddir, "*.jsonl")) +
                fs.glob(os.path.join(ddir, "*.jsonl.gz")))


def _lines(raw, path: str, compression: Optional[str]) -> Iterator[str]:
  """The UTF-8 text lines of the binary file ``raw``, gunzipped when ``compression`` says so
  (None, the manifest does not say: a ``.gz`` name, else the gzip magic bytes decide)."""
  if compression is None:
    compression = tfrecord_io.compression_of_path(path)
    if compression is None:
      head = raw.read(len(tfrecord_io.GZIP_MAGIC))
      raw.seek(0)
      compression = tfrecord_io.GZIP if head == tfrecord_io.GZIP_MAGIC else tfrecord_io.NONE
  if compression == tfrecord_io.GZIP:  # GzipFile is readable(); a GFile is not (TextIOWrapper)
    yield from io.TextIOWrapper(gzip.GzipFile(filename="", mode="rb", fileobj=raw),
                                encoding="utf-8")
  else:
    for line in raw:
      yield line.decode("utf-8")


def load(records_dir: str, manifest: Optional[Mapping[str, Any]] = None,
         fs: records_dir_lib.FileSystem = records_dir_lib.LOCAL) -> dict:
  """``{document_id: document}`` from the side files of ``records_dir``.

  The files and their compression come from ``manifest`` (default: ``<records_dir>/
  manifest.json``, validated by :func:`schemas.records_dir.load_manifest`, if there is one):
  ``documents`` and ``config.compression``.  Without those (manifests written before them, or
  no manifest) ``documents/*.jsonl`` and ``*.jsonl.gz`` are read, each gzip when named ``.gz`` or
  starting with the gzip magic bytes.  ``fs``: the file operations (``open``, ``exists``,
  ``glob`` of :class:`schemas.records_dir.FileSystem`; ``model.inference.decoding.load_documents``
  passes
  ``tf.io.gfile``'s).

  Raises:
    ValueError: A gzip side file is corrupt; the manifest is invalid (ManifestError) or of
      another major schema version (SchemaVersionError).
  """
  if manifest is None:
    manifest = records_dir_lib.load_manifest(records_dir, fs)
  compression = tfrecord_io.manifest_compression(manifest)
  docs = {}
  for path in document_files(records_dir, manifest, fs):
    with fs.open(path) as raw:
      try:
        for line in _lines(raw, path, compression):
          if line.strip():
            d = safe_json.loads(line, path)
            docs[d["document_id"]] = d
      except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"{path}: corrupt gzip documents file ({e}).") from e
  return docs
