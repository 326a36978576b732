"""Serving benchmarks in the calibration (solver/calibrate/observe_serve.py): a serving run is
replayed on the design's serve job, its throughput and median TTFT and TPOT inform the
engine's host time per iteration and the chip's decode (HBM) and prefill (GEMM) rates, and
the serving band comes from the runs held out."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.compiler.measure.read import read_paths
from gclc.compiler.measure.records import ServeRun
from gclc.dsl.source import Span
from gclc.solver.calibrate.calibrate import calibrate, serve_job
from gclc.solver.calibrate.observe_serve import Replay, engine_key, serve_observations
from gclc.model.job import placement
from gclc.testing import load_profile

load_profile()

ROOT = Path(__file__).resolve().parents[3]
DESIGN = ROOT / "tests" / "data" / "calibrate" / "llama8b_serve.gcl"
VLLM = ROOT / "tests" / "data" / "measurements" / "serving" / "vllm_sharegpt_llama31_8b.txt"


@pytest.fixture(scope="module")
def design():
    return check_file(str(DESIGN)).design


def synthetic(design, values: dict, rate: float | None, concurrency: int | None, line: int) -> ServeRun:
    """A serving run as the design's serve job would measure it with the constants `values`
    (SYNTHETIC: what the fit must recover), 200 requests of 230 prompt and 203 output tokens."""
    entity = serve_job(design, None)
    span = Span("synthetic", line, 1, line, 1)
    run = ServeRun("vllm", rate, concurrency, 200, 230.0, 203.0, 1.0, 1.0, (), (), (), (), "Llama31_8B", span)
    obs, _, _ = serve_observations(run, entity, placement(entity)[1])
    replay: Replay = obs[0].settle.__self__
    figures = replay.figures({**{k: v for k, v in replay.anchor.items()}, **values} if replay.anchor else
                             {**_priors(obs), **values})
    return attrs.evolve(run, output_throughput=figures["output_throughput"], ttft=(("p50", figures["ttft"]),),
                        tpot=(("p50", figures["tpot"]),))


def _priors(obs) -> dict:
    chip = obs[0].partition.node.accelerator
    from gclc.solver.calibrate.params import chip_param
    values = {p.key: p.prior for p in obs[0].priors}
    values.update({k: chip_param(chip, k[2]).prior for k in obs[0].informs if k[0] == "chip"})
    return values


def test_a_serving_run_informs_the_engine_and_the_chip(design):
    (run,), problems, _ = read_paths([str(VLLM)])
    assert not problems
    obs, skipped, _ = serve_observations(run, serve_job(design, None), placement(serve_job(design, None))[1])
    assert not skipped and [o.what.split(": ")[1] for o in obs] == ["output tokens/s", "median TTFT", "median TPOT"]
    assert {k[0] for k in obs[0].informs} == {"engine", "chip"}
    assert ("chip", "H100_SXM", "hbm") in obs[0].informs and ("chip", "H100_SXM", "bf16") in obs[0].informs


def test_the_fit_finds_the_engine_host_time_that_made_the_runs(design):
    """Two runs (one at a rate, one at a concurrency) made with 2 ms of host time per iteration
    (vLLM's profile states 100 us): the design misses them by 15 % or more, the fit moves the
    host time at least two thirds of the way (in log terms) to what made them, never past it (the
    chip's HBM efficiency, whose prior is tighter, explains the rest: two runs tell the two only
    partly apart), and predicts them within 5 %."""
    key = engine_key("chat")
    runs = [synthetic(design, {key: 2e-3}, 4.0, None, 1), synthetic(design, {key: 2e-3}, None, 32, 2)]
    result = calibrate(design, runs)
    prior = result.params[key].prior
    assert 2 / 3 * math.log(2e-3 / prior) <= math.log(result.values[key] / prior) <= math.log(2e-3 / prior)
    assert max(abs(r.before) for r in result.rows) > math.log(1.15)
    assert all(abs(r.after) < math.log(1.05) for r in result.rows)
    band = result.serve_band
    assert band is not None and band.runs == 2 and band.low < 1 < band.high


def test_a_serving_run_without_a_serve_job_is_skipped_with_the_reason():
    pod = check_file(str(ROOT / "tests" / "data" / "calibrate" / "h100_pod.gcl")).design
    (run,), _, _ = read_paths([str(VLLM)])
    result = calibrate(pod, [run])
    assert any("no serve job" in s for s in result.skipped) and result.serve_band is None


def test_a_run_of_fewer_than_two_requests_is_not_replayed(design):
    entity = serve_job(design, None)
    for count, output in ((0, 0.0), (1, 100.0)):
        run = ServeRun("vllm", 2.0, None, count, 230.0, output, 1.0, 1.0, (), (), (), (), "m", Span("x", 1, 1, 1, 1))
        obs, skipped, _ = serve_observations(run, entity, placement(entity)[1])
        assert not obs and "too little to replay" in skipped[0]


@given(rate=st.one_of(st.none(), st.floats(0.01, 1e4)), concurrency=st.one_of(st.none(), st.integers(1, 4096)),
       requests=st.integers(2, 8), prompt=st.floats(0.0, 8192.0), output=st.floats(1.0, 512.0))
@settings(deadline=None)
def test_any_readable_serving_run_replays_to_finite_figures(design, rate, concurrency, requests, prompt, output):
    """Whatever rate, concurrency and lengths a summary states (within what the readers accept),
    the replay predicts a finite, positive throughput, TTFT and TPOT at the design's constants
    (TPOT only where outputs have a second token: one-token outputs have none)."""
    entity = serve_job(design, None)
    run = ServeRun("vllm", rate, concurrency, requests, prompt, output, 1.0, 1.0, (("p50", 1.0),), (("p50", 0.01),),
                   (), (), "m", Span("x", 1, 1, 1, 1))
    obs, skipped, _ = serve_observations(run, entity, placement(entity)[1])
    assert not skipped and len(obs) == (3 if round(output) >= 2 else 2)
    values = _priors(obs)
    for o in obs:
        predicted = o.predict_values({k: values[k] for k in o.informs})
        assert math.isfinite(predicted) and predicted > 0


def test_counterexample_two_one_token_requests_at_a_high_rate_still_have_a_throughput(design):
    """The law's counterexample: two one-token requests 1/79 s apart made no token while they
    arrived, so the simulation's throughput was 0; it is counted over their whole run instead."""
    entity = serve_job(design, None)
    run = ServeRun("vllm", 79.0, None, 2, 0.0, 1.0, 1.0, 1.0, (("p50", 1.0),), (("p50", 0.01),), (), (), "m",
                   Span("x", 1, 1, 1, 1))
    obs, _, _ = serve_observations(run, entity, placement(entity)[1])
    assert [o.what.split(": ")[1] for o in obs] == ["output tokens/s", "median TTFT"]   # no second token: no TPOT
    values = _priors(obs)
    assert obs[0].predict_values({k: values[k] for k in obs[0].informs}) > 0


def test_a_small_move_of_a_measured_figure_moves_the_fit_a_little(design):
    """A run at 4 requests/s made with 2 ms of host time whose median TTFT is 20 % above what
    any setting near the priors explains (the published 70B runs are so: benchmarks/
    calibrate_serve.py), measured 0.3 % lower or higher: the fitted host time stays within a
    factor 1.5 and the TTFT's residual within 3 points. The undamped re-anchoring on one arrival
    draw put the host time anywhere from 0.05 to 2.7 ms here (the figure is jagged in the
    constants and the host time loosely held), as a 0.3 % move of the 70B prefill (the
    in-training attention share) moved the published runs' fit (calibrate.anchored_fit)."""
    key = engine_key("chat")
    base = synthetic(design, {key: 2e-3}, 4.0, None, 1)
    fits = []
    for f in (0.997, 1.0, 1.003):
        run = attrs.evolve(base, ttft=(("p50", base.ttft[0][1] * 1.2 * f),))
        result = calibrate(design, [run])
        ttft = next(r for r in result.rows if r.obs.what.endswith("median TTFT"))
        fits.append((result.values[key], ttft.after))
    hosts, residuals = [h for h, _ in fits], [r for _, r in fits]
    assert max(hosts) / min(hosts) < 1.5
    assert max(residuals) - min(residuals) < 0.03


def test_the_serving_fit_ends_no_worse_than_the_design_on_the_simulated_figures(design):
    """The published vLLM run (1,000 ShareGPT requests at once): the fitted constants' objective,
    the figures simulated at them (each row's `after` is exact there: the run is anchored at the
    fit) and the priors' penalty, is no higher than the design's own (calibrate.anchored_fit takes
    a step only where it lowers it)."""
    from gclc.solver.calibrate.fit import _loss
    from gclc.solver.calibrate.params import log_prior

    (run,), _, _ = read_paths([str(VLLM)])
    result = calibrate(design, [run])
    before = sum(_loss(r.before, r.obs.noise) for r in result.rows)
    after = sum(_loss(r.after, r.obs.noise) for r in result.rows) + sum(
        log_prior(p, result.values[k]) for k, p in result.params.items())
    assert after < before
    replay = result.rows[0].obs.settle.__self__
    assert replay.anchor == {k: result.values[k] for k in replay.keys}


def test_a_serving_rows_before_is_a_fresh_replay_at_the_designs_values(design):
    """`before` is the design as written: each serving row's equals a fresh replay of its run at
    the design's constants (not the fit's replay, anchored at the fitted values, read back from
    there linearly: two such runs' median TTFT read -12.0 % where the replay says -16.6 %)."""
    key = engine_key("chat")
    runs = [synthetic(design, {key: 2e-3}, 4.0, None, 1), synthetic(design, {key: 2e-3}, None, 32, 2)]
    result = calibrate(design, runs)
    entity = serve_job(design, None)
    fresh = [o for run in runs for o in serve_observations(run, entity, placement(entity)[1])[0]]
    serving = [r for r in result.rows if r.obs.kind == "serve"]
    assert [r.obs.what for r in serving] == [o.what for o in fresh]
    for row, obs in zip(serving, fresh):
        values = _priors([obs])
        expected = math.log(obs.predict_values({k: values[k] for k in obs.informs}) / obs.measured)
        assert row.before == pytest.approx(expected, rel=1e-9, abs=1e-12)
