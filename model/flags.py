"""The model commands' flags, declared once, and their usage checks (no TensorFlow import).

Every trainer command (``model.train``, ``model.pretrain``, ``model.finetune``) builds its
parser from these groups, so that a flag means the same everywhere and ``--help`` or a usage
error answers before TensorFlow loads.  Defaults not given by a command are
:class:`model.configs.TrainConfig`'s.  The error contract: a usage error prints the usage and
one ``error:`` line (exit 2, ``p.error``); unusable inputs print one ``<prog>: error: ...``
line (exit 1, :func:`fail`); no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, Optional, Sequence, Union

from model import configs as configs_lib
from schemas import cli

OPTIMIZERS = ("adamw", "lamb")


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


def add_model_dir_flag(p: argparse.ArgumentParser) -> None:
  p.add_argument("--model_dir", required=True, io=cli.WRITES,
                 help="config.json, checkpoints, tb/ (train/ and eval/ runs) and metrics.json "
                      "go here (local or gs://); a run resumes from its latest checkpoint")


def add_model_flags(g, preset: str, initialisation: bool = True) -> None:
  """``--preset``, ``--model_config`` and (``initialisation``) ``--init_checkpoint`` /
  ``--init_roberta``."""
  g.add_argument("--preset", default=preset, choices=sorted(configs_lib.PRESETS),
                 help="model preset, fitted to the records' vocabulary (tiny*: seq length)")
  g.add_argument("--model_config", default=None, io=cli.READS,
                 help="ModelConfig JSON file (overrides --preset and the config of "
                      "--init_checkpoint)")
  if not initialisation:
    return
  g.add_argument("--init_checkpoint", default=None, io=cli.READS,
                 help="initialise a fresh run from this checkpoint or model dir (weights only)")
  g.add_argument("--init_roberta", default=None, io=cli.READS,
                 help="initialise BERT_1 from a Hugging Face RoBERTa dir (config.json + "
                      "model.safetensors or pytorch_model.bin [+ vocab.json])")


def add_loop_flags(g, strategies: bool = True) -> None:
  """``--steps_per_loop``, ``--jit_compile`` and (``strategies``) ``--strategy`` / ``--tpu``."""
  d = configs_lib.TrainConfig()
  if strategies:
    g.add_argument("--strategy", default="cpu", choices=configs_lib.STRATEGIES,
                   help="cpu: one device; mirrored: all GPUs (or logical CPUs); tpu: "
                        "TPUStrategy")
    g.add_argument("--tpu", default=None,
                   help="TPU name for --strategy tpu ('local' on a Cloud TPU VM)")
  g.add_argument("--steps_per_loop", type=int, default=d.steps_per_loop,
                 help="train steps per tf.function call (one host round trip)")
  cli.bool_flag(g, "jit_compile", d.jit_compile, "XLA-compile the replica step")


def add_warmup_flag(p, default: float) -> None:
  """``--warmup_fraction``: the one warm-up flag of every trainer command."""
  p.add_argument("--warmup_fraction", type=float, default=default,
                 help="linear warm-up over this fraction of the steps, in [0, 1], then linear "
                      "decay")


def add_optimisation_flags(g, *, optimizer: str, learning_rate: float,
                           warmup_fraction: float) -> None:
  """The schedule, optimizer and seed flags."""
  d = configs_lib.TrainConfig()
  g.add_argument("--learning_rate", type=float, default=learning_rate,
                 help="peak learning rate (fine-tuning: the paper picks one of 5e-6, 1e-5, "
                      "3e-5 on the dev set)")
  add_warmup_flag(g, warmup_fraction)
  g.add_argument("--end_learning_rate_fraction", type=float,
                 default=d.end_learning_rate_fraction,
                 help="learning rate at the last step, as a fraction of the peak")
  g.add_argument("--optimizer", default=optimizer, choices=OPTIMIZERS, help="optimizer")
  g.add_argument("--weight_decay", type=float, default=d.weight_decay,
                 help="decoupled weight decay (not on LayerNorm parameters or biases)")
  g.add_argument("--clipnorm", type=clipnorm_flag, default=d.clipnorm,
                 help="per-variable gradient-norm clip after the cross-replica sum; 'none'")
  g.add_argument("--seed", type=int, default=d.seed,
                 help="seed for initialisation, dropout, shuffling and masking")
  cli.bool_flag(g, "shuffle", d.shuffle, "shuffle packs and files (--noshuffle: file order)")


def add_checkpoint_flags(g, *, log_every: int, log_batches: bool = True) -> None:
  """Checkpoint, logging and resume flags."""
  d = configs_lib.TrainConfig()
  g.add_argument("--checkpoint_every", type=int, default=d.checkpoint_every,
                 help="checkpoint interval (steps)")
  g.add_argument("--max_checkpoints", type=int, default=d.max_checkpoints,
                 help="checkpoints kept")
  g.add_argument("--log_every", type=int, default=log_every,
                 help="log / TensorBoard interval (steps)")
  if log_batches:
    cli.bool_flag(g, "log_batches", False,
                  "log a fingerprint of every pack read (to check data order / resume)")
  cli.bool_flag(g, "allow_schedule_change", False,
                "resume even though the schedule (--steps or --epochs, --warmup_fraction, "
                "--learning_rate, --end_learning_rate_fraction, --optimizer) differs from the "
                "run's: a warning, and the new schedule applies from the resumed step (without "
                "it such a resume is an error)")


def add_common_flags(p: argparse.ArgumentParser, *, preset: str, optimizer: str,
                     learning_rate: float, warmup_fraction: float = 0.1,
                     log_every: int = 100) -> None:
  """The model, initialisation, strategy, optimisation and checkpoint flags of
  ``model.pretrain`` and ``model.finetune``."""
  add_model_dir_flag(p)
  add_model_flags(p.add_argument_group("model"), preset)
  add_loop_flags(p.add_argument_group("distribution"))
  add_optimisation_flags(p.add_argument_group("optimisation"), optimizer=optimizer,
                         learning_rate=learning_rate, warmup_fraction=warmup_fraction)
  add_checkpoint_flags(p.add_argument_group("checkpoints and logs"), log_every=log_every)


def train_config(args: argparse.Namespace, steps: int) -> configs_lib.TrainConfig:
  """The TrainConfig of the parsed flags for ``steps`` steps (ValueError on bad values)."""
  return configs_lib.TrainConfig(
      learning_rate=args.learning_rate, steps=steps, optimizer=args.optimizer,
      weight_decay=args.weight_decay, warmup_steps=int(round(args.warmup_fraction * steps)),
      end_learning_rate_fraction=args.end_learning_rate_fraction, clipnorm=args.clipnorm,
      seed=args.seed, shuffle=args.shuffle, jit_compile=args.jit_compile,
      checkpoint_every=args.checkpoint_every, max_checkpoints=args.max_checkpoints,
      log_every=min(args.log_every, steps), steps_per_loop=args.steps_per_loop)


def check_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
  """Usage errors of every trainer command (exit 2 through ``p.error``)."""
  if getattr(args, "init_checkpoint", None) and getattr(args, "init_roberta", None):
    p.error("--init_checkpoint and --init_roberta are alternatives; give one")
  if getattr(args, "tpu", None) and args.strategy != "tpu":
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


def unusable_records(*dirs: Union[None, str, Sequence[str]]) -> Optional[str]:
  """The error of the first local records dir of ``dirs`` (each None, a path or a list of
  paths, in flag order) that is not a finished pipeline run's output (missing, no manifest, no
  ``COMPLETED``, nothing written, a listed shard missing), else None: the same message the
  command's library gives, found before TensorFlow loads (a typo in a path answers at once, not
  after ~4 s).  Remote paths (``gs://``) are left to the library (``tf.io.gfile``)."""
  from schemas import records_dir as records_dir_lib  # pylint: disable=g-import-not-at-top  (numpy: not for --help)
  for group in dirs:
    for path in [group] if isinstance(group, str) else group or ():
      if "://" in path:
        continue
      try:
        records_dir_lib.read_manifest(path)
      except (OSError, ValueError) as e:  # ManifestError, SchemaVersionError
        return str(e)
  return None


def fail(prog: str, message: str) -> int:
  """One ``<prog>: error: ...`` line on stderr; exit status 1."""
  print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
  return 1


def finish(summary: Dict) -> int:
  """Prints the final summary as the last JSON line."""
  summary = dict(summary)
  summary.pop("losses", None)
  print(json.dumps(summary), flush=True)
  return 0
