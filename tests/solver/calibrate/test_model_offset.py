"""A model's offset in the calibration fit (params.model_param): a nuisance term on each model's
step time, zero-mean with a prior width read from other systems' runs
(solver/calibrate/model_spread.py), so that what one model's runs miss by for their own reasons
stays with that model instead of moving the cluster's constants for every other model."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings, strategies as st

from gclc.dsl.source import no_span
from gclc.solver.calibrate.calibrate import (calibrate_observations, model_widening, offset_variance)
from gclc.solver.calibrate.fit import fit, residual
from gclc.solver.calibrate.model_spread import between_model_spread
from gclc.solver.calibrate.observe import NOISE, Observation
from gclc.solver.calibrate.params import Param, model_param
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

KEY = ("chip", "X", "bf16")
TRUTH = 0.5
SPREAD = 0.085   # a stated GEMM efficiency's prior width (params.SPREAD["stated"])


def _run(model: str, share: float, factor: float, name: str) -> Observation:
    """A training-like run of `model` on a cluster whose constant is TRUTH: its prediction scales
    as value^share, and the model's own physics makes it `factor` times slower than predicted."""
    return Observation("train", name, name, 1.0, "tokens/s", (KEY, ("model", model, "offset")), predict=None,
                       partition=None, span=no_span(), end_to_end=True, model=model,
                       priors=(Param(KEY, TRUTH, SPREAD, 0.02, 1.0),), covers=("bf16", 8, False),
                       predict_values=lambda v: math.exp(share * math.log(v[KEY] / TRUTH) + math.log(factor)))


def _params(model_spread: float, models) -> dict:
    params = {KEY: Param(KEY, TRUTH, SPREAD, 0.02, 1.0)}
    if model_spread > 0:
        params.update({("model", m, "offset"): model_param(m, model_spread) for m in models})
    return params


@settings(max_examples=scaled_examples(40), deadline=None)
@given(st.lists(st.tuples(st.floats(0.3, 0.9), st.floats(0.3, 0.9)), min_size=1, max_size=3),
       st.floats(-0.06, 0.06), st.floats(0.02, 0.15))
def test_a_planted_model_factor_moves_the_cluster_constant_less_with_the_offset(shares, log_factor, spread):
    """Runs of model A are exact at the truth; as many runs of model B carry a planted factor.
    Without offsets the constant follows B's miss part of the way; with them it moves less (never
    more), and B's offset takes the factor's direction. The law's domain, measured: misses inside
    Huber's quadratic zone (|log| <= 1.345 x the 5 % noise) and as many runs of each model. Beyond
    it, it fails and the fit says so: a miss Huber's loss caps pulls harder once an offset takes
    part of it back into the quadratic zone (one run each, a factor e^0.25: the constant moves
    7.6 % with offsets, 5.6 % without), and many runs of A no longer pin the constant once A's
    own offset can absorb it (10 runs of A, 1 of B: 0.34 of B's factor with offsets, 0.16 without,
    in the normal approximation)."""
    runs = [_run("A", a, 1.0, f"a{i}") for i, (a, _) in enumerate(shares)]
    runs += [_run("B", b, math.exp(log_factor), f"b{i}") for i, (_, b) in enumerate(shares)]
    without = fit(_params(0.0, "AB"), runs)
    with_offsets = fit(_params(spread, "AB"), runs)
    moved_without = abs(math.log(without[KEY] / TRUTH))
    moved_with = abs(math.log(with_offsets[KEY] / TRUTH))
    assert moved_with <= moved_without + 1e-4
    if abs(log_factor) > 0.01:
        assert moved_with < moved_without
        # B predicted `factor` times too fast: its offset lengthens B's step, toward that factor
        assert math.log(with_offsets[("model", "B", "offset")]) * log_factor > 0


def test_a_held_back_run_carries_its_models_offset_and_another_model_none():
    runs = [_run("A", 0.6, 1.0, "a"), _run("B", 0.6, 1.2, "b1"), _run("B", 0.5, 1.2, "b2")]
    result = calibrate_observations(runs, model_spread=0.08, carry_offsets=True)
    offset = result.values[("model", "B", "offset")]
    assert offset > 1.0
    seen, unseen = _run("B", 0.6, 1.2, "b3"), _run("C", 0.6, 1.2, "c")
    bare = {k: v for k, v in result.values.items() if k[0] != "model"}
    assert residual(seen, result.values) == residual(seen, bare) - math.log(offset)
    assert residual(unseen, result.values) == residual(unseen, bare)
    # the offset's doubt widens a plan's band: less for the model two runs measured than for one
    # none did, whose band takes the prior's width
    assert 1.0 < result.model_widening("B") < result.model_widening("A") < result.model_widening("C")
    assert result.model_widening("C") == model_widening(offset_variance(0, 0.08))
    assert [p.key for p, _, _ in result.offsets()] == [("model", "A", "offset"), ("model", "B", "offset")]
    assert all(p.key[0] != "model" for p, _, _ in result.moved())


def test_a_run_held_out_alone_keeps_no_offset_read_from_itself():
    """The band's held-out residual of a model's only run is predicted with no offset for it
    (fit resets an offset none of the other runs inform), not the full fit's."""
    runs = [_run("A", 0.6, 1.0, "a1"), _run("A", 0.6, 1.0, "a2"), _run("B", 0.6, 1.3, "b")]
    result = calibrate_observations(runs, model_spread=0.08, carry_offsets=True)
    row = next(r for r in result.rows if r.obs.model == "B")
    assert result.values[("model", "B", "offset")] > 1.05
    # without B's run the constant is A's truth and B's miss is all there: log 1.3
    assert abs(row.held_out - math.log(1.3)) < 0.02


def test_runs_of_one_model_fit_no_offset():
    """One model's runs cannot tell its miss from the cluster's: no offset, the constant takes it."""
    runs = [_run("A", 0.6, 1.2, "a1"), _run("A", 0.5, 1.2, "a2")]
    result = calibrate_observations(runs, model_spread=0.08, carry_offsets=True)
    assert not result.offsets() and result.model_spread == 0.0
    assert result.values[KEY] < TRUTH


cells_st = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.floats(-0.3, 0.3)), min_size=4, max_size=30)


@given(cells_st, st.lists(st.floats(-1, 1), min_size=4, max_size=4), st.floats(0.2, 5.0))
def test_the_spread_ignores_system_offsets_and_scales_with_the_residuals(rows, shifts, scale):
    """Only differences between models on one system count: shifting every run of a system by
    one amount leaves the spread as it was; scaling every residual scales it (where the runs'
    own scatter is read from them, not the stated noise)."""
    named = [(f"s{s}", f"m{m}", r) for s, m, r in rows]
    base = between_model_spread(named, 0.05)
    shifted = between_model_spread([(s, m, r + shifts[int(s[1])]) for s, m, r in named], 0.05)
    assert abs(shifted - base) < 1e-6
    cells = {(s, m) for s, m, _ in named}
    if len(cells) < len(named):   # a cell of two runs or more: the scatter is the runs'
        assert abs(between_model_spread([(s, m, r * scale) for s, m, r in named], 0.05) - base * scale) < 1e-6


def test_the_spread_recovers_a_planted_one():
    rng = random.Random(3)
    for tau in (0.0, 0.05, 0.12):
        rows = []
        for s in range(40):
            shift = rng.gauss(0, 0.1)
            for m in range(4):
                u = rng.gauss(0, tau)
                rows += [(f"s{s}", f"m{m}", shift + u + rng.gauss(0, NOISE["train"])) for _ in range(3)]
        assert abs(between_model_spread(rows, NOISE["train"]) - tau) < 0.02
