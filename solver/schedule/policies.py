"""Scheduling policies: one small protocol (`order`, `filter`, `score`, `bind`) like the
Kubernetes scheduling framework's extension points, and the policies built on it.

- `fifo`: arrival order, strict (the head of the queue blocks the rest), first fit
  anywhere in a partition, no preemption.
- `priority`: highest priority first, then arrival; scores a preferred partition first
  (like Kueue's ordered flavors), then the job's planned throughput at that size and
  partition, then topology-aware best fit like Kueue's TAS (the lowest tier whose one
  group holds the job, the fullest such group); preempts lower priorities; restarts elastic
  jobs larger when GPUs idle (solver/schedule/simulate.py `_grow`).
- `kube`: kube-scheduler's default profile (NodeResourcesFit scoring) with gangs.
- `slurm`: Slurm's main loop and backfill with reservations (solver/schedule/slurm.py).
- `kueue`: Kueue's quota-based admission by ClusterQueue and cohort (solver/schedule/kueue.py).

Every policy by the name the command line takes: solver/schedule/catalog.py.
"""

from __future__ import annotations

from typing import Iterable, Protocol

import attrs

from .records import Option, SchedJob
from .settings import KubeSettings
from .preemptible import Preemptible
from .state import Allocation, ClusterState
from ...dsl.records import frozen


@frozen
class Candidate:
    option: Option
    gpus: int          # what it binds: option.gpus for a gang job, up to that otherwise
    level: int
    group: int
    leftover: int      # free GPUs of the group after binding
    companion: tuple[int, int] | None = None   # (level, group) of the option's companion GPUs


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
        companion = _companion(option, state)
        if option.companion is not None and companion is None:
            continue
        levels = range(len(part.group_domains)) if topology else [len(part.group_domains) - 1]
        for level in levels:
            found = part.best_group(option.gpus, level)
            if found is not None:
                group, room = found
                out.append(Candidate(option, option.gpus, level, group, room - option.gpus, companion))
                break
    return out


def _companion(option: Option, state: ClusterState) -> tuple[int, int] | None:
    """Where an option's companion GPUs fit on their partition: the lowest tier with a group
    that holds them (a gang across partitions binds both at once or neither)."""
    if option.companion is None:
        return None
    name, gpus = option.companion
    part = state.partitions[name]
    if part.free_gpus < gpus:
        return None
    for level in range(len(part.group_domains)):
        found = part.best_group(gpus, level)
        if found is not None:
            return level, found[0]
    return None


def required_level(c: Candidate, state: ClusterState) -> int:
    """The smallest tier whose one group can hold the candidate's job (at least the leaf,
    level 1, where the fabric has one): Kueue's podset-required-topology at that level,
    Slurm's `--switches` for as few leaf switches as the job needs."""
    part = state.partitions[c.option.partition]
    for level, per in enumerate(part.group_domains):
        if per * part.domain_gpus >= c.option.gpus:
            return max(level, min(1, len(part.group_domains) - 1))
    return len(part.group_domains) - 1


def take(job: SchedJob, c: Candidate, state: ClusterState, first_fit: bool = False,
         spread: bool = False) -> Allocation:
    alloc = state.partitions[c.option.partition].take(job.name, c.gpus, c.level, c.group, first_fit, spread)
    if c.companion is None:
        return alloc
    name, gpus = c.option.companion
    other = state.partitions[name].take(job.name, gpus, *c.companion, first_fit, spread)
    return attrs.evolve(alloc, companion=other)


def _rate(job: SchedJob, c: Candidate) -> float:
    return c.option.rate * c.gpus / c.option.gpus / job.best_rate


@frozen
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
        return take(job, c, state, first_fit=True)


def priority_key(job: SchedJob) -> tuple:
    """Highest priority first, then first submitted (names break ties, for determinism)."""
    return (-job.priority, job.submit, job.name)


def by_priority(pending):
    return sorted(pending, key=priority_key)


@frozen
class PriorityBestFit:
    name: str = "priority"
    preempts: bool = True
    blocking: bool = False
    grows: bool = True     # elastic jobs restart larger when GPUs idle (simulate.py `_grow`)

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
        return take(job, c, state)


@frozen
class Kube:
    """kube-scheduler's default profile, gangs made all-or-nothing by coscheduling's
    PodGroups: PriorityClass order, then creation time; the NodeResourcesFit score
    (`least_allocated` spreads pods over the emptiest nodes, `most_allocated` packs the
    fullest) without topology awareness; the default preemption (PostFilter) of lower
    priorities, only where the pod then fits."""

    name: str = "kube"
    preempts: bool = True
    blocking: bool = False
    settings: KubeSettings = KubeSettings()

    def key(self, job):
        return priority_key(job)

    def order(self, pending):
        return by_priority(pending)

    def filter(self, job, state):
        return fits(job, state, topology=False)

    def score(self, job, c, state):
        return (c.option.partition in job.prefer, -job.options.index(c.option))

    def bind(self, job, c, state):
        return take(job, c, state, spread=self.settings.scoring == "least_allocated")


def victims(job: SchedJob, state: ClusterState, running: dict[str, tuple[SchedJob, float]],
            policy: Policy | None = None, index: Preemptible | None = None) -> list[str] | None:
    """The fewest, least important running jobs to evict so that `job` then places, like
    the Kubernetes default preemption (PostFilter): on each partition, evict strictly lower
    priorities (lowest first, most recently started first) until the policy's filter finds
    a placement with them gone (a dry run: their GPUs released, then held again), then
    reprieve the most important evicted ones that the placement does not need. None when
    no eviction makes it place. An rl gang across two partitions needs room on both: jobs
    holding GPUs on either are candidates, and evicting a gang frees both its pools.
    `index`: the running jobs in eviction order, as the simulation keeps them (built from
    `state` and `running` where not given)."""
    if index is None:
        index = Preemptible.of(state, running)
    best: tuple[tuple, list[str]] | None = None
    for option in job.options:
        needs = option.needs(job.gang)
        if any(state.partitions[name].free_gpus + index.freed(name, job.priority) < gpus for name, gpus in needs):
            continue
        lower = index.lower(sorted({name for name, _ in needs}), job.priority)
        chosen = _dry_run(job, option, state, lower, policy,
                          reprieve=lambda names: sorted(names, key=lambda n: (-running[n][0].priority, running[n][1], n)))
        if not chosen:
            continue
        cost = (max(running[n][0].priority for n in chosen), len(chosen),
                sum(state.allocations[n].held_gpus for n in chosen))
        if best is None or cost < best[0]:
            best = (cost, chosen)
    return None if best is None else best[1]


def _dry_run(job: SchedJob, option: Option, state: ClusterState, lower: Iterable[str], policy: Policy | None,
             reprieve) -> list[str]:
    """The jobs of `lower` (read as far as needed) to evict, as `victims` says: released one at a time until `job`
    places on `option`'s partition, then each of `reprieve(chosen)` held again for good if it
    still places without it. Every job touched is held again at the end, in the order that
    releasing and re-holding each tried set in turn leaves them (the cluster state's order
    of allocations is its bind order, which failures read)."""
    held: dict[str, Allocation] = {}
    last: dict[str, tuple[int, int]] = {}        # job -> (the last tried set holding it, its place there)
    tries = 0
    chosen: list[str] = []
    try:
        for name in lower:
            held[name] = state.release(name)
            last[name] = (0, len(last))          # set below once the tries are known
            chosen.append(name)
            tries += 1
            if _places(job, option, state, policy):
                break
        else:
            chosen = []
        for i, name in enumerate(list(held)):    # the jobs of `lower` tried, in its order
            last[name] = (tries, i)
        for name in reprieve(chosen):
            tries += 1
            state.bind(name, held[name])
            for i, other in enumerate(n for n in chosen if n != name):
                last[other] = (tries, i)
            if _places(job, option, state, policy):
                chosen.remove(name)
                del held[name]
            else:
                state.release(name)
        return chosen
    finally:
        for name in last:
            if name not in held:
                held[name] = state.release(name)
        for name in sorted(last, key=last.__getitem__):
            state.bind(name, held[name])


def _places(job: SchedJob, option: Option, state: ClusterState, policy: Policy | None) -> bool:
    """Whether `job` finds a placement on `option`'s partition as the cluster stands."""
    found = (policy.filter if policy is not None else fits)(job, state)
    return any(c.option.partition == option.partition for c in found)
