"""What a step becomes when a part of the cluster slows or goes down: the plan's configuration
on the degraded partition (model/network/degrade.py: the straggler paces the step), and the
best configuration re-planned around it."""

from __future__ import annotations

import attrs

from ...model.job import Job
from ...model.network.degrade import Degradation, degrade
from ...model.train.step import Estimate, estimate
from .plan import Plan, plan
from ...dsl.records import frozen


@frozen
class Degraded:
    degradation: Degradation
    healthy: Plan
    same: Estimate | None        # the healthy plan's configuration, degraded (None: no healthy plan)
    replanned: Plan              # the search again, on the degraded partition

    @property
    def slowdown(self) -> float | None:
        """Degraded step / healthy step of the same configuration."""
        if self.same is None or self.healthy.best is None:
            return None
        return self.same.step_time / self.healthy.best.step_time


def degraded(job: Job, d: Degradation, objective: str = "throughput") -> Degraded:
    healthy = plan(job, objective, top=0)
    slowed = degrade(job.graph, job.partition, d)
    same = estimate(job.shape, healthy.best.config, slowed) if healthy.best is not None else None
    return Degraded(d, healthy, same, plan(attrs.evolve(job, partition=slowed), objective, top=0))
