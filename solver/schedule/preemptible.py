"""The running jobs preemption may evict, kept in eviction order as they start and stop, so
that finding victims costs the victims tried, not a pass over every running job.

Per partition: the jobs holding GPUs there sorted by (priority, latest start first, name),
the order `policies.victims` evicts them in, and the GPUs held there per priority. The
simulation adds a job when its bind reaches the cache and removes it when its release does;
a preemption's dry run releases and re-holds allocations in the cluster state without
touching this index (the jobs it tries are still running)."""

from __future__ import annotations

import bisect
import collections
import heapq
import itertools
from typing import Iterator

from .state import Allocation, ClusterState


class Preemptible:
    def __init__(self) -> None:
        self.order: dict[str, list[tuple[int, float, str]]] = collections.defaultdict(list)
        self.gpus: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
        self.entries: dict[str, tuple[tuple[int, float, str], tuple[tuple[str, int], ...]]] = {}

    @classmethod
    def of(cls, state: ClusterState, running: dict) -> "Preemptible":
        """The index of `state`'s allocations, each job's priority and start from `running`."""
        index = cls()
        for name, alloc in state.allocations.items():
            job, start = running[name]
            index.add(name, job.priority, start, alloc)
        return index

    def add(self, name: str, priority: int, start: float, alloc: Allocation) -> None:
        key = (priority, -start, name)
        parts = tuple((p.partition, p.gpus) for p in alloc.parts())
        self.entries[name] = (key, parts)
        for partition, gpus in parts:
            bisect.insort(self.order[partition], key)
            self.gpus[partition][priority] += gpus

    def remove(self, name: str) -> None:
        key, parts = self.entries.pop(name)
        for partition, gpus in parts:
            entries = self.order[partition]
            del entries[bisect.bisect_left(entries, key)]
            held = self.gpus[partition]
            held[key[0]] -= gpus
            if not held[key[0]]:
                del held[key[0]]

    def lower(self, partitions, priority: int) -> Iterator[str]:
        """The jobs below `priority` holding GPUs on any of `partitions`, in eviction order,
        each once (a gang across two of them is listed under both)."""
        heads = []
        for partition in partitions:
            entries = self.order.get(partition, [])
            heads.append(itertools.islice(entries, bisect.bisect_left(entries, (priority,))))
        last = None
        for _, _, name in heapq.merge(*heads):
            if name != last:       # equal keys are one job's: merged next to each other
                yield name
            last = name

    def freed(self, partition: str, priority: int) -> int:
        """GPUs on `partition` held by jobs below `priority`: what evicting them all frees there."""
        return sum(gpus for p, gpus in self.gpus.get(partition, {}).items() if p < priority)
