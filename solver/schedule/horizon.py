"""The simulated horizon of a schedule: submit times and durations are at most ten years
(`compiler/trace.py` MAX_SECONDS), so a lone job ends within twice that without failures. A job
that has not ended then (a queue of years of work, or one that fails faster than it
checkpoints) is reported unfinished: the failure process and the scheduler stop here, whatever
the durations, so the events a run walks are bounded."""

from __future__ import annotations

from ...compiler.trace import MAX_SECONDS
from .contention import bank

HORIZON_S = 2 * MAX_SECONDS


def stop_at_horizon(sim) -> float:
    """Close every run of `sim` still going at the horizon: its segment ends `horizon`, and the
    work since its start counts, as a checkpoint taken then would keep it."""
    for name in list(sim.running):
        run = sim.runs[name]
        o, alloc = run.option, sim.state.allocations[name]
        rate = o.rate * run.gpus / o.gpus
        kept = min(run.remaining, max(0.0, run.own_time(HORIZON_S) - run.delay) * rate)
        run.remaining -= kept
        width = run.gpus + alloc.held_gpus - alloc.gpus     # an rl gang's companion pool holds GPUs too
        run.useful += kept / rate * width
        run.held += (HORIZON_S - run.start) * width
        bank(run, HORIZON_S)
        run.own_seconds += run.own_time(HORIZON_S)
        run.segments.append((run.start, HORIZON_S, alloc.partition, run.gpus, alloc.level, len(alloc.domains),
                             "horizon", run.rule, alloc))
    sim._sample(HORIZON_S)
    return HORIZON_S
