"""Runs a trained ReadTwice model over packs and writes HotpotQA predictions.

CLI::

  python -m model.predict --records_dir D --model_dir M --output predictions.json

Output: ``{"answer": {qid: str}, "sp": {qid: [[title, sent_id], ...]}}`` (official HotpotQA
prediction format).  Python API: :func:`predict`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, Optional

import tensorflow as tf

from model import decoding
from model import input as input_lib
from model import readtwice
from model.train import load_model

_OUTPUT_KEYS = ("begin_logits", "end_logits", "answer_type_logits", "supporting_logits")


def predict(records_dir: str, model_dir: str, output: Optional[str] = None, top_k: int = 20,
            max_answer_tokens: int = 30, sp_threshold: float = 0.5,
            checkpoint: Optional[str] = None) -> Dict[str, Dict]:
  """Predicts every question in ``records_dir``; writes JSON to ``output`` if given."""
  model, _ = load_model(model_dir, checkpoint)
  decoder = decoding.Decoder(decoding.load_documents(records_dir), top_k=top_k,
                             max_answer_tokens=max_answer_tokens, sp_threshold=sp_threshold)

  @tf.function(reduce_retracing=True)
  def forward(inputs):
    out = model(inputs, training=False)
    return {k: out[k] for k in _OUTPUT_KEYS}

  for features in input_lib.dataset_from_output_dir(records_dir, shuffle=False, repeat=False):
    outputs = forward(readtwice.model_inputs(features))
    decoder.add_pack({k: v.numpy() for k, v in features.items()},
                     {k: v.numpy() for k, v in outputs.items()})
  preds = decoder.predictions()
  if output:
    with tf.io.gfile.GFile(output, "w") as f:
      f.write(json.dumps(preds, indent=1, sort_keys=True) + "\n")
  return preds


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description="ReadTwice HotpotQA prediction.")
  p.add_argument("--records_dir", required=True)
  p.add_argument("--model_dir", required=True)
  p.add_argument("--output", required=True)
  p.add_argument("--top_k", type=int, default=20)
  p.add_argument("--max_answer_tokens", type=int, default=30)
  p.add_argument("--sp_threshold", type=float, default=0.5)
  args = p.parse_args(argv)
  preds = predict(args.records_dir, args.model_dir, args.output, args.top_k,
                  args.max_answer_tokens, args.sp_threshold)
  print(json.dumps({"output": args.output, "questions": len(preds["answer"])}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
