"""The pending queue and one pass over it, bounded by what may fit rather than by what waits.

A trace that overloads the cluster keeps a queue thousands long, and every freed GPU starts a
pass: sorting the whole queue again and trying every waiting job made a pass cost the queue
(1,000 rows: 389 tries a row). Here the queue stays sorted as jobs come and go; a pass skips a
job shaped like one that just failed (the same options, gang, priority, tenant), and ends once
no partition has the GPUs the smallest waiting job needs and no job left may preempt.
"""

from __future__ import annotations

import bisect
import collections
from typing import Callable, Iterator

from .records import SchedJob


class PendingQueue:
    """The pending jobs, a dict by name (in the order they became pending) that also keeps
    them sorted by the policy's `key` (and, where the policy names a `group`, sorted within
    each group: Kueue's workloads of one queue and shape), and counts the fewest GPUs each
    could start on."""

    def __init__(self, key: Callable[[SchedJob], tuple] | None, group: Callable[[SchedJob], object] | None = None) -> None:
        self.key, self.jobs, self.sorted, self.group = key, {}, [], group
        self.groups: dict[object, list[tuple[tuple, str]]] = {}
        self.needs: collections.Counter[int] = collections.Counter()
        self.tenant_needs: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)

    def __setitem__(self, name: str, job: SchedJob) -> None:
        if name in self.jobs:
            del self[name]
        self.jobs[name] = job
        if self.key is not None:
            bisect.insort(self.sorted, (self.key(job), name))
            if self.group is not None:
                bisect.insort(self.groups.setdefault(self.group(job), []), (self.key(job), name))
        self.needs[least_need(job)] += 1
        self.tenant_needs[job.tenant][least_need(job)] += 1

    def __delitem__(self, name: str) -> None:
        job = self.jobs.pop(name)
        if self.key is not None:
            del self.sorted[bisect.bisect_left(self.sorted, (self.key(job), name))]
            if self.group is not None:
                group = self.group(job)
                entries = self.groups[group]
                del entries[bisect.bisect_left(entries, (self.key(job), name))]
                if not entries:
                    del self.groups[group]
        need, mine = least_need(job), self.tenant_needs[job.tenant]
        self.needs[need] -= 1
        if not self.needs[need]:
            del self.needs[need]
        mine[need] -= 1
        if not mine[need]:
            del mine[need]

    def __getitem__(self, name: str) -> SchedJob:
        return self.jobs[name]

    def __contains__(self, name: object) -> bool:
        return name in self.jobs

    def __iter__(self) -> Iterator[str]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def values(self):
        return self.jobs.values()

    def ordered(self, policy) -> Iterator[SchedJob]:
        """The jobs in the policy's order, as of now (a pass that stops early reads few)."""
        if self.key is None:
            return iter(policy.order(self.jobs.values()))
        jobs = self.jobs
        return (jobs[name] for _, name in self.sorted.copy() if name in jobs)

    @property
    def least(self) -> int:
        """The fewest free GPUs any pending job could start on (one not in a gang takes one)."""
        return min(self.needs, default=0)

    def least_of(self, tenant: str) -> int | None:
        """The fewest GPUs any pending job of `tenant` could start on; None if none waits."""
        return min(self.tenant_needs.get(tenant, ()), default=None)


def least_need(job: SchedJob) -> int:
    return job.least if job.gang else 1


def shape(job: SchedJob) -> tuple[tuple, tuple[int, ...]]:
    """What decides whether a job fits now, less its sizes; and its sizes. An rl gang's companion
    pool is part of it: a gang that found no room for its two pools says nothing of a job
    needing as many GPUs of its training partition alone."""
    return ((tuple((o.partition, o.companion) for o in job.options), job.gang, job.priority, job.tenant, job.service),
            tuple(o.gpus for o in job.options))


def place_in_order(sim, now: float, queue) -> None:
    """Place `queue`'s jobs in order through `sim._place`, as the module says."""
    failed: dict[tuple, tuple[int, ...]] = {}
    most_free, least = _most_free(sim), sim.pending.least
    pending, shapes, blocking = sim.pending.jobs, sim.shapes, sim.policy.blocking
    for job in queue:
        name = job.name
        if name not in pending:
            continue
        if most_free < least and not may_preempt(sim, job):
            break   # the order is by priority: nothing later may preempt either
        key, sizes = shapes[name]
        before = failed.get(key)
        if before is not None and (sizes >= before if len(sizes) == 1 else all(map(int.__ge__, sizes, before))):
            if blocking:
                break
            continue
        evicted = sim.evictions
        placed = sim._place(now, job)
        most_free, least = _most_free(sim), sim.pending.least
        if placed:
            continue
        if sim.evictions != evicted:  # an eviction changed what fits: forget what failed
            failed.clear()
        failed[key] = sizes
        if blocking:
            break


def may_preempt(sim, job: SchedJob) -> bool:
    """Whether evicting could make room: the policy preempts and a lower priority runs."""
    return sim.policy.preempts and bool(sim.running) and job.priority > min(sim.priorities)


def _most_free(sim) -> int:
    return max(p.free_gpus for p in sim.state.partitions.values())
