"""Records the inspector tests render: one hand-built QA pack, written as a job's output."""

from __future__ import annotations

import gzip
import pathlib
from typing import Dict, List, Optional, Tuple

from pipelines.beam.packing import pack_features, serialize_pack
from pipelines.inspector import record_io
from pipelines.text.segmenter import SegmenterConfig, segment_document
from pipelines.text.tokenizer import Tokenizer
from schemas import manifest as manifest_schema
from schemas import records, tfrecord_io

ROOT = pathlib.Path(__file__).resolve().parents[3]
N, L = 4, 48
CONTEXT = ("Marie Curie won the Nobel Prize in 1903 for work on <radioactivity> & polonium. "
           "Café 東京 naïve. " + "She kept working in Paris for many years. " * 6)
QUESTION = "When did Marie Curie first win the Nobel Prize?"


def _char_span(text: str, needle: str) -> Tuple[int, int]:
  begin = text.index(needle)
  return begin, begin + len(needle)


def make_pack(tokenizer: Tokenizer, schema_version: Optional[str] = None) -> bytes:
  """One pack: a 3-segment QA document (answers '1903' and 'won the Nobel', mentions
  'Marie Curie' = entity 42 and 'Nobel Prize' = entity 7, crossing the second answer)."""
  config = SegmenterConfig(seq_length=L, overlap=4, max_segments_per_document=8,
                           max_question_tokens=16)
  subs, _ = segment_document(
      "doc-1", "q-1", tokenizer.encode(CONTEXT), tokenizer.encode(QUESTION),
      tokenizer.special_ids, config,
      answer_char_spans=[_char_span(CONTEXT, "1903"), _char_span(CONTEXT, "won the Nobel")],
      mentions=[(0, 11, 42), (*_char_span(CONTEXT, "Nobel Prize"), 7)],
      answer_type=records.ANSWER_TYPE_SPAN,
      supporting_ranges=[(0, CONTEXT.index("Café"))])
  feats = pack_features(subs, N, L, tokenizer.pad_id, "00000-000000")
  if schema_version is not None:
    feats["schema_version"] = [schema_version.encode()]
  return serialize_pack(feats)


def write_output(directory: pathlib.Path, payloads: List[bytes], tokenizer_desc: Optional[Dict],
                  compression: Optional[str] = None, name: Optional[str] = None) -> str:
  """Writes records (and a manifest like a pipeline's when ``tokenizer_desc`` is given).

  ``compression`` "gzip" gzips the records (``.tfrecord.gz``, as ``--compression gzip``) and,
  like "none", is stated in the manifest's config (None: not stated, as before the option).
  """
  directory.mkdir(parents=True, exist_ok=True)
  gzipped = compression == "gzip"
  name = name or "records-00000-of-00001.tfrecord" + (".gz" if gzipped else "")
  framed = b"".join(tfrecord_io.encode_record(payload) for payload in payloads)
  with open(directory / name, "wb") as f:
    f.write(gzip.compress(framed, mtime=0) if gzipped else framed)
  if tokenizer_desc is not None:
    manifest = {
        "manifest_version": manifest_schema.MANIFEST_VERSION,
        "schema_name": records.SCHEMA_NAME, "schema_version": records.SCHEMA_VERSION,
        "job": "test", "tokenizer": tokenizer_desc,
        "config": {"seq_length": L, "segments_per_pack": N,
                   **({"compression": compression} if compression else {})},
        "counts": {"input": 1, "written": 1, "skipped": 0, "rejected": 0},
        "skipped_by_reason": {}, "rejected_by_reason": {},
        "examples": {"documents": 1, "segments": 3, "packs": len(payloads)},
        "shards": [{"path": name, "records": len(payloads), "segments": 3}],
    }
    (directory / manifest_schema.MANIFEST_FILE).write_text(manifest_schema.dumps(manifest))
  return str(directory / "records-*")


def load(pattern: str):
  paths = record_io.match_paths(pattern)
  return paths, record_io.read_manifest(paths), record_io.load_records(paths)
