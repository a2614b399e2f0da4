"""The library under ``python -m model.train`` (:mod:`model.train`): :func:`train` (one device, no
dev evaluation: the same :class:`model.training.trainer.Trainer` as ``model.finetune`` without its
strategies, evaluation and initialisation), :func:`load_model` and :func:`run` (the command's
work once its flags are checked).
"""

from __future__ import annotations

import argparse
import json
from typing import Callable, Dict, Optional

import tensorflow as tf

from model import configs as configs_lib
from model.training import driver
from model import flags
from model.data import pack_reader as input_lib
from model.network import readtwice
from model.training import objectives
from model.training import trainer as trainer_lib
from model.data import training_data


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
  initialisation; this is the same :class:`model.training.trainer.Trainer` without them.

  Args:
    records_dir: pipeline output dir (``manifest.json`` + record shards).
    model_dir: where ``config.json``, checkpoints, ``tb/`` and ``metrics.json`` go.
    model_config: defaults to the ``tiny`` preset fitted to the manifest.
    train_config: defaults to ``TrainConfig()``.
    log_fn: called with each logged metrics dict (default: one JSON line per log).
    allow_schedule_change: resume a model dir trained with another schedule (a warning)
      instead of raising :class:`model.data.training_data.TrainingError`.

  Returns:
    summary dict (:meth:`model.training.trainer.Trainer.run`): ``first_loss``, ``last_loss``,
    ``losses`` (per logged loop), ``steps``, ``checkpoint``, ``model_dir``, ``seconds``, ...
  """
  tc = train_config or configs_lib.TrainConfig()
  mc = model_config or config_from_manifest(records_dir, "tiny")
  log_fn = log_fn or (lambda d: print(json.dumps(d), flush=True))
  return trainer_lib.Trainer(objectives.FinetuneObjective(mc), [records_dir], model_dir, mc, tc,
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


def run(prog: str, args: argparse.Namespace, tc: configs_lib.TrainConfig,
        mc: Optional[configs_lib.ModelConfig]) -> int:
  """``model.train``'s work: trains, prints the summary line; exit status."""
  try:  # Unusable records are a user error: one line, exit 1.
    input_lib.read_manifest(args.records_dir)
    if mc is None:
      mc = config_from_manifest(args.records_dir, args.preset)
  except (FileNotFoundError, ValueError) as e:  # ManifestError, SchemaVersionError
    return flags.fail(prog, f"--records_dir: {e}")
  try:
    summary = train(args.records_dir, args.model_dir, mc, tc,
                    allow_schedule_change=args.allow_schedule_change)
  except (training_data.TrainingError, tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
    return flags.fail(prog, driver.error_message(e, [args.records_dir]))
  except (tf.errors.OpError, UnicodeDecodeError) as e:  # garbage records, a shard gone
    return driver.records_failure(prog, e, [args.records_dir])
  return flags.finish(summary)
