"""A collective beside an incast, analytically: what congestion control does to a ring whose
members also send into a fan-in (every sender to one receiver: a checkpoint or storage
target, a parameter server, an unbalanced expert), so the planner's model can price what the
flow simulator (model/network/flows.py) shows.

The incast's flows are held at the receiver's port: each of `senders` flows gets
`receiver / senders`. A ring member that sends one of them shares its own port with it:

- `ecn`: ECN marks and end-to-end rate control (DCQCN on RoCE, InfiniBand's congestion
  control) slow each sender to its flow's fair share, so rates are max-min fair: the ring's
  flow takes what the incast's leaves of the port;
- `pfc`: Priority Flow Control alone. The receiver's full port pauses the ports behind it, and
  a pause stops every flow of the priority on the sender's port, so the ring's flow moves no
  faster than the incast's: head-of-line blocking, the "victim flow" of Zhu et al.,
  "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015, Sec. 2.2).

A synchronous collective waits for its slowest hop, so one member that sends into the incast
sets every stage of the collective that leaves through the incast's fabric. Stages on other
fabrics (NVLink inside a node) keep their rate. Above one switch tier the model reads only the
slowest collided path (`Incast.path`: ECMP's hashed share of a spine); how the pauses then climb
a leaf's uplinks, link by link, is the flow simulator's alone.
"""

from __future__ import annotations

import math

import attrs

from .placement import Stage, stage_rate
from ...dsl.records import frozen

CONGESTION = ("ecn", "pfc")


@frozen
class Incast:
    """A fan-in on `fabric`: `senders` flows into one port of `receiver` bytes/s. An all-to-all
    is one at every receiver, and each sender's port carries `flows` of them (one to each peer
    across the fabric); `path`: the rate its slowest flow keeps where hashed paths collide
    (ECMP), what the pauses then hold (inf: no collision)."""

    fabric: str
    senders: int
    receiver: float
    flows: int = 1
    path: float = math.inf

    @property
    def flow_rate(self) -> float:
        """Each incast flow's rate, held at the receiver's port."""
        return self.receiver / self.senders

    @property
    def slowest(self) -> float:
        """The incast's slowest flow: at the receiver's port or a collided path."""
        return min(self.flow_rate, self.path)


def victim_rate(alone: float, port: float, incast: Incast, congestion: str) -> float:
    """The rate of a flow that moves at `alone` by itself and leaves a port of `port` bytes/s
    that also carries `incast.flows` flows of `incast`. ECN: max-min on the shared port, each
    incast flow held below at the receiver's share or sharing the port (a synchronous ring
    waits for its port where no collision frees room). PFC: no faster than that, nor than
    the incast's slowest flow, whose pauses reach the port."""
    if congestion not in CONGESTION:
        raise ValueError(f"congestion {congestion!r}: one of {', '.join(CONGESTION)}")
    k = incast.flows
    shared = min(alone, port - k * min(incast.flow_rate, port / (k + 1)))
    return min(shared, incast.slowest) if congestion == "pfc" else shared


def beside_incast(stages: tuple[Stage, ...], incast: Incast, congestion: str) -> tuple[Stage, ...]:
    """A collective's stages when its members send into `incast`: each stage that leaves
    through the incast's fabric at the victim's rate. A ring whose hop out of a node spreads
    over k ports (NCCL's channels, `Stage.ports`) is k victims, each of its share of the hop.
    The victims' ports are NICs like the receiver's."""
    return tuple(attrs.evolve(s, rate=s.ports * victim_rate(stage_rate(s) / s.ports, incast.receiver, incast, congestion))
                 if s.tier.fabric == incast.fabric else s for s in stages)

