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


from ...compiler.ir import Tier
from ...compiler.routing import expected_max_load
# NCCL's collective channels on a node: two on each of an 8-GPU node's NICs (ASSUMPTION, stated there)
from .nccl import CHANNELS
from ...dsl.records import frozen


@frozen(cache_hash=True)  # hashed on every collective cache lookup
class Stage:
    tier: Tier
    peers: int            # members of the group that meet at this tier (per lower group)
    rate: float = 0.0     # bytes/s per GPU of a ring in rank order whose hops mostly stay below `tier` (0: the tier's)
    tiled: tuple = ()     # the hierarchical stages such a ring stands for
    crossings: tuple = () # (tier above, group ranks, domain below, job ranks, slot) of each domain edge the ring leaves
    ports: float = 1.0    # the scale-out ports a hop out of a scale-up domain spreads over (NCCL's channels)


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
    """The stages an all-reduce moves its bytes over fastest (the tuple itself: what views
    show), and every way the group can run (`options`): a collective of a given size takes
    the fastest of them, latency included, as NCCL picks its algorithm per call."""

    options: tuple[tuple[Stage, ...], ...]
    key: tuple[tuple[Stage, ...], ...]   # the options as plain tuples: what a collective's price is memoized on

    def __new__(cls, stages: tuple[Stage, ...], options: tuple[tuple[Stage, ...], ...] = ()) -> "Placement":
        made = super().__new__(cls, stages)
        made.options = options or (tuple(stages),)
        made.key = tuple([tuple(option) for option in made.options])
        return made


@functools.lru_cache(maxsize=16384)   # immutable arguments, asked for every estimate
def place(size: int, stride: int, tiers: tuple[Tier, ...]) -> Placement:
    """The stages of every group of `size` ranks, `stride` apart, over `tiers` (innermost first):
    the tiled stages, or a tiled prefix then one ring in rank order. Each is an option; the
    tuple is the one whose all-reduce moves its bytes soonest."""
    stages = tile(size, stride, tiers)
    if len(stages) == 0 or any(t.ring for t in tiers) or math.prod(s.peers for s in stages) != size:
        return Placement(stages)
    candidates = [stages]
    for prefix in range(len(stages)):
        inside = math.prod(s.peers for s in stages[:prefix])
        ring = _rank_ring(size, inside, stride, tiers, stages[prefix:])
        if ring is not None:
            candidates.append(stages[:prefix] + (ring,))
    return Placement(_cheapest(candidates), tuple(candidates))


def _cheapest(candidates: list[tuple[Stage, ...]]) -> tuple[Stage, ...]:
    """The candidate whose all-reduce moves its bytes soonest (ties keep the tiled stages)."""
    best, cost = candidates[0], _bandwidth_term(candidates[0])
    for stages in candidates[1:]:
        if _bandwidth_term(stages) < cost * (1 - 1e-12):
            best, cost = stages, _bandwidth_term(stages)
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
               rest: tuple[Stage, ...], channels: bool = True) -> Stage | None:
    """One ring in rank order over the `size / inside` sub-groups of `inside` members (each
    of the `inside` positions runs its own ring), priced by the hops that leave each domain.
    None when the ring would cross no domain (the tiled stages are the same thing).

    `channels`: the ring runs as NCCL's channels, each leaving a scale-up domain at another of
    the ring's members there, so a hop that leaves spreads over those members' ports (NCCL
    builds one ring per channel and spreads the channels over the node's NICs: tuning.cc's
    ring bandwidth is nChannels x bwInter). False: one ring whose hop leaves through one port
    (ring attention's send to the next rank)."""
    extent, jobs = size * stride, tiers[-1].group_gpus   # a group's ranks; the job's, as the tiers see it
    slot = inside * stride                              # ranks between a ring's consecutive members
    scale_up = scale_up_gpus(tiers) if channels else 0
    limit, outer, exchange, out_ports = math.inf, None, [], math.inf
    for below, above in zip(tiers, tiers[1:]):
        straddling = _straddling(extent, below.group_gpus, jobs)
        if not straddling or above.group_gpus <= below.group_gpus:
            continue
        share = below.group_gpus / slot / straddling     # the domain's uplink per hop that leaves it
        ports = max(1.0, min(below.group_gpus, scale_up) / slot / straddling)   # the ports a leaving hop spreads over
        per_port = max(1, CHANNELS // scale_up) if channels else 1
        limit = min(limit, _leaving_rate(above, ports, share, slot * straddling, per_port))
        if above.scope == "scaleout":
            out_ports = min(out_ports, ports)
        outer = above
        exchange.append((above, extent, below.group_gpus, jobs, slot))
    if outer is None:
        return None
    first = next((t for t in tiers if t.group_gpus >= 2 * slot), outer)   # where consecutive members meet
    limit = min(limit, rate(first))
    return Stage(outer, size // inside, limit, rest, tuple(exchange), out_ports if out_ports < math.inf else 1.0)


def _leaving_rate(above: Tier, ports: float, share: float, rings: int, per_port: int) -> float:
    """The rate of one ring's hop that leaves a domain below `above` over `ports` ports, where
    `rings` rings leave that domain, each with `share` GPUs' worth of its uplinks, and NCCL
    runs `per_port` channels on each port. Where ECMP hashes the flows onto the domain's
    `paths` uplinks, the tier's efficiency carries the share every down port's flows get; a
    ring's few leaving flows collide less: `rings x ports x per_port` flows of `qps` queue
    pairs each, the fullest uplink (a port's rate) holding its queue pairs to its rate
    (compiler/routing.py E[max load]) only where they would move faster unhashed."""
    unhashed = rate(above) / above.hashed
    hop = unhashed * min(above.oversubscription * ports, max(1.0, share))
    if not above.paths or above.hashed >= 1:
        return hop
    balls = max(1, round(rings * ports * per_port)) * above.qps
    link = unhashed * above.oversubscription                  # one uplink: a port's rate
    return min(hop, link * balls / expected_max_load(balls, above.paths) / rings)


# The tiers of the scale-up domain (a node's NVLink or PCIe, an NVLink rack): every other
# scope is the scale-out fabric.
SCALE_UP_SCOPES = ("node", "supernode")


def scale_up_gpus(tiers: tuple[Tier, ...]) -> int:
    """GPUs of the widest scale-up domain (a node, an NVLink rack): where any member can be the
    one a channel's ring leaves from."""
    return max((t.group_gpus for t in tiers if t.scope in SCALE_UP_SCOPES), default=1)


@functools.lru_cache(maxsize=4096)
def hop_rate(size: int, stride: int, tiers: tuple[Tier, ...]) -> tuple[Tier | None, float]:
    """A ring in rank order over every member (ring attention passes its chunks so): (the
    outermost tier a hop crosses, the rate of the slowest hop, shared uplinks counted). On a
    torus, one link of the outermost axis."""
    stages = tile(size, stride, tiers)
    if not stages:
        return None, 0.0
    outer = stages[-1].tier
    if any(t.ring for t in tiers):
        return outer, outer.link_bandwidth * outer.efficiency
    ring = _rank_ring(size, 1, stride, tiers, stages, channels=False)
    return (ring.tier, ring.rate) if ring is not None else (outer, rate(outer))


@functools.lru_cache(maxsize=4096)
def send_rate(size: int, stride: int, tiers: tuple[Tier, ...]) -> tuple[Tier | None, float]:
    """Pipeline neighbours: `size` stages of `stride` ranks, each rank but the last stage's
    sending to the one `stride` ahead. (The outermost tier a send crosses, the rate of the
    slowest send.) A domain's uplinks carry D GPUs' worth of the tier above, shared by the
    sends that leave it (at most min(D, stride)), never faster than the port. On a torus,
    one link of the outermost axis."""
    stages = tile(size, stride, tiers)
    if not stages:
        return None, 0.0
    outer = stages[-1].tier
    if any(t.ring for t in tiers):
        return outer, outer.link_bandwidth * outer.efficiency
    extent, ranks, limit = size * stride, tiers[-1].group_gpus, math.inf
    for below, above in zip(tiers, tiers[1:]):
        domain = below.group_gpus
        if above.group_gpus <= domain or not _straddling(extent, domain, ranks) and extent <= domain:
            continue
        leaving = _sends_leaving(size, stride, domain, ranks)
        if leaving:
            limit = min(limit, rate(above) * min(above.oversubscription, max(1.0, domain / leaving)))
    return outer, (limit if limit < math.inf else rate(outer))


@functools.lru_cache(maxsize=4096)
def _sends_leaving(size: int, stride: int, domain: int, ranks: int) -> int:
    """The most forward sends of pipelines (`size` stages, `stride` apart, tiling `ranks`
    from 0) that leave one `domain`-rank block: ranks of a stage with a next one, whose
    partner `stride` ahead lies past the block's end (the deep run's counterexample: two
    stages of 48 on 64-GPU leaves send 32 out of the first leaf, not 48)."""
    extent, worst = size * stride, 0
    zone = extent - stride    # the senders' ranks at the start of each pipeline's `extent`
    most = min(domain, stride)   # no block has more ranks within `stride` of its end
    blocks = min(ranks, extent // math.gcd(extent, domain) * domain + domain)
    for lo in range(0, blocks, domain):   # (the block's senders in [0, end): whole pipelines' and the rest's)
        hi = min(lo + domain, ranks)
        start = max(lo, hi - stride)      # partners past the block's end
        whole, rest = divmod(hi, extent)
        first, part = divmod(start, extent)
        leaving = (whole - first) * zone + (rest if rest < zone else zone) - (part if part < zone else zone)
        if leaving > worst:
            worst = leaving
            if worst >= most:
                break
    return worst


@functools.lru_cache(maxsize=4096)
def exchange_costs(stage: Stage) -> tuple[tuple[Tier, float], ...]:
    """(tier, seconds per byte) an all-to-all over a ring stage's members spends on each tier
    it crosses: what leaves the domains below, per GPU of their uplinks or through one port.
    Computed when an all-to-all asks (the planner's rings never need it)."""
    found = []
    for above, extent, domain, ranks, slot in stage.crossings:
        average, most = _leaving(extent, domain, ranks, slot)
        found.append((above, max(average / rate(above), most / port_rate(above))))
    return tuple(found)


@functools.lru_cache(maxsize=4096)
def _leaving(extent: int, domain: int, ranks: int, slot: int) -> tuple[float, float]:
    """Of an all-to-all's bytes over groups of `extent` consecutive ranks, the share that
    leaves a `domain`-rank block: (per GPU of the block's uplinks, the most any GPU sends
    out), worst block. A GPU whose group has m of its n slots in the block sends (n - m)/n
    out; the block's uplinks (a whole domain's, even where the job fills it only in part)
    are shared by all its GPUs, its port by one."""
    slots, worst_average, worst_most = extent / slot, 0.0, 0.0
    blocks = min(ranks, extent // math.gcd(extent, domain) * domain + domain)
    for lo in range(0, blocks, domain):
        hi = min(lo + domain, ranks)
        inside = [min(hi, (g + 1) * extent) - max(lo, g * extent) for g in range(lo // extent, (hi - 1) // extent + 1)]
        leaving = [(slots - m / slot) / slots for m in inside]
        worst_average = max(worst_average, sum(m * f for m, f in zip(inside, leaving)) / domain)
        worst_most = max(worst_most, max(leaving))
    return worst_average, worst_most


@functools.lru_cache(maxsize=4096)
def _straddling(extent: int, domain: int, ranks: int) -> int:
    """The most groups of `extent` consecutive ranks (tiling `ranks` from 0) that cross the
    edges of one `domain`-rank block (0, 1 or 2): the rings that leave that block."""
    if extent > ranks or domain % extent == 0:   # (no edge cuts a group)
        return 0
    worst = 0
    blocks = min(ranks, extent // math.gcd(extent, domain) * domain + domain)   # the pattern's period
    for lo in range(0, blocks, domain):
        hi = lo + domain
        low = lo > 0 and lo % extent != 0            # the block's lower edge cuts a group
        high = hi < ranks and hi % extent != 0       # ... its upper edge another (or the same)
        cut = 2 if low and high and lo // extent != hi // extent else (1 if low or high else 0)
        if cut > worst:
            worst = cut
            if worst == 2:
                break
    return worst


def _bandwidth_term(stages: tuple[Stage, ...]) -> float:
    """Seconds per byte of an all-reduce over `stages`, latency aside (model/comms.py prices the same)."""
    total, share = 0.0, 1.0
    for stage in stages:
        n = stage.peers
        ring = 2 * (n - 1) / n * share / stage_rate(stage)
        if stage.tier.in_network_reduction and not stage.tiled:
            ring = min(ring, share / port_rate(stage.tier))
        total += ring
        share /= n
    return total
