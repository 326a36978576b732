"""Diagrams with graphviz: the topology of a cluster graph (cluster -> partition ->
supernode -> node -> chip, one representative of each repeated unit expanded and the rest
collapsed by multiplicity), a plan's placement drawn on it, and where the watts go.

A view returns a `graphviz.Digraph`; `render_bytes` turns it into DOT (no `dot` needed,
byte-identical across runs), SVG, PNG or PDF. Element ids and label text depend only on
the graph, never on dictionaries' or sets' iteration order.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import attrs
import graphviz

from ..compiler.ir import ClusterGraph, Partition, Tier
from ..compiler.metrics import Metric, power_breakdown
from ..model import comms
from ..model.ranks import rank_partition

FORMATS = ("svg", "png", "pdf", "dot")
FONT = "Helvetica"
SCALE_UP = {"color": "#2e7d32", "penwidth": "2.5", "style": "solid", "fontcolor": "#2e7d32"}
SCALE_OUT = {"color": "#1565c0", "penwidth": "1.5", "style": "dashed", "fontcolor": "#1565c0"}
HOST_LINK = {"color": "#9e9e9e", "penwidth": "0.8", "style": "dotted", "arrowhead": "none"}
HIGHLIGHT = {"fillcolor": "#ffe082", "color": "#e65100", "penwidth": "3"}
DIM_ORDER = ("tp", "cp", "ep", "dp", "pp")   # Megatron: tp innermost, pp outermost


class DotMissing(RuntimeError):
    """Graphviz's `dot` program is not installed (DOT output still works)."""


def fmt(value: float, unit: str) -> str:
    """`3.35 TB/s`, `1.2 MW`: the project's quantity format (`unit` as in `Metric`)."""
    return Metric("", "", value, unit, "").text


def _id(*parts: object) -> str:
    return re.sub(r"\W", "_", "_".join(str(p) for p in parts))


def _label(*lines: str) -> str:
    return "\\n".join(line for line in lines if line)


@attrs.frozen
class Overlay:
    """What the placement view adds to the topology: notes per drawn element, highlights."""

    title: str = ""
    notes: tuple[tuple[str, tuple[str, ...]], ...] = ()   # element id -> extra label lines
    highlight: frozenset[str] = frozenset()               # ids of nodes and clusters to highlight

    def lines(self, element: str) -> tuple[str, ...]:
        return dict(self.notes).get(element, ())

    def style(self, element: str, cluster: bool = False, **base: str) -> dict[str, str]:
        """`base` attributes, with the highlight's over them when `element` is highlighted."""
        if element not in self.highlight:
            return base
        return {**base, "color": HIGHLIGHT["color"], "penwidth": HIGHLIGHT["penwidth"],
                **({} if cluster else {"fillcolor": HIGHLIGHT["fillcolor"]})}


# ----------------------------------------------------------------- element ids


def tier_element(graph: ClusterGraph, index: int, tier: Tier) -> str:
    """The id of the drawn element that stands for `tier` of partition `index`."""
    if tier.scope == "node":
        return _id("p", index, "nodefabric")
    if tier.scope == "supernode":
        return _id("p", index, "unitfabric")
    layers = [layer for layer in graph.switch_layers if layer.fabric == tier.fabric]
    named = [layer for layer in layers if layer.name == tier.name]
    if named or len(layers) == 1:
        layer = (named or layers)[0]
        return _id("sw", layer.fabric, layer.level)
    return _id("p", index, "tier", tier.level)


def _scaleout_chain(graph: ClusterGraph, index: int, p: Partition) -> list[str]:
    """The scale-out elements a partition's NICs reach, innermost first, without repeats."""
    chain: list[str] = []
    for tier in p.tiers:
        if tier.scope == "scaleout":
            element = tier_element(graph, index, tier)
            if element not in chain:
                chain.append(element)
    return chain


def _link_rate(p: Partition, tier: Tier, fabrics: dict) -> tuple[int, float]:
    """(links per node, bytes/s per link) from a node into its first scale-out tier."""
    from ..compiler.lower import ports_per_node

    fabric = fabrics.get(tier.fabric)
    ports = ports_per_node(fabric, p.node) if fabric is not None else (p.node.nic_ports or 1)
    return ports, tier.bandwidth * tier.oversubscription * p.node.gpus / ports


def fabric_entities(design) -> dict:
    return {} if design is None else {e.name: e for e in design.of_kind("fabric")}


# ----------------------------------------------------------------- topology


def topology(graph: ClusterGraph, fabrics: dict | None = None, overlay: Overlay | None = None) -> graphviz.Digraph:
    """The cluster as nested graphviz clusters, scale-up solid, scale-out dashed."""
    overlay = overlay or Overlay()
    dot = graphviz.Digraph(_id(graph.name), graph_attr={
        "rankdir": "BT", "fontname": FONT, "fontsize": "12", "labelloc": "t", "newrank": "true",
        "nodesep": "0.3", "ranksep": "0.5",
        "label": _label(overlay.title or f"{graph.name}: {graph.gpus:,} accelerators")},
        node_attr={"fontname": FONT, "fontsize": "10", "shape": "box", "style": "rounded,filled",
                   "fillcolor": "white"},
        edge_attr={"fontname": FONT, "fontsize": "9"})
    with dot.subgraph(name="cluster_cluster") as c:
        c.attr(label=_label(f"cluster {graph.name}", _cluster_line(graph)), style="rounded", color="#424242",
               labelloc="b")
        for index, p in enumerate(graph.partitions):
            _partition(c, graph, index, p, fabrics or {}, overlay)
        _switch_layers(c, graph, fabrics or {}, overlay)
    _legend(dot)
    return dot


def _cluster_line(graph: ClusterGraph) -> str:
    budget = f" · budget {fmt(graph.power_budget, 'W')}" if graph.power_budget else ""
    return f"{graph.gpus:,} accelerators · PUE {graph.pue:g}{budget}"


def _partition(dot, graph: ClusterGraph, index: int, p: Partition, fabrics: dict, overlay: Overlay) -> None:
    name = _id("cluster_p", index)
    head = f"partition {p.name}: " if len(graph.partitions) > 1 else ""
    with dot.subgraph(name=name) as c:
        c.attr(label=_label(f"{head}{p.units:,} × {p.unit}", f"{p.gpus:,} GPUs"), style="rounded,dashed",
               **overlay.style(name, True, color="#616161"))
        if p.nodes_per_unit > 1:
            _unit(c, index, p, overlay)
        else:
            _node(c, index, p, overlay)
        _more(c, _id("p", index, "more"), p.units - 1, p.unit)
    _scaleout_edges(dot, graph, index, p, fabrics)


def _more(dot, element: str, count: int, what: str) -> None:
    if count > 0:
        dot.node(element, _label(f"× {count:,} more", what), shape="box3d", style="filled",
                 fillcolor="#eeeeee", color="#757575")


def _unit(dot, index: int, p: Partition, overlay: Overlay) -> None:
    name = _id("cluster_p", index, "unit")
    with dot.subgraph(name=name) as c:
        c.attr(label=_label(f"{p.unit} (supernode): 1 of {p.units:,}", f"{p.nodes_per_unit:,} nodes"),
               style="rounded", **overlay.style(name, True, color="#2e7d32"))
        _node(c, index, p, overlay)
        _more(c, _id("p", index, "unit", "more"), p.nodes_per_unit - 1, p.node.name)
        tier = next((t for t in p.tiers if t.scope == "supernode"), None)
        if tier is not None:
            element = _id("p", index, "unitfabric")
            switches = [f"{s.count} × {s.name} per unit" for s in p.unit_switches]
            c.node(element, _label(_tier_head(tier), *switches, *overlay.lines(element)), shape="hexagon",
                   **overlay.style(element, fillcolor="#e8f5e9"))
            source = _id("p", index, "nodefabric") if any(t.scope == "node" for t in p.tiers) else _id("p", index, "chip")
            c.edge(source, element, label=fmt(tier.bandwidth, "B/s") + " per GPU", **SCALE_UP)


def _tier_head(tier: Tier) -> str:
    return f"{tier.name} · {tier.kind}\\n{tier.group_gpus:,} GPUs · {fmt(tier.bandwidth, 'B/s')} per GPU"


def _node(dot, index: int, p: Partition, overlay: Overlay) -> None:
    name = _id("cluster_p", index, "node")
    node = p.node
    of = f"1 of {p.nodes_per_unit:,} per {p.unit}" if p.nodes_per_unit > 1 else f"1 of {p.units:,}"
    with dot.subgraph(name=name) as c:
        c.attr(label=_label(f"{node.name} (node): {of}"), style="rounded",
               **overlay.style(name, True, color="#455a64"))
        chip = _id("p", index, "chip")
        c.node(chip, _label(*_chip_lines(p), *overlay.lines(chip)), shape="box3d",
               **overlay.style(chip, fillcolor="#fff8e1"))
        for part in node.parts:
            speed = f", {fmt(part.bandwidth, 'B/s')}" if part.bandwidth else ""
            element = _id("p", index, "part", part.kind, part.name)
            c.node(element, f"{part.count} × {part.name} ({part.kind.upper()}{speed})", fillcolor="#f5f5f5")
            if part.kind in ("nic", "dpu"):
                c.edge(chip, element, **HOST_LINK)
        tier = next((t for t in p.tiers if t.scope == "node"), None)
        if tier is not None:
            element = _id("p", index, "nodefabric")
            c.node(element, _label(_tier_head(tier), *overlay.lines(element)), shape="hexagon",
                   **overlay.style(element, fillcolor="#e8f5e9"))
            c.edge(chip, element, label=fmt(tier.bandwidth, "B/s") + " per GPU", **SCALE_UP)


def _chip_lines(p: Partition) -> list[str]:
    chip = p.node.accelerator
    peak = next(((name, value) for name, value in chip.peak if name == "bf16"), chip.peak[0] if chip.peak else None)
    lines = [f"{p.node.gpus} × {chip.name}", f"{fmt(chip.hbm_capacity, 'B')} HBM · {fmt(chip.hbm_bandwidth, 'B/s')}"]
    if peak is not None:
        lines.append(f"{fmt(peak[1], 'FLOPS')} {peak[0]} · {fmt(chip.tdp, 'W')}")
    return lines


def _scaleout_edges(dot, graph: ClusterGraph, index: int, p: Partition, fabrics: dict) -> None:
    """From the node's NIC (or DPU, or chip) to the first scale-out element; tiers with no
    switch layer (tori) chain to each other here; switch layers chain in `_switch_layers`."""
    chain = _scaleout_chain(graph, index, p)
    if not chain:
        return
    first = next(t for t in p.tiers if t.scope == "scaleout")
    ports = [x for x in p.node.parts if x.kind in ("nic", "dpu")]
    source = _id("p", index, "part", ports[0].kind, ports[0].name) if ports else _id("p", index, "chip")
    links, rate = _link_rate(p, first, fabrics)
    cables = f"{links * p.nodes:,} links × {fmt(rate, 'B/s')}" if chain[0].startswith("sw_") else ""
    dot.edge(source, chain[0], label=_label(cables, f"{fmt(first.bandwidth, 'B/s')} per GPU"), **SCALE_OUT)
    for tier in p.tiers:
        if tier.scope == "scaleout" and tier_element(graph, index, tier) == _id("p", index, "tier", tier.level):
            dot.node(_id("p", index, "tier", tier.level), _tier_head(tier), shape="hexagon", fillcolor="#e3f2fd")
    for lower, upper in zip(chain, chain[1:]):
        if not (lower.startswith("sw_") and upper.startswith("sw_")):
            dot.edge(lower, upper, **SCALE_OUT)


def _switch_layers(dot, graph: ClusterGraph, fabrics: dict, overlay: Overlay) -> None:
    layers = sorted(graph.switch_layers, key=lambda layer: (layer.fabric, layer.level))
    for layer in layers:
        element = _id("sw", layer.fabric, layer.level)
        count = f"{layer.switches:,} switches · radix {layer.radix}" if layer.switches else "no switches (direct links)"
        seen = [_tier_line(graph, p, element) for p in graph.partitions]
        dot.node(element, _label(layer.name, count, *[s for s in seen if s], *overlay.lines(element)),
                 shape="hexagon", **overlay.style(element, fillcolor="#e3f2fd"))
    for lower, upper in zip(layers, layers[1:]):
        if lower.fabric == upper.fabric:
            fabric = fabrics.get(upper.fabric)
            rate = fabric.get("bandwidth") if fabric is not None else None
            speed = f" × {fmt(float(rate), 'B/s')}" if rate is not None else ""
            dot.edge(_id("sw", lower.fabric, lower.level), _id("sw", upper.fabric, upper.level),
                     label=f"{upper.links_below:,} links{speed}", **SCALE_OUT)


def _tier_line(graph: ClusterGraph, p: Partition, element: str) -> str:
    index = graph.partitions.index(p)
    tier = next((t for t in p.tiers if t.scope == "scaleout" and tier_element(graph, index, t) == element), None)
    if tier is None:
        return ""
    head = f"{p.name}: " if len(graph.partitions) > 1 else ""
    over = f" (oversubscribed {tier.oversubscription:g}:1)" if tier.oversubscription != 1 else ""
    return f"{head}{tier.group_gpus:,} GPUs per group · {fmt(tier.bandwidth, 'B/s')} per GPU{over}"


def _legend(dot) -> None:
    with dot.subgraph(name="cluster_legend") as c:
        c.attr(label="legend", style="rounded", color="#bdbdbd", fontsize="10")
        c.node("legend_a", "GPU", shape="plaintext", style="")
        c.node("legend_b", "scale-up (node / rack)", shape="plaintext", style="")
        c.node("legend_c", "NIC", shape="plaintext", style="")
        c.node("legend_d", "scale-out (switched fabric)", shape="plaintext", style="")
        c.edge("legend_a", "legend_b", **SCALE_UP)
        c.edge("legend_c", "legend_d", **SCALE_OUT)


# ----------------------------------------------------------------- placement


def dimension_stages(cfg, tiers: tuple[Tier, ...]) -> tuple[tuple[str, int, int, tuple[comms.Stage, ...]], ...]:
    """(dimension, size, stride, stages), with the strides the cost model uses (`cfg.stride`)."""
    return tuple((dim, getattr(cfg, dim), cfg.stride(dim), comms.place(getattr(cfg, dim), cfg.stride(dim), tiers))
                 for dim in DIM_ORDER if getattr(cfg, dim) > 1)


def tier_traffic(dim: str, seconds: float, stages: tuple[comms.Stage, ...]) -> tuple[tuple[Tier, float], ...]:
    """A dimension's exposed communication seconds split over the tiers its group crosses,
    in proportion to each stage's wire time for the same message (hierarchical collectives:
    each stage carries 1/peers of the one inside it; all-to-all: the share that reaches it;
    pipeline sends: all on the innermost tier, the one the model charges them to)."""
    weights, share, inside, total = [], 1.0, 1, math.prod(s.peers for s in stages)
    for i, stage in enumerate(stages):
        n, rate = stage.peers, stage.tier.bandwidth * stage.tier.efficiency or 1.0
        if dim == "pp":
            weights.append(1.0 if i == 0 else 0.0)
        elif dim in ("ep", "cp"):
            weights.append((inside * n - inside) / total / rate)
        else:
            weights.append((n - 1) / n * share / rate)
        share, inside = share / n, inside * n
    whole = sum(weights) or 1.0
    return tuple((stage.tier, seconds * w / whole) for stage, w in zip(stages, weights))


def placement_overlay(plan) -> Overlay:
    """Which tier each parallel dimension occupies, the traffic per tier, one group highlighted."""
    job, e = plan.job, plan.best
    graph, cfg = job.graph, e.config
    index = next(i for i, p in enumerate(graph.partitions) if p.name == job.partition.name)
    seconds = dict(e.breakdown.rows())
    notes: dict[str, list[str]] = {}
    dims = dimension_stages(cfg, rank_partition(job.partition, cfg.gpus).tiers)
    for dim, size, stride, stages in dims:
        reach = 1
        for i, (stage, (_, spent)) in enumerate(zip(stages, tier_traffic(dim, seconds.get(dim, 0.0), stages))):
            reach = size if i == len(stages) - 1 else min(size, reach * stage.peers)
            notes.setdefault(tier_element(graph, index, stage.tier), []).append(
                f"▶ {dim}: {reach:,} of {size:,} ranks, {spent:.3g} s/step")
    shown = next((d for d in dims if d[0] in ("tp", "ep")), dims[0] if dims else None)
    highlight, group = _highlight(graph, index, shown)
    title = (f"plan {job.name}: " + " ".join(f"{d}={getattr(cfg, d)}" for d in ("tp", "pp", "dp", "cp", "ep"))
             + f" · {cfg.gpus:,} of {graph.gpus:,} GPUs · step {e.step_time:.3g} s · MFU {e.mfu:.1%}" + group)
    return Overlay(title, tuple((k, tuple(v)) for k, v in notes.items()), highlight)


def _highlight(graph: ClusterGraph, index: int, shown) -> tuple[frozenset[str], str]:
    if shown is None:
        return frozenset(), ""
    dim, size, stride, stages = shown
    elements = {_id("p", index, "chip")} | {tier_element(graph, index, s.tier) for s in stages}
    scopes = {s.tier.scope for s in stages}
    spans = ("cluster_p", index) if "scaleout" in scopes else (
        ("cluster_p", index, "unit") if "supernode" in scopes else ("cluster_p", index, "node"))
    elements.add(_id(*spans))
    where = stages[-1].tier.name if stages else "one GPU"
    return frozenset(elements), f"\\nhighlighted: one {dim.upper()} group of {size} GPUs (stride {stride}), up to {where}"


def placement(plan, fabrics: dict | None = None) -> graphviz.Digraph:
    return topology(plan.job.graph, fabrics, placement_overlay(plan))


# ----------------------------------------------------------------- power


_GROUPS = (("power.accelerators", "accelerators"), ("power.cpus", "hosts"), ("power.nics", "hosts"),
           ("power.dpus", "hosts"), ("power.dram", "hosts"), ("power.node_overhead", "hosts"),
           ("power.unit_overhead", "scale-up domains"), ("power.cluster_overhead", "cluster overhead"))


def _group_of(metric: Metric) -> str:
    if metric.key.startswith(("power.switches.", "power.optics.")):
        return "network: " + metric.label.rsplit(" ", 1)[0]
    return dict(_GROUPS).get(metric.key, metric.label)


def power(graph: ClusterGraph) -> graphviz.Digraph:
    """Facility power -> IT load and cooling -> categories -> rows, edge width by share."""
    rows = power_breakdown(graph)
    by_key = {m.key: m for m in rows}
    facility = by_key["power.facility"].value or 1.0
    dot = graphviz.Digraph(_id(graph.name, "power"), graph_attr={
        "rankdir": "LR", "fontname": FONT, "labelloc": "t", "ranksep": "0.6",
        "label": f"{graph.name}: where the watts go (full load, accelerators at TDP)"},
        node_attr={"fontname": FONT, "fontsize": "10", "shape": "box", "style": "rounded,filled"},
        edge_attr={"color": "#ef6c00", "arrowhead": "none"})

    def box(element: str, label: str, watts: float, fill: str) -> None:
        dot.node(element, _label(label, f"{fmt(watts, 'W')} ({watts / facility:.1%})"), fillcolor=fill)

    def flow(a: str, b: str, watts: float) -> None:
        dot.edge(a, b, penwidth=f"{max(0.5, 16 * watts / facility):.2f}")

    budget = f" (budget {fmt(graph.power_budget, 'W')})" if graph.power_budget else ""
    box("facility", f"facility{budget}", facility, "#ffe0b2")
    for key, fill in (("power.it", "#fff3e0"), ("power.cooling", "#e1f5fe")):
        box(_id(key), by_key[key].label, by_key[key].value, fill)
        flow("facility", _id(key), by_key[key].value)
    groups: dict[str, list[Metric]] = {}
    for m in rows:
        if m.key not in ("power.it", "power.cooling", "power.facility"):
            groups.setdefault(_group_of(m), []).append(m)
    for name, members in groups.items():
        total = sum(m.value for m in members)
        box(_id("g", name), name, total, "#fff8e1")
        flow(_id("power.it"), _id("g", name), total)
        for m in members if len(members) > 1 else ():
            box(_id(m.key), m.label, m.value, "white")
            flow(_id("g", name), _id(m.key), m.value)
    return dot


# ----------------------------------------------------------------- output


def output_format(path: str | Path) -> str | None:
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in FORMATS else None


def render_bytes(dot: graphviz.Digraph, fmt_: str) -> bytes:
    """DOT source, or what `dot -T<fmt>` makes of it; `DotMissing` when `dot` is absent."""
    if fmt_ == "dot":
        return dot.source.encode("utf-8")
    try:
        return dot.pipe(format=fmt_)
    except graphviz.ExecutableNotFound:
        raise DotMissing("graphviz's `dot` program is not installed (apt-get install graphviz); "
                         ".dot output works without it") from None


def svg_text(dot: graphviz.Digraph) -> str:
    return render_bytes(dot, "svg").decode("utf-8")


def design_svg(design, cluster: str | None = None) -> str | None:
    """The topology of a design as SVG text, or None (no cluster, or no `dot`): for Jupyter."""
    from ..compiler.lower import lower

    try:
        return svg_text(topology(lower(design, cluster), fabric_entities(design)))
    except (DotMissing, LookupError):
        return None


def plan_svg(plan) -> str | None:
    """The placement of a feasible plan as SVG text, or None: for Jupyter."""
    if plan.best is None:
        return None
    try:
        return svg_text(placement(plan))
    except DotMissing:
        return None
