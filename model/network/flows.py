"""A flow-level picture of the fabric: every hop of every ring a flow over the links it crosses,
rates by max-min fair sharing (progressive filling on a sparse link x flow matrix, numpy and
scipy), the links those of the IR's tiers.

The fabric, as the tiers describe it: each GPU has one port into each fabric (its NVLink,
its NIC), at the first tier's rate of that fabric before oversubscription; each domain of a
tier has one pooled uplink into the next tier of the same fabric, carrying `domain GPUs x the
upper tier's per-GPU rate` (adaptive routing or packet spraying: no hash collisions), and as
much down. Under ECMP (`paths`) that pool is that many equal uplinks instead, and each flow is
hashed onto one of them (a deterministic hash of the flow and `seed`) and comes down from the
switch it climbed to, so flows collide as hashing makes them. A flow between two GPUs takes the port of the fabric of the lowest tier they
share, the uplinks of the sender's domains up to it and the receiver's downlinks back.

Communicators are rings in rank order (what NCCL builds for all-reduce, reduce-scatter and
all-gather), pipeline neighbours, all-to-alls (every member to every other: MoE dispatch and
combine) and fan-ins (every member to the first: incast); a group moves at its slowest flow.
A ring runs as NCCL's channels: each channel's ring leaves a scale-up domain (a node, an
NVLink rack) at another of the group's members there, so a hop that leaves one is k flows,
each carrying 1/k of its bytes over another pair of the members' ports (`channel_flows`).

Congestion (`congestion`): with ECN and end-to-end rate control (DCQCN on RoCE, InfiniBand's
congestion control, the NICs' default) each sender slows to its flow's fair share, so rates are
max-min fair ("ecn"). A lossless fabric without it ("pfc": Priority Flow Control alone, as Meta
runs its 400G RoCE training fabric, SIGCOMM 2024 Sec. 6) holds a flow bottlenecked on its way
down (incast at a receiver's port, a hash collision on a spine's port toward a leaf) by pausing
the queues behind it; a pause stops every flow of the priority on the paused port, so a flow
sharing the sender's port or a climbing uplink with it moves no faster than it (head-of-line
blocking, the "victim flow" of Zhu et al., "Congestion Control for Large-Scale RDMA
Deployments", SIGCOMM 2015, Sec. 2.2). A synchronous collective alone finishes with its slowest
flow, which pausing never slows (`lossless_rates`): PFC changes a step only through the
communicators running beside it, which the analytic model (each alone) does not price. Simulating all of a
step's communicators at once shows what they take from each other, which the analytic model
(model/comms.py, each alone) does not see; the analytic model stays the planner's inner
loop, this refines finalists (`compare`).
"""

from __future__ import annotations

import math

import attrs
import numpy as np
from scipy import sparse

from ...compiler.ir import Tier
from .placement import port_rate, rate, scale_up_gpus
from ...dsl.records import frozen


PATTERNS = ("ring", "pairs", "all", "fan_in")
CONGESTION = ("ecn", "pfc")


@frozen
class Communicator:
    name: str
    size: int        # ranks in each group
    stride: int      # ranks between members
    ring: bool = True   # a ring of all members; else pairs of consecutive members (pipeline sends)
    pattern: str = ""   # PATTERNS; empty: "ring" or "pairs" as `ring` says
    channels: bool = True   # a ring runs as NCCL's channels (`channel_flows`); False: one ring of sends

    def hops(self, members: list[int]) -> list[tuple[int, int]]:
        """The (sender, receiver) flows of one group."""
        kind = self.pattern or ("ring" if self.ring else "pairs")
        if kind == "ring":
            return [(members[k], members[(k + 1) % len(members)]) for k in range(len(members))]
        if kind == "pairs":
            return list(zip(members, members[1:]))
        if kind == "all":
            return [(a, b) for a in members for b in members if a != b]
        if kind == "fan_in":
            return [(a, members[0]) for a in members[1:]]
        raise ValueError(f"communicator pattern {kind!r}: one of {', '.join(PATTERNS)}")


@frozen
class Fabric:
    """The links of `gpus` ranks over `tiers`: capacities (bytes/s) and how to find them."""

    tiers: tuple[Tier, ...]
    gpus: int
    capacity: np.ndarray   # per link
    ports: dict            # (fabric name) -> first link id of the GPUs' ports (up at 2 i, down at 2 i + 1)
    uplinks: dict          # tier index t -> first link id of the domains of tier t-1 (up at 2 (d U + k), down at +1)
    first: tuple[int, ...] # per tier index: the index of the first tier of its fabric
    paths: dict = attrs.Factory(dict)   # tier index t -> U equal uplinks a domain hashes flows over (ECMP); 1: a pool
    seed: int = 0


def fabric(tiers: tuple[Tier, ...], gpus: int, paths: dict[int, int] | None = None, seed: int = 0) -> Fabric:
    """The links; `paths`: per tier index, the equal uplinks (ECMP) a domain below hashes its
    flows over (absent or 1: one pool, adaptive routing)."""
    paths = {i: p for i, p in (paths or {}).items() if p > 1}
    capacity: list[np.ndarray] = []
    first = tuple(next(i for i, u in enumerate(tiers) if u.fabric == t.fabric) for t in tiers)
    ports, uplinks, count = {}, {}, 0
    for index, tier in enumerate(tiers):
        if first[index] == index:   # a fabric's first tier: every GPU's port into it
            ports[tier.fabric] = count
            capacity.append(np.full(2 * gpus, port_rate(tier)))
            count += 2 * gpus
        else:                        # a tier above a domain of the same fabric: pooled uplinks
            below, ways = tiers[index - 1].group_gpus, paths.get(index, 1)
            domains = math.ceil(gpus / below)
            uplinks[index] = count
            capacity.append(np.full(2 * domains * ways, below * rate(tier) / ways))
            count += 2 * domains * ways
    return Fabric(tuple(tiers), gpus, np.concatenate(capacity), ports, uplinks, first, paths, seed)


def _path(f: Fabric, a: int, b: int, flow: int = 0) -> list[int]:
    """The links flow number `flow`, from rank `a` to rank `b`, crosses."""
    level = next((i for i, t in enumerate(f.tiers) if a // t.group_gpus == b // t.group_gpus), len(f.tiers) - 1)
    port = f.ports[f.tiers[level].fabric]
    links = [port + 2 * a, port + 2 * b + 1]
    for index in range(f.first[level] + 1, level + 1):
        below, start, ways = f.tiers[index - 1].group_gpus, f.uplinks[index], f.paths.get(index, 1)
        k = _hash(f.seed, flow, index) % ways if ways > 1 else 0   # the uplink it climbs, the switch it comes down from
        links += [start + 2 * (a // below * ways + k), start + 2 * (b // below * ways + k) + 1]
    return links


_MASK = (1 << 64) - 1


def _hash(*values: int) -> int:
    """A deterministic 64-bit mix of `values` (splitmix64's finalizer, chained): a switch's
    hash of a flow's header, reproducible across runs (Python's own hash is salted for text)."""
    x = 0
    for v in values:
        x = (x + v + 0x9E3779B97F4A7C15) & _MASK
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
        x ^= x >> 31
    return x


def groups(c: Communicator, gpus: int) -> list[list[int]]:
    """The members of every group of `c` among `gpus` ranks (a family per offset inside the stride)."""
    span = c.size * c.stride
    return [[base + k * c.stride for k in range(c.size)]
            for block in range(gpus // span) for offset in range(c.stride)
            for base in (block * span + offset,)]


def flows(f: Fabric, communicators: list[Communicator]) -> tuple[sparse.csr_matrix, np.ndarray, list[tuple[str, int, int]]]:
    """(link x flow incidence, the group each flow belongs to, (communicator, group size, first flow) per group)."""
    matrix, owner, spans, _, _ = weighted_flows(f, communicators)
    return matrix, owner, spans


def weighted_flows(f: Fabric, communicators: list[Communicator]):
    """`flows`, then per flow the share of its hop's bytes it carries (1, or 1/k for each of
    the k flows a ring's hop out of a scale-up domain spreads over: `channel_flows`) and its
    (sender, receiver)."""
    rows, cols, owner, spans, share, ends = [], [], [], [], [], []
    domain = scale_up_gpus(f.tiers)
    for c in communicators:
        spread = domain > 1 and c.channels and (c.pattern or ("ring" if c.ring else "pairs")) == "ring"
        for members in groups(c, f.gpus):
            spans.append((c.name, len(members), len(owner)))
            for a, b in c.hops(members):
                pairs = channel_flows(members, a, b, domain) if spread else [(a, b)]
                for x, y in pairs:
                    links = _path(f, x, y, len(owner))
                    rows += links
                    cols += [len(owner)] * len(links)
                    owner.append(len(spans) - 1)
                    share.append(1 / len(pairs))
                    ends.append((x, y))
    matrix = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(f.capacity), len(owner)))
    return matrix, np.array(owner), spans, np.array(share), ends


def channel_flows(members: list[int], a: int, b: int, domain: int) -> list[tuple[int, int]]:
    """The flows of a ring's hop from `a` to `b` as NCCL's channels run it: a hop that leaves a
    scale-up domain of `domain` GPUs leaves it at another of the group's members there in each
    channel and enters the next at another, so the hop's bytes spread over k pairs of the
    members' ports (k: the fewer members on either side); a hop inside a domain is one flow."""
    if a // domain == b // domain:
        return [(a, b)]
    senders = [m for m in members if m // domain == a // domain]
    receivers = [m for m in members if m // domain == b // domain]
    return list(zip(senders, receivers))


def max_min(matrix: sparse.csr_matrix, capacity: np.ndarray, limit: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of the flows (columns) over links of `capacity` (progressive filling:
    raise every unfrozen flow alike until a link fills or a flow reaches its `limit`, freeze
    the flows through it, repeat)."""
    rates = np.zeros(matrix.shape[1])
    active = np.ones(matrix.shape[1], dtype=bool)
    left = capacity.astype(float).copy()
    limit = np.full(matrix.shape[1], np.inf) if limit is None else limit
    transpose = matrix.T.tocsr()
    while active.any():
        crossing = matrix @ active.astype(float)
        used = crossing > 0
        if not used.any():
            break
        step = min(np.min(left[used] / crossing[used]), np.min(limit[active] - rates[active]))
        rates[active] += step
        left -= step * crossing
        full = used & (left <= 1e-9 * capacity)
        active &= ~((transpose @ full.astype(float)) > 0) & (rates < limit * (1 - 1e-12))
    return rates


def lossless_rates(matrix: sparse.csr_matrix, capacity: np.ndarray, rounds: int = 32) -> np.ndarray:
    """Rates on a lossless fabric without end-to-end congestion control (PFC alone): a flow held
    at a full link on its way down (odd link ids: a receiver's port, a switch's port toward the
    receiver) pauses the upward links it crosses (even ids: its sender's port, the uplinks it
    climbs), and every flow through a paused link moves no faster than the slowest flow held
    below it. Capping is monotone, so the caps settle; progressive filling reaches the slowest
    flows before any cap binds, so the slowest flow is max-min's."""
    limit = np.full(matrix.shape[1], np.inf)
    upward = (np.arange(matrix.shape[0]) % 2 == 0)
    for _ in range(rounds):
        rates = max_min(matrix, capacity, limit)
        held = _held_below(matrix, capacity, rates, upward)
        if not held.any():
            return rates
        rows, cols = matrix.nonzero()
        mask = held[cols] & upward[rows]
        slowest_held = np.full(matrix.shape[0], np.inf)     # per upward link: its slowest held flow
        np.minimum.at(slowest_held, rows[mask], rates[cols[mask]])
        cap = np.full(matrix.shape[1], np.inf)
        np.minimum.at(cap, cols, slowest_held[rows])
        new = np.minimum(limit, cap)
        if np.allclose(new, limit, rtol=1e-9):
            return rates
        limit = new
    return max_min(matrix, capacity, limit)


def _held_below(matrix: sparse.csr_matrix, capacity: np.ndarray, rates: np.ndarray, upward: np.ndarray) -> np.ndarray:
    """The flows whose bottleneck is a downward link: a full one where no flow is faster."""
    rows, cols = matrix.nonzero()
    full_down = (~upward) & (matrix @ rates >= capacity * (1 - 1e-9))
    fastest = np.zeros(matrix.shape[0])
    np.maximum.at(fastest, rows, rates[cols])
    at = full_down[rows] & (rates[cols] >= fastest[rows] * (1 - 1e-9))
    held = np.zeros(matrix.shape[1], dtype=bool)
    held[cols[at]] = True
    return held


def rates_of(matrix: sparse.csr_matrix, capacity: np.ndarray, congestion: str = "ecn") -> np.ndarray:
    """The flows' rates under `congestion` (CONGESTION)."""
    if congestion == "ecn":
        return max_min(matrix, capacity)
    if congestion == "pfc":
        return lossless_rates(matrix, capacity)
    raise ValueError(f"congestion {congestion!r}: one of {', '.join(CONGESTION)}")


def pair_rates(f: Fabric, pairs: list[tuple[int, int]], congestion: str = "ecn") -> np.ndarray:
    """The rate of a flow from each (sender, receiver) rank pair, all at once."""
    rows, cols = [], []
    for k, (a, b) in enumerate(pairs):
        links = _path(f, a, b, k)
        rows += links
        cols += [k] * len(links)
    matrix = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(f.capacity), len(pairs)))
    return rates_of(matrix, f.capacity, congestion)


def ring_rates(f: Fabric, communicators: list[Communicator], congestion: str = "ecn") -> dict[str, float]:
    """Per communicator, the rate (bytes/s per flow) of its slowest group, all of them at once:
    each group moves at its slowest flow."""
    matrix, owner, spans, share, _ = weighted_flows(f, communicators)
    rates = rates_of(matrix, f.capacity, congestion)
    slowest = np.full(len(spans), np.inf)
    np.minimum.at(slowest, owner, rates / share)   # a hop spread over k flows moves k times its slowest
    found: dict[str, float] = {}
    for (name, _, _), value in zip(spans, slowest):
        found[name] = min(found.get(name, math.inf), float(value))
    return found


def stage_communicators(name: str, size: int, stride: int, tiers: tuple[Tier, ...],
                        ring: bool = True) -> list[tuple[Communicator, float]]:
    """The rings the planner's model runs for a group of `size` ranks, `stride` apart, with the
    rate it gives each: one per stage, over the stage's peers (`inside` members apart, one ring
    per position inside the sub-group below: NCCL's hierarchical channels). Pipeline sends
    (`ring` false) are pairs of neighbours at the rate of the outermost tier they cross. The
    simulation has no in-network reduction: compare on tiers whose switches do not reduce."""
    from . import placement

    if not ring:
        outer, speed = placement.send_rate(size, stride, tiers)
        return [(Communicator(f"{name}.0", size, stride, ring=False), speed)] if outer is not None else []
    out, inside = [], 1
    for k, stage in enumerate(placement.place(size, stride, tiers)):
        out.append((Communicator(f"{name}.{k}", stage.peers, stride * inside), placement.stage_rate(stage)))
        inside *= stage.peers
    return out


def compare(tiers: tuple[Tier, ...], gpus: int, dimensions: list[tuple[str, int, int, bool]],
            paths: dict[int, int] | None = None, seed: int = 0,
            congestion: str = "ecn") -> list[tuple[str, float, float, float]]:
    """Per stage of each (name, size, stride, ring) dimension: (stage, the analytic rate, the
    simulated rate alone, the simulated rate while every dimension's outermost stage runs at once);
    `paths` and `seed` as `fabric`'s (ECMP), `congestion` as `rates_of`'s."""
    f = fabric(tiers, gpus, paths, seed)
    stages = {name: stage_communicators(name, size, stride, tiers, ring) for name, size, stride, ring in dimensions
              if size > 1}
    together = ring_rates(f, [found[-1][0] for found in stages.values() if found], congestion)
    rows = []
    for found in stages.values():
        for k, (c, analytic) in enumerate(found):
            alone = ring_rates(f, [c], congestion)[c.name]
            rows.append((c.name, analytic, alone, together.get(c.name, alone) if k == len(found) - 1 else alone))
    return rows
