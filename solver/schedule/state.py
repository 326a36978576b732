"""The cluster as the scheduler sees it: per partition, free and working GPUs per
scale-up domain (a node, or an NVL72 rack), grouped by the fabric's tiers (leaf, spine,
...). Counts per domain, never one record per GPU, so 100,000 GPUs are ~12,500 numbers;
and what the simulation reads at every event (working GPUs, free GPUs, free GPUs in wholly
free domains, free GPUs per group of each tier) is kept as each change happens, so an
event costs what it touches, not a pass over every domain.

An allocation is the domains a job holds and how many GPUs in each; the level is the
lowest tier whose one group holds it all (0: one scale-up domain). An rl gang across two
partitions holds a companion allocation on the other one, bound and released with it, and
listed under the job's name among the holders of its domains (a failure there hits the job).
"""

from __future__ import annotations

import attrs
import numpy as np

from ...compiler.ir import ClusterGraph, Partition
from .prefix import Fenwick
from ...dsl.records import define, frozen

SMALL = 8   # allocations of at most this many domains are applied without numpy (its calls cost more)


@frozen
class Allocation:
    partition: str
    domains: tuple[int, ...]
    counts: tuple[int, ...]
    level: int
    companion: "Allocation | None" = attrs.field(default=None, kw_only=True)   # on another partition
    index: dict[int, int] = attrs.field(init=False, eq=False, repr=False)   # domain -> GPUs, for failures
    gpus: int = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "index", dict(zip(self.domains, self.counts)))
        object.__setattr__(self, "gpus", sum(self.counts))

    @property
    def held_gpus(self) -> int:
        """GPUs held on every partition: with the companion's."""
        return self.gpus + (self.companion.gpus if self.companion is not None else 0)

    def parts(self) -> tuple["Allocation", ...]:
        return (self,) if self.companion is None else (self, self.companion)


@define
class PartitionState:
    name: str
    chip: str
    domain_gpus: int                 # GPUs per scale-up domain
    node_gpus: int
    group_domains: tuple[int, ...]   # domains per group at each level (level 0: 1)
    tier_names: tuple[str, ...]
    capacity: np.ndarray             # working GPUs per domain (failures take nodes out): change with `resize`
    free: np.ndarray                 # free working GPUs per domain: change with `apply`
    working_gpus: int = attrs.field(init=False)      # capacity.sum()
    free_gpus: int = attrs.field(init=False)         # free.sum()
    whole_free_gpus: int = attrs.field(init=False)   # free GPUs of domains wholly free
    _working: Fenwick = attrs.field(init=False, repr=False)   # capacity, to find the r-th working GPU
    _sums: list[np.ndarray] = attrs.field(init=False, repr=False)   # free GPUs per group at each level (0: `free`)

    def __attrs_post_init__(self) -> None:
        self.working_gpus, self.free_gpus = int(self.capacity.sum()), int(self.free.sum())
        self.whole_free_gpus = self._whole(self.free)
        self._working = Fenwick(self.capacity.tolist())
        self._sums = [self.free] + [np.add.reduceat(self.free, np.arange(0, len(self.free), per))
                                    for per in self.group_domains[1:]]

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
                   full.copy(), full.copy())

    @property
    def domains(self) -> int:
        return len(self.free)

    def group_free(self, level: int) -> np.ndarray:
        """Free GPUs per group of `level` (the last group may be short); kept as GPUs are
        held and released, so read it, never write it."""
        return self._sums[level]

    def best_group(self, gpus: int, level: int) -> tuple[int, int] | None:
        """(group, its free GPUs) of the fullest group at `level` that still has `gpus` free."""
        if gpus > self.group_domains[level] * self.domain_gpus:    # no group of this level is that large
            return None
        sums = self.group_free(level)
        fits = np.flatnonzero(sums >= gpus)
        if fits.size == 0:
            return None
        best = fits[np.argmin(sums[fits])]
        return int(best), int(sums[best])

    def take(self, job: str, gpus: int, level: int, group: int, first_fit: bool = False,
             spread: bool = False) -> Allocation:
        """Place `gpus` in `group` of `level`: the fullest single domain that holds it, else
        whole free domains first and then the fullest partial ones (fewest domains);
        `first_fit` walks the domains in order instead; `spread` takes the emptiest domain
        that holds it, else the emptiest domains first (kube-scheduler's LeastAllocated)."""
        per = self.group_domains[level]
        lo, hi = group * per, min(self.domains, (group + 1) * per)
        free = self.free[lo:hi]
        if first_fit:       # only the leading domains that hold it: a prefix, doubled until it does
            end = min(len(free), 64)
            while end < len(free) and int(free[:end].sum()) < gpus:
                end = min(len(free), 2 * end)
            order = np.flatnonzero(free[:end] > 0)
        elif gpus <= self.domain_gpus and (free >= gpus).any():
            fits = np.flatnonzero(free >= gpus)
            order = fits[np.argsort(-free[fits] if spread else free[fits], kind="stable")][:1]
        else:
            order = _fullest_first(free, gpus)
        held = np.cumsum(free[order])
        last = int(np.searchsorted(held, gpus))          # the first domain that completes it
        if last >= len(order):
            raise AssertionError("take() called on a group without room")
        counts = free[order[:last + 1]].copy()
        counts[-1] -= int(held[last]) - gpus
        keep = counts > 0
        domains = (order[:last + 1][keep] + lo).tolist()
        return Allocation(self.name, tuple(domains), tuple(counts[keep].tolist()), self.level_of(domains))

    def level_of(self, domains) -> int:
        first, last = min(domains), max(domains)
        for level, per in enumerate(self.group_domains):
            if first // per == last // per:
                return level
        return len(self.group_domains) - 1

    def _whole(self, free: np.ndarray) -> int:
        return int(free[free == self.domain_gpus].sum())

    def apply(self, alloc: Allocation, sign: int) -> None:
        """Hold (`sign` = 1) or release (-1) an allocation's GPUs."""
        if len(alloc.domains) <= SMALL:
            self._apply_few(alloc, sign)
            return
        domains = np.fromiter(alloc.domains, dtype=np.int64, count=len(alloc.domains))
        before = self.free[domains]
        after = before - sign * np.fromiter(alloc.counts, dtype=np.int64, count=len(alloc.counts))
        if (after < 0).any() or (after > self.capacity[domains]).any():
            raise AssertionError(f"GPU counts out of range in partition {self.name}")
        self.free[domains] = after
        for per, sums in zip(self.group_domains[1:], self._sums[1:]):
            np.add.at(sums, domains // per, after - before)
        self.free_gpus -= sign * alloc.gpus
        self.whole_free_gpus += self._whole(after) - self._whole(before)

    def _apply_few(self, alloc: Allocation, sign: int) -> None:
        """`apply` one domain at a time: for a few domains, cheaper than numpy's calls."""
        free, capacity, whole = self.free, self.capacity, self.domain_gpus
        if any(not 0 <= free[d] - sign * c <= capacity[d] for d, c in zip(alloc.domains, alloc.counts)):
            raise AssertionError(f"GPU counts out of range in partition {self.name}")
        levels = tuple(zip(self.group_domains[1:], self._sums[1:]))
        change = 0
        for d, c in zip(alloc.domains, alloc.counts):
            before = int(free[d])
            after = before - sign * c
            free[d] = after
            for per, sums in levels:
                sums[d // per] -= sign * c
            change += (after if after == whole else 0) - (before if before == whole else 0)
        self.free_gpus -= sign * alloc.gpus
        self.whole_free_gpus += change

    def resize(self, domain: int, gpus: int) -> None:
        """A node of `domain` comes back (`gpus` > 0) or goes down (< 0, its GPUs free):
        its GPUs join or leave both the working and the free count."""
        before, after = int(self.free[domain]), int(self.free[domain]) + gpus
        if after < 0:
            raise AssertionError(f"a node of domain {domain} of {self.name} goes down while its GPUs are held")
        self.capacity[domain] += gpus
        self.free[domain] = after
        for per, sums in zip(self.group_domains[1:], self._sums[1:]):
            sums[domain // per] += gpus
        self.working_gpus += gpus
        self.free_gpus += gpus
        whole = self.domain_gpus
        self.whole_free_gpus += (after if after == whole else 0) - (before if before == whole else 0)
        self._working.add(domain, gpus)

    def domain_of_working(self, unit: int) -> int:
        """The domain that holds working GPU number `unit` (0 <= unit < working_gpus), in domain order."""
        return self._working.find(unit)


@define
class ClusterState:
    partitions: dict[str, PartitionState]
    allocations: dict[str, Allocation] = attrs.Factory(dict)
    # per partition, per domain: the jobs holding GPUs there, in the order they were bound (a
    # failure finds its victims without a pass over every allocation); a list by domain
    # number, so a bind or release costs a dict write per domain it touches
    holding: dict[str, list[dict[str, int]]] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self.holding = {name: [{} for _ in range(p.domains)] for name, p in self.partitions.items()}
        for job, alloc in self.allocations.items():
            for part in alloc.parts():
                for domain, count in zip(part.domains, part.counts):
                    self.holding[part.partition][domain][job] = count

    @classmethod
    def of(cls, graph: ClusterGraph) -> "ClusterState":
        return cls({p.name: PartitionState.of(p) for p in graph.partitions})

    def bind(self, job: str, alloc: Allocation) -> None:
        assert job not in self.allocations, f"{job} is already bound"
        self.allocations[job] = alloc
        for part in alloc.parts():
            self.partitions[part.partition].apply(part, 1)
            held = self.holding[part.partition]
            for domain, count in zip(part.domains, part.counts):
                held[domain][job] = count

    def release(self, job: str) -> Allocation:
        alloc = self.allocations.pop(job)
        for part in alloc.parts():
            self.partitions[part.partition].apply(part, -1)
            held = self.holding[part.partition]
            for domain in part.domains:
                del held[domain][job]
        return alloc

    def holders(self, partition: str, domain: int) -> dict[str, int]:
        """Jobs holding GPUs of one domain, and how many, in the order they were bound."""
        return dict(self.holding[partition][domain])

    def holders_within(self, partition: str, lo: int, hi: int) -> set[str]:
        """Jobs holding GPUs of any domain in [lo, hi) (a leaf switch's)."""
        return {job for held in self.holding[partition][lo:hi] for job in held}

    def free(self, partition: str) -> int:
        return self.partitions[partition].free_gpus

    def capacity(self, partition: str) -> int:
        return self.partitions[partition].working_gpus

    def used(self) -> int:
        return sum(a.held_gpus for a in self.allocations.values())

    def total(self) -> int:
        return sum(p.working_gpus for p in self.partitions.values())


def _fullest_first(free: np.ndarray, gpus: int) -> np.ndarray:
    """Indices of `free` from the fullest domain down, ties in index order, as far as they
    hold `gpus` (what a stable argsort of -free gives up to there): a pass per distinct free
    count, never a sort of every domain of a spine group."""
    parts, got = [], 0
    for k in range(int(free.max(initial=0)), 0, -1):
        found = np.flatnonzero(free == k)
        parts.append(found)
        got += k * len(found)
        if got >= gpus:
            break
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
