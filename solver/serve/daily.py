"""A serve plan over a day (`daily_load`): each stretch of the day runs the replicas its
share of the peak `rate` needs, at the plan's layout.

Each pool keeps ceil(count x share) replicas. Requests spread over replicas at random
split a Poisson stream into Poisson streams, so every replica then sees at most the rate
it was confirmed at under the peak: the plan's simulated percentiles still bound each
stretch's (fewer replicas at a lower rate: the same load per replica, or less). The power
is the plan's power model at those replicas and that rate."""

from __future__ import annotations

import math

import attrs

from .screen import Side, pools_power
from ...dsl.records import frozen

DAY = 86_400.0


@frozen
class Stretch:
    start_s: float        # from midnight
    length_s: float
    share: float          # of the peak rate
    rate: float           # requests per second
    replicas: tuple[int, ...]   # per pool: the serving (decode) pool, then prefill
    gpus: int
    power_w: float


def daily(plan, shares: tuple[float, ...]) -> tuple[Stretch, ...]:
    """The stretches of a day for `plan` (a ServePlan with a rate) under `shares` of its rate."""
    peak = plan.demand.rate
    pools = [s for s in (plan.decode, plan.prefill) if s is not None]
    length = DAY / len(shares)
    out = []
    for i, share in enumerate(shares):
        sides = [attrs.evolve(s, count=max(1, math.ceil(s.count * share - 1e-9))) for s in pools]
        rate = peak * share
        out.append(Stretch(i * length, length, share, rate, tuple(s.count for s in sides), sum(s.gpus for s in sides),
                           pools_power(plan.graph, plan.partition, sides, rate)))
    return tuple(out)


def summary(stretches: tuple[Stretch, ...]) -> dict:
    """What a day costs: GPU-hours held, energy, the most and fewest GPUs."""
    return {"gpu_hours": sum(s.gpus * s.length_s for s in stretches) / 3600,
            "energy_j": sum(s.power_w * s.length_s for s in stretches),
            "peak_gpus": max(s.gpus for s in stretches), "least_gpus": min(s.gpus for s in stretches)}


__all__ = ["Side", "Stretch", "daily", "summary"]
