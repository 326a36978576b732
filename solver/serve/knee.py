"""The knee of a serving system: the highest offered load at which its latency percentiles
still meet their bounds, found as a benchmark's operator finds it, and the latency-vs-load
curve around it.

MLPerf Inference's Server scenario (LoadGen, loadgen/results.cc `PerfConstraintsMet`) is run
this way: arrivals are Poisson at a target rate, the P99 of TTFT and of TPOT over every
sample of the run must stay within the benchmark's constraints (loadgen/mlperf.conf:
llama2-70b and mixtral-8x7b ttft_latency = 2000 ms, tpot_latency = 200 ms), and a submitter
raises the rate until one of them just holds. The published P50 latencies are therefore
read at the system's own knee: a model whose capacity is off by a few per cent, compared at
the published rate, sits on another part of a curve that is nearly vertical there, while
at its own knee its P50s answer the question the benchmark asks.

Near saturation a run's tail depends on its length (a queue that grows slowly takes minutes
to pass a bound), so the caller's `run` simulates the benchmark's full duration."""

from __future__ import annotations

from typing import Callable

from .outcome import Outcome, missed_by

Run = Callable[[float, dict, Callable], Outcome]     # (rate, slo, stop) -> the simulated run


def meets(outcome: Outcome, slo: dict[str, float]) -> bool:
    """Whether a finished run holds every bound of `slo` (`ttft.p99`: P99 TTFT, seconds)."""
    return not missed_by(outcome, slo)


def knee(run: Run, slo: dict[str, float], low: float, high: float, steps: int = 7) -> tuple[float, Outcome] | None:
    """The highest rate in [low, high] (to (high - low) / 2^steps) whose run meets `slo`, and
    that run; None when even `low` does not. A run is stopped as soon as a bound is broken
    for certain, so the rates above the knee cost little. `high` is returned when it meets
    the bounds (the knee lies beyond the bracket)."""
    def attempt(rate: float) -> Outcome:
        return run(rate, slo, lambda missed: True)

    top = attempt(high)
    if meets(top, slo):
        return high, top
    best = attempt(low)
    if not meets(best, slo):
        return None
    for _ in range(steps):
        middle = (low + high) / 2
        outcome = attempt(middle)
        if meets(outcome, slo):
            low, best = middle, outcome
        else:
            high = middle
    return low, best


def load_curve(run: Run, rates: list[float]) -> list[tuple[float, Outcome]]:
    """The run at each offered rate, to the end (no bounds): latency against load."""
    return [(rate, run(rate, {}, None)) for rate in rates]


def plan_run(plan) -> Run:
    """The plan's own simulation at another offered rate: its pools, router, memory limit and
    warm-up, its requests arriving rate / planned rate times faster (`Demand.at_rate`). At the
    planned rate it is the run the planner confirmed (no bound stops it)."""
    from ...model.serve.inference import kv_transfer_time
    from .demand import lifetime
    from .sim import Pool, simulate
    from .space import router_of

    router = router_of(plan.entity)
    hbm = plan.limits.memory_bytes(plan.decode.replica.hbm)

    def pool(side) -> Pool:
        r = side.replica
        return Pool(r, side.count, r.config.batch, r.kv_capacity_tokens(hbm), router)
    decode = pool(plan.decode)
    prefill = pool(plan.prefill) if plan.prefill else None
    transfer = (lambda prompt: kv_transfer_time(plan.prefill.replica, plan.decode.replica, prompt)) if prefill else None
    warmup = lifetime(plan.entity, plan.demand.output)

    def run(rate: float, slo: dict, stop) -> Outcome:
        return simulate(plan.demand.at_rate(rate).requests, decode, prefill, transfer, slo or None, warmup, stop)
    return run
