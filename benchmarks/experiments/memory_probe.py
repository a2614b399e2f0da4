r"""Do memories reach the right tokens?  Where the answer segment's author mention looks in a
model trained on the long-range QA task (``synthetic/long_range_qa/``).

  python -m benchmarks memory_probe --model_dir M --data_dir D [--split dev]

``D`` is a ``synthetic.long_range_qa.build`` output dir (``records_<split>/``, ``entities/``,
``docs-<split>.jsonl``); ``M`` a model trained on it (``python -m model.finetune``), with
memory.  For every document, the tokens of the target author's mention in the segment holding
the answer ("*Author* was born in *City*") are the readers that matter: the one memory that
tells them the question is about them is *Author*'s mention in the segment of the book fact
("*Book* was written by *Author*", next to the asked-about book), ``distance`` segments away.
The probe runs BERT_1 and the memory attention (``ReadTwiceModel.memory_attention_probe``, in
inference mode) and reports, averaged over those tokens and then over documents:

* ``bridge``: the attention (mean over heads) on the memories of *Author*'s mention in the book
  fact's segment;
* ``uniform``: what ``bridge`` would be if the token spread its attention evenly over every
  memory it may read and the no-op (so ``bridge / uniform`` > 1 means it seeks that memory);
* ``same_entity_elsewhere``: on *Author*'s memories in any other segment; ``noop``: on the
  no-op.

Last line: JSON, ``value`` = mean ``bridge / uniform`` (1 = no preference; target > 1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Dict, List


def _entity_ids(entities_dir: str) -> Dict[str, int]:
  """Title -> entity id, from the vocabulary of a Wikipedia job's output dir."""
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  from schemas import entities as entities_schema  # pylint: disable=g-import-not-at-top
  titles = entities_schema.titles_by_id(tables.read_vocabulary(entities_dir))
  return {title: int(i) for i, title in titles.items()}


def probe(model_dir: str, data_dir: str, split: str = "dev") -> Dict:
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.data import pack_reader as input_lib  # pylint: disable=g-import-not-at-top
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  from model.training.train_lib import load_model  # pylint: disable=g-import-not-at-top

  model, config = load_model(model_dir)
  if not config.use_memory:
    raise SystemExit(f"{model_dir}: a model without memory has nothing to probe")
  ids = _entity_ids(os.path.join(data_dir, "entities"))
  with open(os.path.join(data_dir, f"docs-{split}.jsonl"), encoding="utf-8") as f:
    metas = {m["id"]: m for m in map(json.loads, f)}
  forward = tf.function(lambda x: model.memory_attention_probe(x), reduce_retracing=True)
  dataset = input_lib.dataset_from_output_dir(os.path.join(data_dir, f"records_{split}"),
                                              max_mentions=readtwice.max_mentions(config))
  rows: List[Dict[str, float]] = []
  for features in dataset:
    out = {k: v.numpy() for k, v in forward(readtwice.model_inputs(features)).items()}
    f = {k: features[k].numpy() for k in ("document_id", "segment_index", "document_index",
                                          "mention_segment", "mention_begin", "mention_end",
                                          "mention_entity_id")}
    for s, raw_id in enumerate(f["document_id"]):
      meta = metas.get(raw_id.decode())
      if meta is None or int(f["segment_index"][s]) != meta["birth_segment"]:
        continue
      author = ids.get(meta["triples"][0][1])
      tokens = [t for k in np.flatnonzero((f["mention_segment"] == s)
                                          & (f["mention_entity_id"] == author))
                for t in range(f["mention_begin"][k], f["mention_end"][k] + 1)]
      if author is None or not tokens:
        continue
      mem = out["memory_index"][s]  # [C] candidate -> memory row
      same_doc = (out["document"][mem] == f["document_index"][s]) & (out["mask"][mem] == 1)
      if config.same_segment_only:
        same_doc &= out["position"][mem] == f["segment_index"][s]
      is_author = same_doc & (out["entity_id"][mem] == author)
      bridge = is_author & (out["position"][mem] == meta["book_segment"])
      elsewhere = is_author & (out["position"][mem] != f["segment_index"][s])
      # Window padding repeats a candidate: count each memory row once for the uniform share.
      allowed = len(set(mem[same_doc].tolist()))
      p = out["memories"][s][tokens]  # [T, C]
      rows.append({"bridge": float(p[:, bridge].sum(-1).mean()),
                   "uniform": len(set(mem[bridge].tolist())) / (allowed + 1),
                   "same_entity_elsewhere": float(p[:, elsewhere].sum(-1).mean()),
                   "noop": float(out["noop"][s][tokens].mean()),
                   "distance": meta["distance"]})
  if not rows:
    raise SystemExit(f"no target author mention found in {data_dir}/records_{split}")
  mean = {k: statistics.fmean(r[k] for r in rows) for k in
          ("bridge", "uniform", "same_entity_elsewhere", "noop")}
  ratios = [r["bridge"] / r["uniform"] for r in rows if r["uniform"] > 0]
  return {"metric": "bridge_memory_attention_over_uniform",
          "value": round(statistics.fmean(ratios), 4) if ratios else None,
          "target": 1.0, "unit": "ratio", "documents": len(rows),
          **{k: round(v, 5) for k, v in mean.items()},
          "same_segment_only": config.same_segment_only}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks memory_probe",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--model_dir", required=True)
  ap.add_argument("--data_dir", required=True, help="a synthetic.long_range_qa build dir")
  ap.add_argument("--split", default="dev", choices=["train", "dev"])
  args = ap.parse_args(argv)
  result = probe(args.model_dir, args.data_dir, args.split)
  print(f"{result['documents']} documents: attention of the answer segment's author mention on "
        f"its memory from the book fact's segment {result['bridge']:.4f} (uniform "
        f"{result['uniform']:.4f}); on the author's memories in any other segment "
        f"{result['same_entity_elsewhere']:.4f}; no-op {result['noop']:.4f}")
  print(json.dumps(result))
  return 0


if __name__ == "__main__":
  sys.exit(main())
