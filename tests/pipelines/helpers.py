"""Small builders shared by the pipeline tests."""

from __future__ import annotations

import json
import re
from typing import Dict, List, Sequence

import numpy as np

from pipelines.beam.config import RecordsConfig
from pipelines.text.segmenter import SegmenterConfig
from pipelines.text.tokenizer import Encoded

SPECIAL = {"cls": 0, "pad": 1, "sep": 2, "mask": 3}

# A small job configuration (48-token segments, 8 per pack, 2 shards) and a context of three
# paragraphs, shared by the pipeline tests.  Their inputs mix a few good records with bad ones
# on purpose, more than the default error budget (--max_error_fraction 0.1) allows: any share
# is accepted here (tests/test_bad_inputs.py tests the budget).
SMALL = RecordsConfig(
    segmenter=SegmenterConfig(seq_length=48, overlap=8, max_segments_per_document=6,
                              max_question_tokens=12),
    segments_per_pack=8, num_shards=2, max_error_fraction=1.0)

PARIS = [["Paris", ["Paris is the capital of France.", " It hosts the Louvre."]],
         ["Lyon", ["Lyon is a city in France.", " Paris is north of it."]],
         ["Nice", ["Nice is on the coast."] + [f" Filler sentence {i} here." for i in range(12)]]]


def word_encoding(text: str, split: Dict[str, int] | None = None) -> Encoded:
  """A fake, fully predictable encoding: one token per whitespace word (id = 100 + index).

  ``split`` maps a word to a number of pieces it is cut into (continuation tokens), so tests
  can put multi-token words at segment edges.
  """
  ids, offsets = [], []
  for m in re.finditer(r"\S+", text):
    pieces = (split or {}).get(m.group(), 1)
    b, e = m.span()
    cuts = np.linspace(b, e, pieces + 1).astype(int)
    for i in range(pieces):
      ids.append(100 + len(ids))
      offsets.append((int(cuts[i]), int(cuts[i + 1])))
  return Encoded.build(text, ids, offsets)


def hotpot_record(qid: str, question: str, answer: str | None,
                  context: Sequence[Sequence], supporting: Sequence[Sequence] | None = None,
                  **extra) -> Dict:
  rec = {"_id": qid, "question": question, "context": [list(c) for c in context],
         "type": "bridge", "level": "hard"}
  if answer is not None:
    rec["answer"] = answer
  if supporting is not None:
    rec["supporting_facts"] = [list(s) for s in supporting]
  rec.update(extra)
  return rec


def write_json(path, records: List) -> str:
  with open(path, "w", encoding="utf-8") as f:
    json.dump(records, f)
  return str(path)


def numbered_words(n: int, prefix: str = "w") -> str:
  return " ".join(f"{prefix}{i}" for i in range(n))


def read_records(output_dir: str) -> List[Dict]:
  """Every record a job wrote under ``output_dir`` (uncompressed shards), decoded, in order."""
  import glob  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  from schemas import example_proto, tfrecord_io  # pylint: disable=g-import-not-at-top
  recs = []
  for path in sorted(glob.glob(os.path.join(output_dir, "records-*.tfrecord"))):
    recs += [example_proto.decode_example(p) for p in tfrecord_io.read_records(path)]
  return recs


def record_mentions(output_dir: str, entities_dir: str) -> List:
  """(mention text, entity title or None) of every mention in a job's records, sorted, with
  the titles of the vocabulary of ``entities_dir`` (a Wikipedia job's output dir)."""
  import os  # pylint: disable=g-import-not-at-top
  from schemas import documents as documents_schema  # pylint: disable=g-import-not-at-top
  from schemas import entities as entities_schema  # pylint: disable=g-import-not-at-top
  docs = documents_schema.load(output_dir)
  vocab = entities_schema.titles_by_id(entities_schema.read_vocabulary(
      os.path.join(entities_dir, "entities", "vocabulary.parquet")))
  found = []
  for r in read_records(output_dir):
    L = len(r["token_ids"]) // len(r["segment_mask"])
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      text = docs[r["document_id"][s].decode()]["text"]
      found.append((text[r["char_begin"][s * L + b]:r["char_end"][s * L + e]], vocab.get(ent)))
  return sorted(found)


# A one-paragraph HotpotQA context, for the job command-line tests (test_flags, test_runner).
PARAS = [["Paris", ["Paris is the capital of France.", " It hosts the Louvre."]]]


def run_main(argv, capsys):
  """(exit status, stdout, stderr) of ``python -m pipelines hotpotqa`` run in-process."""
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  try:
    code = runner.dataset_main("hotpotqa", argv)
  except SystemExit as e:
    code = e.code
  out, err = capsys.readouterr()
  return code, out, err


def one_error_line(err: str) -> str:
  """The one line of ``err``, checked to be the HotpotQA job's error line (no traceback)."""
  lines = [l for l in err.splitlines() if l.strip()]
  assert len(lines) == 1, err
  assert lines[0].startswith("python -m pipelines hotpotqa: error: "), err
  assert "Traceback" not in err
  return lines[0]
