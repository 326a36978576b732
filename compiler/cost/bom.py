"""The bill of materials of a lowered cluster: accelerators, nodes, scale-up units, racks,
switches per fabric tier, and the cables and transceivers of each tier, with prices.

Counts come from the IR (`ClusterGraph`); prices from the `price` fields of the parts the
cluster names (its entity), so the IR stays physical. The topmost priced level pays: a
priced supernode includes its trays and chips, a priced node its chips, CPUs and NICs;
below a price the parts are listed with `included` set.

Racks (ASSUMPTION, stated so that it can be argued with): a supernode (a scale-up domain
such as GB200 NVL72) is one rack; nodes are packed into racks up to the economics block's
`rack_power` (default 41 kW: four DGX H100 as in the DGX SuperPOD H100 reference
architecture). Switch racks are not counted.

Cable lengths (ASSUMPTION): a link is copper (one passive DAC) only when both ends sit in
one rack, i.e. on a leaf that serves no more endpoints than one rack holds (top of rack);
every other link, and every link above the leaf, is optical: two transceivers and one
fiber (passive DAC reaches only a few metres at 400 Gb/s, so links that leave the rack
are optical).
"""

from __future__ import annotations

import math


from ..design import Construct, Entity, Repeat
from ..ir import ClusterGraph, Partition, SwitchLayer
from ..lower import _partition_specs
from ..metrics import DRAM_W_PER_BYTE
from ...dsl.numbers import count, quantity
from ...dsl.units import Quantity
from ...dsl.records import frozen

DEFAULT_RACK_POWER = 41e3  # W; ASSUMPTION: four DGX H100 (10.2 kW max each) per rack, as in the DGX SuperPOD H100 RA


@frozen
class Line:
    """One row of the bill: `count` items at `each` USD; `cost` is what this row adds to capex."""

    key: str
    label: str
    count: int
    each: float | None           # USD each; None when no price is known
    cost: float                  # USD added to capex (0 when included in another row or unpriced)
    formula: str
    included: bool = False       # paid for by the price of the system it sits in


@frozen
class Bom:
    lines: tuple[Line, ...]
    racks: int
    rack_it_power: float         # W of IT load per compute rack (average)
    missing: tuple[str, ...]     # priced rows that have no price: capex is a lower bound

    @property
    def capex(self) -> float:
        return sum(line.cost for line in self.lines)

    def count(self, key: str) -> int:
        """Items of one kind (`accelerators`, `switches`, `transceivers`) over every partition and tier."""
        return sum(line.count for line in self.lines if key in line.key.split("."))


def _price(entity: Entity | None) -> float | None:
    value = None if entity is None else entity.get("price")
    return float(value) if isinstance(value, Quantity) else None


def usd(x: float) -> str:
    return quantity(x, "USD")


def bill(cluster: Entity, graph: ClusterGraph, rack_power: float = DEFAULT_RACK_POWER,
         rack_price: float | None = None) -> Bom:
    """The bill of materials of `graph`, lowered from `cluster`."""
    lines: list[Line] = []
    missing: list[str] = []
    racks, rack_watts = 0, 0.0
    fabrics: dict[str, Entity] = {}
    for (_, units, fabric, *_), p in zip(_partition_specs(cluster), graph.partitions):
        lines += _partition_lines(p, units, missing, f"{p.name}." if len(graph.partitions) > 1 else "")
        n, watts = _racks(p, rack_power)
        racks, rack_watts = racks + n, rack_watts + watts
        if fabric is not None:
            fabrics[fabric.name] = fabric
    each = rack_price or 0.0
    lines.append(Line("racks", "compute racks", racks, rack_price, racks * each,
                      f"{racks} x {usd(each)}" if rack_price is not None else
                      f"{count(racks, 'rack')} (no `rack_price` in `economics`: not costed)"))
    ports_per_rack = _ports_per_rack(graph, racks)
    for layer in graph.switch_layers:
        lines += _layer_lines(layer, fabrics.get(layer.fabric), ports_per_rack, missing)
    return Bom(tuple(lines), racks, rack_watts / racks if racks else 0.0, tuple(dict.fromkeys(missing)))


# ----------------------------------------------------------------- systems


def _partition_lines(p: Partition, units: Repeat, missing: list[str], prefix: str) -> list[Line]:
    unit = units.part
    node = unit if unit.kind == "node" else unit.get("nodes").part
    unit_price = _price(unit) if unit.kind == "supernode" else None
    node_price = _price(node)
    out: list[Line] = []
    if unit.kind == "supernode":
        priced = unit_price is not None
        if not priced and node_price is None:
            missing.append(unit.name)
        out.append(Line(f"{prefix}units", f"{unit.name} (scale-up units)", p.units, unit_price,
                        p.units * unit_price if priced else 0.0,
                        f"{p.units} x {usd(unit_price)}" if priced else f"{p.units} units, priced by their parts"))
        for s in p.unit_switches:
            switch = unit.get("switches").part
            each = _price(switch)
            count = p.units * s.count
            out.append(_part_line(f"{prefix}unit_switches", f"{s.name} (in {unit.name})", count, each, priced,
                                  f"{p.units} units x {s.count}", missing, switch.name))
    in_unit = unit_price is not None
    node_each = node_price if node_price is not None else None
    if node_price is None and not in_unit:
        missing.append(node.name)
    out.append(Line(f"{prefix}nodes", f"{node.name} (nodes)", p.nodes, node_each,
                    p.nodes * node_each if node_each is not None and not in_unit else 0.0,
                    (f"{p.nodes} x {usd(node_each)}" if node_each is not None else f"{p.nodes} nodes, no price")
                    + (f" (in the {unit.name} price)" if in_unit else ""), in_unit))
    covered = in_unit or node_price is not None
    chip = node.get("gpus").part
    out.append(_part_line(f"{prefix}accelerators", f"{chip.name} (accelerators)", p.gpus, _price(chip), covered,
                          f"{p.nodes} nodes x {p.node.gpus}", missing, chip.name))
    for field, kind in (("cpus", "CPUs"), ("nics", "NICs"), ("dpus", "DPUs")):
        repeat = node.get(field)
        if repeat is not None:
            out.append(_part_line(f"{prefix}{field}", f"{repeat.part.name} ({kind})", p.nodes * repeat.count,
                                  _price(repeat.part), covered, f"{p.nodes} nodes x {repeat.count}", missing,
                                  repeat.part.name))
    return out


def _part_line(key: str, label: str, count: int, each: float | None, included: bool, counted: str,
               missing: list[str], name: str) -> Line:
    if included:
        return Line(key, label, count, each, 0.0, f"{counted} (in the system price)", True)
    if each is None:
        missing.append(name)
        return Line(key, label, count, None, 0.0, f"{counted}, no price")
    return Line(key, label, count, each, count * each, f"{counted} x {usd(each)}")


def unit_power(p: Partition) -> float:
    """Rated IT watts of one unit, what its rack is provisioned for: its nodes (chips at TDP,
    parts, DRAM allowance, overhead at their ratings, not the draw at load of
    compiler/host_load.py) and the unit's own overhead and switches."""
    n = p.node
    node_w = (n.gpus * n.accelerator.tdp + sum(x.count * x.power for x in n.parts)
              + n.dram * DRAM_W_PER_BYTE + n.overhead)
    return p.nodes_per_unit * node_w + p.unit_overhead + sum(s.count * s.power for s in p.unit_switches)


def _racks(p: Partition, rack_power: float) -> tuple[int, float]:
    """(racks, IT watts in them): a supernode is one rack; nodes pack up to `rack_power`."""
    watts = unit_power(p)
    if p.nodes_per_unit > 1:
        return p.units, p.units * watts
    per_rack = max(1, int(rack_power // watts)) if watts > 0 else p.units
    return math.ceil(p.units / per_rack), p.units * watts


# ----------------------------------------------------------------- fabric


def _ports_per_rack(graph: ClusterGraph, racks: int) -> float:
    endpoints = sum(layer.links_below for layer in graph.switch_layers if layer.level == 1)
    return endpoints / racks if racks else 0.0


def _top_of_rack(layer: SwitchLayer, fabric: Entity | None, ports_per_rack: float) -> bool:
    """A leaf whose endpoints all fit in one rack (a rail-optimized leaf meets one port of
    each of its nodes, so it spans as many nodes as it has ports down)."""
    if layer.level != 1 or layer.switches == 0:
        return False
    down = math.ceil(layer.links_below / layer.switches)
    shape = fabric.get("topology") if fabric is not None else None
    rails = isinstance(shape, Construct) and shape.name == "rail_optimized"
    return (down * (fabric.get("rails") or 1) if rails else down) <= ports_per_rack


def _layer_lines(layer: SwitchLayer, fabric: Entity | None, ports_per_rack: float,
                 missing: list[str]) -> list[Line]:
    key = f"{layer.fabric}.{layer.level}"
    switch = fabric.get("switch") if fabric is not None else None
    out = []
    if layer.switches:
        out.append(_part_line(f"switches.{key}", f"{layer.name} switches", layer.switches, _price(switch), False,
                              f"{layer.switches}", missing, switch.name if switch is not None else f"{layer.name} switch"))
    links = layer.links_below
    if _top_of_rack(layer, fabric, ports_per_rack):
        out.append(_part_line(f"copper.{key}", f"{layer.name} copper cables (in rack)", links,
                              _price_field(fabric, "copper_price"), False, f"{links} links", missing,
                              f"{layer.fabric}.copper_price"))
        return out
    out.append(_part_line(f"transceivers.{key}", f"{layer.name} transceivers (2 per optical link)", 2 * links,
                          _price_field(fabric, "transceiver_price"), False, f"2 ends x {links} links", missing,
                          f"{layer.fabric}.transceiver_price"))
    out.append(_part_line(f"fibers.{key}", f"{layer.name} fibers", links, _price_field(fabric, "fiber_price"), False,
                          f"{links} links", missing, f"{layer.fabric}.fiber_price"))
    return out


def _price_field(fabric: Entity | None, field: str) -> float | None:
    value = None if fabric is None else fabric.get(field)
    return float(value) if isinstance(value, Quantity) else None
