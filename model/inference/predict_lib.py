"""The library under ``python -m model.predict`` (:mod:`model.predict`, which documents the
output formats per task): :func:`predict` (loads the model from ``model_dir``),
:func:`predict_with_model` (an already built model, e.g. for periodic dev evaluation during
training; score its result with :func:`model.evaluation.evaluate_lib.score`) and :func:`run`, the
command's work once its flags are checked.  ``reduction`` aggregates a question's span candidates
across its segments, sub-documents and packs: ``max`` (best single span) or ``sum`` (logsumexp per
normalised answer text).  Paths may be any ``tf.io.gfile`` path (local, ``gs://``).
"""

from __future__ import annotations

import contextlib
import json
import os
import argparse
import sys
import weakref
from typing import Callable, Dict, Mapping, Optional, Tuple

import tensorflow as tf

from model import faults
from model.network import book_memory
from model import configs as configs_lib
from model.inference import decoding
from model.data import pack_reader as input_lib
from model import progress as progress_lib
from model.network import readtwice
from model import tasks
from model.training import trainer as trainer_lib
from model.data import training_data
from model.training.train_lib import load_model
from schemas import cli
from schemas import manifest as manifest_lib
from schemas import records
from schemas import safe_json

_OUTPUT_KEYS = ("begin_logits", "end_logits", "answer_type_logits", "supporting_logits")


# model -> its traced inference forward, so repeated calls (a dev evaluation every N training
# steps) reuse one tf.function and its traces instead of tracing a new one per call.
_FORWARDS: "weakref.WeakKeyDictionary[readtwice.ReadTwiceModel, Dict]" = (
    weakref.WeakKeyDictionary())


def _forward_fn(model: readtwice.ReadTwiceModel, memory_chunk: Optional[int] = None
                ) -> Callable:
  """The cached ``tf.function`` running ``model`` in inference mode (``_OUTPUT_KEYS`` only),
  one per ``memory_chunk`` (see :meth:`model.network.readtwice.ReadTwiceModel.call`)."""
  forwards = _FORWARDS.setdefault(model, {})
  forward = forwards.get(memory_chunk)
  if forward is None:
    model_ref = weakref.ref(model)  # a strong reference would keep the weak key alive forever

    @tf.function(reduce_retracing=True, autograph=False)  # no control flow on tensors
    def forward(inputs):
      out = model_ref()(inputs, training=False, memory_chunk=memory_chunk,
                        sparse_queries=True)  # not XLA-compiled: mention tokens only
      return {k: out[k] for k in _OUTPUT_KEYS}

    forwards[memory_chunk] = forward
  return forward


class PredictError(ValueError):
  """Records and model that do not go together, or a task the records contradict: one line."""


def records_task(manifest: Mapping, documents: Mapping[str, Mapping]) -> Tuple[str, bool]:
  """``(task, per_document)`` of a pipeline output: its task (the manifest's ``task``, else the
  job that wrote it), and whether its official keys are per (question, document) -- for
  TriviaQA, documents that are (question, page) pairs (the web domain, or Wikipedia with the
  job's ``--per_document``), keyed ``<QuestionId>--<Filename>``."""
  name = tasks.task_name(manifest)
  if name not in tasks.names():
    known = ", ".join(tasks.names())
    if manifest.get("task"):
      raise PredictError(f"the records' manifest names the task {name!r}, which model.predict "
                         f"does not know; it predicts the tasks {known}")
    raise PredictError(f"the records were written by the {name!r} job, which has no questions; "
                       f"model.predict reads the output of jobs with a QA task ({known})")
  return name, tasks.get(name).records_per_document(manifest, documents)


def score_options(task: str, predictions: Mapping) -> Dict:
  """``model.evaluate`` options that go with predictions (the task's
  :meth:`model.tasks.Task.score_options`): TriviaQA keys of (question, page) pairs are scored
  per document."""
  return tasks.get(task).score_options(predictions)


def predict_with_model(model: readtwice.ReadTwiceModel, records_dir: str, *,
                       task: Optional[str] = None, reduction: str = "max",
                       per_document: Optional[bool] = None, top_k: int = 20,
                       max_answer_tokens: int = 30, sp_threshold: float = 0.5,
                       max_packs: Optional[int] = None,
                       memory_scope: str = "sub_document",
                       progress: Optional[progress_lib.Progress] = None) -> Dict:
  """Predicts the questions of ``records_dir`` with an already built (restored) ``model``.

  Returns the prediction object of the task (:meth:`model.tasks.Task.predictions`), ready for
  :func:`model.evaluation.evaluate_lib.score`.  ``task`` and ``per_document`` follow the records
  (:func:`records_task`) when None; given, they must agree with them (PredictError).
  ``records_dir`` may be any ``tf.io.gfile`` path.  ``max_packs`` (None: all) reads only the
  first packs, in record order (questions cut off by the limit are predicted from the packs
  read).  The traced forward pass is cached per model, so periodic calls during training do not
  retrace.  ``memory_scope="book"``: every segment reads the memories of its whole book, across
  sub-documents and packs (:mod:`model.network.book_memory`; two passes over the packs of the books
  that span several packs).  ``progress`` (a started :class:`model.progress.Progress`, as
  ``model.predict`` passes): its count of packs is set and advanced here.
  """
  if memory_scope not in configs_lib.MEMORY_SCOPES:
    raise ValueError(f"memory_scope must be one of {configs_lib.MEMORY_SCOPES}, got "
                     f"{memory_scope!r}.")
  if max_packs is not None and (isinstance(max_packs, bool) or
                                not isinstance(max_packs, int) or max_packs < 1):
    raise ValueError(f"max_packs must be None or an int >= 1, got {max_packs!r}.")
  manifest = input_lib.read_manifest(records_dir)
  trainer_lib.check_compatible(model.config, manifest)
  documents = decoding.load_documents(records_dir)
  found_task, found_per_document = records_task(manifest, documents)
  if task is not None and task != found_task:
    job = manifest.get("job")
    source = f"python -m pipelines {job}" + ("" if job == found_task else f" (task {found_task})")
    raise PredictError(f"--task {task} contradicts the records: {records_dir} was written by "
                       f"{source}; leave --task out")
  if per_document is not None and per_document != found_per_document:
    holds = ("one document per (question, page)" if found_per_document
             else "one document per question")
    raise PredictError(
        f"--{'' if per_document else 'no'}per_document contradicts the records: {records_dir} "
        f"holds {holds}; leave the flag out")
  task, per_document = found_task, found_per_document
  decoder = decoding.Decoder(documents, top_k=top_k,
                             max_answer_tokens=max_answer_tokens, sp_threshold=sp_threshold,
                             reduction=reduction,
                             answer_type_mode=model.config.answer_type_mode)
  # Book scope reads the memory table in chunks: pass 2's scores stay [N, heads, L, chunk]
  # however long the book (its table is external memories + the pack's).
  book = memory_scope == "book" and model.config.use_memory
  forward = _forward_fn(model, book_memory.MEMORY_CHUNK if book else None)

  def packs():
    dataset = input_lib.dataset_from_output_dir(
        records_dir, shuffle=False, repeat=False,
        max_mentions=readtwice.max_mentions(model.config))
    if max_packs is not None:
      dataset = dataset.take(max_packs)
    return dataset

  if progress is not None:
    total = (manifest.get("examples") or {}).get("packs")
    total = total if isinstance(total, int) and total > 0 else None
    progress.total = min(total, max_packs) if total and max_packs else (total or max_packs)
  scope = None
  if book:
    if progress is not None:
      progress.set_phase("reading the book memories (pass 1 of 2)")
    scope = book_memory.BookMemory(
        lambda: ({k: v.numpy() for k, v in f.items()} for f in packs()),
        int(manifest["config"]["max_segments_per_document"]), model.config.hidden_size)
    scope.fill(model)
  for i, features in enumerate(packs()):
    if progress is not None and i == 0:
      progress.set_phase("compiling the model for the first pack")
    arrays = {k: v.numpy() for k, v in features.items()}
    inputs = scope.pack_inputs(features, arrays) if scope else features
    outputs = forward(readtwice.model_inputs(inputs))
    decoder.add_pack(arrays, {k: v.numpy() for k, v in outputs.items()})
    if progress is not None:
      progress.update(i + 1)
  preds = tasks.get(task).predictions(decoder, per_document)
  if decoder.unmapped_candidates:  # offsets outside the side file's text: wrong records_dir?
    print(f"warning: {decoder.unmapped_candidates} span candidates could not be mapped to a "
          f"document text of {records_dir}/documents (missing document or offsets out of "
          "range) and were ignored", file=sys.stderr, flush=True)
  return preds


def predict(records_dir: str, model_dir: str, output: Optional[str] = None, top_k: int = 20,
            max_answer_tokens: int = 30, sp_threshold: float = 0.5,
            checkpoint: Optional[str] = None, *, task: Optional[str] = None,
            reduction: str = "max", per_document: Optional[bool] = None,
            memory_scope: str = "sub_document", progress: bool = False) -> Dict:
  """Predicts every question in ``records_dir``; writes JSON to ``output`` if given.

  Loads the model from ``model_dir`` (``config.json`` + the latest, or the given, checkpoint)
  and runs :func:`predict_with_model` (``task`` / ``per_document``: None follows the records).
  Every path may be a ``tf.io.gfile`` path (local, ``gs://``, ``ram://``).  Returns the
  prediction object of the task (:meth:`model.tasks.Task.predictions`).  ``progress``: print
  time-based ``progress: predicting d/t packs, rate, ETA`` lines on stdout (as
  ``model.predict`` does; :mod:`model.progress`).
  """
  manifest = input_lib.read_manifest(records_dir)  # before the model is loaded
  with (progress_lib.Progress(None, unit="packs", what="predicting") if progress
        else contextlib.nullcontext()) as meter:
    if meter is not None:
      meter.set_phase("loading the model")
    model, _ = load_model(model_dir, checkpoint)
    try:
      trainer_lib.check_compatible(model.config, manifest)
    except training_data.TrainingError as e:
      raise PredictError(f"--model_dir {model_dir} does not fit --records_dir {records_dir}: "
                         f"{e}") from None
    preds = predict_with_model(model, records_dir, task=task, reduction=reduction,
                               per_document=per_document, top_k=top_k,
                               max_answer_tokens=max_answer_tokens, sp_threshold=sp_threshold,
                               memory_scope=memory_scope, progress=meter)
  if output:
    write_json_atomically(output, preds)
  return preds


def write_json_atomically(path: str, value) -> None:
  """Writes ``value`` as JSON to a temporary file beside ``path``, then renames it over
  ``path``: a full disk, a signal or an error leaves ``path`` as it was and no temporary file."""
  tmp = f"{path}.tmp-{os.getpid()}"
  try:
    with tf.io.gfile.GFile(tmp, "w") as f:
      f.write(json.dumps(value, indent=1, sort_keys=True) + "\n")
    faults.fault_point("predict", tmp)
    tf.io.gfile.rename(tmp, path, overwrite=True)
  except BaseException:
    try:
      if tf.io.gfile.exists(tmp):
        tf.io.gfile.remove(tmp)
    except Exception:  # pylint: disable=broad-except  (the first error is the one to report)
      pass
    raise


def run(prog: str, args: argparse.Namespace) -> int:
  """``model.predict``'s work (flags checked by :func:`model.predict.main`): writes the
  predictions, prints their summary (and, with ``--gold``, the metrics) line; exit status."""
  from model.evaluation import evaluate_lib  # pylint: disable=g-import-not-at-top

  def body():
    # A gold file is scored with the options the records imply (NarrativeQA's split, from the
    # manifest), as `model.evaluate --split` and model.finetune's dev metrics: checked first.
    gold_options = {}
    if args.gold:
      manifest = input_lib.read_manifest(args.records_dir)
      if tasks.task_name(manifest) in tasks.names():  # else predict() says what is wrong
        gold_options = evaluate_lib.records_options(tasks.task_name(manifest), manifest,
                                                args.records_dir)
    preds = predict(args.records_dir, args.model_dir, args.output, args.top_k,
                    args.max_answer_tokens, args.sp_threshold, args.checkpoint, task=args.task,
                    reduction=args.reduction, per_document=args.per_document,
                    memory_scope=args.memory_scope, progress=True)
    task = tasks.task_name(input_lib.read_manifest(args.records_dir))
    count = tasks.get(task).count(preds)
    print(json.dumps({"output": args.output, "task": task, "reduction": args.reduction,
                      "predictions": count}), flush=True)
    if args.gold:
      metrics = evaluate_lib.run(task, args.output, args.gold, **gold_options,
                             **score_options(task, preds))
      evaluate_lib.print_warnings(task, metrics)
      return metrics
    return None

  return cli.run_command(prog, body, (PredictError, input_lib.RecordsError,
                                      training_data.TrainingError, evaluate_lib.EvaluationError,
                                      FileNotFoundError, manifest_lib.ManifestError,
                                      records.SchemaVersionError, safe_json.JsonTooDeepError),
                         message_of=lambda e: input_lib.records_error(e, [args.records_dir]))


