"""The operating point beside a training configuration's layout: the power cap per GPU (and
so the clock on the chip's DVFS curve, model/dvfs.py) it runs at. Part of the problem
`solver.train.enumerate` defines: the caps its space holds and how one layout at several
caps is told apart from another layout."""

from __future__ import annotations

import attrs

from ...model import dvfs
from ...model.job import Job
from ...model.power import job_power
from .limits import limits


def power_limited(job: Job) -> bool:
    """Whether a power limit on the job (its `subject to { power <= ... }`, its partition's or
    cluster's `power.budget`) can bind: below what all its GPUs draw computing the whole step at
    the chip's own clock, the most any configuration draws (job power grows with the GPU count
    and the busy share: model/power.py)."""
    limit = limits(job).get("power")
    if limit is None or not limit.upper:
        return False
    return job_power(job.graph, job.partition, job.gpus, 1.0).total > limit.value


def operating_caps(job: Job, objective: str) -> tuple[float | None, ...]:
    """The power caps per GPU the space holds beside the layout: the chip as it is (None),
    and, where a lower clock can win, each clock step of the chip's DVFS curve
    (model/dvfs.py `clock_steps`): under a power limit (fewer watts per GPU run more GPUs or
    fit at all) and for energy or cost (a lower clock can spend fewer joules per token). Without
    either, a lower clock only slows the step: throughput, time, MFU and goodput never gain."""
    if objective not in ("energy", "cost") and not power_limited(job):
        return (None,)
    return tuple(cap for _, cap in dvfs.clock_steps(job.partition.node.accelerator))


def at_cap(job: Job, cap: float | None) -> Job:
    """The job on chips under power cap `cap` (the job itself for None)."""
    return job if cap is None else attrs.evolve(job, partition=dvfs.with_cap(job.partition, cap))

