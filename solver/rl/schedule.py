"""An `rl` job on a shared cluster (`gclc schedule`): one gang, both pools placed at once.

Each option (solver/schedule/jobs.py builds them) is the job's best plan with both pools on one partition it may use (colocated, or
apart on that partition's GPUs), sized at the GPUs the two pools hold together; its rate is
steps a second and its work the job's `steps`. A plan with its pools on two partitions (the
mixed-generation case `gclc plan` weighs) is no option here: the scheduler's options and
allocations each hold one partition (solver/schedule/jobs.py `Option`), so such a gang would
need both partitions' GPUs bound as one. That is left to the scheduler; the plan says what it
would run at."""

from __future__ import annotations

import attrs

from ...compiler.design import Entity
from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...model.rl.job import rl_job
from .search import search


def gang_options(entity: Entity, problems: list[Diagnostic]) -> tuple[list[tuple[str, int, float]], float] | None:
    """([(partition, GPUs of both pools, steps a second)], the steps to run), fastest first; None
    (with a located problem) without `steps` or without a plan on any one partition."""
    job = rl_job(entity)
    if job.steps is None:
        problems.append(codes.NO_SIZE.make(entity.span, what=f"`{entity.name}` has no amount of work to schedule",
                                           notes=["help: add `steps = 1000`: an rl job's work is its steps"]))
        return None
    options = []
    for partition in job.partitions:
        here = attrs.evolve(job, generate=attrs.evolve(job.generate, partition=partition.name),
                            train=attrs.evolve(job.train, partition=partition.name))
        found = search(here, 0).best
        if found:
            options.append((partition.name, found[0].gpus, 1.0 / found[0].step.step_time))
    if not options:
        problems.append(codes.NO_FEASIBLE_SIZE.make(
            entity.span, what=f"`{entity.name}` has no plan with both pools on one partition it may use",
            notes=["help: `gclc plan` on the job says why; a plan across two partitions is not scheduled as one gang "
                   "yet"]))
        return None
    return sorted(options, key=lambda o: -o[2]), float(job.steps)
