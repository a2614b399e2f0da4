"""ReadTwice trainer: one pack = one global batch = one step.

CLI::

  python -m model.train --records_dir <pipeline output dir> --model_dir <dir> \
      [--preset tiny|base | --model_config model.json] [--steps 1000] [--learning_rate 5e-5] \
      [--warmup_fraction 0] [--end_learning_rate_fraction 0] [--optimizer adamw|lamb] \
      [--weight_decay 0.01] [--clipnorm 1.0|none] [--seed 0] [--noshuffle] [--jit_compile] \
      [--checkpoint_every 1000] [--max_checkpoints 3] [--log_every 1] [--steps_per_loop 1] \
      [--allow_schedule_change]

e.g. ``--preset tiny --steps 120 --learning_rate 2e-3 --warmup_fraction 0.08`` (the demo).  Every
trainer flag defaults to the matching :class:`model.configs.TrainConfig` field (the values shown);
invalid values (e.g. ``--steps 0``) print the usage and one ``error: ...`` line on stderr and
exit with status 2.  It
prints one JSON line per step (``{"step", "loss", ...}``), a plain-text ``progress: step s/t,
loss, steps/s, ETA`` line at least every 15 s (:mod:`model.progress`) and a final JSON summary
line (``{"summary": true, "first_loss", "last_loss", ...}``); a model dir that already trained
all its steps trains nothing (one ``... already finished at step N ...`` line, exit 0).  Writes ``<model_dir>/config.json``,
checkpoints (``tf.train.CheckpointManager``, prefix ``ckpt``) and TensorBoard summaries under
``<model_dir>/tb``.  A model dir with checkpoints is resumed (one ``resuming from ...`` line);
resuming with another schedule (``--steps``, ``--warmup_fraction``, ``--learning_rate``, ...)
is an error unless ``--allow_schedule_change``.  Python API: :func:`train`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Callable, Dict, Optional

import tensorflow as tf

from model import faults
from model import configs as configs_lib
from model import driver
from model import input as input_lib
from model import optimization
from model import readtwice
from model import objectives
from model import trainer as trainer_lib
from model import training_data
from schemas import cli


# The optimisation pieces live in model.optimization; kept importable from here.
WarmupLinearDecay = optimization.WarmupLinearDecay
make_schedule = optimization.make_schedule
decays_weight = optimization.decays_weight
make_optimizer = optimization.make_optimizer


def config_from_manifest(records_dir: str, preset: str = "tiny", **overrides
                        ) -> configs_lib.ModelConfig:
  """A preset whose vocab size / position table fit the records' manifest."""
  return configs_lib.config_from_manifest(input_lib.read_manifest(records_dir), preset,
                                          **overrides)


def train(records_dir: str, model_dir: str,
          model_config: Optional[configs_lib.ModelConfig] = None,
          train_config: Optional[configs_lib.TrainConfig] = None,
          log_fn: Optional[Callable[[Dict], None]] = None,
          allow_schedule_change: bool = False) -> Dict:
  """Trains ReadTwice's QA heads on a pipeline output dir (one device); resumes from
  ``model_dir``'s latest checkpoint.  :mod:`model.finetune` adds strategies, dev evaluation and
  initialisation; this is the same :class:`model.trainer.Trainer` without them.

  Args:
    records_dir: pipeline output dir (``manifest.json`` + record shards).
    model_dir: where ``config.json``, checkpoints, ``tb/`` and ``metrics.json`` go.
    model_config: defaults to the ``tiny`` preset fitted to the manifest.
    train_config: defaults to ``TrainConfig()``.
    log_fn: called with each logged metrics dict (default: one JSON line per log).
    allow_schedule_change: resume a model dir trained with another schedule (a warning)
      instead of raising :class:`model.training_data.TrainingError`.

  Returns:
    summary dict (:meth:`model.trainer.Trainer.run`): ``first_loss``, ``last_loss``,
    ``losses`` (per logged loop), ``steps``, ``checkpoint``, ``model_dir``, ``seconds``, ...
  """
  tc = train_config or configs_lib.TrainConfig()
  mc = model_config or config_from_manifest(records_dir, "tiny")
  log_fn = log_fn or (lambda d: print(json.dumps(d), flush=True))
  return trainer_lib.Trainer(objectives.FinetuneTask(mc), [records_dir], model_dir, mc, tc,
                             log_fn=log_fn, allow_schedule_change=allow_schedule_change).run()


def load_model(model_dir: str, checkpoint: Optional[str] = None):
  """Rebuilds the model from ``config.json`` and restores the latest (or given) checkpoint.

  Returns ``(model, model_config)``.
  """
  mc, _ = configs_lib.load_configs(model_dir)
  model = readtwice.build_model(mc)
  path = checkpoint or tf.train.latest_checkpoint(model_dir)
  if path is None:
    raise FileNotFoundError(f"No checkpoint in {model_dir}.")
  tf.train.Checkpoint(model=model).restore(path).expect_partial()
  return model, mc


EXAMPLE = ("python -m model.train --records_dir /tmp/hotpot_records --model_dir /tmp/model "
           "--preset tiny --steps 120 --learning_rate 2e-3 --warmup_fraction 0.08")


def build_parser() -> cli.Parser:
  """The CLI; every trainer flag's default is the matching ``TrainConfig`` field's default."""
  d = configs_lib.TrainConfig()
  p = cli.Parser("model.train", __doc__.split("\n\n")[0], EXAMPLE)
  p.add_argument("--records_dir", required=True, io=cli.READS, help="pipeline output dir")
  p.add_argument("--model_dir", required=True, io=cli.WRITES,
                 help="config.json, checkpoints and tb/ go here; resumes from its checkpoint")
  p.add_argument("--preset", default="tiny", choices=sorted(configs_lib.PRESETS),
                 help="model preset, fitted to the records' vocab (and, tiny, seq length)")
  p.add_argument("--model_config", default=None, io=cli.READS,
                 help="JSON file with a ModelConfig (overrides --preset).")
  p.add_argument("--steps", type=int, default=d.steps, help="training steps (packs)")
  p.add_argument("--learning_rate", type=float, default=d.learning_rate,
                 help="peak learning rate")
  driver.add_warmup_flag(p, d.warmup_steps / d.steps)
  p.add_argument("--end_learning_rate_fraction", type=float,
                 default=d.end_learning_rate_fraction,
                 help="learning rate reached at --steps, as a fraction of the peak")
  p.add_argument("--optimizer", default=d.optimizer, choices=["adamw", "lamb"], help="optimizer")
  p.add_argument("--weight_decay", type=float, default=d.weight_decay,
                 help="decoupled weight decay (kernels and embeddings only)")
  p.add_argument("--clipnorm", type=driver.clipnorm_flag, default=d.clipnorm,
                 help="per-variable gradient-norm clip; 'none' disables clipping")
  p.add_argument("--seed", type=int, default=d.seed,
                 help="seed for initialisation, dropout and shuffling")
  cli.bool_flag(p, "shuffle", d.shuffle, "shuffle packs (--noshuffle: file order)")
  cli.bool_flag(p, "jit_compile", d.jit_compile, "XLA-compile the train step")
  p.add_argument("--checkpoint_every", type=int, default=d.checkpoint_every,
                 help="checkpoint interval (steps)")
  p.add_argument("--max_checkpoints", type=int, default=d.max_checkpoints,
                 help="checkpoints kept")
  p.add_argument("--steps_per_loop", type=int, default=d.steps_per_loop,
                 help="train steps per tf.function call (host round trip)")
  p.add_argument("--log_every", type=int, default=d.log_every,
                 help="TensorBoard summary interval (steps)")
  cli.bool_flag(p, "allow_schedule_change", False,
                "resume even though the schedule (--steps, --warmup_fraction, --learning_rate, "
                "--end_learning_rate_fraction, --optimizer) differs from the run's: a warning, "
                "and the new schedule applies from the resumed step (without it: an error)")
  return p


# Every TrainConfig field but warmup_steps (``--warmup_fraction`` x ``--steps``) is set from
# the CLI flag of the same name (``build_parser``).
CLI_TRAIN_FIELDS = tuple(f.name for f in dataclasses.fields(configs_lib.TrainConfig)
                         if f.name != "warmup_steps")


@faults.command("model.train", trains=True)
def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  if not 0.0 <= args.warmup_fraction <= 1.0:
    p.error(f"--warmup_fraction must be in [0, 1], got {args.warmup_fraction}")
  try:  # Validate before touching the records or TF state: bad numbers are usage errors.
    tc = configs_lib.TrainConfig(
        warmup_steps=int(round(args.warmup_fraction * args.steps)),
        **{f: getattr(args, f) for f in CLI_TRAIN_FIELDS})
    if args.model_config:
      with open(args.model_config) as f:
        mc = configs_lib.ModelConfig.from_json(f.read(), f"--model_config {args.model_config}")
    else:
      mc = None
  except (OSError, ValueError) as e:
    p.error(str(e))
  try:  # Unusable records are a user error: one line, exit 1.
    input_lib.read_manifest(args.records_dir)
    if mc is None:
      mc = config_from_manifest(args.records_dir, args.preset)
  except (FileNotFoundError, ValueError) as e:  # ManifestError, SchemaVersionError
    return driver.fail(p.prog, f"--records_dir: {e}")
  try:
    summary = train(args.records_dir, args.model_dir, mc, tc,
                    allow_schedule_change=args.allow_schedule_change)
  except (training_data.TrainingError, tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
    return driver.fail(p.prog, driver.error_message(e, [args.records_dir]))
  except (tf.errors.OpError, UnicodeDecodeError) as e:  # garbage records, a shard gone
    return driver.records_failure(p.prog, e, [args.records_dir])
  summary.pop("losses")
  print(json.dumps(summary), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
