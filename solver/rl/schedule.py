"""An `rl` job on a shared cluster (`gclc schedule`): one gang, both pools placed at once.

Each option (solver/schedule/jobs.py builds them) is the job's best plan for one placement of
its pools, sized at the GPUs they hold: both pools on one partition it may use (colocated, or
apart on that partition's GPUs), or generation on one partition and training on another (the
mixed-generation case `gclc plan` weighs). A two-partition option holds the training pool's
GPUs as its own and the generation pool's as its companion (solver/schedule/records.py
`Option.companion`): the scheduler binds both at once or neither, releases them together, and a
failure on either partition stops the whole gang. Its rate is steps a second and its work the
job's `steps`. The file's pins (`generate { on }`, `train { on }`, `placement`) rule placements out
as they do for `gclc plan`."""

from __future__ import annotations

import attrs

from ...compiler.design import Entity
from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...model.rl.job import RLJob, rl_job
from ...model.rl.step import COLOCATED, DISAGGREGATED
from .search import search

GangOption = tuple[str, int, float, tuple[str, int] | None]   # partition, GPUs, steps a second, companion


def gang_options(entity: Entity, problems: list[Diagnostic]) -> tuple[list[GangOption], float] | None:
    """([(training partition, its GPUs (all the gang's on one partition), steps a second,
    (generation partition, its GPUs) when apart on another)], the steps to run), fastest first;
    None (with a located problem) without `steps` or without a plan anywhere."""
    job = rl_job(entity)
    if job.steps is None:
        problems.append(codes.NO_SIZE.make(entity.span, what=f"`{entity.name}` has no amount of work to schedule",
                                           notes=["help: add `steps = 1000`: an rl job's work is its steps"]))
        return None
    options = [option for g, t in placements(job) if (option := _option(job, g, t)) is not None]
    if not options:
        problems.append(codes.NO_FEASIBLE_SIZE.make(
            entity.span, what=f"`{entity.name}` has no plan on the partitions it may use",
            notes=["help: `gclc plan` on the job says why"]))
        return None
    return sorted(options, key=lambda o: -o[2]), float(job.steps)


def placements(job: RLJob) -> list[tuple[str, str]]:
    """(generation partition, training partition) pairs the pins allow: each partition alone,
    then each ordered pair of two (pools apart)."""
    names = [p.name for p in job.partitions]
    gens = [n for n in names if job.generate.partition in (None, n)]
    trains = [n for n in names if job.train.partition in (None, n)]
    pairs = [(n, n) for n in names if n in gens and n in trains]
    if job.placement != COLOCATED:
        pairs += [(g, t) for g in gens for t in trains if g != t]
    return pairs


def _option(job: RLJob, generate: str, train: str) -> GangOption | None:
    here = attrs.evolve(job, generate=attrs.evolve(job.generate, partition=generate),
                        train=attrs.evolve(job.train, partition=train),
                        placement=job.placement if generate == train else DISAGGREGATED)
    found = search(here, 0).best
    if not found:
        return None
    best = found[0]
    rate = 1.0 / best.step.step_time
    if generate == train:
        return train, best.gpus, rate, None
    return train, best.train.gpus, rate, (generate, best.generation.layout.gpus)
