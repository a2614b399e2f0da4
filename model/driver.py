"""Command-line plumbing shared by :mod:`model.pretrain` and :mod:`model.finetune`.

Flags common to both drivers, the model config a run uses (``--model_config`` JSON, else the
config of ``--init_checkpoint``'s model dir, else ``--preset`` fitted to the records, each
with ``--init_roberta``'s encoder shape when given), the initialisation of a fresh run, the
strategy, and the error contract: a usage error prints the usage and one ``error:`` line
(exit 2); unusable inputs print one ``<prog>: error: ...`` line (exit 1); no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from model import configs as configs_lib
from model import strategies
from model import training_data
from schemas import cli


def clipnorm_flag(text: str) -> Optional[float]:
  """``--clipnorm`` value: a number, or ``none`` for no clipping."""
  if text.strip().lower() == "none":
    return None
  try:
    return float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def nonnegative_float(text: str) -> float:
  """A flag value that is a number >= 0."""
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
  if not value >= 0:
    raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
  return value


def add_coref_flag(p: argparse.ArgumentParser, default: float, why: str) -> None:
  """``--coref_weight``: the weight of the coreference loss on entity memories."""
  p.add_argument("--coref_weight", type=nonnegative_float, default=default,
                 help=f"weight of the coreference loss on entity memories ({why})")


def add_common_flags(p: argparse.ArgumentParser, *, preset: str, optimizer: str,
                     learning_rate: float, warmup_fraction: float = 0.1,
                     log_every: int = 100) -> None:
  """The model, initialisation, strategy, optimisation and checkpoint flags of both drivers;
  the defaults not given here are :class:`model.configs.TrainConfig`'s."""
  d = configs_lib.TrainConfig()
  p.add_argument("--model_dir", required=True, io=cli.WRITES,
                 help="config.json, checkpoints, tb/ (train/ and eval/ runs) and metrics.json "
                      "go here (local or gs://); a run resumes from its latest checkpoint")
  g = p.add_argument_group("model")
  g.add_argument("--preset", default=preset, choices=sorted(configs_lib.PRESETS),
                 help="model preset, fitted to the records' vocabulary (tiny*: seq length)")
  g.add_argument("--model_config", default=None, io=cli.READS, help="ModelConfig JSON file (overrides "
                 "--preset and the config of --init_checkpoint)")
  g.add_argument("--init_checkpoint", default=None, io=cli.READS,
                 help="initialise a fresh run from this checkpoint or model dir (weights only)")
  g.add_argument("--init_roberta", default=None, io=cli.READS,
                 help="initialise BERT_1 from a Hugging Face RoBERTa dir (config.json + "
                      "model.safetensors or pytorch_model.bin [+ vocab.json])")
  g = p.add_argument_group("distribution")
  g.add_argument("--strategy", default="cpu", choices=strategies.STRATEGIES,
                 help="cpu: one device; mirrored: all GPUs (or logical CPUs); tpu: TPUStrategy")
  g.add_argument("--tpu", default=None,
                 help="TPU name for --strategy tpu ('local' on a Cloud TPU VM)")
  g.add_argument("--steps_per_loop", type=int, default=d.steps_per_loop,
                 help="train steps per tf.function call")
  cli.bool_flag(g, "jit_compile", d.jit_compile, "XLA-compile the replica step")
  g = p.add_argument_group("optimisation")
  g.add_argument("--learning_rate", type=float, default=learning_rate,
                 help="peak learning rate (fine-tuning: the paper picks one of 5e-6, 1e-5, "
                      "3e-5 on the dev set)")
  add_warmup_flag(g, warmup_fraction)
  g.add_argument("--end_learning_rate_fraction", type=float,
                 default=d.end_learning_rate_fraction,
                 help="learning rate at the last step, as a fraction of the peak")
  g.add_argument("--optimizer", default=optimizer, choices=["adamw", "lamb"],
                 help="optimizer")
  g.add_argument("--weight_decay", type=float, default=d.weight_decay,
                 help="decoupled weight decay (not on LayerNorm parameters or biases)")
  g.add_argument("--clipnorm", type=clipnorm_flag, default=d.clipnorm,
                 help="per-variable gradient-norm clip after the cross-replica sum; 'none'")
  g.add_argument("--seed", type=int, default=d.seed,
                 help="seed for initialisation, dropout, shuffling and masking")
  cli.bool_flag(g, "shuffle", d.shuffle, "shuffle packs and files (--noshuffle: file order)")
  g = p.add_argument_group("checkpoints and logs")
  g.add_argument("--checkpoint_every", type=int, default=d.checkpoint_every,
                 help="checkpoint interval (steps)")
  g.add_argument("--max_checkpoints", type=int, default=d.max_checkpoints,
                 help="checkpoints kept")
  g.add_argument("--log_every", type=int, default=log_every,
                 help="log / TensorBoard interval (steps)")
  cli.bool_flag(g, "log_batches", False,
                "log a fingerprint of every pack read (to check data order / resume)")
  cli.bool_flag(g, "allow_schedule_change", False,
                "resume even though the schedule (--steps or --epochs, --warmup_fraction, "
                "--learning_rate, --end_learning_rate_fraction, --optimizer) differs from the "
                "run's: a warning, and the new schedule applies from the resumed step (without "
                "it such a resume is an error)")


def add_warmup_flag(p, default: float) -> None:
  """``--warmup_fraction``: the one warm-up flag of every trainer command."""
  p.add_argument("--warmup_fraction", type=float, default=default,
                 help="linear warm-up over this fraction of the steps, in [0, 1], then linear "
                      "decay")


def train_config(args: argparse.Namespace, steps: int) -> configs_lib.TrainConfig:
  """The TrainConfig of the parsed flags for ``steps`` steps (ValueError on bad values)."""
  return configs_lib.TrainConfig(
      learning_rate=args.learning_rate, steps=steps, optimizer=args.optimizer,
      weight_decay=args.weight_decay, warmup_steps=int(round(args.warmup_fraction * steps)),
      end_learning_rate_fraction=args.end_learning_rate_fraction, clipnorm=args.clipnorm,
      seed=args.seed, shuffle=args.shuffle, jit_compile=args.jit_compile,
      checkpoint_every=args.checkpoint_every, max_checkpoints=args.max_checkpoints,
      log_every=min(args.log_every, steps), steps_per_loop=args.steps_per_loop)


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
    from model import roberta_checkpoint, roberta_mapping  # pylint: disable=g-import-not-at-top
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
    from model import roberta_mapping  # pylint: disable=g-import-not-at-top
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
  from model import roberta_checkpoint, roberta_mapping  # pylint: disable=g-import-not-at-top
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


def check_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
  """Usage errors shared by both drivers (exit 2 through ``p.error``)."""
  if args.init_checkpoint and args.init_roberta:
    p.error("--init_checkpoint and --init_roberta are alternatives; give one")
  if args.tpu and args.strategy != "tpu":
    p.error("--tpu needs --strategy tpu")
  for name in ("steps_per_loop", "checkpoint_every", "max_checkpoints", "log_every"):
    if getattr(args, name) < 1:
      p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
  if not 0.0 <= args.warmup_fraction <= 1.0:
    p.error(f"--warmup_fraction must be in [0, 1], got {args.warmup_fraction}")
  if args.steps is not None and args.steps < 1:
    p.error(f"--steps must be >= 1, got {args.steps}")
  try:  # the remaining TrainConfig checks (learning rate, weight decay, clipnorm, ...)
    train_config(args, args.steps or 1)
  except ValueError as e:
    p.error(str(e))


def error_message(error: BaseException, records_dirs) -> str:
  """The one line for an error of a run: a corrupt record names its file and index."""
  from model import input as input_lib  # pylint: disable=g-import-not-at-top
  return input_lib.records_error(error, list(records_dirs)) or " ".join(str(error).split())


def records_failure(prog: str, error: BaseException, records_dirs) -> int:
  """:func:`fail` with the one line of a TensorFlow error that the records caused (a shard
  gone, a payload that is not a pack: :func:`model.input.records_error`), raised in the input
  pipeline before or during training; any other error is re-raised (a bug: its traceback)."""
  from model import input as input_lib  # pylint: disable=g-import-not-at-top
  message = input_lib.records_error(error, list(records_dirs))
  if message is None:
    raise error
  return fail(prog, " ".join(message.split()))


def fail(prog: str, message: str) -> int:
  print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
  return 1


def finish(summary: Dict) -> int:
  """Prints the final summary as the last JSON line."""
  summary = dict(summary)
  summary.pop("losses", None)
  print(json.dumps(summary), flush=True)
  return 0


__all__: List[str] = ["add_common_flags", "train_config", "model_config", "init_fn",
                      "check_flags", "fail", "finish"]
