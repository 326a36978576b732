"""The time a job asks the scheduler for (Slurm's `--time`, a Kubernetes Job's
`activeDeadlineSeconds`): what the design states, or, for a train job that states none,
its expected run at its first option with a margin, so that backfill can plan around it
and the exports ask for the same time the simulation assumed."""

from __future__ import annotations

import math

MARGIN = 1.25     # ASSUMPTION: a quarter more than the plan expects, for restarts and slow steps
GRANULE = 3600.0  # ASSUMPTION: asked in whole hours, as people write `--time=HH:00:00`


def expected_run(work: float, rate: float, interval: float, write: float) -> float:
    """Seconds one run takes to do `work` at `rate`, writing a checkpoint every `interval`
    seconds of work (each taking `write`), with no failure."""
    writes = math.ceil(work / (rate * interval)) - 1 if math.isfinite(interval) else 0
    return work / rate + max(0, writes) * write


def requested(stated: float | None, expected: float) -> float:
    """`stated` seconds, else the `expected` run x MARGIN rounded up to whole GRANULEs."""
    if stated is not None:
        return stated
    return math.ceil(expected * MARGIN / GRANULE) * GRANULE
