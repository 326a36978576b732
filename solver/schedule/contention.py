"""Jobs that share a fabric: what the running train jobs take from each other's uplinks.

A train job's plan prices it alone. In the schedule a job whose GPUs span several groups of
a tier (leaves, spine groups) climbs through the uplinks of every group it holds GPUs in, and
so do the other jobs spanning that group. A group's uplinks are one pool (adaptive routing,
as `model/network/flows.py` pools them) of `group GPUs x the tier's per-GPU rate`, and a GPU
never sends faster than its port (`oversubscription` x that rate). The GPUs that climb share
the pool alike (max-min fair: every one of them wants its port), so each gets

    min(oversubscription, group GPUs / climbing GPUs)  x the tier's per-GPU rate.

Under ECMP (`routing`, the default on Ethernet) the uplinks are no pool: each flow is hashed
onto one, and a collective waits for the fullest (compiler/routing.py). The planner's tier rate
already pays the collisions of every port of a switch climbing (`e_full = ecmp_share(D f, U)`
of its D down ports' f flows each over its U uplinks); in the schedule the climbing GPUs' share
of a switch's ports climbs, F = climbing / group GPUs x D x f flows, and each GPU gets

    min(oversubscription, f D / (U E[fullest of F flows in U])) / e_full  x the tier's rate,

so a neighbour's flows collide with a job's even on a non-blocking (1:1) fabric.

A synchronous step runs at its slowest group's share (the straggler, as in
`model/network/degrade.py`). The job's step is its plan's configuration priced with each tier
at the share it gets (`StepCurve`), and its slowdown is that step over the same with the job
alone on its allocation: neighbours that climb through its groups slow it; a job inside one
group, or neighbours inside theirs, climb nothing. On a non-blocking fabric (1:1) every share is
the port and nothing slows.

ASSUMPTIONS (docs/scheduling.md, "Jobs that share a fabric"): a group's climbing GPUs spread
evenly over its switches (rails); the jobs' communication phases
overlap all the time (CASSINI, NSDI 2024, shows that interleaving them recovers part of it); a
trace row states no model, so it neither loads uplinks nor is slowed; a job's whole run,
restarts and checkpoint writes included, stretches by its slowdown; a job's ranks fill its
allocation in order, a group holding as many of them as the job's emptiest group at that level
(`Contention._layout`).

On a lossless fabric (`congestion = pfc`) that routes by ECMP, a neighbour's expert all-to-all
is an incast whose flows collide on the spine paths its group hashes onto; the pauses that hold
them stop every flow of the paused links, the job's own that cross the same group's uplinks too
(Zhu et al., SIGCOMM 2015, Sec. 2.2: the victim flow). While the neighbour's all-to-all runs (its
`duty`, a share of its step) the job's flows there move no faster than the incast's slowest
flow, the hashed share of a port's fair share among the incast's k senders:

    min(share, oversubscription x hashed / k)  x the tier's per-GPU rate,

and its step is the duty-weighted mean of the two (model/train/incast.py prices the same pause
inside one job). With adaptive routing, or under ECN, the incast's flows keep their fair share
and the pool's share above is all a neighbour takes.

The simulation (`simulate.py`) asks `started` and `stopped` at each run's start and end and
re-paces the runs whose slowdown changed.
"""

from __future__ import annotations

import math

import attrs

from ...compiler.ir import Partition
from ...compiler.routing import ecmp_share, expected_max_load
from .events import Timer
from .state import Allocation, PartitionState
from ...dsl.records import frozen

STEPS_PER_OCTAVE = 64    # shares are rounded down on a log grid (~1 %): few distinct estimates


@frozen
class Pool:
    """The groups of one level and the tier their uplinks climb into."""

    level: int
    per: int                 # domains per group
    gpus: int                # GPUs under a whole group (the switches are built for all of them)
    tier: int                # index of the tier above, in the partition's tiers
    below: int               # index of the tier whose groups these are
    oversubscription: float  # a GPU's port over its share of that tier's uplinks
    hashing: tuple[int, int, int] | None = None   # ECMP: (down ports, uplinks, flows a port) of a switch

    def share(self, climbing: int) -> float:
        """Each climbing GPU's rate, as a share of the tier's per-GPU rate, with `climbing`
        GPUs of the group climbing."""
        if self.hashing is None:
            return min(self.oversubscription, self.gpus / climbing)
        down, up, flows = self.hashing
        hashed = max(1, round(climbing / self.gpus * down)) * flows
        full = ecmp_share(down * flows, up)
        return min(self.oversubscription, flows * down / (up * expected_max_load(hashed, up))) / full


class StepCurve:
    """A plan's step time with tiers at shares of their per-GPU rate (memoized). At a share
    every GPU of the job climbs at that rate and no faster: the planner's credit of a leaf's
    spare uplinks to the few ring hops or sends that leave it (model/network/placement.py)
    assumes the job alone under the leaf, which is what sharing takes away, so the tier's
    oversubscription goes (a switch that reduces keeps its port: it sends 1/k of the bytes up)."""

    def __init__(self, shape, config, partition: Partition) -> None:
        self.shape, self.config, self.partition = shape, config, partition
        self._memo: dict[tuple, float] = {}
        self._alltoall: list = []

    def alltoall(self):
        """The plan's expert all-to-all as an incast on a `pfc` fabric (None where it is not one)."""
        if not self._alltoall:
            from ...model.train.step import estimate

            self._alltoall.append(estimate(self.shape, self.config, self.partition).alltoall)
        return self._alltoall[0]

    def step(self, shares: dict[int, float], layout: tuple[tuple[int, int], ...] = ()) -> float:
        """The step with tier `i` at `shares[i]` of its per-GPU rate, and the job's ranks laid
        out as `layout` says ((tier index, the job's GPUs in each of its groups), as the
        allocation holds them, where the plan assumed whole groups)."""
        key = (tuple(sorted((i, _rounded(s)) for i, s in shares.items())), layout)
        if key not in self._memo:
            from ...model.train.step import estimate

            tiers = list(self.partition.tiers)
            for i, gpus in layout:
                tiers[i] = attrs.evolve(tiers[i], group_gpus=gpus)
            for i, s in key[0]:
                t = tiers[i]
                spare = max(1.0, t.oversubscription / s) if t.in_network_reduction else 1.0
                tiers[i] = attrs.evolve(t, bandwidth=t.bandwidth * s, oversubscription=spare)
            self._memo[key] = estimate(self.shape, self.config, attrs.evolve(self.partition, tiers=tuple(tiers))).step_time
        return self._memo[key]


def _rounded(share: float) -> float:
    """`share` rounded down on a log grid: monotone, so a smaller share never rounds larger."""
    return 2.0 ** (math.floor(math.log2(share) * STEPS_PER_OCTAVE + 1e-9) / STEPS_PER_OCTAVE)


def pools(p: Partition, part: PartitionState, hashing: tuple[int, int, int] | None = None) -> tuple[Pool, ...]:
    """The levels whose groups climb into a switched scale-out tier above them. Levels are
    `PartitionState.of`'s: each tier that holds more domains than the one below. `hashing`: the
    scale-out fabric's ECMP (`hashing_of`)."""
    levels, groups = [0], [1]
    for index, tier in enumerate(p.tiers[1:], 1):
        per = max(1, min(part.domains, tier.group_gpus // part.domain_gpus))
        if per > groups[-1]:
            groups.append(per)
            levels.append(index)
    if groups[-1] < part.domains:   # beyond the declared tiers the outermost carries the rest
        levels.append(len(p.tiers) - 1)
    found = []
    for level in range(1, len(part.group_domains) - 1):
        above = levels[level + 1]
        tier = p.tiers[above]
        if above != levels[level] and tier.scope == "scaleout" and not tier.ring:
            per = part.group_domains[level]
            found.append(Pool(level, per, per * part.domain_gpus, above, levels[level], max(1.0, tier.oversubscription),
                              hashing))
    return tuple(found)


def hashing_of(cluster, partition: str) -> tuple[int, int, int] | None:
    """(down ports, uplinks, flows a port) of the switches of `partition`'s scale-out fat tree
    where it routes by ECMP (compiler/lower.py `_routed` prices the same), else None."""
    from ...compiler.routing import routing_of
    from ...compiler.topology import down_ports

    fabric = cluster.get("scaleout")
    parts = cluster.get("partition")
    for item in getattr(parts, "items", ()):
        if item.name == partition:
            fabric = item.value.get("scaleout") or fabric
    shape = fabric.get("topology") if fabric is not None else None
    if shape is None or routing_of(fabric) != "ecmp" or "radix" not in getattr(shape, "args", {}):
        return None
    radix, oversubscription = shape.args.get("radix"), shape.args.get("oversubscription")
    down = down_ports(radix, float(oversubscription) if oversubscription is not None else 1.0)
    return down, radix - down, fabric.get("flows") or 1


class Contention:
    """The running train jobs' GPUs in each group they climb out of, and each one's slowdown."""

    def __init__(self, curves: dict[tuple[str, str, int], StepCurve], partitions: dict[str, Partition],
                 states: dict[str, PartitionState], hashing: dict[str, tuple[int, int, int] | None] | None = None) -> None:
        self.curves = curves
        hashing = hashing or {}
        self.pools = {name: pools(partitions[name], states[name], hashing.get(name)) for name in states}
        self.tiers = {name: partitions[name].tiers for name in states}
        self.climbing: dict[tuple[str, int, int], dict[str, int]] = {}   # (partition, pool, group) -> job -> GPUs
        self.held: dict[str, tuple[StepCurve, tuple[tuple[str, int, int], ...]]] = {}
        self.slowdown: dict[str, float] = {}
        self.pausers: dict[str, tuple[str, ...]] = {}   # job -> neighbours whose PFC pauses hold it now

    def started(self, name: str, alloc: Allocation, option_gpus: int) -> dict[str, float]:
        """`name` runs on `alloc`: the new slowdown of every job that changed, its own included."""
        curve = self.curves.get((name, alloc.partition, option_gpus))
        keys = self._groups(alloc) if curve is not None else ()
        if not keys:
            return {}
        self.held[name] = (curve, tuple(keys), self._layout(alloc, keys))
        for key, gpus in keys.items():
            self.climbing.setdefault(key, {})[name] = gpus
        return self._update(name, keys)

    def stopped(self, name: str) -> dict[str, float]:
        """`name` stopped: the new slowdown of every neighbour that changed."""
        found = self.held.pop(name, None)
        self.slowdown.pop(name, None)
        self.pausers.pop(name, None)
        if found is None:
            return {}
        for key in found[1]:
            del self.climbing[key][name]
            if not self.climbing[key]:
                del self.climbing[key]
        return self._update(None, found[1])

    def _layout(self, alloc: Allocation, keys: dict[tuple[str, int, int], int]) -> tuple[tuple[int, int], ...]:
        """The job's ranks as its allocation lays them out: at each level it spans, the tier of
        that level's groups holds as many of its GPUs as its emptiest group there (ranks fill the
        GPUs in order; a group the plan assumed whole may hold a part of the job), never fewer
        than the tier below holds."""
        tiers = self.tiers[alloc.partition]
        out = []
        for index, pool in enumerate(self.pools[alloc.partition]):
            counts = [gpus for (_, i, _), gpus in keys.items() if i == index]
            if counts:
                floor = tiers[pool.below - 1].group_gpus if pool.below > 0 else 1
                out.append((pool.below, max(floor, min(tiers[pool.below].group_gpus, min(counts)))))
        return tuple(out)

    def _groups(self, alloc: Allocation) -> dict[tuple[str, int, int], int]:
        """(partition, pool index, group) -> the job's GPUs there, for every group it climbs out of."""
        out: dict[tuple[str, int, int], int] = {}
        for index, pool in enumerate(self.pools.get(alloc.partition, ())):
            if alloc.level <= pool.level:
                continue
            for domain, count in zip(alloc.domains, alloc.counts):
                key = (alloc.partition, index, domain // pool.per)
                out[key] = out.get(key, 0) + count
        return out

    def _update(self, name: str | None, keys) -> dict[str, float]:
        affected = {job for key in keys for job in self.climbing.get(key, ())}
        if name is not None:
            affected.add(name)
        changed = {}
        for job in sorted(affected):
            value = self._slowdown(job)
            if value != self.slowdown.get(job, 1.0):
                changed[job] = value
            self.slowdown[job] = value
        return changed

    def _slowdown(self, job: str) -> float:
        curve, keys, layout = self.held[job]
        alone: dict[int, float] = {}
        shared: dict[int, float] = {}
        held: dict[int, float] = {}
        duty, pausers = 0.0, set()
        for key in keys:
            pool = self.pools[key[0]][key[1]]
            users = self.climbing[key]
            for shares, climbing in ((alone, users[job]), (shared, sum(users.values()))):
                shares[pool.tier] = min(shares.get(pool.tier, math.inf), pool.share(climbing))
            cap, share_of_step, who = self._paused(key, pool, job)
            if share_of_step:
                held[pool.tier], duty = min(held.get(pool.tier, math.inf), cap), max(duty, share_of_step)
                pausers |= who
        self.pausers[job] = tuple(sorted(pausers))
        if alone == shared and not held:
            return 1.0
        step = curve.step(shared, layout)
        if held:   # PFC: while a neighbour's all-to-all runs, its pauses hold the job's flows too
            paused = {i: min(s, held.get(i, math.inf)) for i, s in shared.items()}
            step = (1 - duty) * step + duty * curve.step(paused, layout)
        return step / curve.step(alone, layout)

    def _paused(self, key: tuple[str, int, int], pool: Pool, job: str) -> tuple[float, float, set[str]]:
        """(the share a pause holds the job's flows in this group to, the share of a step it
        lasts, the neighbours whose all-to-all it is) where a neighbour's all-to-all is an incast that climbs the group's lossless, hashed
        uplinks (as its plan lays it out); (inf, 0) elsewhere."""
        tier = self.tiers[key[0]][pool.tier]
        if tier.congestion != "pfc" or tier.hashed >= 1:
            return math.inf, 0.0, set()
        cap, duty, who = math.inf, 0.0, set()
        for other in self.climbing[key]:
            incast = self.held[other][0].alltoall() if other != job else None
            if incast is not None and incast.fabric == tier.fabric and incast.level >= tier.level:
                cap = min(cap, pool.oversubscription * tier.hashed / incast.senders)
                duty = max(duty, incast.duty)
                who.add(other)
        return cap, duty, who


def time_end(sim, now: float, run) -> None:
    """Push the timer that ends `run` at its pace: its finish, or its time limit where it
    would end later (the scheduler ends it there, Slurm's --time). `run.due` is the finish
    the simulation honours; a finish timer pushed before a change of pace is stale."""
    left = (run.length - run.own_time(now)) * run.pace
    if (now - run.start) + left > run.job.time_limit:
        run.due = None
        if not run.limit_timer:
            run.limit_timer = True
            sim.timeline.push(Timer(run.start + run.job.time_limit, "timeout", run.job.name, run.run_id))
    else:
        run.due = now + left
        sim.timeline.push(Timer(run.due, "finish", run.job.name, run.run_id))


def repace(sim, now: float, paced: dict[str, float], cause: str = "contended") -> None:
    """Runs whose neighbours (`cause` "contended") or degraded parts ("degraded", degraded.py)
    changed go on at their new pace from `now`: the product of the two."""
    for name, value in paced.items():
        run = sim.runs[name]
        if run.phase == "running" and getattr(run, cause) != value:
            bank(run, now)
            setattr(run, cause, value)
            run.pace = run.contended * run.degraded
            time_end(sim, now, run)


def bank(run, now: float) -> None:
    """Bank the run's own time by `now`, and the wall time it took at its neighbours' pace alone."""
    own = run.own_time(now)
    run.undegraded += (own - run.banked) * run.contended
    run.banked, run.paced_at = own, now
