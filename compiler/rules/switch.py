"""Rules of a switch and of the fabric built from it: switching capacity against the ports'
line rate, and in-network reduction (SHARP on InfiniBand, NVLS on NVLink) asked of a switch
that cannot do it, or of a topology that has no switch to do it in."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterator

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic, Label
from ...dsl.numbers import number
from ...dsl.units import Quantity
from ..design import Entity
from ..routing import routing_of

# Topologies whose `radix` counts the ports of one switch, each at the fabric's `bandwidth`.
TREES = ("fat_tree", "rail_optimized")
# Topologies with no switch between the chips: nothing to reduce in.
SWITCHLESS = ("torus", "full_mesh")


def bits(q: Quantity | Fraction) -> str:
    """A network rate the way vendors quote it: `25.6 Tb/s`, `400 Gb/s` (per direction)."""
    value = float(q.value if isinstance(q, Quantity) else q) * 8
    for unit, scale in (("Pb/s", 1e15), ("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6)):
        if value >= scale:
            return f"{number(value / scale, 4)} {unit}"
    return f"{number(value)} b/s"


def node_switch_rules(node: Entity) -> Iterator[Diagnostic]:
    """A node's `switches` are its scale-up fabric's: without `scaleup` nothing reads them."""
    if node.get("switches") is not None and node.get("scaleup") is None:
        yield codes.SWITCH_REDUCTION.make(
            node.span_of("switches"), what=f"`{node.name}` lists `switches` but no `scaleup` fabric for them",
            notes=["help: name the scale-up fabric they switch (`scaleup = NVLink4`), or drop `switches`"])


def switch_rules(switch: Entity) -> Iterator[Diagnostic]:
    """A switch's ports at line rate fit its switching capacity (both per direction); a
    reduction rate only on a switch that reduces."""
    if switch.get("reduction") is not None and not switch.get("in_network_reduction"):
        yield codes.SWITCH_REDUCTION.make(
            switch.span_of("reduction"), what=f"`{switch.name}` states a `reduction` rate but does not reduce",
            notes=["help: set `in_network_reduction = true` if its chips reduce (SHARP, NVLS), or drop `reduction`"])
    radix, speed, capacity = switch.get("radix"), switch.get("port_speed"), switch.get("capacity")
    if radix is None or speed is None or capacity is None:
        return
    line = speed.value * radix
    if line > capacity.value:
        yield codes.SWITCH_CAPACITY.make(
            switch.span_of("capacity"), switch=switch.name, radix=radix, speed=bits(speed), line=bits(line),
            capacity=bits(capacity), labels=[Label(switch.span_of("radix"), "the ports"),
                                             Label(switch.span_of("port_speed"), "their speed")],
            notes=["its ports cannot all send at line rate at once: the switch is blocking",
                   "help: `capacity` is per direction; a vendor's sum of both directions is written with `bidir` "
                   "(`51.2 Tb/s bidir` for 64 x 400 Gb/s): check it, the radix and the port speed"])


def fabric_switch_rules(fabric: Entity) -> Iterator[Diagnostic]:
    switch = fabric.get("switch")
    yield from _capacity(fabric, switch if isinstance(switch, Entity) else None)
    yield from _reduction(fabric, switch if isinstance(switch, Entity) else None)
    yield from _flows(fabric)
    yield from _congestion(fabric)


def _congestion(fabric: Entity) -> Iterator[Diagnostic]:
    """`congestion` picks between RoCE's two ways of meeting congestion: read only on Ethernet."""
    kind = getattr(fabric.get("kind"), "name", None)
    if fabric.get("congestion") is None or kind in (None, "ethernet"):
        return
    yield codes.CONGESTION_KIND.make(
        fabric.span_of("congestion"),
        what=f"`{fabric.name}` is {kind}, but `congestion` picks how an Ethernet (RoCE) fabric meets congestion",
        notes=["PFC pauses and ECN marks are Ethernet's; InfiniBand's credit-based flow control and "
               "congestion control are not modelled by this field",
               "help: drop `congestion`, or use `kind = ethernet`"])


def _flows(fabric: Entity) -> Iterator[Diagnostic]:
    """`flows` says how many flows a port's traffic is hashed as: read only where flows are hashed,
    and `routing` only where there are uplinks to spread them over (a fat tree's)."""
    shape = getattr(fabric.get("topology"), "name", None)
    stated = [name for name in ("routing", "flows") if fabric.get(name) is not None]
    if shape is not None and shape not in TREES and stated:
        yield codes.ROUTING_FLOWS.make(
            fabric.span_of(stated[0]),
            what=f"`{fabric.name}` sets `{stated[0]}`, but its topology is `{shape}`: it has no equal-cost uplinks "
                 "to spread or hash flows over, so the model would ignore it",
            labels=[Label(fabric.span_of("topology"), "here")] if fabric.span_of("topology") else [],
            notes=[f"help: drop {' and '.join(f'`{n}`' for n in stated)}, or make the topology a `fat_tree(...)` "
                   "or `rail_optimized(...)`"])
        return
    if fabric.get("flows") is None:
        return
    if routing_of(fabric) != "ecmp":
        stated = fabric.get("routing") is not None
        how = "says `routing = adaptive`" if stated else "routes adaptively (the default off Ethernet)"
        yield codes.ROUTING_FLOWS.make(
            fabric.span_of("flows"),
            what=f"`{fabric.name}` sets `flows`, but it {how}: no flow is hashed onto one uplink",
            notes=["help: set `routing = ecmp` to model hash collisions, or drop `flows`"])


def _capacity(fabric: Entity, switch: Entity | None) -> Iterator[Diagnostic]:
    """Each switch of a fat tree drives `radix` ports at the fabric's bandwidth: at most its capacity."""
    shape, bandwidth = fabric.get("topology"), fabric.get("bandwidth")
    capacity = switch.get("capacity") if switch is not None else None
    if capacity is None or bandwidth is None or getattr(shape, "name", None) not in TREES:
        return
    radix = shape.args.get("radix")
    if radix is None:  # invalid, and reported as such
        return
    need = bandwidth.value * radix
    if need > capacity.value:
        most = int(capacity.value / bandwidth.value)
        yield codes.FABRIC_CAPACITY.make(
            fabric.span_of("topology"), fabric=fabric.name, radix=radix, bandwidth=bits(bandwidth), need=bits(need),
            switch=switch.name, capacity=bits(capacity),
            labels=[Label(fabric.span_of("bandwidth"), "per port"), Label(switch.span_of("capacity"), "its capacity")],
            notes=[f"help: at {bits(bandwidth)} a port, a `{switch.name}` drives at most radix = {most}; at radix "
                   f"{radix}, {bits(capacity.value / radix)} a port; or name a switch of more capacity"])


def in_network_reduction(fabric: Entity) -> bool:
    """Whether the fabric's collectives reduce in its switches: as it says, else as its switch says."""
    stated = fabric.get("in_network_reduction")
    if stated is not None:
        return bool(stated)
    switch = fabric.get("switch")
    return bool(switch.get("in_network_reduction", False)) if isinstance(switch, Entity) else False


def _reduction(fabric: Entity, switch: Entity | None) -> Iterator[Diagnostic]:
    if not fabric.get("in_network_reduction"):
        return
    shape = getattr(fabric.get("topology"), "name", None)
    if shape in SWITCHLESS:
        yield codes.IN_NETWORK_REDUCTION.make(
            fabric.span_of("in_network_reduction"), what=f"`{fabric.name}` reduces in the network, but a {shape} "
            "has no switch to reduce in", labels=[Label(fabric.span_of("topology"), "no switches")],
            notes=["help: drop `in_network_reduction`: the chips of a torus or mesh reduce among themselves"])
    elif switch is not None and switch.get("in_network_reduction") is False:
        yield codes.IN_NETWORK_REDUCTION.make(
            fabric.span_of("in_network_reduction"), what=f"`{fabric.name}` reduces in the network, but its switch "
            f"`{switch.name}` cannot", labels=[Label(switch.span_of("in_network_reduction"), "the switch's")],
            notes=["help: name a switch that reduces (SHARP, NVLS), or set `in_network_reduction = false` "
                   "(absent, a fabric reduces in the network when its switch can)"])
