"""The least power that runs a job: what a plan says when nothing runs within its power limit
(solver/train/explain.py). A lower bound from the power floors of every valid layout at the
chip's lowest clock step, and a configuration that runs there with what it draws."""

from __future__ import annotations

import attrs

from ...dsl.numbers import percent, quantity
from ...model import dvfs
from ...model.job import Job
from ...model.train.step import Estimate, estimate
from . import enumerate as space_def
from .bounds import JobPower
from .least_memory import least_memory


def least_power(job: Job) -> tuple[float, int, Estimate | None]:
    """(W, GPUs, a configuration that runs): the fewest GPUs on which a configuration fits, GPUs,
    waiting at the lowest clock step draw W, less than any configuration that runs (job power
    grows with the GPU count and the busy share); the least-memory configuration on them at that
    clock step runs (None when nothing fits anywhere: W and GPUs are then those of the fewest GPUs)."""
    cap = space_def.operating_caps(job, "energy")[-1]     # the lowest clock step
    power = JobPower(space_def.at_cap(job, cap))
    counts = sorted({tp * pp * cp * dp for space in space_def.variant_spaces(job, space_def.space(job))
                     for tp, pp, cp, ep, dp in space_def.branches(job, space)})
    memory = space_def.limits(job).memory
    for gpus in counts:
        frugal = least_memory(job, gpus)
        if frugal is not None and frugal.memory.total <= memory:
            runs = estimate(job.shape, attrs.evolve(frugal.config, power_cap=cap), job.partition)
            return power.floor(gpus), gpus, runs
    return (power.floor(counts[0]), counts[0], None) if counts else (float("inf"), 0, None)


def least_power_words(job: Job, limit) -> tuple[str, float]:
    """The sentence that names the least power that runs `job` under `limit` (a Limit), and the
    power it needs (the lower bound, or what the configuration that runs draws where that bound
    is within the limit)."""
    watts, gpus, runs = least_power(job)
    head = f"`{job.name}` runs within no `power {limit.op} {quantity(limit.value, 'W')}` ({limit.source}, {limit.span})"
    text = (f"{head}: the least power that runs it is at least {quantity(watts, 'W')} (the fewest GPUs it fits on, "
            f"{gpus:,}, waiting at their lowest clock)")
    if runs is None:
        return text, watts
    c = runs.config
    drawn = space_def.power_of(job, runs)
    clock = dvfs.clock_of(job.partition, c.power_cap)
    text += (f" and at most {quantity(drawn, 'W')} (tp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp} on them at "
             f"{percent(clock)} clock runs)")
    return text, watts if watts > limit.value else drawn
