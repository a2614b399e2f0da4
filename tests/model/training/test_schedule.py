"""The learning-rate schedule the trainer's optimizer uses, value by value (computed by hand).

The optimizer's ``learning_rate`` is the schedule at ``optimizer.iterations`` (the 0-based update
index ``s``).  With peak 1, ``total_steps`` T = 10 and ``warmup_steps`` w = 2:
warm-up ``(s + 1) / w`` for ``s < w``, then ``1 - (1 - e) * (s - w) / (T - w)``, clipped at T.
"""

import pytest

from model import configs
from model.training import optimization

PEAK, T, W = 1.0, 10, 2
# s -> rate for end fraction e = 0 (the TrainConfig default).
DECAY_TO_ZERO = {0: 0.5, 1: 1.0, 2: 1.0, 3: 0.875, 6: 0.5, 9: 0.125, 10: 0.0, 15: 0.0}
# s -> rate for e = 0.25: 1 - 0.75 * (s - 2) / 8.
DECAY_TO_QUARTER = {0: 0.5, 1: 1.0, 2: 1.0, 6: 0.625, 9: 1 - 0.75 * 7 / 8, 10: 0.25, 15: 0.25}


def _rates(tc, steps):
  opt = optimization.make_optimizer(tc, [])
  rates = {}
  for s in steps:
    opt.iterations.assign(s)
    rates[s] = float(opt.learning_rate)
  return rates


def test_default_end_fraction_is_zero():
  assert configs.TrainConfig().end_learning_rate_fraction == 0.0


@pytest.mark.parametrize("end_fraction,expected", [(None, DECAY_TO_ZERO),
                                                   (0.25, DECAY_TO_QUARTER)])
def test_optimizer_schedule_follows_train_config(end_fraction, expected):
  kw = {} if end_fraction is None else {"end_learning_rate_fraction": end_fraction}
  tc = configs.TrainConfig(learning_rate=PEAK, steps=T, warmup_steps=W, **kw)
  assert _rates(tc, expected) == pytest.approx(expected, abs=1e-6)


def test_schedule_without_warmup_starts_at_peak_and_scales_with_it():
  tc = configs.TrainConfig(learning_rate=3e-4, steps=4, warmup_steps=0,
                           end_learning_rate_fraction=0.5)
  # 1 - 0.5 * s / 4, times the peak.
  assert _rates(tc, [0, 2, 4, 8]) == pytest.approx(
      {0: 3e-4, 2: 2.25e-4, 4: 1.5e-4, 8: 1.5e-4}, rel=1e-5)


def test_make_schedule_decays_to_zero_by_default_and_round_trips():
  schedule = optimization.make_schedule(configs.TrainConfig(learning_rate=PEAK, steps=T, warmup_steps=W))
  for s, rate in DECAY_TO_ZERO.items():
    assert float(schedule(s)) == pytest.approx(rate, abs=1e-6), s
  config = schedule.get_config()
  assert config == dict(peak=PEAK, total_steps=T, warmup_steps=W, end_fraction=0.0)
  clone = optimization.WarmupLinearDecay.from_config(config)
  assert [float(clone(s)) for s in DECAY_TO_ZERO] == pytest.approx(list(DECAY_TO_ZERO.values()),
                                                                   abs=1e-6)
