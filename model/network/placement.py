"""Where a group's members meet: the stages of a collective over the tiers of the hierarchy.

A group of `size` ranks, `stride` apart, runs a collective one of two ways, whichever moves
its bytes sooner (NCCL builds rings in rank order and adds hierarchy where it pays):

- **tiled** (hierarchical): one stage per tier, each over sub-groups that sit whole inside
  that tier's domains whatever the group's offset; a group whose members do not tile a
  domain (32 ranks on 24-GPU leaves) meets only at the tier above;
- **a ring in rank order** over the members beyond a tiled prefix: most of its hops stay
  inside a domain, and only the hops where the ring leaves a domain climb above it. A
  domain's uplinks carry `domain GPUs x the upper tier's per-GPU rate`, shared by the few
  ring hops that leave it (at most two groups straddle a domain's edges), so a ragged group
  pays the upper tier only for the members outside the domain, not for all of them. A hop
  is never faster than the GPU's own port (the tier's rate before oversubscription).
"""

from __future__ import annotations

import functools
import math

import attrs

from ...compiler.ir import Tier


@attrs.frozen
class Stage:
    tier: Tier
    peers: int            # members of the group that meet at this tier (per lower group)
    rate: float = 0.0     # bytes/s per GPU of a ring in rank order whose hops mostly stay below `tier` (0: the tier's)
    tiled: tuple = ()     # the hierarchical stages such a ring stands for (what an all-to-all runs over)


def rate(tier: Tier) -> float:
    return tier.bandwidth * tier.efficiency


def port_rate(tier: Tier) -> float:
    """What one GPU's port carries into a tier that reduces in its switches (SHARP, NVLS): each
    switch sends one reduced (or receives one multicast) stream up for all the GPUs below it,
    so the oversubscribed links above carry 1/k of the ring's bytes and the port is the limit."""
    return rate(tier) * tier.oversubscription


def stage_rate(stage: Stage) -> float:
    return stage.rate or rate(stage.tier)


class Placement(tuple):
    """The stages an all-reduce runs over (the tuple itself), and those a reduce-scatter or an
    all-gather runs over (`scatter`): where the switches reduce, an all-reduce may take them
    while half of one moves fewer bytes along a ring in rank order."""

    scatter: tuple[Stage, ...]

    def __new__(cls, stages: tuple[Stage, ...], scatter: tuple[Stage, ...] | None = None) -> "Placement":
        made = super().__new__(cls, stages)
        made.scatter = tuple(stages) if scatter is None else scatter
        return made


@functools.lru_cache(maxsize=16384)   # immutable arguments, asked for every estimate
def place(size: int, stride: int, tiers: tuple[Tier, ...]) -> Placement:
    """The stages of every group of `size` ranks, `stride` apart, over `tiers` (innermost first):
    the tiled stages, or a tiled prefix then one ring in rank order, whichever costs less
    bandwidth (ties keep the tiled stages, which take fewer latency steps)."""
    stages = tile(size, stride, tiers)
    if len(stages) == 0 or any(t.ring for t in tiers) or math.prod(s.peers for s in stages) != size:
        return Placement(stages)
    candidates = [stages]
    for prefix in range(len(stages)):
        inside = math.prod(s.peers for s in stages[:prefix])
        ring = _rank_ring(size, inside, stride, tiers, stages[prefix:])
        if ring is not None:
            candidates.append(stages[:prefix] + (ring,))
    return Placement(_cheapest(candidates, False), _cheapest(candidates, True))


def _cheapest(candidates: list[tuple[Stage, ...]], scatter: bool) -> tuple[Stage, ...]:
    best, cost = candidates[0], _bandwidth_term(candidates[0], scatter)
    for stages in candidates[1:]:
        if _bandwidth_term(stages, scatter) < cost * (1 - 1e-12):
            best, cost = stages, _bandwidth_term(stages, scatter)
    return best


@functools.lru_cache(maxsize=16384)
def tile(size: int, stride: int, tiers: tuple[Tier, ...]) -> tuple[Stage, ...]:
    """The tiled stages. Ranks fill the GPUs in order, so a tier's domains are blocks of
    `group_gpus` consecutive ranks. A group's members meet at a tier in sub-groups of `g`
    consecutive members, where `g` is the largest divisor of `size` (a multiple of the
    sub-group below) whose `g` members span whole blocks: `g * stride` divides `group_gpus`.
    Then every group's sub-groups sit inside one domain, whatever the group's offset."""
    if size <= 1:
        return ()
    stages, inside = [], 1
    for tier in tiers:
        reach = _tiling(size, stride, tier.group_gpus, inside)
        if reach > inside:
            stages.append(Stage(tier, reach // inside))
            inside = reach
        if inside >= size:
            break
    if inside < size and tiers:  # beyond the declared tiers: the outermost carries the rest
        stages.append(Stage(tiers[-1], math.ceil(size / inside)))
    return tuple(stages)


@functools.lru_cache(maxsize=16384)
def _tiling(size: int, stride: int, domain: int, inside: int) -> int:
    """The most members of a group that always share one `domain`-GPU block: the largest
    multiple `g` of `inside` dividing `size` with `g * stride` dividing `domain`."""
    best = inside
    for d in _divisors(size // inside):
        g = inside * d
        if g * stride > domain:
            break
        if domain % (g * stride) == 0:
            best = g
    return best


def _divisors(n: int) -> list[int]:
    """The divisors of `n`, ascending (n is a GPU count: trial division up to its root)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _rank_ring(size: int, inside: int, stride: int, tiers: tuple[Tier, ...],
               rest: tuple[Stage, ...]) -> Stage | None:
    """One ring in rank order over the `size / inside` sub-groups of `inside` members (each
    of the `inside` positions runs its own ring), priced by the hops that leave each domain.
    None when the ring would cross no domain (the tiled stages are the same thing)."""
    extent, jobs = size * stride, tiers[-1].group_gpus   # a group's ranks; the job's, as the tiers see it
    slot = inside * stride                              # ranks between a ring's consecutive members
    limit, outer = math.inf, None
    for below, above in zip(tiers, tiers[1:]):
        straddling = _straddling(extent, below.group_gpus, jobs)
        if not straddling or above.group_gpus <= below.group_gpus:
            continue
        share = below.group_gpus / slot / straddling     # the domain's uplink per hop that leaves it
        limit = min(limit, rate(above) * min(above.oversubscription, max(1.0, share)))
        outer = above
    if outer is None:
        return None
    first = next((t for t in tiers if t.group_gpus >= 2 * slot), outer)   # where consecutive members meet
    limit = min(limit, rate(first))
    return Stage(outer, size // inside, limit, rest)


@functools.lru_cache(maxsize=4096)
def _straddling(extent: int, domain: int, ranks: int) -> int:
    """The most groups of `extent` consecutive ranks (tiling `ranks` from 0) that cross the
    edges of one `domain`-rank block (0, 1 or 2): the rings that leave that block."""
    if extent > ranks:
        return 0
    worst = 0
    blocks = min(ranks, extent // math.gcd(extent, domain) * domain + domain)   # the pattern's period
    for lo in range(0, blocks, domain):
        hi = min(lo + domain, ranks)
        cut = {edge // extent for edge in (lo, hi) if 0 < edge < ranks and edge % extent}
        worst = max(worst, len(cut))
        if worst == 2:
            break
    return worst


def _bandwidth_term(stages: tuple[Stage, ...], scatter: bool) -> float:
    """Seconds per byte of an all-reduce (`scatter`: a reduce-scatter) over `stages`, latency
    aside: what picks the algorithm (model/comms.py prices the same)."""
    total, share = 0.0, 1.0
    for stage in stages:
        n = stage.peers
        ring = (1 if scatter else 2) * (n - 1) / n * share / stage_rate(stage)
        if stage.tier.in_network_reduction and not stage.tiled:
            ring = min(ring, share / port_rate(stage.tier))
        total += ring
        share /= n
    return total
