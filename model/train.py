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
is an error unless ``--allow_schedule_change``.  Python API: :func:`model.training.train_lib.train`.

This module is the command (its flags, :mod:`model.flags`, then :mod:`model.training.train_lib`):
its
``--help`` and usage errors answer before TensorFlow loads.
"""

from __future__ import annotations

import sys

from model import configs as configs_lib
from model import faults
from model import flags
from schemas import cli

EXAMPLE = ("python -m model.train --records_dir /tmp/hotpot_records --model_dir /tmp/model "
           "--preset tiny --steps 120 --learning_rate 2e-3 --warmup_fraction 0.08")


def build_parser() -> cli.Parser:
  """The CLI; every trainer flag's default is the matching ``TrainConfig`` field's default."""
  d = configs_lib.TrainConfig()
  p = cli.Parser("model.train", __doc__.split("\n\n")[0], EXAMPLE)
  p.add_argument("--records_dir", required=True, io=cli.READS, help="pipeline output dir")
  p.add_argument("--model_dir", required=True, io=cli.WRITES,
                 help="config.json, checkpoints and tb/ go here; resumes from its checkpoint")
  p.add_argument("--steps", type=int, default=d.steps, help="training steps (packs)")
  flags.add_model_flags(p, "tiny", initialisation=False)
  flags.add_optimisation_flags(p, optimizer=d.optimizer, learning_rate=d.learning_rate,
                               warmup_fraction=d.warmup_steps / d.steps)
  flags.add_loop_flags(p, strategies=False)
  flags.add_checkpoint_flags(p, log_every=d.log_every, log_batches=False)
  return p


@faults.command("model.train", trains=True)
def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  flags.check_flags(p, args)  # bad numbers are usage errors, before TF loads
  tc = flags.train_config(args, args.steps)
  mc = None
  if args.model_config:
    try:
      with open(args.model_config) as f:
        mc = configs_lib.ModelConfig.from_json(f.read(), f"--model_config {args.model_config}")
    except (OSError, ValueError) as e:
      p.error(str(e))
  problem = flags.unusable_records(args.records_dir)
  if problem:
    return flags.fail(p.prog, f"--records_dir: {problem}")
  with faults.starting():
    from model.training import train_lib  # pylint: disable=g-import-not-at-top  (TensorFlow)
  return train_lib.run(p.prog, args, tc, mc)


if __name__ == "__main__":
  sys.exit(main())
