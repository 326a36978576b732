"""Derived numbers of a cluster graph, each with its formula and inputs: totals,
bandwidths per tier, switch counts and the power breakdown."""

from __future__ import annotations

from fractions import Fraction

import attrs

from ..dsl.source import Span
from . import host_load
from .ir import ClusterGraph, Partition
from ..dsl.numbers import number, readable
from ..dsl.units import Quantity, format_quantity, BYTES, BANDWIDTH, FLOPS, MONEY, POWER, NONE, TIME
from ..dsl.records import frozen

# Host DRAM power per byte of capacity. An assumption: a 64 GB DDR4/DDR5 RDIMM draws
# about 6 W under load (Micron TN-40-07 DDR4 power calculator, typical server load),
# i.e. ~0.1 W per GB.
DRAM_W_PER_BYTE = 0.1e-9

_DIMS = {"W": POWER, "B": BYTES, "B/s": BANDWIDTH, "FLOPS": FLOPS, "": NONE, "s": TIME, "USD": MONEY}


@frozen
class Metric:
    key: str
    label: str
    value: float
    unit: str                    # "W", "B", "B/s", "FLOPS", "s", "USD" or "" for counts
    formula: str = attrs.field(converter=readable)  # numbers in it as the one formatter writes them
    span: Span | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def text(self) -> str:
        if self.unit == "":
            return number(self.value)
        return format_quantity(Quantity(_exact(self.value), _DIMS[self.unit]))


def _exact(value: float) -> Fraction:
    return Fraction(repr(float(value)))  # the shortest decimal, so 1e-06 s shows as 1 us


def _q(value: float, unit: str) -> str:
    return Metric("", "", value, unit, "").text


# ----------------------------------------------------------------- totals


def totals(graph: ClusterGraph) -> tuple[Metric, ...]:
    out = [Metric("gpus", "accelerators", graph.gpus, "",
                  " + ".join(f"{p.units} x {p.unit} x {p.nodes_per_unit} nodes x {p.node.gpus} GPUs"
                             if p.nodes_per_unit > 1 else f"{p.units} x {p.unit} x {p.node.gpus} GPUs"
                             for p in graph.partitions), graph.span)]
    for precision in _precisions(graph):
        value = sum(p.gpus * (p.node.accelerator.peak_of(precision) or 0.0) for p in graph.partitions)
        out.append(Metric(f"peak.{precision}", f"peak {precision} (dense)", value, "FLOPS",
                          " + ".join(f"{p.gpus} x {_q(p.node.accelerator.peak_of(precision) or 0, 'FLOPS')}"
                                     for p in graph.partitions)))
    if any(p.node.accelerator.hbm_nominal is not None for p in graph.partitions):  # as the data sheets state it
        out.append(_sum_metric(graph, "hbm.nominal", "HBM (data sheet)", lambda p: p.gpus * p.node.accelerator.hbm_datasheet,
                               lambda p: f"{p.gpus} x {_q(p.node.accelerator.hbm_datasheet, 'B')}", "B"))
    out.append(_sum_metric(graph, "hbm.capacity", "HBM capacity (what plans fit in)",
                           lambda p: p.gpus * p.node.accelerator.hbm_capacity,
                           lambda p: f"{p.gpus} x {_q(p.node.accelerator.hbm_capacity, 'B')}", "B"))
    out.append(_sum_metric(graph, "hbm.bandwidth", "HBM bandwidth (aggregate)",
                           lambda p: p.gpus * p.node.accelerator.hbm_bandwidth,
                           lambda p: f"{p.gpus} x {_q(p.node.accelerator.hbm_bandwidth, 'B/s')}", "B/s"))
    out.append(_sum_metric(graph, "host.dram", "host DRAM", lambda p: p.nodes * p.node.dram,
                           lambda p: f"{p.nodes} nodes x {_q(p.node.dram, 'B')}", "B"))
    out.append(_sum_metric(graph, "host.nvme", "host NVMe", lambda p: p.nodes * p.node.nvme,
                           lambda p: f"{p.nodes} nodes x {_q(p.node.nvme, 'B')}", "B"))
    return tuple(out)


def _precisions(graph: ClusterGraph) -> list[str]:
    seen: list[str] = []
    for p in graph.partitions:
        seen += [name for name, _ in p.node.accelerator.peak if name not in seen]
    return seen


def _sum_metric(graph, key, label, value_of, term_of, unit) -> Metric:
    return Metric(key, label, sum(value_of(p) for p in graph.partitions), unit,
                  " + ".join(term_of(p) for p in graph.partitions))


def tiers(graph: ClusterGraph) -> tuple[Metric, ...]:
    """Per partition and tier: group size, bandwidth per GPU, latency."""
    out = []
    for p in graph.partitions:
        prefix = f"{p.name}." if len(graph.partitions) > 1 else ""
        for t in p.tiers:
            key = f"{prefix}tier{t.level}"
            out.append(Metric(f"{key}.group", f"{t.name}: GPUs in one group", t.group_gpus, "", _group_formula(p, t),
                              t.span))
            over = f" / oversubscription {t.oversubscription:g}" if t.oversubscription != 1 else ""
            share = f"{t.fabric} link share per GPU{over}"
            if t.ring:
                share = (f"a ring along the axis: {'2 links' if t.wraparound else '1 link'} x {t.fabric} "
                         "bandwidth per chip / its links")
            out.append(Metric(f"{key}.bandwidth", f"{t.name}: bandwidth per GPU per direction", t.bandwidth, "B/s",
                              share, t.span))
            out.append(Metric(f"{key}.latency", f"{t.name}: latency", t.latency, "s", f"hops x {t.fabric} latency", t.span))
    return tuple(out)


def _group_formula(p: Partition, t) -> str:
    if t.ring:
        return f"axes up to this one ({t.ring} chips along it{', wraparound' if t.wraparound else ''})"
    if t.scope == "node":
        return f"{p.node.gpus} GPUs per {p.node.name}"
    if t.scope == "supernode":
        return f"{p.nodes_per_unit} nodes x {p.node.gpus} GPUs per {p.unit}"
    return f"GPUs below one {t.name} switch group (all {p.gpus} at the top tier)"


def bisection(graph: ClusterGraph) -> Metric:
    """Scale-out bisection: half the GPUs sending at their top-tier bandwidth."""
    terms, total = [], 0.0
    for p in graph.partitions:
        top = p.tiers[-1] if p.tiers else None
        if top is not None:
            total += p.gpus / 2 * top.bandwidth
            terms.append(f"{p.gpus} / 2 x {_q(top.bandwidth, 'B/s')}")
    return Metric("bisection", "bisection bandwidth (per direction)", total, "B/s", " + ".join(terms) or "no fabric")


def switches(graph: ClusterGraph) -> tuple[Metric, ...]:
    out = []
    for layer in graph.switch_layers:
        out.append(Metric(f"switches.{layer.fabric}.{layer.level}", f"{layer.name} switches", layer.switches, "",
                          f"ceil(ports below / ports down per switch), radix {layer.radix}", layer.span))
        out.append(Metric(f"links.{layer.fabric}.{layer.level}", f"{layer.name} links from below", layer.links_below, "",
                          "endpoint ports" if layer.level == 1 else "uplinks of the tier below", layer.span))
    return tuple(out)


# ----------------------------------------------------------------- power


def power_breakdown(graph: ClusterGraph, accelerator_power: dict[str, float] | None = None) -> tuple[Metric, ...]:
    """Watts per category at full load (accelerators at TDP, or their power cap, unless
    `accelerator_power` says); the host parts draw at the load the accelerators' heat puts on
    them (compiler/host_load.py), not their rating."""
    rows = _node_rows(graph, accelerator_power or {}) + _fabric_rows(graph)
    if graph.overhead:
        rows.append(Metric("power.cluster_overhead", "cluster overhead", graph.overhead, "W", "power.overhead"))
    rows = [r for r in rows if r.value or r.key == "power.accelerators"]
    it = sum(r.value for r in rows)
    rows.append(Metric("power.it", "IT load", it, "W", "sum of the rows above"))
    rows.append(Metric("power.cooling", "cooling and losses (PUE)", it * (graph.pue - 1), "W",
                       f"{_q(it, 'W')} x (PUE {graph.pue:g} - 1)"))
    rows.append(Metric("power.facility", "facility power", it * graph.pue, "W", f"{_q(it, 'W')} x PUE {graph.pue:g}"))
    return tuple(rows)


def _node_rows(graph: ClusterGraph, accelerator_power: dict[str, float]) -> list[Metric]:
    """The nodes' parts (accelerators, CPUs, NICs, DPUs, DRAM, overhead) and the scale-up
    domains' trays and shelves, summed over the partitions."""
    def chip_power(p: Partition) -> float:
        chip = p.node.accelerator
        # at full load the chip draws its TDP, or its cap, or less where its full clock needs less
        full = min(chip.tdp, chip.power_cap or chip.tdp, chip.full_clock or chip.tdp)
        return accelerator_power.get(p.name, full)

    def load(p: Partition) -> float:
        chip = p.node.accelerator
        return host_load.heat_load(chip.idle, chip.full_clock or chip.tdp, chip_power(p))

    def share(p: Partition, kind: str) -> float:
        return host_load.BY_KIND[kind].at(load(p))

    rows = [
        _sum_metric(graph, "power.accelerators", "accelerators", lambda p: p.gpus * chip_power(p),
                    lambda p: f"{p.gpus} x {_q(chip_power(p), 'W')}", "W"),
    ]
    for kind, label in (("cpu", "CPUs"), ("nic", "NICs"), ("dpu", "DPUs")):
        rows.append(_sum_metric(graph, f"power.{kind}s", label,
                                lambda p, k=kind: p.nodes * share(p, k) * sum(x.count * x.power for x in p.node.parts_of(k)),
                                lambda p, k=kind: f"{p.nodes} x (" + (" + ".join(f"{x.count} x {_q(x.power, 'W')}"
                                                                                for x in p.node.parts_of(k)) or "0 W")
                                + f") x {host_load.shares_text(k, load(p))}",
                                "W"))
    rows.append(_sum_metric(graph, "power.dram", "host DRAM (0.1 W/GB allowance)",
                            lambda p: p.nodes * p.node.dram * DRAM_W_PER_BYTE * share(p, "dram"),
                            lambda p: f"{p.nodes} x {_q(p.node.dram, 'B')} x 0.1 W/GB x {host_load.shares_text('dram', load(p))}",
                            "W"))
    rows.append(_sum_metric(graph, "power.node_overhead", "node overhead (fans, boards, conversion)",
                            lambda p: p.nodes * p.node.overhead * share(p, "overhead"),
                            lambda p: f"{p.nodes} x {_q(p.node.overhead, 'W')} x {host_load.shares_text('overhead', load(p))}",
                            "W"))
    rows.append(_sum_metric(graph, "power.unit_overhead", "scale-up domain (switch trays, shelves)",
                            lambda p: p.units * (p.unit_overhead + sum(s.count * s.power for s in p.unit_switches)),
                            lambda p: f"{p.units} x {_q(p.unit_overhead + sum(s.count * s.power for s in p.unit_switches), 'W')}",
                            "W"))
    return rows


def _fabric_rows(graph: ClusterGraph) -> list[Metric]:
    """Each switch layer's switches and, where its links are optical, their transceivers (two ends a link)."""
    rows = []
    for layer in graph.switch_layers:
        rows.append(Metric(f"power.switches.{layer.fabric}.{layer.level}", f"{layer.name} switches",
                           layer.switches * layer.switch_power, "W",
                           f"{layer.switches} x {_q(layer.switch_power, 'W')}", layer.span))
        if layer.link_power:
            rows.append(Metric(f"power.optics.{layer.fabric}.{layer.level}", f"{layer.name} optics",
                               2 * layer.links_below * layer.link_power, "W",
                               f"2 ends x {layer.links_below} links x {_q(layer.link_power, 'W')}", layer.span))
    return rows


def facility_power(graph: ClusterGraph) -> float:
    return power_breakdown(graph)[-1].value


def explain(graph: ClusterGraph) -> tuple[Metric, ...]:
    return totals(graph) + tiers(graph) + (bisection(graph),) + switches(graph) + power_breakdown(graph)
