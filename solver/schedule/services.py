"""Serve jobs on a shared cluster: a service holds, stretch by stretch of each day, the
GPUs its serve plan needs at that stretch's share of its peak rate (`daily_load`,
solver/serve/daily.py; without one, the plan's GPUs all day). Each stretch is one gang
job of the scheduler (`chat@d0h14`), submitted when the stretch begins, asking for exactly
its length: it competes by the service's priority like any job (a critical service
preempts training where the policy may), and it is served on time when it starts the
moment it is due. The days simulated cover every other job's arrival and expected run."""

from __future__ import annotations

import math


from ...compiler.design import Entity
from ...compiler.ir import ClusterGraph
from ...compiler.trace import priority_value
from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ..serve.daily import DAY, daily
from .records import Option, SchedJob
from ...dsl.records import frozen

SERVE_UNIT = "GPU-s"


@frozen
class Service:
    name: str
    partition: str
    stretches: tuple             # solver/serve/daily.Stretch, one day


def service_of(entity: Entity, graph: ClusterGraph, problems: list[Diagnostic]) -> Service | None:
    """The serve job's plan over a day, or None (with the reason in `problems`)."""
    from ..serve.plan import plan_serve

    plan = plan_serve(entity)
    if plan.decode is None or plan.demand is None or not plan.demand.rate:
        why = "has no feasible serve plan" if plan.decode is None else "states no `rate` to serve"
        problems.append(codes.NO_FEASIBLE_SIZE.make(entity.span, what=f"serve job `{entity.name}` {why}",
                                                    notes=["help: `gclc plan` on the job says why"]))
        return None
    shares = tuple(float(s) for s in entity.get("daily_load") or (1.0,))
    return Service(entity.name, plan.partition.name, daily(plan, shares))


def stretches(service: Service, entity: Entity, days: int) -> list[SchedJob]:
    """One gang job per stretch of each day, due when the stretch begins."""
    weight, label = priority_value(entity.get("priority"))
    tenant = getattr(entity.get("tenant"), "name", "")
    out = []
    for day in range(days):
        for s in service.stretches:
            start = day * DAY + s.start_s
            option = Option(service.partition, s.gpus, float(s.gpus), math.inf, 0.0, 0.0, None)
            name = f"{service.name}@d{day}h{s.start_s / 3600:g}"
            out.append(SchedJob(name, weight, label, start, s.gpus * s.length_s, SERVE_UNIT, True, (option,), (),
                                entity.span, s.length_s, tenant, service.name))
    return out


HORIZON_FACTOR = 4    # days of serving per day the other jobs would need on an empty cluster
MOST_DAYS = 90


def days_covered(jobs: list[SchedJob]) -> int:
    """Days of serving to lay out: four times the whole days that hold every other job's
    arrival and its slowest expected run (sharing the cluster slows them), at most
    MOST_DAYS; the simulation stops serving when the last other job ends."""
    last = max((j.submit + j.work / min(o.rate for o in j.options) for j in jobs), default=0.0)
    return min(MOST_DAYS, HORIZON_FACTOR * max(1, math.ceil(last / DAY)))
