"""`python -m model.train` flags: defaults are TrainConfig's, every field has a flag, bad values
are usage errors (exit 2, one `error:` line) and the demo's flags still parse."""

import dataclasses

import pytest

from demo import run as demo_run
from model import configs, flags, train
from model.training import train_lib

REQUIRED = ["--records_dir", "records", "--model_dir", "model"]
FIELDS = [f.name for f in dataclasses.fields(configs.TrainConfig)]

# A non-default value for every TrainConfig field, as CLI flags.
NON_DEFAULT_FLAGS = {
    "learning_rate": (["--learning_rate", "0.25"], 0.25),
    "steps": (["--steps", "7"], 7),
    "optimizer": (["--optimizer", "lamb"], "lamb"),
    "weight_decay": (["--weight_decay", "0.5"], 0.5),
    "warmup_steps": (["--warmup_fraction", "0.43"], 3),  # x --steps 7 below
    "end_learning_rate_fraction": (["--end_learning_rate_fraction", "0.1"], 0.1),
    "clipnorm": (["--clipnorm", "none"], None),
    "seed": (["--seed", "11"], 11),
    "shuffle": (["--noshuffle"], False),
    "jit_compile": (["--jit_compile"], True),
    "checkpoint_every": (["--checkpoint_every", "5"], 5),
    "max_checkpoints": (["--max_checkpoints", "9"], 9),
    "log_every": (["--log_every", "4"], 4),
    "steps_per_loop": (["--steps_per_loop", "6"], 6),
}


@pytest.fixture
def captured(monkeypatch):
  """Runs `train.main` without records or TF work; returns the TrainConfig it would train with."""
  calls = []

  def fake_train(records_dir, model_dir, mc, tc, allow_schedule_change=False):
    assert allow_schedule_change is False  # (no flag given)
    calls.append(tc)
    return {"losses": [], "steps": tc.steps}

  monkeypatch.setattr(train_lib, "train", fake_train)
  monkeypatch.setattr(train_lib, "config_from_manifest", lambda d, p: configs.tiny())
  monkeypatch.setattr(train_lib.input_lib, "read_manifest", lambda d: {})
  monkeypatch.setattr(flags, "unusable_records", lambda *dirs: None)  # (its check, pre-TF)
  return calls


def test_records_dir_without_a_manifest_is_one_line(tmp_path, capsys):
  code = train.main(["--records_dir", str(tmp_path / "nope"), "--model_dir", str(tmp_path / "m")])
  err = capsys.readouterr().err
  assert code == 1
  assert err.splitlines() == [
      f"python -m model.train: error: --records_dir: {tmp_path / 'nope'} does not exist or is "
      "not a directory (expected a pipeline's --output_dir)"]
  assert not (tmp_path / "m").exists()


def test_parser_defaults_are_train_config_defaults():
  args = train.build_parser().parse_args(REQUIRED)
  defaults = configs.TrainConfig()
  for name in FIELDS:
    if name == "warmup_steps":  # --warmup_fraction, as every trainer command
      assert args.warmup_fraction * args.steps == defaults.warmup_steps
      continue
    assert getattr(args, name) == getattr(defaults, name), name
  assert (args.steps, args.learning_rate) == (1000, 5e-5)


def test_every_train_config_field_has_a_flag(captured):
  assert sorted(NON_DEFAULT_FLAGS) == sorted(FIELDS)  # a new field needs a row here
  dests = {a.dest for a in train.build_parser()._actions if a.option_strings}
  assert set(FIELDS) - {"warmup_steps"} | {"warmup_fraction"} <= dests
  argv = REQUIRED + [flag for flags, _ in NON_DEFAULT_FLAGS.values() for flag in flags]
  assert train.main(argv) == 0
  (tc,) = captured
  for name, (_, value) in NON_DEFAULT_FLAGS.items():
    assert getattr(tc, name) == value, name
    assert value != getattr(configs.TrainConfig(), name), name


def test_defaults_reach_the_trainer(captured):
  assert train.main(REQUIRED) == 0
  assert captured == [configs.TrainConfig()]


@pytest.mark.parametrize("flags,message", [
    (["--steps", "0"], "steps must be >= 1"),
    (["--learning_rate", "-1"], "learning_rate must be > 0"),
    (["--learning_rate", "0"], "learning_rate must be > 0"),
    (["--steps", "5", "--warmup_fraction", "1.2"], "--warmup_fraction must be in [0, 1]"),
    (["--warmup_steps", "6"], "--warmup_steps was renamed --warmup_fraction"),
    (["--no_shuffle"], "--no_shuffle was renamed --noshuffle"),
    (["--learnng_rate", "1"], "unknown flag --learnng_rate (did you mean --learning_rate?)"),
    (["--end_learning_rate_fraction", "1.5"], "end_learning_rate_fraction must be in [0, 1]"),
    (["--clipnorm", "0"], "clipnorm must be None"),
    (["--clipnorm", "big"], "expected a number or 'none'"),
])
def test_bad_values_are_usage_errors(captured, capsys, flags, message):
  with pytest.raises(SystemExit) as exit_info:
    train.main(REQUIRED + flags)
  assert exit_info.value.code == 2
  assert not captured  # nothing was trained
  err = capsys.readouterr().err
  errors = [line for line in err.splitlines() if "error:" in line]
  assert len(errors) == 1 and message in errors[0], err
  assert "Traceback" not in err


def test_demo_flags_parse(captured):
  assert train.main(demo_run.train_flags("records", "model", 120)) == 0
  tc = captured[-1]
  assert (tc.steps, tc.learning_rate, tc.warmup_steps) == (120, 2e-3, 10)
  # A short demo run (python -m demo.run --steps 5) warms up over at most its steps.
  assert train.main(demo_run.train_flags("records", "model", 5)) == 0
  assert (captured[-1].steps, captured[-1].warmup_steps) == (5, 5)
