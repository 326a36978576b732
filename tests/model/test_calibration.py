"""Efficiency defaults, the attention length law and the plan's error band with its reasons."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.compiler.ir import Accelerator
from gclc.model import calibration, compute
from gclc.model.job import train_job
from gclc.model.train.workload import Op
from gclc.views.plan_json import plan_json
from gclc.views.plan_text import plan_text
from gclc.dsl.source import no_span
from gclc.solver.train.plan import plan
from gclc.testing import load_profile

load_profile()
DATA = Path(__file__).parents[1] / "data"


def chip(name="X", **efficiency) -> Accelerator:
    peaks = (("bf16", 1000e12), ("fp8", 2000e12), ("fp4", 4000e12))
    return Accelerator(name, "V", peaks, tuple(efficiency.items()), 80e9, 3e12, 700.0, 70.0, None, span=no_span())


# ---------------------------------------------------------------- precision defaults


def test_fp4_without_a_calibration_takes_at_most_fp8s():
    # the case: fp8 fitted at 46 %, fp4 must not fall back to the 61 % default
    assert compute.gemm_efficiency(chip(fp8=0.46, bf16=0.7), "fp4") == 0.46
    assert compute.gemm_efficiency(chip(bf16=0.5), "fp8") == 0.5
    assert compute.gemm_efficiency(chip(), "fp4") == compute.DEFAULT_GEMM_EFFICIENCY
    assert compute.gemm_efficiency(chip(fp4=0.9, fp8=0.4), "fp4") == 0.9   # declared wins


@given(st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.sampled_from(["fp4", "fp6", "fp8"]))
def test_a_narrower_default_never_exceeds_a_wider_calibrated_share(fp8, bf16, precision):
    c = chip(fp8=fp8, bf16=bf16) if precision != "fp8" else chip(bf16=bf16)
    wider = {"fp4": min(fp8, bf16), "fp6": min(fp8, bf16), "fp8": bf16}[precision]
    assert compute.gemm_efficiency(c, precision) <= wider


# ---------------------------------------------------------------- attention length


def test_attention_time_by_hand():
    c = chip(bf16=0.7, attention=0.5)
    op = Op("attention", "attention", 1e12, 0.0, 0, 4096, 128)
    rate = 1000e12 * 0.5 * 4096 / (4096 + compute.ATTENTION_HALF_SEQ)
    assert compute.op_time(op, c, "bf16") == pytest.approx(1e12 / rate + compute.KERNEL_OVERHEAD_S)


def test_the_length_law_matches_flashattention3_within_its_stated_tolerance():
    measured = {1024: 423, 2048: 521, 4096: 579, 8192: 602, 16384: 616}   # FA3 paper Fig. 5 (compute.py)
    for length, tflops in measured.items():
        model = compute.attention_length_factor(length) / compute.attention_length_factor(16384)
        assert model == pytest.approx(tflops / 616, abs=0.04)


@given(st.integers(1, 10**6), st.integers(1, 10**6))
def test_longer_attention_calls_never_run_slower_per_flop(a, b):
    short, long = sorted((a, b))
    assert compute.attention_length_factor(short) <= compute.attention_length_factor(long) <= 1.0


# ---------------------------------------------------------------- bands and reasons


def test_reasons_name_what_is_uncalibrated():
    keys = lambda *a: [r.key for r in calibration.reasons(*a)]  # noqa: E731
    assert keys("H100_SXM", "bf16", False, 1, 64, True) == []
    assert keys("B200", "fp4", False, 1, 64, True) == ["precision"]
    assert keys("H200_SXM", "fp8", False, 1, 64, True) == ["sibling"]
    assert keys("MI300X", "bf16", True, 4, 64, False) == ["chip", "moe", "cp", "stack"]
    assert keys("H100_SXM", "bf16", False, 1, 10**6, True) == ["scale"]
    text = calibration.reasons("B200", "fp4", False, 1, 64, True)[0].text
    assert "fp4" in text and "B200" in text


def test_the_band_without_reasons_is_the_shipped_quantiles_by_hand():
    low, high = calibration.ratio_band()
    assert low == pytest.approx(math.exp(calibration.QUANTILES[0] * calibration.BAND_SCALE))
    assert high == pytest.approx(math.exp(calibration.QUANTILES[1] * calibration.BAND_SCALE))
    assert low < 1 < high


reason_sets = st.sets(st.sampled_from(sorted(calibration.FACTORS)))


@given(reason_sets, reason_sets)
def test_more_reasons_never_narrow_the_band(a, b):
    small = tuple(calibration.Reason(k, k) for k in sorted(a))
    large = tuple(calibration.Reason(k, k) for k in sorted(a | b))
    assert calibration.half_width(small) <= calibration.half_width(large)


def test_a_plan_says_why_its_band_is_wide():
    job = train_job(check_file(str(DATA / "train.gcl")).design)
    p = plan(job)
    why = p.band_reasons
    assert why, "the test pod's chip is not one the calibration saw"
    data = plan_json(p)
    assert [r["reason"] for r in data["error_band"]["reasons"]] == [r.key for r in why]
    low, high = data["error_band"]["tokens_per_s"]
    assert low < p.best.tokens_per_s < high
    assert "band wide" in plan_text(p)
    # a calibrated chip at a calibrated precision narrows the band
    assert calibration.half_width(why) > calibration.half_width(())


@given(st.sets(st.sampled_from(sorted(calibration.FACTORS)), min_size=1))
def test_the_band_line_never_calls_the_usual_width_wide(keys):
    from gclc.views.plan_text import _band_line

    why = tuple(calibration.Reason(k, f"reason {k}") for k in sorted(keys))
    line = _band_line(why)
    assert all(f"reason {k}" in line for k in keys)           # every reason is named
    wide, usual = calibration.half_width(why), calibration.half_width(())
    assert ("band wide" in line) == (wide > usual)
    if "band wide" not in line:                                 # "±11%, not ±11%" was the bug
        assert ", not ±" not in line and line.count("±") == 1


def test_a_plan_whose_reasons_do_not_widen_says_so():
    from gclc.compiler.driver import check_text

    # an H200 takes its same-silicon H100's efficiencies, a reason whose fitted factor is 1
    text = ('import "std/nvidia"\ncluster C { units = 4 x HGX_H200  scaleout = NDR_FatTree }\n'
            "model M { arch = dense  layers = 32  hidden = 4096  heads = 32  ffn = 11008  vocab = 32000  seq = 4096 }\n"
            "train job { model = M  on = C  batch = 256  precision = bf16  software = megatron_core\n"
            "  parallelism { tp = 1 pp = 1 dp = 16 cp = 1 microbatch = 1 recompute = selective zero = 1 dp_overlap = true } }\n")
    p = plan(train_job(check_text(text, "h200.gcl").design))
    assert [r.key for r in p.band_reasons] == ["sibling"]
    assert calibration.FACTORS["sibling"] == 1.0
    shown = plan_text(p)
    assert "band       ±" in shown and "no wider for: " in shown
    assert "band wide" not in shown


@given(st.integers(1, 40), st.floats(0.2, 5.0))
def test_runs_that_miss_as_the_shipped_band_does_get_the_shipped_band(runs, spread):
    """The shipped scale is a unit whose 80 % interval spans QUANTILES; a normal residual of
    deviation sigma spans 2 x 1.2816 sigma. Held-out residuals at the deviation the shipped
    band implies (SIGMA_PER_SCALE x BAND_SCALE) give the shipped band whatever their number;
    wider or narrower ones move it towards theirs, never past it."""
    sigma = calibration.SIGMA_PER_SCALE * calibration.BAND_SCALE
    assert calibration.own_band([sigma] * runs) == pytest.approx(calibration.ratio_band())
    assert calibration.own_scale([sigma * spread] * runs) == pytest.approx(
        calibration.BAND_SCALE * math.sqrt((calibration.PRIOR_RUNS + runs * spread ** 2) / (calibration.PRIOR_RUNS + runs)))
    # an 80 % interval of a normal: 1.2816 deviations either side, in the band's log bounds
    low, high = calibration.own_band([sigma] * runs)
    assert (math.log(high) - math.log(low)) / 2 == pytest.approx(1.2816 * sigma)


@given(st.integers(1, 40), st.floats(0.01, 0.5), st.floats(0.2, 5.0))
def test_a_band_pulled_to_another_prior_scale_behaves_the_same(runs, prior, spread):
    """The serving band's prior is the shipped serving scale, not training's: residuals at that
    scale's deviation give its band whatever their number, others move it towards theirs."""
    sigma = calibration.SIGMA_PER_SCALE * prior
    low, high = calibration.own_band([sigma] * runs, prior)
    assert (low, high) == pytest.approx((math.exp(calibration.QUANTILES[0] * prior),
                                         math.exp(calibration.QUANTILES[1] * prior)))
    moved = calibration.own_scale([sigma * spread] * runs, prior)
    assert min(prior, prior * spread) <= moved * (1 + 1e-9) and moved <= max(prior, prior * spread) * (1 + 1e-9)


@given(st.floats(0.005, 0.3), st.booleans())
def test_a_precision_your_runs_did_not_run_takes_the_published_band_where_one_calibrated_it(half, moe):
    """On a calibrated cluster, a plan at a precision the operator's runs did not run: where the
    published fit calibrated the chip at it, the band is at least the shipped one (the
    efficiency is the published fit's: your runs measured nothing of it) and no wider than the
    shipped band or yours, each with the other reasons; where no run calibrated it, yours
    widened by the shipped factor for an uncalibrated precision."""
    own = calibration.Own(3, math.exp(-half), math.exp(half), ("fp8",))
    published = calibration.own_reasons(own, "bf16", moe, 8, published=True)
    assert [r.key for r in published][0] == calibration.PUBLISHED
    low, high = own.ratio_band(published)
    others = tuple(r for r in published if r.key != calibration.PUBLISHED)
    shipped, mine = calibration.ratio_band(others), own.ratio_band(others)
    assert low == pytest.approx(min(shipped[0], mine[0])) and high == pytest.approx(max(shipped[1], mine[1]))
    unpublished = calibration.own_reasons(own, "bf16", moe, 8)
    assert [r.key for r in unpublished][0] == "precision"
    assert own.ratio_band(unpublished)[1] == pytest.approx(math.exp(half * calibration.widening(unpublished)))
    # a precision your runs did run: your band alone
    assert calibration.own_reasons(own, "fp8", False, 8) == ()


RUN = st.tuples(st.sampled_from(("bf16", "fp16", "fp8", "fp8_e4m3", "fp4")), st.integers(1, 4096), st.booleans())


@given(RUN, st.lists(RUN, min_size=1, max_size=4))
def test_a_held_out_run_counts_for_a_plan_like_the_runs_by_what_it_had_that_they_had_not(run, others):
    """A calibrating run held out of the fit of the others is a plan at its own precision, MoE and
    GPUs on a cluster calibrated by them: its residual is expected wider by exactly the factors
    such a plan's band takes (own_reasons, the shipped FACTORS), never narrower, and by nothing
    where another run had all it had."""
    precision, gpus, moe = run
    factor = calibration.unlike_widening(run, others)
    own = calibration.Own(len(others), 1.0, 1.0, tuple(p for p, _, _ in others), max(g for _, g, _ in others),
                          any(m for _, _, m in others))
    assert factor == pytest.approx(calibration.widening(calibration.own_reasons(own, precision, moe, gpus)))
    assert factor >= 1.0
    assert calibration.unlike_widening(run, others + [run]) == 1.0
    assert calibration.unlike_widening(run, []) == calibration.unlike_widening(None, others) == 1.0


def test_the_largest_dense_bf16_run_held_out_of_smaller_fp8_moe_runs_takes_each_factor():
    factor = calibration.unlike_widening(("bf16", 64, True), [("fp8", 8, False), ("fp8_e4m3", 16, False)])
    assert factor == pytest.approx(math.prod(calibration.FACTORS[k] for k in ("precision", "moe", "scale")))
    assert calibration.unlike_widening(("fp16", 8, False), [("bf16", 16, False)]) == 1.0   # one GEMM rate


# ---------------------------------------------------------------- unstated fields together


@given(st.lists(st.floats(0.0, math.log(1.5)), min_size=1, max_size=6), st.sampled_from(["moe", "precision", "stack"]))
def test_unstated_fields_add_in_quadrature_not_by_compounding(spreads, fitted):
    # the GB200 flagship left three fields to the search, each worth about x3: their product
    # printed a +-398 % band; independent errors add in quadrature (one field of the root sum
    # of squares widens the band exactly as the lot)
    unstated = tuple(calibration.Reason(calibration.UNSTATED, f"f{i}", s) for i, s in enumerate(spreads))
    other = calibration.Reason(fitted, fitted)
    alone = calibration.Reason(calibration.UNSTATED, "all", math.sqrt(sum(s * s for s in spreads)))
    for high in (False, True):
        assert math.isclose(calibration.widening(unstated, high), calibration.widening((alone,), high), rel_tol=1e-12)
        assert math.isclose(calibration.widening((other, *unstated), high),
                            other.factor * calibration.widening((alone,), high), rel_tol=1e-12)
        assert calibration.widening(unstated, high) <= math.prod(r.factor for r in unstated) * (1 + 1e-12)
        # one more field never narrows the band
        assert calibration.widening(unstated[:-1], high) <= calibration.widening(unstated, high) * (1 + 1e-12)
    assert math.isclose(alone.factor, max(calibration.widening((alone,), h) for h in (False, True)), rel_tol=1e-12)


@given(st.floats(0.0, math.log(1.5)), st.floats(0.0, math.log(1.5)))
def test_an_unstated_field_widens_the_side_its_alternatives_lie_on(slower, faster):
    # the search's optimum: a run that chose another micro-batch or recompute mode is slower than
    # predicted, never faster, so the band's high side stays the calibrated one
    base_low, base_high = calibration.ratio_band(())
    low, high = calibration.ratio_band((calibration.Reason(calibration.UNSTATED, "x", max(slower, faster),
                                                           sides=(slower, faster)),))
    assert low <= math.exp(-slower) * (1 + 1e-12) and low <= base_low * (1 + 1e-12)
    assert high >= math.exp(faster) * (1 - 1e-12) and high >= base_high * (1 - 1e-12)
    if slower == 0:
        assert math.isclose(low, base_low, rel_tol=1e-12)
    if faster == 0:
        assert math.isclose(high, base_high, rel_tol=1e-12)
