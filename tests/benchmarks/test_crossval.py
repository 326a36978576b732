"""The cross-validation behind benchmarks/accuracy.py: a held-out group's predictions come
from a fit that never saw its measurements, and the conformal bands cover what they say."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.testing import load_profile

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bands  # noqa: E402
import calibrate  # noqa: E402
import crossval  # noqa: E402

load_profile()

# Three small source groups on A100 80 GB (20 runs): enough for two folds that each fit
# the chip's GEMM and attention efficiencies, quick to check and fit.
GROUPS = {"korthikanti_dp1_": 8, "kort_t5_": 8, "sc21_t1_": 10}


@pytest.fixture(scope="module", autouse=True)
def shipped_model():
    """Fits set the model's global constants; later tests must see the shipped ones."""
    yield
    calibrate.restore_shipped()


@pytest.fixture(scope="module")
def cases():
    chosen = calibrate.load(BENCHMARKS / "runs", BENCHMARKS / "data" / "public_runs_measured.csv",
                            keep=lambda run_id: any(run_id.startswith(p) for p in GROUPS))
    assert len({c.group for c in chosen}) >= 2
    return chosen


def scaled(cases, group, factor):
    return [replace(c, measured=c.measured * factor) if c.group == group else c for c in cases]


def predictions(cases):
    return {p.case.run_id: p.predicted for p in crossval.leave_one_group_out(cases, rounds=1)}


def test_a_held_out_group_is_predicted_without_its_measurements(cases):
    group = cases[0].group
    base = predictions(cases)
    moved = predictions(scaled(cases, group, 1.7))
    held = [c.run_id for c in cases if c.group == group]
    others = [c.run_id for c in cases if c.group != group]
    assert all(moved[r] == base[r] for r in held)
    # the same change reaches the other groups' predictions (their fits include it),
    # so the check above would see a leak
    assert any(moved[r] != pytest.approx(base[r], rel=1e-3) for r in others)


def test_a_fold_is_the_fit_on_the_other_groups(cases):
    group = cases[-1].group
    train = [c for c in cases if c.group != group]
    params = calibrate.fit(train, rounds=1)
    calibrate.apply_globals(params)
    direct = {c.run_id: calibrate.predict(c, params) for c in cases if c.group == group}
    folds = crossval.leave_one_group_out(cases, rounds=1)
    cv = {p.case.run_id: p.predicted for p in folds}
    assert direct and all(cv[r] == pytest.approx(v, rel=1e-12) for r, v in direct.items())
    # each prediction carries the fit it came from, and the report names its constants
    assert all(dict(p.fitted) == params for p in folds if p.case.group == group)
    line = next(l for l in crossval.refits(folds) if l.strip().startswith(group[:36]))
    assert all(f"{key} {value:g}" in line for (_, key), value in params.items())


def test_the_fit_ignores_the_efficiencies_written_in_std(cases):
    """The shipped efficiencies came from a fit on every run; a fold must not see them."""
    params = {("", "moe"): 0.0}
    case = cases[0]
    chip = calibrate.calibrated_partition(case, params).node.accelerator
    assert chip.efficiency_of("bf16") is None and chip.efficiency_of("attention") is None


def test_a_sibling_part_borrows_the_fitted_efficiency():
    params = {("A100_SXM_80GB", "bf16"): 0.7}
    assert calibrate.resolved("A100_SXM_40GB", "bf16", params) == (0.7, "sibling")
    assert calibrate.resolved("A100_SXM_40GB", "fp8", params)[1] in ("vendor", "default")



def test_a_fixed_host_time_per_step_is_read_from_runs_of_different_step_lengths(cases, monkeypatch):
    """calibrate.STEP_OVERHEAD (an experiment, off as shipped: docs/calibration.md): runs measured
    with a planted fixed time per step (0.3 s, a quarter of the shortest of these steps, a
    hundredth of the longest) give it back to the grid's 10 %, and the chip's GEMM efficiency as
    before; runs with none give a time below the grid's first steps (a rate alone does not ask for one)."""
    key = ("", "step_overhead")
    assert key not in calibrate.keys_of(cases)   # off: the published fit is as it was
    monkeypatch.setattr(calibrate, "STEP_OVERHEAD", True)
    assert key in calibrate.keys_of(cases)
    base = calibrate.fit(cases, rounds=2)
    for planted in (0.0, 0.3):
        truth = {**base, key: planted}
        calibrate.apply_globals(truth)
        measured = [replace(c, measured=calibrate.predict(c, truth)) for c in cases]
        found = calibrate.fit(measured)   # the fit's three rounds, as the benchmarks run it
        if planted:
            assert found[key] == pytest.approx(planted, rel=0.1)
        else:
            assert found[key] <= 0.002
        assert found[("A100_SXM_80GB", "bf16")] == pytest.approx(base[("A100_SXM_80GB", "bf16")], abs=0.011)


def test_a_stated_step_overhead_stands_over_the_fitted_one(cases):
    """A design that states its node's per-step host time keeps it, and its runs do not inform
    the global; one that states none takes the fitted value."""
    import attrs

    case = cases[0]
    params = {("", "step_overhead"): 0.05}
    assert calibrate.calibrated_partition(case, params).node.step_overhead == 0.05
    stated = replace(case, job=attrs.evolve(case.job, partition=attrs.evolve(
        case.job.partition, node=attrs.evolve(case.job.partition.node, step_overhead=0.2))))
    assert calibrate.calibrated_partition(stated, params).node.step_overhead == 0.2
    assert calibrate.relevant([case, stated], ("", "step_overhead")) == [case]


# ---------------------------------------------------------------- bands


def test_conformal_order_statistics_by_hand():
    scores = [float(i) for i in range(1, 20)]   # n = 19: the 2nd and the 18th smallest
    assert bands.conformal(scores, 0.8) == (2.0, 18.0)
    assert bands.conformal([1.0, 2.0], 0.8) == (-math.inf, math.inf)   # too few for 80 %


def test_a_reason_that_triples_the_residuals_triples_the_scale():
    plain = [0.01, -0.02, 0.04, -0.03, 0.02, -0.01, 0.03, -0.04]
    residuals = plain + [3 * r for r in plain]
    flags = [()] * len(plain) + [("moe",)] * len(plain)
    band = bands.fit_band(residuals, flags)
    assert band.factors["moe"] == pytest.approx(3.0, rel=1e-6)
    assert band.scale(("moe",)) == pytest.approx(3 * band.scale(()), rel=1e-6)


residual_lists = st.lists(st.tuples(st.floats(-1.0, 1.0), st.sets(st.sampled_from(["chip", "moe", "cp"]))),
                          min_size=9, max_size=60)


@given(residual_lists)
def test_the_band_covers_at_least_its_confidence_of_its_own_residuals(rows):
    residuals, flags = [r for r, _ in rows], [tuple(sorted(f)) for _, f in rows]
    band = bands.fit_band(residuals, flags)
    inside = sum(band.covers(r, f) for r, f in zip(residuals, flags))
    assert inside >= 0.8 * len(rows)


def test_residuals_on_the_bands_edge_are_inside_it():
    """Regression (hypothesis found it): scaled back from score space, 0.75 rounded past
    the band's upper edge of 0.75 and three of ten residuals fell outside."""
    residuals = [0.0] * 5 + [0.5, 0.75, 0.75, 0.75, 0.0]
    flags = [()] * 9 + [("chip",)]
    band = bands.fit_band(residuals, flags)
    assert sum(band.covers(r, f) for r, f in zip(residuals, flags)) >= 8


def test_a_reason_every_residual_carries_keeps_the_band_finite():
    """Regression (the deep profile found it): with one flag on every row, the fit ran off to
    an infinite factor (OverflowError)."""
    residuals = [0.0] * 9 + [1.0]
    band = bands.fit_band(residuals, [("chip",)] * 10)
    assert math.isfinite(band.scale(("chip",)))
    assert sum(band.covers(r, ("chip",)) for r in residuals) >= 8


@given(residual_lists)
def test_a_reason_never_narrows_the_band(rows):
    band = bands.fit_band([r for r, _ in rows], [tuple(sorted(f)) for _, f in rows])
    assert all(f >= 1.0 for f in band.factors.values())


def test_nested_coverage_fits_each_groups_band_without_it():
    residuals = [0.01 * i for i in range(-10, 10)] + [5.0]
    groups = ["a"] * 20 + ["b"]
    flags = [()] * 21
    nested = bands.nested_coverage(residuals, flags, groups)
    # b's outlier is judged by a's band alone (which never saw it): outside
    assert nested[-1][0] is False


def test_a_flag_on_every_residual_is_absorbed_into_the_base_not_left_to_rounding():
    # the column of a flag every row carries equals the intercept's: without the ridge the
    # least-squares problem has no unique answer and the solver's pick (once an overflow)
    # hung on its linear algebra's last bits
    residuals = [0.0] * 9 + [1.0]
    flagged = bands.fit_band(residuals, [("chip",)] * 10)
    plain = bands.fit_band(residuals, [()] * 10)
    assert flagged.factors["chip"] == pytest.approx(1.0, abs=1e-3)
    assert flagged.scale(("chip",)) == pytest.approx(plain.scale(()), rel=1e-3)
    # two flags always together share one factor
    both = bands.fit_band([0.01, 0.02, 0.5, 0.6] * 3, [(), (), ("cp", "moe"), ("cp", "moe")] * 3)
    assert both.factors["cp"] == pytest.approx(both.factors["moe"], rel=1e-3) and both.factors["cp"] > 1


def test_a_generation_with_kernel_data_takes_its_own_fitted_attention_share(monkeypatch):
    """calibrate.PER_GENERATION_SHARE (on as shipped: see there): an H100's attention is Hopper's kernel rate times the
    share fitted on Hopper chips' runs; without a fitted Hopper share it keeps the global one
    (no declared attention efficiency)."""
    from gclc.model import compute

    monkeypatch.setattr(calibrate, "PER_GENERATION_SHARE", True)
    h100 = calibrate.load(BENCHMARKS / "runs", BENCHMARKS / "data" / "public_runs_measured.csv",
                          keep=lambda run_id: run_id == "mlm_h100_1")[0]
    kernels = compute.kernel_efficiency(h100.job.partition.node.accelerator)
    assert kernels is not None
    fitted = calibrate.calibrated_partition(h100, {("hopper", "attention_share"): 0.4}).node.accelerator
    assert fitted.efficiency_of("attention") == pytest.approx(kernels * 0.4)
    other = calibrate.calibrated_partition(h100, {("blackwell", "attention_share"): 0.4}).node.accelerator
    assert other.efficiency_of("attention") is None
    assert ("hopper", "attention_share") in calibrate.keys_of([h100])
    monkeypatch.setattr(calibrate, "PER_GENERATION_SHARE", False)
    assert ("hopper", "attention_share") not in calibrate.keys_of([h100])
    off = calibrate.calibrated_partition(h100, {("hopper", "attention_share"): 0.4}).node.accelerator
    assert off.efficiency_of("attention") is None


def test_a_reason_no_residual_carries_takes_the_widest_fitted_factor():
    """A reason the fit never saw is not 'no doubt' (factor 1): it takes the widest factor the
    fit learnt, listed (`known`) or met later."""
    plain = [0.01, -0.02, 0.04, -0.03, 0.02, -0.01, 0.03, -0.04]
    band = bands.fit_band(plain + [3 * r for r in plain], [()] * 8 + [("moe",)] * 8, known=("power_cap",))
    assert band.factors["moe"] == pytest.approx(3.0, rel=1e-6)
    assert band.factors["power_cap"] == band.unseen == band.factors["moe"] and band.carried == {"moe"}
    assert band.scale(("cp",)) == pytest.approx(3 * band.scale(()), rel=1e-6)
    assert bands.fit_band(plain, [()] * 8).unseen == 1.0      # nothing fitted wider


def test_a_group_alone_in_carrying_a_reason_is_judged_with_the_widest_factor():
    # group b alone is power-capped, its residuals 2.5x the plain ones: the band fitted without
    # it has never seen the cap; taken as no doubt (factor 1) it would leave b's misses outside
    plain = [0.01, -0.02, 0.04, -0.03, 0.02, -0.01, 0.03, -0.04, 0.015, -0.025]
    residuals = plain + [3 * r for r in plain] + [0.09, -0.1]
    flags = [()] * 10 + [("moe",)] * 10 + [("power_cap",)] * 2
    groups = ["a"] * 20 + ["b"] * 2
    nested = bands.nested_coverage(residuals, flags, groups)
    assert all(inside for inside, _ in nested[-2:])
    without_b = bands.fit_band(residuals[:20], flags[:20])
    assert not bands.Band(without_b.base, without_b.factors, without_b.quantiles).covers(-0.1, ("power_cap",))
