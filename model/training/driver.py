"""What the trainer commands do with their parsed flags (:mod:`model.flags`) once TensorFlow is
loaded: the model config a run uses (``--model_config`` JSON, else the config of
``--init_checkpoint``'s model dir, else ``--preset`` fitted to the records, each with
``--init_roberta``'s encoder shape when given), the initialisation of a fresh run, and the one
line of a run's error (exit 1, no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from model import configs as configs_lib
from model import flags
from model.data import training_data


def _checkpoint_path(path: str) -> str:
  """A checkpoint prefix from a checkpoint prefix or a model dir (its ``best/`` is not used)."""
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise training_data.TrainingError(f"--init_checkpoint {path}: no checkpoint in it")
    return latest
  if not tf.io.gfile.glob(path + ".index"):
    raise training_data.TrainingError(f"--init_checkpoint {path}: no such checkpoint")
  return path


def model_config(args: argparse.Namespace, manifest: Dict, **preset_overrides
                 ) -> configs_lib.ModelConfig:
  """The run's ModelConfig (see the module docstring)."""
  if tf.io.gfile.exists(os.path.join(args.model_dir, configs_lib.CONFIG_FILE)):
    return configs_lib.load_configs(args.model_dir)[0]  # resuming: the run's own config
  if args.model_config:
    with tf.io.gfile.GFile(args.model_config) as f:
      return configs_lib.ModelConfig.from_json(f.read(), f"--model_config {args.model_config}")
  if args.init_checkpoint:
    d = (args.init_checkpoint if tf.io.gfile.isdir(args.init_checkpoint)
         else os.path.dirname(args.init_checkpoint))
    if tf.io.gfile.exists(os.path.join(d, configs_lib.CONFIG_FILE)):
      return configs_lib.load_configs(d)[0]
  if args.init_roberta:
    from model.roberta_import import checkpoint as roberta_checkpoint  # pylint: disable=g-import-not-at-top
    from model.roberta_import import mapping as roberta_mapping  # pylint: disable=g-import-not-at-top
    base = configs_lib.config_from_manifest(manifest, args.preset, **preset_overrides)
    return roberta_mapping.config_from_hf(roberta_checkpoint.read_hf_config(args.init_roberta),
                                          base=base, vocab_size=base.vocab_size)
  return configs_lib.config_from_manifest(manifest, args.preset, **preset_overrides)


def init_fn(args: argparse.Namespace) -> Optional[Callable]:
  """What a fresh run loads into its model: a checkpoint's weights or RoBERTa's."""
  if args.init_checkpoint:
    path = _checkpoint_path(args.init_checkpoint)

    def load(model):
      # Weights only: the optimizer slots, step and data position of that run are not ours.
      tf.train.Checkpoint(model=model).restore(path).expect_partial()
      print(json.dumps({"initialised_from": path}), flush=True)
    return load
  if args.init_roberta:
    from model.roberta_import import mapping as roberta_mapping  # pylint: disable=g-import-not-at-top
    check_roberta_dir(args.init_roberta)

    def load(model):
      try:
        report = roberta_mapping.initialize_from_roberta(model, args.init_roberta)
      except ValueError as e:  # CheckpointError, shapes, config: the files are at fault
        raise training_data.TrainingError(f"--init_roberta: {' '.join(str(e).split())}"
                                          ) from None
      print(json.dumps({"initialised_from_roberta": args.init_roberta, **report}), flush=True)
    return load
  return None


def check_roberta_dir(path: str) -> None:
  """TrainingError (one line, before anything is built) unless ``path`` holds what
  ``--init_roberta`` reads: ``config.json``, a weights file and ``vocab.json``."""
  from model.roberta_import import checkpoint as roberta_checkpoint  # pylint: disable=g-import-not-at-top
  from model.roberta_import import mapping as roberta_mapping  # pylint: disable=g-import-not-at-top
  if not tf.io.gfile.isdir(path):
    raise training_data.TrainingError(f"--init_roberta {path} is not a directory; give a "
                                      "Hugging Face RoBERTa checkpoint dir")
  missing = [name for name in (roberta_checkpoint.CONFIG_NAME, roberta_mapping.VOCAB_NAME)
             if not tf.io.gfile.exists(os.path.join(path, name))]
  if not any(tf.io.gfile.exists(os.path.join(path, name))
             for name in roberta_checkpoint.WEIGHT_FILES):
    missing.append(" or ".join(roberta_checkpoint.WEIGHT_FILES[::2]))
  if missing:
    raise training_data.TrainingError(
        f"--init_roberta {path} has no {', no '.join(missing)}: the dir must hold a Hugging Face "
        "RoBERTa checkpoint's config.json, its weights (model.safetensors or pytorch_model.bin) "
        "and the vocab.json of its tokenizer (our token ids are mapped to its rows by it)")


def error_message(error: BaseException, records_dirs) -> str:
  """The one line for an error of a run: a corrupt record names its file and index."""
  from model.data import pack_reader as input_lib  # pylint: disable=g-import-not-at-top
  return input_lib.records_error(error, list(records_dirs)) or " ".join(str(error).split())


def records_failure(prog: str, error: BaseException, records_dirs) -> int:
  """:func:`fail` with the one line of a TensorFlow error that the records caused (a shard
  gone, a payload that is not a pack: :func:`model.data.pack_reader.records_error`), raised in the
  input pipeline before or during training; any other error is re-raised (a bug: its traceback)."""
  from model.data import pack_reader as input_lib  # pylint: disable=g-import-not-at-top
  message = input_lib.records_error(error, list(records_dirs))
  if message is None:
    raise error
  return flags.fail(prog, " ".join(message.split()))


__all__: List[str] = ["model_config", "init_fn", "check_roberta_dir", "error_message",
                      "records_failure"]
