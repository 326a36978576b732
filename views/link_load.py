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
"""

from __future__ import annotations

from ..model import comms
from ..model.ranks import rank_partition
from .report.timeline import hidden_sync

BUSY, FULL = 0.3, 0.7      # load bands: light below BUSY, busy below FULL, saturated above
COLOURS = ("#2e7d32", "#ef6c00", "#c62828")


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
            weights = _weights(comms.place(size, stride, tiers), ring=dim in ("tp", "dp"))
            _spread(loads, seconds[dim], weights)
    if c.pp > 1 and b.pp > 0:
        boundary = comms.outermost(c.pp, c.stride("pp"), tiers)
        if boundary is not None:
            _spread(loads, b.pp, {boundary.name: 1.0})
    return {name: min(1.0, busy / e.step_time) for name, busy in loads.items()}


def _weights(stages, ring: bool) -> dict[str, float]:
    """Each tier's share of one collective's time, as the comms model times its stages."""
    out: dict[str, float] = {}
    share, inside = 1.0, 1
    total = 1
    for s in stages:
        total *= s.peers
    for s in stages:
        rate = s.tier.bandwidth or 1.0
        if ring:
            out[s.tier.name] = out.get(s.tier.name, 0.0) + (s.peers - 1) / s.peers * share / rate
            share /= s.peers
        else:
            reached = inside * s.peers
            out[s.tier.name] = out.get(s.tier.name, 0.0) + (reached - inside) / total / rate
            inside = reached
    return out


def _spread(loads: dict[str, float], seconds: float, weights: dict[str, float]) -> None:
    whole = sum(weights.values())
    for name, w in weights.items():
        if whole > 0:
            loads[name] = loads.get(name, 0.0) + seconds * w / whole


def colour(load: float) -> str:
    return COLOURS[0] if load < BUSY else COLOURS[1] if load < FULL else COLOURS[2]
