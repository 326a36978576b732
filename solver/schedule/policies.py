"""Scheduling policies: one small protocol (`order`, `filter`, `score`, `bind`) like the
Kubernetes scheduling framework's extension points, and three policies.

- `fifo`: arrival order, strict (the head of the queue blocks the rest), first fit
  anywhere in a partition, no preemption.
- `priority`: highest priority first, then arrival; scores a preferred partition first
  (like Kueue's ordered flavors), then the job's planned throughput at that size and
  partition, then topology-aware best fit like Kueue's TAS (the lowest tier whose one
  group holds the job, the fullest such group); preempts lower priorities.
- `slurm`: Slurm's multifactor order (priority, then age) with backfill (a job that
  does not fit does not block smaller ones behind it) and the topology/tree plugin's
  lowest-switch best fit; no preemption (Slurm's default PreemptType=none).
"""

from __future__ import annotations

from typing import Iterable, Protocol

import attrs

from .jobs import Option, SchedJob
from .state import Allocation, ClusterState


@attrs.frozen
class Candidate:
    option: Option
    gpus: int          # what it binds: option.gpus for a gang job, up to that otherwise
    level: int
    group: int
    leftover: int      # free GPUs of the group after binding


class Policy(Protocol):
    name: str
    preempts: bool     # may evict lower priorities when nothing fits
    blocking: bool     # a job that does not fit stops the cycle

    def key(self, job: SchedJob) -> tuple: ...   # the queue's order: the simulation keeps it sorted by this

    def order(self, pending: Iterable[SchedJob]) -> list[SchedJob]: ...

    def filter(self, job: SchedJob, state: ClusterState) -> list[Candidate]: ...

    def score(self, job: SchedJob, candidate: Candidate, state: ClusterState) -> tuple: ...

    def bind(self, job: SchedJob, candidate: Candidate, state: ClusterState) -> Allocation: ...


def fits(job: SchedJob, state: ClusterState, topology: bool = True) -> list[Candidate]:
    """Every option of `job` that fits now, each at the lowest tier with room (or, without
    `topology`, anywhere in the partition). A gang job needs its whole size at once."""
    out = []
    for option in job.options:
        part = state.partitions[option.partition]
        free = part.free_gpus
        if not job.gang:
            if free > 0:
                gpus = min(free, option.gpus)
                out.append(Candidate(option, gpus, len(part.group_domains) - 1, 0, free - gpus))
            continue
        if free < option.gpus:
            continue
        levels = range(len(part.group_domains)) if topology else [len(part.group_domains) - 1]
        for level in levels:
            found = part.best_group(option.gpus, level)
            if found is not None:
                group, room = found
                out.append(Candidate(option, option.gpus, level, group, room - option.gpus))
                break
    return out


def _take(job: SchedJob, c: Candidate, state: ClusterState, first_fit: bool = False) -> Allocation:
    return state.partitions[c.option.partition].take(job.name, c.gpus, c.level, c.group, first_fit)


def _rate(job: SchedJob, c: Candidate) -> float:
    return c.option.rate * c.gpus / c.option.gpus / job.best_rate


@attrs.frozen
class Fifo:
    name: str = "fifo"
    preempts: bool = False
    blocking: bool = True

    def key(self, job):
        return (job.submit, job.name)

    def order(self, pending):
        return sorted(pending, key=self.key)

    def filter(self, job, state):
        return fits(job, state, topology=False)

    def score(self, job, c, state):
        return (-job.partitions.index(c.option.partition), c.gpus)

    def bind(self, job, c, state):
        return _take(job, c, state, first_fit=True)


def priority_key(job: SchedJob) -> tuple:
    """Highest priority first, then first submitted (names break ties, for determinism)."""
    return (-job.priority, job.submit, job.name)


def by_priority(pending):
    return sorted(pending, key=priority_key)


@attrs.frozen
class PriorityBestFit:
    name: str = "priority"
    preempts: bool = True
    blocking: bool = False

    def key(self, job):
        return priority_key(job)

    def order(self, pending):
        return by_priority(pending)

    def filter(self, job, state):
        return fits(job, state)

    def score(self, job, c, state):
        preferred = c.option.partition in job.prefer
        return (preferred, round(_rate(job, c), 6), -c.level, -c.leftover)

    def bind(self, job, c, state):
        return _take(job, c, state)


@attrs.frozen
class SlurmTree:
    name: str = "slurm"
    preempts: bool = False
    blocking: bool = False

    def key(self, job):
        return priority_key(job)

    def order(self, pending):
        return by_priority(pending)

    def filter(self, job, state):
        return fits(job, state)

    def score(self, job, c, state):
        return (-c.level, -c.leftover, c.option.partition in job.prefer, c.gpus)

    def bind(self, job, c, state):
        return _take(job, c, state)


POLICIES = {"fifo": Fifo(), "priority": PriorityBestFit(), "slurm": SlurmTree()}


def victims(job: SchedJob, state: ClusterState, running: dict[str, tuple[SchedJob, float]]) -> list[str] | None:
    """The fewest, least important running jobs to evict so that `job` fits, like the
    Kubernetes default preemption: on each partition, evict strictly lower priorities
    (lowest first, most recently started first) until it fits, then reprieve the most
    important evicted ones that are not needed. None when no eviction makes room."""
    best: tuple[tuple, list[str]] | None = None
    for option in job.options:
        part = state.partitions[option.partition]
        lower = sorted((name for name, alloc in state.allocations.items()
                        if alloc.partition == option.partition and running[name][0].priority < job.priority),
                       key=lambda n: (running[n][0].priority, -running[n][1], n))
        need = option.gpus if job.gang else 1
        free = part.free_gpus          # room counts GPUs, not where they are: a total is enough
        if free + sum(state.allocations[n].gpus for n in lower) < need:
            continue
        chosen: list[str] = []
        for name in lower:
            free += state.allocations[name].gpus
            chosen.append(name)
            if free >= need:
                break
        for name in sorted(chosen, key=lambda n: (-running[n][0].priority, running[n][1], n)):
            if free - state.allocations[name].gpus >= need:
                free -= state.allocations[name].gpus
                chosen.remove(name)
        if not chosen:
            continue
        cost = (max(running[n][0].priority for n in chosen), len(chosen),
                sum(state.allocations[n].gpus for n in chosen))
        if best is None or cost < best[0]:
            best = (cost, chosen)
    return None if best is None else best[1]

