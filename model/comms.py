"""Collective communication on the tiers of the hierarchy: alpha-beta costs with ring,
tree, hierarchical and in-network-reduction algorithms.

A group of `size` ranks laid out with `stride` (ranks between members) spans tiers of
the partition; the collective runs as one stage per tier it crosses, each on that
tier's per-GPU bandwidth (NCCL's hierarchical rings: reduce-scatter inside the fast
tier, all-reduce across the slow one on 1/n of the data, all-gather back).

A k-D torus is k tiers, one per axis (compiler/topology.py `torus_axes`): a collective
runs dimension by dimension (TPU ICI, custom DSA meshes), each a ring along its axis with
the wrap-around links; all-to-all is bounded by each axis's bisection, and pipeline
neighbours talk over one link.
"""

from __future__ import annotations

import functools
import math

import attrs

from ..compiler.ir import Partition, Tier

# ASSUMPTION: share of the host link's per-direction rate a large pinned-memory copy
# reaches (PCIe 128b/130b encoding and TLP headers; NVIDIA's nvbandwidth reports about
# 55 GB/s host-to-device on a 64 GB/s PCIe Gen5 x16 link).
HOST_LINK_EFFICIENCY = 0.85


def host_rate(partition: Partition) -> float:
    """Bytes/s one GPU copies to or from host memory (inf when the node declares no host
    link: `gclc check` refuses an offload on such a node, so this never decides a plan)."""
    link = partition.node.host_link
    return link * HOST_LINK_EFFICIENCY if link else math.inf


@attrs.frozen
class Stage:
    tier: Tier
    peers: int            # members of the group that meet at this tier (per lower group)


@functools.lru_cache(maxsize=16384)   # immutable arguments, asked for every estimate
def place(size: int, stride: int, tiers: tuple[Tier, ...]) -> tuple[Stage, ...]:
    """The stages of every group of `size` ranks, `stride` apart, over `tiers` (innermost first).

    Ranks fill the GPUs in order, so a tier's domains are blocks of `group_gpus` consecutive
    ranks. A group's members meet at a tier in sub-groups of `g` consecutive members, where
    `g` is the largest divisor of `size` (a multiple of the sub-group below) whose `g` members
    span whole blocks: `g * stride` divides `group_gpus`. Then every group's sub-groups sit
    inside one domain, whatever the group's offset; a group whose members do not tile the
    domains (64 consecutive ranks on 72-GPU racks) is charged the tier above for the rest."""
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


def outermost(size: int, stride: int, tiers: tuple[Tier, ...]) -> Tier | None:
    """The slowest tier a group of `size` ranks, `stride` apart, must cross (None: one rank)."""
    stages = place(size, stride, tiers)
    return stages[-1].tier if stages else None


def _rate(tier: Tier) -> float:
    return tier.bandwidth * tier.efficiency


def _exchange_rate(tier: Tier) -> float:
    """Per-chip rate of an all-to-all over a tier. On a torus axis of d chips the ring's
    bisection limits it: a uniform exchange crosses d/4 links on average (shortest way
    round), so each chip gets min(1, 4/d) of the ring rate (d/3 and 3/d on an open line)."""
    if not tier.ring:
        return _rate(tier)
    reach = 4 if tier.wraparound else 3
    return _rate(tier) * min(1.0, reach / tier.ring)


def _latency(tier: Tier, peers: int) -> float:
    """Ring latency grows with peers, tree latency with their logarithm; NCCL picks the lower.
    Along a torus axis only the ring is one hop per step (a tree's edges would span many)."""
    if tier.ring:
        return tier.latency * (peers - 1)
    return tier.latency * min(peers - 1, 2 * math.ceil(math.log2(peers)))


def flat(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The same group as one ring on its outermost tier: every rank's traffic crosses it."""
    if not stages:
        return stages
    return (Stage(stages[-1].tier, math.prod(s.peers for s in stages)),)


def all_reduce(nbytes: float, stages: tuple[Stage, ...]) -> float:
    """Hierarchical all-reduce: each stage reduces its share, then passes 1/n of it outward."""
    time, share = 0.0, nbytes
    for stage, axes in zip(stages, _concurrent_axes(stages)):
        n = stage.peers
        if stage.tier.in_network_reduction:
            time += share / _rate(stage.tier) + 2 * stage.tier.latency
        else:
            time += 2 * (n - 1) / n * share / _rate(stage.tier) / axes + 2 * _latency(stage.tier, n)
        share /= n
    return time


def _concurrent_axes(stages: tuple[Stage, ...]) -> tuple[int, ...]:
    """For each stage, how many torus axes of its fabric the group spans. A collective over
    j axes splits its data j ways, each part taking the axes in another order, so all j
    axes' links work at once (the multi-dimensional rings of TPU ICI): the per-axis phases
    take 1/j of their single-ring time. 1 for switched tiers."""
    fabrics = [s.tier.fabric if s.tier.ring else None for s in stages]
    return tuple(fabrics.count(f) if f is not None else 1 for f in fabrics)


def reduce_scatter(nbytes: float, stages: tuple[Stage, ...]) -> float:
    """Half an all-reduce (all-gather costs the same)."""
    time, share = 0.0, nbytes
    for stage, axes in zip(stages, _concurrent_axes(stages)):
        n = stage.peers
        time += (n - 1) / n * share / _rate(stage.tier) / axes + _latency(stage.tier, n)
        share /= n
    return time


all_gather = reduce_scatter


def all_to_all(nbytes: float, stages: tuple[Stage, ...]) -> float:
    """Each rank sends `nbytes` spread evenly over the group; traffic to members reached
    only at a tier uses that tier's bandwidth; tiers work in parallel, the slowest sets the time."""
    total = math.prod(s.peers for s in stages)
    if total <= 1:
        return 0.0
    slowest, inside = 0.0, 1
    for stage in stages:
        reached = inside * stage.peers
        share = (reached - inside) / total
        slowest = max(slowest, nbytes * share / _exchange_rate(stage.tier) + _latency(stage.tier, stage.peers))
        inside = reached
    return slowest


def point_to_point(nbytes: float, tier: Tier | None) -> float:
    if tier is None:
        return 0.0
    return nbytes / (tier.link_bandwidth * tier.efficiency) + tier.latency
