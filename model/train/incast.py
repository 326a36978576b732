"""What an expert all-to-all does to the data-parallel collectives beside it on a lossless
RoCE fabric without end-to-end congestion control (`congestion = pfc`).

An all-to-all is an incast at every receiver: each GPU's NIC takes one flow from every expert
peer outside its node (k of them) and sends k. The data-parallel rings leave through the
same NICs while the layers' passes run, and so while the all-to-all does. With ECN (DCQCN)
the ring's flow gets its max-min share of its port, 1/(k+1) of it where the all-to-all fills
the port evenly; the analytic model prices each communicator alone and leaves that sharing
out on every fabric alike. Under PFC alone a flow held at a full port on its way down pauses
the ports behind it, and a pause stops every flow on the port, so the ring moves no faster
than the all-to-all's slowest flow (model/network/pfc.py; on one switch it equals the flow
simulator's slowest ring flow by law). With adaptive routing that flow keeps its fair share
and PFC costs nothing beyond ECN (the flow simulator agrees: tests/model/test_flows.py).
Under ECMP the flows that cross the spine collide on its paths, the most loaded path holds its
flows to the fabric's hashed share of their fair rate (compiler/routing.py, which the spine
tier's efficiency carries), and the pauses spread that to the rings. This module charges
PFC's rate against ECN's for the share of a layer pass the all-to-all runs. `on_fabric` says
where a job's all-to-all is an incast on a lossless fabric and for what share of its step, which
`gclc schedule` charges to the jobs whose flows share its spine (solver/schedule/contention.py).
"""

from __future__ import annotations

import math

from .. import comms
from ..config import TrainConfig
from ..network.pfc import Incast, beside_incast
from ..network.placement import SCALE_UP_SCOPES, port_rate, tile
from . import sharding
from ...dsl.records import frozen

PROBE_BYTES = 1e9   # the rings' rate ratio is read on a bandwidth-bound all-reduce


@frozen
class Held:
    """The data-parallel collectives held behind an expert all-to-all's incast under PFC."""

    fabric: str          # the RoCE fabric whose ports pause
    senders: int         # incast flows into each receiving NIC: expert peers outside its node
    duty: float          # share of a layer pass the all-to-all runs
    slowdown: float      # the data-parallel collectives' time beside it under PFC over ECN
    factor: float        # their time per step, duty counted: 1 + duty x (slowdown - 1)
    seconds: float = 0.0 # what this adds to the step (model/train/step.py)


def held(cfg: TrainConfig, tiers: tuple, ep_per_pass: float, layer_pass: float) -> Held | None:
    """The PFC term of `cfg` on `tiers` (ranked for it), where an expert all-to-all of
    `ep_per_pass` seconds per layer pass of `layer_pass` seconds crosses a `pfc` fabric that
    the data-parallel collectives also cross; None elsewhere."""
    if cfg.ep <= 1 or cfg.dp * cfg.cp <= 1 or ep_per_pass <= 0 or layer_pass <= 0:
        return None
    if not any(t.congestion == "pfc" for t in tiers):
        return None
    experts = tile(cfg.ep, cfg.stride("ep"), tiers)
    lossless = [s.tier for s in experts if s.tier.scope == "scaleout" and s.tier.congestion == "pfc"]
    rings = tuple(sharding.groups(cfg, tiers)[0])
    if not lossless or not any(s.tier.fabric == lossless[0].fabric for s in rings):
        return None
    fabric = lossless[0].fabric
    first = next(t for t in tiers if t.fabric == fabric)
    k = max(1, cfg.ep - math.prod(s.peers for s in experts if s.tier.scope in SCALE_UP_SCOPES))
    port = port_rate(first)
    hashed = min(1.0, lossless[-1].efficiency / first.efficiency) if first.efficiency else 1.0
    incast = Incast(fabric, k, port, flows=k, path=hashed * port / k if hashed < 1 else math.inf)
    ecn = comms.PER_OPTION["all_reduce"](PROBE_BYTES, beside_incast(rings, incast, "ecn"), latency=False)
    pfc = comms.PER_OPTION["all_reduce"](PROBE_BYTES, beside_incast(rings, incast, "pfc"), latency=False)
    duty = min(1.0, ep_per_pass / layer_pass)
    slowdown = pfc / ecn if ecn > 0 else 1.0
    return Held(fabric, k, duty, slowdown, 1 + duty * (slowdown - 1))


@frozen
class AllToAll:
    """A job's expert all-to-all as an incast on a lossless (`pfc`) scale-out fabric."""

    fabric: str
    senders: int         # incast flows into each receiving NIC: expert peers outside its node
    duty: float          # share of the job's step the all-to-all is on the wire
    level: int = 0       # the outermost tier its flows climb to (Tier.level)


def on_fabric(cfg: TrainConfig, tiers: tuple, wire: float, step: float) -> AllToAll | None:
    """Where `cfg`'s expert all-to-all (`wire` seconds per micro-batch's layer passes, four
    exchanges per MoE layer) crosses a `pfc` scale-out fabric: its incast and its share of a
    `step`; None elsewhere."""
    if cfg.ep <= 1 or wire <= 0 or step <= 0:
        return None
    experts = tile(cfg.ep, cfg.stride("ep"), tiers)
    lossless = [s.tier for s in experts if s.tier.scope == "scaleout" and s.tier.congestion == "pfc"]
    if not lossless:
        return None
    k = max(1, cfg.ep - math.prod(s.peers for s in experts if s.tier.scope in SCALE_UP_SCOPES))
    return AllToAll(lossless[0].fabric, k, min(1.0, cfg.microbatches * wire / step), lossless[-1].level)
