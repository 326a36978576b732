"""Empirical-Bayes prior strengths (solver/calibrate/shrinkage.py) and the shrinkage law of
the fit they feed: a constant's fit lies between its prior and its runs' own fit, and more of
the same runs never move it away from theirs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from gclc.dsl.source import no_span
from gclc.solver.calibrate.fit import fit
from gclc.solver.calibrate.observe import Observation
from gclc.solver.calibrate.params import Param
from gclc.solver.calibrate.shrinkage import Runs, between_spread, within_noise
from gclc.testing import load_profile

load_profile()

KEY = ("chip", "X", "bf16")
PRIOR = 0.5


def _run(share: float, offset: float) -> Observation:
    """A training-like run whose log(predicted / measured) is offset + share x log(value / prior)."""
    return Observation("train", f"{share}:{offset}", "run", 1.0, "tokens/s", (KEY,), predict=None, partition=None,
                       span=no_span(), end_to_end=True,
                       predict_values=lambda v: math.exp(offset + share * math.log(v[KEY] / PRIOR)))


def _fitted(runs: list[Observation], spread: float) -> float:
    return math.log(fit({KEY: Param(KEY, PRIOR, spread, 0.02, 1.0)}, runs)[KEY] / PRIOR)


runs_st = st.lists(st.tuples(st.floats(0.05, 1.0), st.floats(-0.3, 0.3)), min_size=1, max_size=4)


@given(runs_st, st.floats(0.005, 0.5), st.integers(2, 4))
def test_the_fit_lies_between_the_prior_and_the_runs_and_more_runs_move_it_toward_theirs(runs, spread, copies):
    once = [_run(s, o) for s, o in runs]
    alone = _fitted(once, 1e6)                  # the runs' own fit (no prior to speak of)
    shrunk = _fitted(once, spread)
    tol = 1e-5
    assert min(0.0, alone) - tol <= shrunk <= max(0.0, alone) + tol
    more = _fitted([_run(s, o) for s, o in runs for _ in range(copies)], spread)
    assert abs(more - alone) <= abs(shrunk - alone) + tol


def test_between_spread_reads_the_systems_spread_beyond_their_noise():
    # each system's runs-only move is d exactly, known to noise / sqrt(information): the
    # moment estimator returns the moves' excess variance
    moves = (-0.1, -0.05, 0.0, 0.05, 0.1)
    systems = [Runs((-d, -d), (1.0, 1.0)) for d in moves]
    noise = 0.05
    mean = 0.0
    q = sum(2 / noise ** 2 * (d - mean) ** 2 for d in moves)
    w = [2 / noise ** 2] * 5
    expected = math.sqrt((q - 4) / (sum(w) - sum(x * x for x in w) / sum(w)))
    assert between_spread(systems, noise) == pytest.approx(expected)
    assert within_noise(systems) == pytest.approx(0.0, abs=1e-12)    # each system's runs agree exactly


def test_systems_that_agree_within_their_noise_vary_not_at_all():
    systems = [Runs((0.01, -0.01), (1.0, 1.0)), Runs((-0.01, 0.01), (0.5, 0.5)), Runs((0.0,), (0.8,))]
    assert between_spread(systems, 0.05) == 0.0
    assert within_noise(systems) == pytest.approx(math.sqrt((0.0002 + 0.0002) / 2))


def test_one_informative_system_says_nothing_of_the_spread():
    assert between_spread([Runs((0.1,), (1.0,)), Runs((0.2,), (0.0,))], 0.05) is None
    assert within_noise([Runs((0.1,), (1.0,))]) is None
