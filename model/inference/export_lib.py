"""The library under ``python -m model.export`` (:mod:`model.export`, which documents the
SavedModel's signature and files): :func:`export`, :func:`geometry` and :func:`run`, the
command's work once its flags are checked.
"""

from __future__ import annotations

import json
import os
import argparse
from typing import Dict, Optional, Tuple

import keras
import tensorflow as tf

from model import faults
from model import configs as configs_lib
from model.data import pack_reader as input_lib
from model.network import readtwice
from model.data import training_data
from model.training.trainer import check_compatible
from schemas import cli
from schemas import manifest as manifest_lib
from schemas import records
from schemas import safe_json

SIGNATURE = "serving_default"
EXPORT_FILE = "export.json"
LOGIT_KEYS = ("begin_logits", "end_logits", "answer_type_logits", "supporting_logits")
SPAN_KEYS = ("best_span_begin", "best_span_end", "best_span_score")
DEFAULT_MAX_ANSWER_TOKENS = configs_lib.DEFAULT_MAX_ANSWER_TOKENS  # model.predict's default
_TOKEN_INPUTS = ("token_ids", "input_mask", "token_kind")
# The model config fields export.json repeats (the whole config is in config.json beside it).
_SUMMARY_FIELDS = ("vocab_size", "hidden_size", "num_heads", "num_layers_first",
                   "num_layers_second", "max_seq_length", "use_memory", "memory_source",
                   "max_memories", "memory_application", "answer_type_mode")


class ExportError(ValueError):
  """A model dir, checkpoint or output dir that cannot be exported from / to: one line."""


def input_spec(config: configs_lib.ModelConfig, seq_length: int, segments_per_pack: int
               ) -> Dict[str, tf.TensorSpec]:
  """The signature's inputs: the pack features the model reads, as :mod:`model.data.pack_reader`
  parses them (int32; token features ``[N, L]``, segment features ``[N]``, mentions ``[K]``)."""
  n, l = segments_per_pack, seq_length
  spec = {k: tf.TensorSpec([n, l] if k in _TOKEN_INPUTS else [n], tf.int32, name=k)
          for k in readtwice.MODEL_INPUT_KEYS}
  k = readtwice.max_mentions(config)
  if k is not None:
    spec.update({name: tf.TensorSpec([k], tf.int32, name=name)
                 for name in readtwice.MENTION_INPUT_KEYS if name != "mentions_dropped"})
  return spec


def best_spans(begin_logits: tf.Tensor, end_logits: tf.Tensor, token_kind: tf.Tensor,
               max_answer_tokens: int) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Each segment's best span, with TF ops: ``(begin, end, score)``, each ``[N]``.

  Over the pairs of context tokens ``begin <= end < begin + max_answer_tokens``, the highest
  ``begin_logits[begin] + end_logits[end]`` (ties: the lowest begin, then the shortest span).
  Scores are searched per span length (``[N, L, max_answer_tokens]``, not ``[N, L, L]``).
  Segments without a context token give ``(-1, -1, -inf)``.
  """
  m = int(max_answer_tokens)
  begin_logits = tf.convert_to_tensor(begin_logits, tf.float32)
  end_logits = tf.convert_to_tensor(end_logits, tf.float32)
  context = tf.equal(tf.cast(token_kind, tf.int32), records.TOKEN_KIND_CONTEXT)
  n, l = tf.shape(begin_logits)[0], tf.shape(begin_logits)[1]
  # ends[:, b, d] = end_logits[:, b + d] (padded past the segment's last token).
  padded_end = tf.pad(end_logits, [[0, 0], [0, m - 1]])
  padded_context = tf.pad(context, [[0, 0], [0, m - 1]])
  index = tf.range(l)[:, None] + tf.range(m)[None, :]  # [L, m]
  ends = tf.gather(padded_end, index, axis=1)
  end_ok = tf.gather(padded_context, index, axis=1)
  valid = context[:, :, None] & end_ok  # [N, L, m]
  scores = tf.where(valid, begin_logits[:, :, None] + ends, float("-inf"))
  flat = tf.reshape(scores, [n, l * m])
  best = tf.cast(tf.argmax(flat, axis=1, output_type=tf.int64), tf.int32)
  score = tf.reduce_max(flat, axis=1)
  found = tf.reduce_any(context, axis=1)
  begin = tf.where(found, best // m, -1)
  end = tf.where(found, best // m + best % m, -1)
  return begin, end, tf.where(found, score, float("-inf"))


class ServingModule(tf.Module):
  """The Keras model and its serving function (:data:`SIGNATURE`), as ``tf.saved_model.save``
  writes them: variables plus traced graphs, no Python class of this repository."""

  def __init__(self, model: readtwice.ReadTwiceModel, spec: Dict[str, tf.TensorSpec],
               max_answer_tokens: int):
    super().__init__(name="readtwice_serving")
    self.model = model
    self._max_answer_tokens = int(max_answer_tokens)
    self.serve = tf.function(self._serve, input_signature=[spec])

  def _serve(self, features):
    out = self.model(features, training=False)
    result = {k: out[k] for k in LOGIT_KEYS}
    begin, end, score = best_spans(out["begin_logits"], out["end_logits"],
                                   features["token_kind"], self._max_answer_tokens)
    result.update(zip(SPAN_KEYS, (begin, end, score)))
    return result


def restore(model_dir: str, checkpoint: Optional[str] = None
            ) -> Tuple[readtwice.ReadTwiceModel, configs_lib.ModelConfig, str]:
  """``(model, config, checkpoint path)``: the model of ``model_dir/config.json`` with every
  variable restored from ``checkpoint`` (default: the latest of ``model_dir``); ExportError
  when the dir, its config or a checkpoint is missing, or the checkpoint lacks a variable."""
  if not tf.io.gfile.isdir(model_dir):
    raise ExportError(f"--model_dir {model_dir} does not exist")
  if not tf.io.gfile.exists(os.path.join(model_dir, configs_lib.CONFIG_FILE)):
    raise ExportError(f"{model_dir} has no {configs_lib.CONFIG_FILE}: not a model dir of "
                      "model.finetune / model.train")
  config, _ = configs_lib.load_configs(model_dir)
  path = checkpoint or tf.train.latest_checkpoint(model_dir)
  if path is None:
    raise ExportError(f"no checkpoint in {model_dir} (train the model first, or pass "
                      "--checkpoint)")
  if not tf.io.gfile.exists(path + ".index"):
    raise ExportError(f"--checkpoint {path}: no such checkpoint ({path}.index does not exist)")
  model = readtwice.build_model(config)
  status = tf.train.Checkpoint(model=model).restore(path).expect_partial()
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise ExportError(f"{path} does not hold this model's variables ({model_dir}/"
                      f"{configs_lib.CONFIG_FILE} describes another model): {e}") from None
  return model, config, path


def _spec_json(spec) -> Dict:
  return {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}


def _check_replaceable(output_dir: str) -> None:
  """``--overwrite`` deletes only an earlier export (a directory holding our ``export.json``),
  never a symlink (whose target is someone else's) nor anything else."""
  local = "://" not in output_dir
  if local and os.path.islink(output_dir.rstrip(os.sep) or os.sep):
    raise ExportError(f"--output_dir {output_dir} is a symlink (to "
                      f"{os.path.realpath(output_dir)}); --overwrite never deletes through a "
                      "symlink: give the real path or another --output_dir")
  if (not tf.io.gfile.isdir(output_dir)
      or not tf.io.gfile.exists(os.path.join(output_dir, EXPORT_FILE))):
    raise ExportError(f"--output_dir {output_dir} exists and is not an earlier export (no "
                      f"{EXPORT_FILE} in it); --overwrite replaces only what model.export "
                      "wrote: choose another --output_dir")


def export(model_dir: str, output_dir: str, *, seq_length: int, segments_per_pack: int,
           checkpoint: Optional[str] = None,
           max_answer_tokens: int = DEFAULT_MAX_ANSWER_TOKENS, overwrite: bool = False
           ) -> Dict:
  """Writes the SavedModel of ``model_dir``'s model (module docstring) to ``output_dir``, with
  ``config.json`` and ``export.json`` beside it; returns the summary (also ``export.json``'s
  main fields).  ExportError for an unusable model dir, checkpoint or output dir; a failed
  export leaves no output dir behind."""
  if max_answer_tokens < 1:
    raise ValueError(f"max_answer_tokens must be >= 1, got {max_answer_tokens}")
  if tf.io.gfile.exists(output_dir):
    if not overwrite:
      raise ExportError(f"--output_dir {output_dir} exists; pass --overwrite to replace it")
    if cli.holds(output_dir, model_dir):
      raise ExportError(f"--output_dir {output_dir} holds --model_dir {model_dir}; "
                        "export somewhere else")
    _check_replaceable(output_dir)
  model, config, path = restore(model_dir, checkpoint)
  if seq_length > config.max_seq_length:
    raise ExportError(f"seq_length {seq_length} > the model's max_seq_length "
                      f"{config.max_seq_length}")
  spec = input_spec(config, seq_length, segments_per_pack)
  module = ServingModule(model, spec, max_answer_tokens)
  outputs = module.serve.get_concrete_function().structured_outputs
  if tf.io.gfile.exists(output_dir):
    if tf.io.gfile.isdir(output_dir):
      tf.io.gfile.rmtree(output_dir)
    else:
      tf.io.gfile.remove(output_dir)
  try:
    tf.saved_model.save(module, output_dir, signatures={SIGNATURE: module.serve})
    faults.fault_point("export", output_dir)
    tf.io.gfile.copy(os.path.join(model_dir, configs_lib.CONFIG_FILE),
                     os.path.join(output_dir, configs_lib.CONFIG_FILE))
    info = {
        "format": "tf_saved_model", "signature": SIGNATURE,
        "inputs": {k: _spec_json(v) for k, v in sorted(spec.items())},
        "outputs": {k: _spec_json(v) for k, v in sorted(outputs.items())},
        "seq_length": seq_length, "segments_per_pack": segments_per_pack,
        "max_answer_tokens": max_answer_tokens,
        "answer_types": {name: code for name, code in records.ANSWER_TYPES.items()},
        "model": {k: getattr(config, k) for k in _SUMMARY_FIELDS},
        "source": {"model_dir": model_dir, "checkpoint": path},
        "written_by": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }
    with tf.io.gfile.GFile(os.path.join(output_dir, EXPORT_FILE), "w") as f:
      f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
  except BaseException:
    if tf.io.gfile.exists(output_dir):
      tf.io.gfile.rmtree(output_dir)
    raise
  return {"output_dir": output_dir, "checkpoint": path, "signature": SIGNATURE,
          "seq_length": seq_length, "segments_per_pack": segments_per_pack,
          "inputs": sorted(spec), "outputs": sorted(outputs)}


def geometry(model_dir: str, records_dir: Optional[str], seq_length: Optional[int],
             segments_per_pack: Optional[int]) -> Tuple[int, int]:
  """``(seq_length, segments_per_pack)`` of the signature: the flags, else the records'
  manifest, else (L only) the model's ``max_seq_length``; ExportError when N is unknown or the
  flags contradict the records."""
  if records_dir is not None:
    manifest = input_lib.read_manifest(records_dir)
    if tf.io.gfile.exists(os.path.join(model_dir, configs_lib.CONFIG_FILE)):
      check_compatible(configs_lib.load_configs(model_dir)[0], manifest)
    found = (int(manifest["config"]["seq_length"]),
             int(manifest["config"]["segments_per_pack"]))
    for flag, given, theirs in (("seq_length", seq_length, found[0]),
                                ("segments_per_pack", segments_per_pack, found[1])):
      if given is not None and given != theirs:
        raise ExportError(f"--{flag} {given} contradicts the records: {records_dir} has "
                          f"{flag} {theirs}; leave --{flag} out")
    return found
  if segments_per_pack is None:
    raise ExportError("the pack geometry is unknown: pass --records_dir (the records the "
                      "model will serve) or --segments_per_pack")
  if seq_length is None:
    if not tf.io.gfile.isdir(model_dir):
      raise ExportError(f"--model_dir {model_dir} does not exist")
    seq_length = configs_lib.load_configs(model_dir)[0].max_seq_length
  return seq_length, segments_per_pack


def run(prog: str, args: argparse.Namespace) -> int:
  """``model.export``'s work (flags checked by :func:`model.export.main`); exit status."""
  def body():
    seq_length, segments_per_pack = geometry(args.model_dir, args.records_dir, args.seq_length,
                                             args.segments_per_pack)
    return export(args.model_dir, args.output_dir, seq_length=seq_length,
                  segments_per_pack=segments_per_pack, checkpoint=args.checkpoint,
                  max_answer_tokens=args.max_answer_tokens, overwrite=args.overwrite)

  return cli.run_command(prog, body, (ExportError, training_data.TrainingError,
                                      FileNotFoundError, manifest_lib.ManifestError,
                                      records.SchemaVersionError, safe_json.JsonTooDeepError))


