"""Collective communication on the tiers of the hierarchy: alpha-beta costs with ring,
tree, hierarchical and in-network-reduction algorithms.

A group of `size` ranks laid out with `stride` (ranks between members) spans tiers of
the partition; the collective runs as one stage per tier it crosses, each on that
tier's per-GPU bandwidth (NCCL's hierarchical rings: reduce-scatter inside the fast
tier, all-reduce across the slow one on 1/n of the data, all-gather back), or, where it
moves the bytes sooner, as one ring in rank order whose few hops out of a domain share
that domain's uplinks (model/network/placement.py: ragged groups).

A k-D torus is k tiers, one per axis (compiler/topology.py `torus_axes`): a collective
runs dimension by dimension (TPU ICI, custom DSA meshes), each a ring along its axis with
the wrap-around links; all-to-all is bounded by each axis's bisection, and pipeline
neighbours talk over one link.
"""

from __future__ import annotations

import math

import attrs

from ..compiler.ir import Partition, Tier
from .network.placement import (Stage, exchange_costs, hop_rate, place, port_rate, rate as _rate,
                                send_rate, stage_rate)

# ASSUMPTION: share of the host link's per-direction rate a large pinned-memory copy
# reaches (PCIe 128b/130b encoding and TLP headers; NVIDIA's nvbandwidth reports about
# 55 GB/s host-to-device on a 64 GB/s PCIe Gen5 x16 link).
HOST_LINK_EFFICIENCY = 0.85


def host_rate(partition: Partition) -> float:
    """Bytes/s one GPU copies to or from host memory (inf when the node declares no host
    link: `gclc check` refuses an offload on such a node, so this never decides a plan)."""
    link = partition.node.host_link
    return link * HOST_LINK_EFFICIENCY if link else math.inf


def outermost(size: int, stride: int, tiers: tuple[Tier, ...]) -> Tier | None:
    """The slowest tier a group of `size` ranks, `stride` apart, must cross (None: one rank)."""
    stages = place(size, stride, tiers)
    return stages[-1].tier if stages else None


def _exchange_rate(tier: Tier) -> float:
    """Per-chip rate of an all-to-all over a switched tier (a torus axis: `_axis_exchange`)."""
    return _rate(tier)


def _axis_exchange(stage: Stage) -> float:
    """Seconds per byte a rank's uniform all-to-all spends on one torus axis, routed dimension
    by dimension (TPU ICI): every destination whose coordinate on this axis differs, a share
    (p-1)/p of them, travels along it, whatever the other axes. Over a whole axis of p chips
    the shortest ways sum to floor(p^2/4) hops from each chip: on a ring that load spreads
    over its 2p directed links (the ring rate is two links), on an open line the middle link
    carries it alone (the ring rate is one link); both come to floor(p^2/4)/p bytes per byte
    at the ring rate (Dally & Towles, "Principles and Practices of Interconnection Networks",
    2004, Sec. 3.3: channel load k/8 under uniform traffic on a k-ary n-cube). Part of an axis
    keeps the bisection share min(1, 4/d) of the ring rate (3/d on an open line)."""
    tier, p = stage.tier, stage.peers
    if p <= 1:
        return 0.0
    if p >= tier.ring:
        return (p * p // 4) / p / _rate(tier)
    reach = 4 if tier.wraparound else 3
    return (p - 1) / p / (_rate(tier) * min(1.0, reach / tier.ring))


def _latency(tier: Tier, peers: int) -> float:
    """Latency steps of half an all-reduce (a reduce-scatter or an all-gather). A ring takes
    peers - 1; on a switch NCCL's trees (all-reduce: up and down a tree of depth log2 n) and
    PAT (reduce-scatter, all-gather: log2 n steps) take the logarithm, never more. The
    logarithm keeps a group split over two tiers no faster than the same group on one.
    Along a torus axis only the ring is one hop per step (a tree's edges would span many)."""
    if tier.ring:
        return tier.latency * (peers - 1)
    return tier.latency * math.ceil(math.log2(peers))


def flat(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The same group as one ring on its outermost tier: every rank's traffic crosses it."""
    if not stages:
        return stages
    return (Stage(stages[-1].tier, math.prod(s.peers for s in stages)),)


def _in_network(stage: Stage) -> bool:
    """The switches of this stage reduce and multicast (SHARP, NVLS): a tiled stage of such a tier."""
    return stage.tier.in_network_reduction and not stage.tiled


def _fastest(collective, nbytes: float, stages) -> float:
    """A group that can run several ways (a Placement's options) takes the fastest at this size."""
    return min(collective(nbytes, tuple(option)) for option in getattr(stages, "options", (stages,)))


def all_reduce(nbytes: float, stages: tuple[Stage, ...]) -> float:
    """Hierarchical all-reduce: each stage reduces its share, then passes 1/n of it outward.
    In the network (SHARP, NVLS) a stage sends its share once up and receives the sum once."""
    return _fastest(_all_reduce, nbytes, stages)


def _all_reduce(nbytes: float, stages: tuple[Stage, ...], latency: bool = True, nvls: float = 1.0) -> float:
    """`latency=False`: the bytes alone (model/collectives.py adds NCCL's latencies instead);
    `nvls`: the share of the port an NVLink switch's reduction gets (model/collectives.py)."""
    time, share = 0.0, nbytes
    for stage, axes in zip(stages, _concurrent_axes(stages)):
        n = stage.peers
        if _in_network(stage):
            time += share / _reducing_rate(stage.tier, nvls) + 2 * stage.tier.latency * latency
        else:
            time += 2 * (n - 1) / n * share / stage_rate(stage) / axes + 2 * _latency(stage.tier, n) * latency
        share /= n
    return time


def _reducing_rate(tier: Tier, nvls: float) -> float:
    """The port rate of a tier whose switches reduce, at `nvls` of it inside a scale-up domain."""
    return port_rate(tier) * (nvls if tier.scope != "scaleout" else 1.0)


def _concurrent_axes(stages: tuple[Stage, ...]) -> tuple[int, ...]:
    """For each stage, how many torus axes of its fabric the group spans. A collective over
    j axes splits its data j ways, each part taking the axes in another order, so all j
    axes' links work at once (the multi-dimensional rings of TPU ICI): the per-axis phases
    take 1/j of their single-ring time. 1 for switched tiers."""
    fabrics = [s.tier.fabric if s.tier.ring else None for s in stages]
    return tuple(fabrics.count(f) if f is not None else 1 for f in fabrics)


def reduce_scatter(nbytes: float, stages: tuple[Stage, ...]) -> float:
    """Half an all-reduce (all-gather costs the same: the same bytes the other way).

    Where the switches reduce (SHARP v3 with NCCL >= 2.20, NVLS), a reduce-scatter sends the
    whole share up once and receives 1/n back (an all-gather: 1/n up, the share down), against
    the ring's (n-1)/n each way (NVIDIA/nccl#1083): more bytes through the GPU's port, but
    none of the ring's crossings of oversubscribed links and two switch traversals of
    latency. NCCL takes whichever is faster: on one NVSwitch the ring (NVIDIA/nccl#1047),
    on an oversubscribed SHARP fabric the switches."""
    return _fastest(_reduce_scatter, nbytes, stages)


def _reduce_scatter(nbytes: float, stages: tuple[Stage, ...], latency: bool = True, nvls: float = 1.0) -> float:
    """`latency=False` and `nvls`: as `_all_reduce`'s."""
    time, share = 0.0, nbytes
    for stage, axes in zip(stages, _concurrent_axes(stages)):
        n = stage.peers
        ring = (n - 1) / n * share / stage_rate(stage) / axes + _latency(stage.tier, n) * latency
        if _in_network(stage):
            ring = min(ring, share / _reducing_rate(stage.tier, nvls) + 2 * stage.tier.latency * latency)
        time += ring
        share /= n
    return time


all_gather = reduce_scatter

# One placement option's price, `latency=False` for the bytes alone (model/collectives.py
# adds NCCL's latencies to them).
PER_OPTION = {"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter}


def all_to_all(nbytes: float, stages: tuple[Stage, ...], latency: bool = True) -> float:
    """Each rank sends `nbytes` spread evenly over the group; traffic to members reached
    only at a tier uses that tier's bandwidth; tiers work in parallel, the slowest sets the time.
    Over a ring in rank order's members (a ragged group), each tier it crosses carries what
    leaves the domains below it, shared by their GPUs (`exchange_costs`), or the tiled
    stages' charge, whichever is less. `latency=False`: the bytes alone (model/collectives.py
    adds NCCL's latency instead)."""
    tiled = _exchange(nbytes, tiles(stages), None, latency)
    if not any(s.crossings for s in stages):
        return tiled
    ragged = _exchange(nbytes, tuple(s for s in stages if not s.tiled), math.prod(s.peers for s in stages), latency)
    for stage in stages:
        for tier, per_byte in exchange_costs(stage):
            ragged = max(ragged, nbytes * per_byte + _latency(tier, stage.peers) * latency)
    return min(tiled, ragged)


NODE = ("node",)   # a node's NVLink peers
# DeepEP's V1 internode kernels forward among 8 consecutive ranks over NVLink whatever the OS node: rdma_rank =
# rank / NUM_MAX_NVL_PEERS, num_rdma_ranks = num_ranks / NUM_MAX_NVL_PEERS, NUM_MAX_NVL_PEERS = 8 (deepseek-ai/DeepEP
# csrc/kernels/configs.cuh and csrc/deep_ep.cpp `Buffer::Buffer`), so on an NVL72 rack its "nodes" are 8-GPU slices
# of the rack, the rest reached through NVSHMEM as if remote.
DEEPEP_NVL_PEERS = 8


def forwarded_all_to_all(rank_bytes: float, node_bytes: float, stages: tuple[Stage, ...], latency: bool = True,
                         domain: tuple[str, ...] = NODE, most: int | None = None) -> float:
    """An all-to-all that crosses the tiers beyond a node once per destination node and is forwarded inside
    each node to the ranks it is for (DeepEP's internode normal kernels: RDMA to one GPU of every node that
    holds any of a token's experts, NVLink on to that node's ranks holding them). Each rank sends `node_bytes`
    out of the node, spread over the nodes as `all_to_all` spreads them, and forwards `rank_bytes` inside
    one, (g - 1) / g of them to another of the node's g GPUs; the two run at once, the slower sets the time,
    the forward streaming chunks as they arrive (DeepEP's forwarder warps), so its bytes add no start-up
    latency of their own. A group inside one node (or with no node tier) is a plain all-to-all of `rank_bytes`.
    `domain`: the scopes of the tiers a node's forward runs on (HybridEP forwards in an NVLink domain, a rack
    of NVLink included); `most`: the forwarding node's most ranks (DeepEP's 8, DEEPEP_NVL_PEERS)."""
    inner = node_stages(stages, domain, most)
    if not inner or _members(inner) >= _members(tiles(stages)):
        return all_to_all(rank_bytes, stages, latency)
    return max(all_to_all(node_bytes, stages, latency), all_to_all(rank_bytes, inner, latency=False))


def tiles(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The group's tiled stages, one a tier (a ring in rank order's own included)."""
    return tuple(t for s in stages for t in (s.tiled or (s,)))


def node_stages(stages: tuple[Stage, ...], domain: tuple[str, ...] = NODE, most: int | None = None) -> tuple[Stage, ...]:
    """The tiled stages of a group inside one node (its GPUs' NVLink), or inside one forwarding `domain` of at
    most `most` of its consecutive ranks: the innermost stages whole, the one the limit falls in cut to it."""
    inner, inside = [], 1
    for stage in tiles(stages):
        if stage.tier.scope not in domain:
            continue
        if most is None or stage.peers * inside <= most:
            inner.append(stage)
            inside *= stage.peers
            continue
        if most // inside > 1:
            inner.append(attrs.evolve(stage, peers=most // inside))
        break
    return tuple(inner)


def node_members(stages: tuple[Stage, ...], domain: tuple[str, ...] = NODE, most: int | None = None) -> int:
    """The group's members in one node (or `domain` of at most `most` ranks): how many of its ranks a send to
    that node can reach."""
    return _members(node_stages(stages, domain, most))


def _members(stages: tuple[Stage, ...]) -> int:
    return math.prod(s.peers for s in stages)


def _exchange(nbytes: float, stages: tuple[Stage, ...], total: int | None = None, latency: bool = True) -> float:
    """The tiled all-to-all over `stages`, the innermost of a group of `total` members."""
    total = total or math.prod(s.peers for s in stages)
    if total <= 1:
        return 0.0
    slowest, inside = 0.0, 1
    for stage in stages:
        reached = inside * stage.peers
        per_byte = _axis_exchange(stage) if stage.tier.ring else (reached - inside) / total / _exchange_rate(stage.tier)
        slowest = max(slowest, nbytes * per_byte + _latency(stage.tier, stage.peers) * latency)
        inside = reached
    return slowest


def ring_send(nbytes: float, size: int, stride: int, tiers: tuple[Tier, ...]) -> float:
    """One step of a ring in rank order over every member (ring attention): the slowest hop's
    send, all hops at once, shared uplinks counted (model/network/placement.py)."""
    outer, speed = hop_rate(size, stride, tiers)
    if outer is None:
        return 0.0
    return nbytes / speed + outer.latency


def pipeline_send(nbytes: float, size: int, stride: int, tiers: tuple[Tier, ...]) -> float:
    """One send between pipeline neighbours (`size` stages, `stride` ranks apart), all stages'
    at once: at the rate of the slowest, shared uplinks counted (model/network/placement.py)."""
    outer, speed = send_rate(size, stride, tiers)
    if outer is None:
        return 0.0
    return nbytes / speed + outer.latency


def point_to_point(nbytes: float, tier: Tier | None) -> float:
    if tier is None:
        return 0.0
    return nbytes / (tier.link_bandwidth * tier.efficiency) + tier.latency
