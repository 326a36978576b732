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
fabrics (NVLink inside a node) keep their rate. One switch tier: the pauses that climb a leaf's
uplinks toward a spine are the flow simulator's alone.
"""

from __future__ import annotations

import attrs

from ...compiler.ir import Tier
from .placement import Stage, port_rate, stage_rate

CONGESTION = ("ecn", "pfc")


@attrs.frozen
class Incast:
    """A fan-in on `fabric`: `senders` flows into one port of `receiver` bytes/s."""

    fabric: str
    senders: int
    receiver: float

    @property
    def flow_rate(self) -> float:
        """Each incast flow's rate, held at the receiver's port."""
        return self.receiver / self.senders


def victim_rate(alone: float, port: float, incast: Incast, congestion: str) -> float:
    """The rate of a flow that moves at `alone` by itself and leaves a port of `port` bytes/s
    that also carries one flow of `incast`."""
    if congestion not in CONGESTION:
        raise ValueError(f"congestion {congestion!r}: one of {', '.join(CONGESTION)}")
    held = incast.flow_rate
    if congestion == "pfc":
        return min(alone, held)
    # max-min on the shared port: the incast's flow is held below at `held`, or both share it
    return min(alone, port - min(held, port / 2))


def beside_incast(stages: tuple[Stage, ...], incast: Incast, congestion: str) -> tuple[Stage, ...]:
    """A collective's stages when one of its members sends into `incast`: each stage that
    leaves through the incast's fabric at the victim's rate."""
    return tuple(attrs.evolve(s, rate=victim_rate(stage_rate(s), _port(s.tier), incast, congestion))
                 if s.tier.fabric == incast.fabric else s for s in stages)


def _port(tier: Tier) -> float:
    """A GPU's port into the tier's fabric (before oversubscription, as the flow simulator's)."""
    return port_rate(tier)
