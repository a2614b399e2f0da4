"""Runs a trained ReadTwice model over packs and writes predictions in a task's official format.

CLI::

  python -m model.predict --records_dir D --model_dir M --output predictions.json \
      [--task hotpotqa|triviaqa|narrativeqa] [--reduction max|sum] [--per_document]

Output (see :mod:`model.decoding`):

* ``hotpotqa`` (default): ``{"answer": {qid: str}, "sp": {qid: [[title, sent_id], ...]}}``.
* ``triviaqa``: ``{QuestionId: answer}``, or with ``--per_document``
  ``{"<QuestionId>--<Filename>": answer}`` (one answer per question-document pair).
* ``narrativeqa``: ``{"<document_id>: <question>": answer}``.

``--reduction`` aggregates a question's span candidates across its segments, sub-documents and
packs: ``max`` (best single span) or ``sum`` (logsumexp per normalised answer text).
Python API: :func:`predict` (loads the model from ``model_dir``) and :func:`predict_with_model`
(an already built model, e.g. for periodic dev evaluation during training; score its result with
:func:`model.evaluate.score`).  Paths may be any ``tf.io.gfile`` path (local, ``gs://``).
"""

from __future__ import annotations

import argparse
import json
import sys
import weakref
from typing import Callable, Dict, Optional

import tensorflow as tf

from model import decoding
from model import input as input_lib
from model import readtwice
from model.train import load_model

_OUTPUT_KEYS = ("begin_logits", "end_logits", "answer_type_logits", "supporting_logits")


# model -> its traced inference forward, so repeated calls (a dev evaluation every N training
# steps) reuse one tf.function and its traces instead of tracing a new one per call.
_FORWARDS: "weakref.WeakKeyDictionary[readtwice.ReadTwiceModel, Callable]" = (
    weakref.WeakKeyDictionary())


def _forward_fn(model: readtwice.ReadTwiceModel) -> Callable:
  """The cached ``tf.function`` running ``model`` in inference mode (``_OUTPUT_KEYS`` only)."""
  forward = _FORWARDS.get(model)
  if forward is None:
    model_ref = weakref.ref(model)  # a strong reference would keep the weak key alive forever

    @tf.function(reduce_retracing=True)
    def forward(inputs):
      out = model_ref()(inputs, training=False)
      return {k: out[k] for k in _OUTPUT_KEYS}

    _FORWARDS[model] = forward
  return forward


def predict_with_model(model: readtwice.ReadTwiceModel, records_dir: str, *,
                       task: str = "hotpotqa", reduction: str = "max",
                       per_document: bool = False, top_k: int = 20,
                       max_answer_tokens: int = 30, sp_threshold: float = 0.5,
                       max_packs: Optional[int] = None) -> Dict:
  """Predicts the questions of ``records_dir`` with an already built (restored) ``model``.

  Returns the prediction object of ``task`` (:func:`model.decoding.task_predictions`), ready for
  :func:`model.evaluate.score`.  ``records_dir`` may be any ``tf.io.gfile`` path.  ``max_packs``
  (None: all) reads only the first packs, in record order (questions cut off by the limit are
  predicted from the packs read).  The traced forward pass is cached per model, so periodic
  calls during training do not retrace.
  """
  decoding.check_task(task, per_document)
  if max_packs is not None and (isinstance(max_packs, bool) or
                                not isinstance(max_packs, int) or max_packs < 1):
    raise ValueError(f"max_packs must be None or an int >= 1, got {max_packs!r}.")
  decoder = decoding.Decoder(decoding.load_documents(records_dir), top_k=top_k,
                             max_answer_tokens=max_answer_tokens, sp_threshold=sp_threshold,
                             reduction=reduction,
                             answer_type_mode=model.config.answer_type_mode)
  forward = _forward_fn(model)
  dataset = input_lib.dataset_from_output_dir(
      records_dir, shuffle=False, repeat=False,
      max_mentions=readtwice.max_mentions(model.config))
  if max_packs is not None:
    dataset = dataset.take(max_packs)
  for features in dataset:
    outputs = forward(readtwice.model_inputs(features))
    decoder.add_pack({k: v.numpy() for k, v in features.items()},
                     {k: v.numpy() for k, v in outputs.items()})
  preds = decoding.task_predictions(decoder, task, per_document)
  if decoder.unmapped_candidates:  # offsets outside the side file's text: wrong records_dir?
    print(f"warning: {decoder.unmapped_candidates} span candidates could not be mapped to a "
          f"document text of {records_dir}/documents (missing document or offsets out of "
          "range) and were ignored", file=sys.stderr, flush=True)
  return preds


def predict(records_dir: str, model_dir: str, output: Optional[str] = None, top_k: int = 20,
            max_answer_tokens: int = 30, sp_threshold: float = 0.5,
            checkpoint: Optional[str] = None, *, task: str = "hotpotqa",
            reduction: str = "max", per_document: bool = False) -> Dict:
  """Predicts every question in ``records_dir``; writes JSON to ``output`` if given.

  Loads the model from ``model_dir`` (``config.json`` + the latest, or the given, checkpoint)
  and runs :func:`predict_with_model`.  Every path may be a ``tf.io.gfile`` path (local,
  ``gs://``, ``ram://``).  Returns the prediction object of ``task``
  (:func:`model.decoding.task_predictions`).
  """
  decoding.check_task(task, per_document)  # before the model is loaded
  model, _ = load_model(model_dir, checkpoint)
  preds = predict_with_model(model, records_dir, task=task, reduction=reduction,
                             per_document=per_document, top_k=top_k,
                             max_answer_tokens=max_answer_tokens, sp_threshold=sp_threshold)
  if output:
    with tf.io.gfile.GFile(output, "w") as f:
      f.write(json.dumps(preds, indent=1, sort_keys=True) + "\n")
  return preds


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description="ReadTwice prediction.")
  p.add_argument("--records_dir", required=True)
  p.add_argument("--model_dir", required=True)
  p.add_argument("--output", required=True)
  p.add_argument("--top_k", type=int, default=20)
  p.add_argument("--max_answer_tokens", type=int, default=30)
  p.add_argument("--sp_threshold", type=float, default=0.5)
  p.add_argument("--checkpoint", default=None)
  p.add_argument("--task", choices=decoding.TASKS, default="hotpotqa",
                 help="prediction format (default hotpotqa)")
  p.add_argument("--reduction", choices=decoding.REDUCTIONS, default="max",
                 help="per-question aggregation of span candidates (default max)")
  p.add_argument("--per_document", action="store_true",
                 help="triviaqa: one answer per '<QuestionId>--<Filename>' document")
  p.add_argument("--gold", default=None,
                 help="official gold file: also score the predictions with the same code as "
                 "`python -m model.evaluate` and print the metrics as the last line")
  args = p.parse_args(argv)
  if args.per_document and args.task != "triviaqa":
    p.error("--per_document requires --task triviaqa")
  preds = predict(args.records_dir, args.model_dir, args.output, args.top_k,
                  args.max_answer_tokens, args.sp_threshold, args.checkpoint, task=args.task,
                  reduction=args.reduction, per_document=args.per_document)
  count = len(preds["answer"]) if args.task == "hotpotqa" else len(preds)
  print(json.dumps({"output": args.output, "task": args.task, "reduction": args.reduction,
                    "predictions": count}), flush=True)
  if args.gold:
    from model import evaluate  # pylint: disable=g-import-not-at-top
    options = {"per_document": True} if args.per_document else {}
    try:
      metrics = evaluate.run(args.task, args.output, args.gold, **options)
    except evaluate.EvaluationError as e:
      print(f"error: {e}", file=sys.stderr)
      return 1
    print(json.dumps(metrics, sort_keys=True), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
