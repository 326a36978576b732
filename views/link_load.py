"""How busy each tier's links are at a plan (issue 27): `gclc render --view topology --job
NAME` colours the topology's links by it.

A tier's load is the share of the step its links carry the plan's collectives: each
communicator's time per step (the step model's exposed term, and for gradient
synchronization also what the backward pass hides) is spread over the tiers its group
crosses as `model/comms.py` times them: a ring collective (TP, DP) spends (n - 1) / n of
what is left of its message on each tier, at that tier's bandwidth; an all-to-all (CP, EP)
sends each tier the share of peers first reached there; pipeline sends cross the outermost
tier between stages. TP and EP traffic hidden under GEMMs is not in the step model's terms,
so those loads are lower bounds.

Per link (`link_loads`, what the drawing colours): the same communicators' time, each stage
of a ring its share of it, run on the flow simulator's links (model/network/flows.py): every
hop a flow at its group's slowest max-min rate while the communicator runs, so a link is busy
for the time it runs times the share of its capacity its flows fill. A drawn link stands for
the links of the drawn node (rank 0's: its GPUs' ports) or of the first domain below a switch
layer (its pooled uplinks); on a rail-optimized fabric each rail's drawn links carry only the
flows its GPUs send or receive, so a pipeline boundary that leaves the node from half its GPUs
lights half the rails.
"""

from __future__ import annotations

import numpy as np

from ..model import comms
from ..model.network import flows as sim
from ..model.ranks import rank_partition
from .report.timeline import hidden_sync

BUSY, FULL = 0.3, 0.7      # load bands: light below BUSY, busy below FULL, saturated above
COLOURS = ("#2e7d32", "#ef6c00", "#c62828")
SIMULATED_GPUS = 4096   # beyond, per tier: the flow simulation's flows grow with the ranks


def tier_loads(plan) -> dict[str, float]:
    """Tier name -> share of the step its links are busy at `plan.best` (0 to 1)."""
    e, job = plan.best, plan.job
    c, b = e.config, e.breakdown
    tiers = rank_partition(job.partition, c.gpus).tiers
    groups = {"tp": (c.tp, c.stride("tp")), "cp": (c.cp, c.stride("cp")), "ep": (c.ep, c.stride("ep")),
              "dp": (c.dp * c.cp, min(c.stride("dp"), c.stride("cp")))}
    seconds = {"tp": b.tp, "cp": b.cp, "ep": b.ep, "dp": b.dp + hidden_sync(plan)}
    loads: dict[str, float] = {}
    for dim, (size, stride) in groups.items():
        if seconds[dim] > 0 and size > 1:
            weights = _weights(_tiled(comms.place(size, stride, tiers)), ring=dim in ("tp", "dp"))
            _spread(loads, seconds[dim], weights)
    if c.pp > 1 and b.pp > 0:
        boundary = comms.outermost(c.pp, c.stride("pp"), tiers)
        if boundary is not None:
            _spread(loads, b.pp, {boundary.name: 1.0})
    return {name: min(1.0, busy / e.step_time) for name, busy in loads.items()}


def _tiled(stages):
    """A ring in rank order as the tiled stages it stands for: its hops cross each of their tiers."""
    return tuple(t for s in stages for t in (getattr(s, "tiled", ()) or (s,)))


def _weights(stages, ring: bool) -> dict[str, float]:
    """Each tier's share of one collective's time, as the comms model times its stages."""
    out: dict[str, float] = {}
    for s, w in zip(stages, _stage_weights(stages, ring)):
        out[s.tier.name] = out.get(s.tier.name, 0.0) + w
    return out


def _stage_weights(stages, ring: bool) -> list[float]:
    """Each stage's share (unnormalized) of one collective's time, as the comms model times it."""
    out, share, inside, total = [], 1.0, 1, 1
    for s in stages:
        total *= s.peers
    for s in stages:
        rate = s.tier.bandwidth or 1.0
        if ring:
            out.append((s.peers - 1) / s.peers * share / rate)
            share /= s.peers
        else:
            reached = inside * s.peers
            out.append((reached - inside) / total / rate)
            inside = reached
    return out


def _spread(loads: dict[str, float], seconds: float, weights: dict[str, float]) -> None:
    whole = sum(weights.values())
    for name, w in weights.items():
        if whole > 0:
            loads[name] = loads.get(name, 0.0) + seconds * w / whole


def colour(load: float) -> str:
    return COLOURS[0] if load < BUSY else COLOURS[1] if load < FULL else COLOURS[2]


# ---------------------------------------------------------------- per link (flow simulation)

def link_loads(plan, rails: dict[str, int] | None = None) -> dict:
    """Drawn link -> share of the step it is busy at `plan.best` (0 to 1): a tier name for the
    drawn node's links into that tier (its GPUs' ports, or the pooled uplinks of the first
    domain below), and (tier name, k) for rail k's own links where `rails` (fabric name ->
    rails) says the fabric is rail-optimized. Per tier (`tier_loads`) beyond SIMULATED_GPUS."""
    e, job = plan.best, plan.job
    c = e.config
    if c.gpus > SIMULATED_GPUS:
        return tier_loads(plan)
    tiers = rank_partition(job.partition, c.gpus).tiers
    f = sim.fabric(tiers, c.gpus)
    busy, rail_busy = np.zeros(len(f.capacity)), {}
    node = min(job.partition.node.gpus, c.gpus)
    for comm, seconds in _communicators(plan, tiers):
        matrix, owner, _, share, ends = sim.weighted_flows(f, [comm])
        if matrix.shape[1] == 0:
            continue
        rates = sim.rates_of(matrix, f.capacity)
        slowest = np.full(owner.max() + 1, np.inf)
        np.minimum.at(slowest, owner, rates / share)
        flow_rate = slowest[owner] * share               # a group moves at its slowest hop; a flow carries its share
        busy += seconds * (matrix @ flow_rate) / f.capacity
        _by_rail(rail_busy, f, ends, matrix, flow_rate * seconds, node, rails or {})
    share = lambda x: min(1.0, float(x) / e.step_time)  # noqa: E731
    loads: dict = {(t.name, k): 0.0 for t in tiers if t.scope == "scaleout" for k in range((rails or {}).get(t.fabric, 0))}
    for index, tier in enumerate(tiers):
        loads[tier.name] = share(max(busy[link] for link in _drawn(f, index, node)))
    for key, per_link in rail_busy.items():
        loads[key] = share(max(per_link.values()))
    return loads


def _communicators(plan, tiers):
    """(flow-simulator communicator, seconds it runs per step) for every group the plan runs:
    a ring's stages split its time as the comms model times them."""
    e = plan.best
    c, b = e.config, e.breakdown
    rings = {"tp": (c.tp, c.stride("tp"), b.tp), "dp": (c.dp * c.cp, min(c.stride("dp"), c.stride("cp")),
                                                          b.dp + hidden_sync(plan))}
    for name, (size, stride, seconds) in rings.items():
        if size > 1 and seconds > 0:
            stages = comms.place(size, stride, tiers)
            weights = _stage_weights(stages, ring=True)
            for (comm, _), w in zip(sim.stage_communicators(name, size, stride, tiers), weights):
                yield comm, seconds * w / sum(weights)
    for name, size, seconds in (("cp", c.cp, b.cp), ("ep", c.ep, b.ep)):
        if size > 1 and seconds > 0:
            yield sim.Communicator(name, size, c.stride(name), pattern="all"), seconds
    if c.pp > 1 and b.pp > 0:
        yield sim.Communicator("pp", c.pp, c.stride("pp"), ring=False), b.pp


def _drawn(f, index: int, node: int) -> list[int]:
    """The simulator's links a drawn edge into tier `index` stands for: the drawn node's ports
    into the tier's fabric, or the uplinks (both ways) of the first domain below the tier."""
    if f.first[index] == index:
        port = f.ports[f.tiers[index].fabric]
        return [port + 2 * g + d for g in range(node) for d in (0, 1)]
    start, ways = f.uplinks[index], f.paths.get(index, 1)
    return [start + 2 * k + d for k in range(ways) for d in (0, 1)]


def _by_rail(out: dict, f, ends, matrix, flow_seconds, node: int, rails: dict[str, int]) -> None:
    """Adds to out[(tier name, rail)][link] the busy seconds of the drawn links of each rail:
    on a link up (out of a GPU or a domain) the flows its senders on that rail send, on a link
    down those its receivers on that rail receive (`ends`: each flow's sender and receiver)."""
    columns = matrix.tocsr()
    for index, tier in enumerate(f.tiers):
        count = rails.get(tier.fabric, 0)
        if not count or tier.scope != "scaleout":
            continue
        for link in _drawn(f, index, node):
            row = columns.getrow(link)
            for flow in row.indices:
                a, b = ends[flow]
                gpu = (a if link % 2 == 0 else b) % node
                key = (tier.name, gpu * count // node)
                per_link = out.setdefault(key, {})
                per_link[link] = per_link.get(link, 0.0) + flow_seconds[flow] / f.capacity[link]
