"""Synthetic pack TFRecords + manifest + documents side file for the model tests.

Built with the TF-free schema helpers (``schemas.example_proto``, ``schemas.tfrecord_io``) so the
tests exercise the exact wire format the pipelines write.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Mapping, Sequence

import numpy as np

from schemas import documents as documents_lib
from schemas import example_proto, manifest as manifest_lib, records, tfrecord_io

CLS, SEP, PAD, MASK = 0, 2, 1, 3
SPECIAL_IDS = {"cls": CLS, "sep": SEP, "pad": PAD, "mask": MASK}
DTYPES = {f.name: f.dtype for f in records.FEATURES}


def empty_pack(n: int, l: int, pack_id: str = "00000-0",
               version: str = records.SCHEMA_VERSION) -> Dict[str, np.ndarray]:
  """A pack of n all-padding segments of l tokens (token features shaped [n, l])."""
  z = lambda: np.zeros([n, l], np.int64)
  p = {
      "schema_version": [version], "pack_id": [pack_id],
      "token_ids": np.full([n, l], PAD, np.int64), "input_mask": z(), "word_start": z(),
      "token_kind": z(), "char_begin": np.full([n, l], -1, np.int64),
      "char_end": np.full([n, l], -1, np.int64),
      "segment_mask": np.zeros([n], np.int64), "document_index": np.full([n], -1, np.int64),
      "document_id": [""] * n, "question_id": [""] * n,
      "sub_document_index": np.zeros([n], np.int64), "num_sub_documents": np.zeros([n], np.int64),
      "segment_index": np.zeros([n], np.int64), "num_segments": np.zeros([n], np.int64),
      "question_length": np.zeros([n], np.int64), "context_char_begin": np.zeros([n], np.int64),
      "context_char_end": np.zeros([n], np.int64),
      "answer_type": np.full([n], records.ANSWER_TYPE_NONE, np.int64),
      "supporting": np.full([n], -1, np.int64),
  }
  for name in ("answer_segment", "answer_begin", "answer_end", "mention_segment",
               "mention_begin", "mention_end", "mention_entity_id"):
    p[name] = []
  return p


def fill_segment(p: Dict, s: int, document_index: int, document_id: str, question_id: str,
                 question_ids: Sequence[int], context: Sequence[int],
                 context_offsets: Sequence[Sequence[int]], segment_index: int = 0,
                 num_segments: int = 1, answer_type: int = records.ANSWER_TYPE_SPAN,
                 supporting: int = 0, sub_document_index: int = 0) -> None:
  """Writes segment ``s``: ``[CLS] question [SEP] context [SEP]`` and its segment features."""
  ids = [CLS] + list(question_ids) + [SEP] + list(context) + [SEP]
  kinds = ([records.TOKEN_KIND_SPECIAL] + [records.TOKEN_KIND_QUESTION] * len(question_ids) +
           [records.TOKEN_KIND_SPECIAL] + [records.TOKEN_KIND_CONTEXT] * len(context) +
           [records.TOKEN_KIND_SPECIAL])
  l = p["token_ids"].shape[1]
  assert len(ids) <= l, (len(ids), l)
  p["token_ids"][s, :len(ids)] = ids
  p["input_mask"][s, :len(ids)] = 1
  p["token_kind"][s, :len(ids)] = kinds
  qlen = len(question_ids) + 2
  p["word_start"][s, 1:qlen - 1] = 1
  p["word_start"][s, qlen:qlen + len(context)] = 1
  for i in range(len(question_ids)):
    p["char_begin"][s, 1 + i], p["char_end"][s, 1 + i] = i, i + 1
  for i, (b, e) in enumerate(context_offsets):
    p["char_begin"][s, qlen + i], p["char_end"][s, qlen + i] = b, e
  p["segment_mask"][s] = 1
  p["document_index"][s] = document_index
  p["document_id"][s] = document_id
  p["question_id"][s] = question_id
  p["sub_document_index"][s] = sub_document_index
  p["num_sub_documents"][s] = 1
  p["segment_index"][s] = segment_index
  p["num_segments"][s] = num_segments
  p["question_length"][s] = qlen
  if context_offsets:
    p["context_char_begin"][s] = context_offsets[0][0]
    p["context_char_end"][s] = context_offsets[-1][1]
  p["answer_type"][s] = answer_type
  p["supporting"][s] = supporting


def add_answer(p: Dict, segment: int, begin: int, end: int) -> None:
  p["answer_segment"].append(segment)
  p["answer_begin"].append(begin)
  p["answer_end"].append(end)


def add_mention(p: Dict, segment: int, begin: int, end: int, entity: int) -> None:
  p["mention_segment"].append(segment)
  p["mention_begin"].append(begin)
  p["mention_end"].append(end)
  p["mention_entity_id"].append(entity)


def encode_pack(p: Mapping) -> bytes:
  flat = {k: (np.asarray(v).reshape(-1).tolist() if DTYPES[k] == "int64" else list(v))
          for k, v in p.items()}
  n = len(p["segment_mask"])
  l = np.asarray(p["token_ids"]).shape[1]
  records.validate_record(flat, n, l) if flat["schema_version"][0].startswith("1.") else None
  return example_proto.encode_example(flat, DTYPES)


def write_records(path: str, packs: Sequence[Mapping]) -> str:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "wb") as f:
    for p in packs:
      f.write(tfrecord_io.encode_record(encode_pack(p)))
  return path


def write_output_dir(out_dir: str, packs: Sequence[Mapping], docs: Sequence[Mapping],
                     seq_length: int, segments_per_pack: int, vocab_size: int = 64,
                     job: str = "hotpotqa") -> str:
  """Writes a pipeline-like output dir: one record shard, manifest.json, documents side file;
  ``job`` is the manifest's (``model.predict`` follows it)."""
  os.makedirs(out_dir, exist_ok=True)
  shard = "records-00000-of-00001.tfrecord"
  write_records(os.path.join(out_dir, shard), packs)
  ddir = os.path.join(out_dir, documents_lib.DOCUMENTS_DIR)
  os.makedirs(ddir, exist_ok=True)
  with open(os.path.join(ddir, "documents-00000-of-00001.jsonl"), "w") as f:
    for d in sorted(docs, key=lambda d: d["document_id"]):
      f.write(json.dumps(d) + "\n")
  n_docs = len(docs)
  manifest = {
      "manifest_version": manifest_lib.MANIFEST_VERSION, "schema_name": records.SCHEMA_NAME,
      "schema_version": records.SCHEMA_VERSION, "job": job, "git_revision": "unknown",
      "created_at": "1970-01-01T00:00:00Z",
      "tokenizer": {"name": "test", "fingerprint": "sha256:0", "vocab_size": vocab_size,
                    "special_ids": SPECIAL_IDS},
      "config": {"seq_length": seq_length, "segments_per_pack": segments_per_pack},
      "counts": {"input": n_docs, "written": n_docs, "skipped": 0, "rejected": 0},
      "skipped_by_reason": {}, "rejected_by_reason": {}, "stages": {},
      "examples": {"documents": n_docs, "packs": len(packs)},
      "shards": [{"path": shard, "records": len(packs),
                  "segments": int(sum(np.sum(p["segment_mask"]) for p in packs))}],
      "dead_letter": [],
  }
  with open(os.path.join(out_dir, manifest_lib.MANIFEST_FILE), "w") as f:
    f.write(manifest_lib.dumps(manifest))
  open(os.path.join(out_dir, manifest_lib.COMPLETED_FILE), "w").close()
  return out_dir


def as_job(records_dir: str, job: str, out_dir: str) -> str:
  """A copy of ``records_dir`` whose manifest says it was written by ``job``."""
  import shutil  # pylint: disable=g-import-not-at-top
  shutil.copytree(records_dir, out_dir)
  path = os.path.join(out_dir, manifest_lib.MANIFEST_FILE)
  manifest = json.load(open(path))
  manifest["job"] = job
  with open(path, "w") as f:
    f.write(manifest_lib.dumps(manifest))
  return out_dir


def word_offsets(text: str) -> List[List[int]]:
  """(begin, end) char offsets of whitespace-separated words of ``text``."""
  out, i = [], 0
  for w in text.split(" "):
    out.append([i, i + len(w)])
    i += len(w) + 1
  return out


def qa_output_dir(out_dir: str, seq_length: int = 24, segments_per_pack: int = 4,
                  vocab_size: int = 64, num_packs: int = 2) -> str:
  """A small learnable HotpotQA-like output dir.

  Each pack holds two questions (documents), each of two segments; the answer is always the
  context word with token id 40 ("gold"), placed at a pack-dependent position.
  """
  rng = np.random.RandomState(0)
  packs, docs = [], []
  for k in range(num_packs):
    p = empty_pack(segments_per_pack, seq_length, pack_id=f"00000-{k}")
    for d in range(2):
      qid = f"q{k}_{d}"
      words = [f"w{rng.randint(100)}" for _ in range(12)]
      gold = 3 + (k + d) % 6
      words[gold] = "gold"
      text = " ".join(words)
      offs = word_offsets(text)
      ids = [10 + int(w[1:]) % 20 if w != "gold" else 40 for w in words]
      sent_split = 6
      docs.append({
          "document_id": f"doc{k}_{d}", "question_id": qid, "question": "what is gold",
          "text": text, "answers": ["gold"], "answer_type": records.ANSWER_TYPE_SPAN,
          "paragraphs": [
              {"title": f"T{k}{d}a", "begin": 0, "end": offs[sent_split - 1][1],
               "supporting": gold < sent_split, "sentences": [[0, offs[sent_split - 1][1]]]},
              {"title": f"T{k}{d}b", "begin": offs[sent_split][0], "end": len(text),
               "supporting": gold >= sent_split,
               "sentences": [[offs[sent_split][0], len(text)]]}],
          "source_id": qid})
      for half in range(2):
        s = 2 * d + half
        lo, hi = half * sent_split, (half + 1) * sent_split
        fill_segment(p, s, d, f"doc{k}_{d}", qid, [5, 6, 7], ids[lo:hi], offs[lo:hi],
                     segment_index=half, num_segments=2,
                     supporting=int(lo <= gold < hi))
        if lo <= gold < hi:
          add_answer(p, s, 5 + gold - lo, 5 + gold - lo)
    packs.append(p)
  return write_output_dir(out_dir, packs, docs, seq_length, segments_per_pack, vocab_size)
