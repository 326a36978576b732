"""The power limit's sentence tells the configuration it rules out from the plan: the
100k-GPU example read "tp=4 pp=6 dp=525 ... would be 1.9% faster but exceeds it", the
plan's own layout in the plan's own words, where the rival differed only in its clock."""

from __future__ import annotations

import attrs

from gclc.model.config import TrainConfig
from gclc.solver.train.plan import _config, _rival

CHOSEN = TrainConfig(batch=512, seq=8192, tp=4, pp=6, dp=16, power_cap=1120.0)


def test_the_same_layout_at_another_clock_is_said_so():
    assert _rival(attrs.evolve(CHOSEN, power_cap=None), CHOSEN) == "the same layout at full clock"
    assert _rival(attrs.evolve(CHOSEN, power_cap=1150.0), CHOSEN) == "the same layout under a power cap of 1.15 kW"


def test_another_layout_keeps_its_words_and_its_clock():
    other = attrs.evolve(CHOSEN, tp=8, pp=3, power_cap=None)
    assert _rival(other, CHOSEN) == _config(other) + " at full clock"
    assert _rival(attrs.evolve(other, power_cap=1120.0), CHOSEN) == _config(other)
    assert _rival(other, CHOSEN) != _config(CHOSEN)
