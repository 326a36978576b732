"""The cluster as the scheduler sees it: per partition, free and working GPUs per
scale-up domain (a node, or an NVL72 rack), grouped by the fabric's tiers (leaf, spine,
...). Counts per domain, never one record per GPU, so 100,000 GPUs are ~12,500 numbers.

An allocation is the domains a job holds and how many GPUs in each; the level is the
lowest tier whose one group holds it all (0: one scale-up domain).
"""

from __future__ import annotations

import attrs
import numpy as np

from ...compiler.ir import ClusterGraph, Partition


@attrs.frozen
class Allocation:
    partition: str
    domains: tuple[int, ...]
    counts: tuple[int, ...]
    level: int

    @property
    def gpus(self) -> int:
        return sum(self.counts)


@attrs.define
class PartitionState:
    name: str
    chip: str
    domain_gpus: int                 # GPUs per scale-up domain
    node_gpus: int
    group_domains: tuple[int, ...]   # domains per group at each level (level 0: 1)
    tier_names: tuple[str, ...]
    capacity: np.ndarray             # working GPUs per domain (failures take nodes out)
    free: np.ndarray                 # free working GPUs per domain
    holders: list[dict[str, int]]    # per domain: job -> GPUs held there

    @classmethod
    def of(cls, p: Partition) -> "PartitionState":
        domain = p.nodes_per_unit * p.node.gpus
        count = p.units
        groups = [1]
        names = [p.tiers[0].name if p.tiers else "domain"]
        for tier in p.tiers[1:]:
            per = max(1, min(count, tier.group_gpus // domain))
            if per > groups[-1]:
                groups.append(per)
                names.append(tier.name)
        if groups[-1] < count:
            groups.append(count)
            names.append("partition")
        full = np.full(count, domain, dtype=np.int64)
        return cls(p.name, p.node.accelerator.name, domain, p.node.gpus, tuple(groups), tuple(names),
                   full.copy(), full.copy(), [dict() for _ in range(count)])

    @property
    def domains(self) -> int:
        return len(self.free)

    def group_free(self, level: int) -> np.ndarray:
        """Free GPUs per group of `level` (the last group may be short)."""
        per = self.group_domains[level]
        if per == 1:
            return self.free
        return np.add.reduceat(self.free, np.arange(0, self.domains, per))

    def best_group(self, gpus: int, level: int) -> tuple[int, int] | None:
        """(group, its free GPUs) of the fullest group at `level` that still has `gpus` free."""
        sums = self.group_free(level)
        fits = np.flatnonzero(sums >= gpus)
        if fits.size == 0:
            return None
        best = fits[np.argmin(sums[fits])]
        return int(best), int(sums[best])

    def take(self, job: str, gpus: int, level: int, group: int, first_fit: bool = False) -> Allocation:
        """Place `gpus` in `group` of `level`: whole free domains first (fewest domains),
        then the fullest partial ones; `first_fit` walks the domains in order instead."""
        per = self.group_domains[level]
        lo, hi = group * per, min(self.domains, (group + 1) * per)
        free = self.free[lo:hi]
        if first_fit:
            order = np.flatnonzero(free > 0)
        elif gpus <= self.domain_gpus and (free >= gpus).any():
            fits = np.flatnonzero(free >= gpus)
            order = fits[np.argsort(free[fits], kind="stable")][:1]
        else:
            order = np.argsort(-free, kind="stable")
        domains, counts, left = [], [], gpus
        for i in order:
            if left == 0:
                break
            n = int(min(free[i], left))
            if n > 0:
                domains.append(lo + int(i))
                counts.append(n)
                left -= n
        assert left == 0, "take() called on a group without room"
        return Allocation(self.name, tuple(domains), tuple(counts), self.level_of(domains))

    def level_of(self, domains) -> int:
        for level, per in enumerate(self.group_domains):
            if len({d // per for d in domains}) == 1:
                return level
        return len(self.group_domains) - 1

    def apply(self, job: str, alloc: Allocation, sign: int) -> None:
        """Hold (`sign` = 1) or release (-1) an allocation's GPUs."""
        for d, n in zip(alloc.domains, alloc.counts):
            self.free[d] -= sign * n
            if sign > 0:
                self.holders[d][job] = self.holders[d].get(job, 0) + n
            else:
                left = self.holders[d].pop(job) - n
                if left:
                    self.holders[d][job] = left
        if (self.free < 0).any() or (self.free > self.capacity).any():
            raise AssertionError(f"GPU counts out of range in partition {self.name}")


@attrs.define
class ClusterState:
    partitions: dict[str, PartitionState]
    allocations: dict[str, Allocation] = attrs.Factory(dict)

    @classmethod
    def of(cls, graph: ClusterGraph) -> "ClusterState":
        return cls({p.name: PartitionState.of(p) for p in graph.partitions})

    def bind(self, job: str, alloc: Allocation) -> None:
        assert job not in self.allocations, f"{job} is already bound"
        self.partitions[alloc.partition].apply(job, alloc, 1)
        self.allocations[job] = alloc

    def release(self, job: str) -> Allocation:
        alloc = self.allocations.pop(job)
        self.partitions[alloc.partition].apply(job, alloc, -1)
        return alloc

    def free(self, partition: str) -> int:
        return int(self.partitions[partition].free.sum())

    def capacity(self, partition: str) -> int:
        return int(self.partitions[partition].capacity.sum())

    def used(self) -> int:
        return sum(a.gpus for a in self.allocations.values())

    def total(self) -> int:
        return sum(int(p.capacity.sum()) for p in self.partitions.values())
