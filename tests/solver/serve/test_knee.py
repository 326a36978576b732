"""solver/serve/knee.py: the highest offered rate whose run meets its latency bounds, found by
bisection as a benchmark's operator raises the rate, on runs whose tails grow with the rate."""

from __future__ import annotations

from hypothesis import given, strategies as st

from gclc.solver.serve.knee import knee, load_curve, meets
from gclc.solver.serve.outcome import Outcome
from gclc.testing import load_profile

load_profile()

SLO = {"ttft.p99": 2.0, "tpot.p99": 0.2}


def _outcome(ttft: float, tpot: float, stopped=()) -> Outcome:
    return Outcome(ttft=(ttft / 2, ttft), tpot=(tpot / 2, tpot), e2e=(1.0, 2.0), met=2, window=1.0,
                   output_tokens=1.0, preemptions=0, stopped=stopped)


def _queue(capacity: float):
    """A run whose P99 TTFT grows as 1 / (1 - rate / capacity) (M/M/1-like) and TPOT stays 0.1 s."""
    def run(rate, slo, stop):
        load = min(rate / capacity, 0.999999)
        return _outcome(0.1 / (1 - load), 0.1)
    return run


def test_meets_reads_every_bound_and_a_stopped_run_fails():
    assert meets(_outcome(1.9, 0.19), SLO)
    assert not meets(_outcome(2.1, 0.19), SLO)
    assert not meets(_outcome(1.9, 0.21), SLO)
    assert not meets(_outcome(0.1, 0.1, stopped=("ttft.p99",)), SLO)


@given(st.floats(10.0, 1000.0), st.floats(0.3, 0.9))
def test_the_knee_is_where_the_tail_reaches_its_bound(capacity, low_share):
    """P99 TTFT = 0.1 / (1 - rate / capacity) reaches 2 s at rate = 0.95 capacity: the knee found
    in [low, 1.2 capacity] meets the bound and lies within the bisection's step below it."""
    low, high, steps = low_share * capacity, 1.2 * capacity, 10
    rate, outcome = knee(_queue(capacity), SLO, low, high, steps)
    assert meets(outcome, SLO)
    assert rate <= 0.95 * capacity * (1 + 1e-9)
    assert 0.95 * capacity - rate <= (high - low) / 2 ** steps * (1 + 1e-9)


def test_no_knee_when_even_the_lowest_rate_fails_and_the_top_when_all_pass():
    assert knee(_queue(100.0), SLO, 99.0, 120.0) is None
    rate, _ = knee(lambda rate, slo, stop: _outcome(0.1, 0.1), SLO, 10.0, 20.0)
    assert rate == 20.0


def test_the_load_curve_runs_every_rate_to_the_end():
    seen = []

    def run(rate, slo, stop):
        seen.append((rate, slo, stop))
        return _outcome(rate, 0.1)
    curve = load_curve(run, [1.0, 2.0])
    assert [r for r, _ in curve] == [1.0, 2.0] and seen == [(1.0, {}, None), (2.0, {}, None)]
