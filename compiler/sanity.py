"""Checks of a lowered cluster a designer wants before anything is bought: power
against the budget, fabrics that cannot be built, thin or oversubscribed tiers."""

from __future__ import annotations

from typing import Iterator

from ..dsl import codes
from . import topology
from .design import Entity
from ..dsl.diagnostics import Diagnostic, Label
from ..dsl.numbers import number
from .ir import ClusterGraph
from .metrics import power_breakdown
from ..dsl.units import Quantity, format_quantity, BANDWIDTH, POWER
from fractions import Fraction

THIN_RATIO = 20  # warn when scale-out per GPU is below 1/20 of scale-up
HEAVY_OVERSUBSCRIPTION = 2  # 2:1 is a common deliberate choice; beyond it, say so


def sanity(cluster: Entity, graph: ClusterGraph) -> list[Diagnostic]:
    return [*_budget(cluster, graph), *_fabrics(cluster, graph), *_thin(cluster, graph)]


def _w(value: float) -> str:
    return format_quantity(Quantity(Fraction(value), POWER))


def _bw(value: float) -> str:
    return format_quantity(Quantity(Fraction(value), BANDWIDTH))


def _budget(cluster: Entity, graph: ClusterGraph) -> Iterator[Diagnostic]:
    if graph.power_budget is None:
        return
    rows = power_breakdown(graph)
    facility = rows[-1].value
    if facility > graph.power_budget:
        notes = [f"{row.label}: {row.text} = {row.formula}" for row in rows if row.value]
        notes.append("note: a job planned on it runs under the budget (fewer GPUs, power caps, lower clocks) and "
                     "its plan says what the budget gives up")
        yield codes.POWER_BUDGET.make(cluster.span_of("power.budget"), name=f"cluster `{graph.name}`", need=_w(facility),
                                      budget=_w(graph.power_budget), label="the budget", notes=notes)


def _fabrics(cluster: Entity, graph: ClusterGraph) -> Iterator[Diagnostic]:
    seen: set[str] = set()
    for layer in graph.switch_layers:
        if layer.fabric in seen or layer.level != 1:
            continue
        seen.add(layer.fabric)
        fabric = _fabric_entity(cluster, layer.fabric)
        if fabric is None:
            continue
        shape = fabric.get("topology")
        if shape.name not in ("fat_tree", "rail_optimized"):
            continue
        radix, tiers = shape.args.get("radix"), shape.args.get("tiers")
        over = float(shape.args.get("oversubscription", Quantity(Fraction(1))).value)
        capacity = topology.fat_tree_capacity(radix, tiers, over)
        if layer.links_below > capacity:
            yield codes.RADIX_TOO_SMALL.make(fabric.span_of("topology"), fabric=fabric.name, ports=layer.links_below,
                                             tiers=tiers, radix=radix, capacity=capacity,
                                             notes=["help: add a tier or use switches of a larger radix"])
        if over > HEAVY_OVERSUBSCRIPTION:
            yield codes.OVERSUBSCRIBED.make(fabric.span_of("topology"), fabric=fabric.name, ratio=f"{over:g}")
    for p in graph.partitions:
        fabric = _fabric_entity(cluster, next((t.fabric for t in p.tiers if t.scope == "scaleout"), ""))
        rails = fabric.get("rails") if fabric is not None else None
        if rails and p.node.nic_ports and rails != p.node.nic_ports:
            yield codes.RAILS_MISMATCH.make(fabric.span_of("rails"), fabric=fabric.name, rails=rails,
                                            node=p.node.name, nics=p.node.nic_ports,
                                            labels=[Label(p.node.span, "the node")])


def _thin(cluster: Entity, graph: ClusterGraph) -> Iterator[Diagnostic]:
    for p in graph.partitions:
        up = [t for t in p.tiers if t.scope != "scaleout"]
        out = [t for t in p.tiers if t.scope == "scaleout"]
        if up and out and out[0].bandwidth * THIN_RATIO < up[-1].bandwidth:
            yield codes.THIN_SCALEOUT.make(p.span, out=_bw(out[0].bandwidth), up=_bw(up[-1].bandwidth),
                                           ratio=number(round(up[-1].bandwidth / out[0].bandwidth)),
                                           labels=[Label(out[0].span, "the scale-out fabric")])


def _fabric_entity(cluster: Entity, name: str) -> Entity | None:
    """The fabric entity of that name reachable from the cluster (its own or a partition's)."""
    candidates = [cluster.get("scaleout")]
    partitions = cluster.get("partition")
    if partitions is not None:
        candidates += [item.value.get("scaleout") for item in partitions.items]
    return next((f for f in candidates if f is not None and f.name == name), None)
