"""The topology view: cluster -> partition -> supernode -> node -> chip as nested graphviz
clusters, one representative of each repeated unit expanded and the rest collapsed by
multiplicity; scale-up solid green, scale-out dashed blue.

A rail-optimized fabric is drawn after the compute-fabric figures of NVIDIA's DGX SuperPOD
reference architectures: DGX H100 (RA-11333-001 V11, 2023: scalable units of 32 DGX H100,
eight NDR leaves per unit, one per rail) and DGX B300 (docs.nvidia.com/dgx-superpod/
reference-architecture/scalable-infrastructure-b300/latest/network-fabrics.html: "each
group of 64 nodes is rail-aligned ... traffic between nodes, or between rails, traverses
the spine layer"; its Table 3 gives as many leaf-spine cables as node-leaf cables).
Taken from them:
- rails: NIC k of every node cabled to the leaves of rail k, one hue per rail from the
  node's NIC ports up to its leaves, one switch hop within a rail;
- leaf and spine groups: per rail, its leaves as one box (`rail 3: 4 x QM9700, 32 nodes
  each`, one leaf per rail per scalable unit), the spine layer as one box above all rails
  with its switch count and the GPUs one spine group reaches;
- the oversubscription label on the leaf-to-spine uplinks, as the RA's tables state it by
  cable counts: `1:1 non-blocking` when uplinks equal downlinks, else `oversubscribed 2:1`,
  with the link count and speed (`1,024 links x 400 Gb/s`).
Left out: the storage, in-band and out-of-band fabrics, the RA's twin-plane variant (a
design states one fabric) and the physical rack rows (the view is logical).
Link speeds read as on the data sheet: network links in bits per second (`400 Gb/s`),
scale-up links in bytes (`450 GB/s`); oversubscription is written on the uplinks.
"""

from __future__ import annotations

import math

import graphviz

from ..compiler.ir import ClusterGraph, Partition, SwitchLayer, Tier
from ..dsl.numbers import count, datasheet_memory, percent
from . import link_load, torus
from .torus import is_torus
from .diagram import (FONT, HOST_LINK, PALETTE, PASTEL, SCALE_OUT, SCALE_UP, escape, fmt, ident, in_bits,
                      label, speed)

MAX_RAILS = 8  # rails drawn one by one; beyond, the first few and a summary


def topology(graph: ClusterGraph, fabrics: dict | None = None, design=None, title: str = "",
             loads: dict[str, float] | None = None) -> graphviz.Digraph:
    """The cluster; with `loads` (tier name -> busy share of a plan's step, views/link_load.py)
    its links coloured by how busy the plan keeps them."""
    fabrics = fabrics or {}
    dot = graphviz.Digraph(ident(graph.name), graph_attr={
        "rankdir": "BT", "fontname": FONT, "fontsize": "14", "labelloc": "t", "newrank": "true",
        "nodesep": "0.35", "ranksep": "0.7", "label": title or f"{graph.name}: {graph.gpus:,} accelerators"},
        node_attr={"fontname": FONT, "fontsize": "11", "shape": "box", "style": "rounded,filled", "fillcolor": "white"},
        edge_attr={"fontname": FONT, "fontsize": "10"})
    view = _View(graph, fabrics, design, loads)
    with dot.subgraph(name="cluster_cluster") as c:
        c.attr(label=label(f"cluster {graph.name}", _cluster_line(graph)), style="rounded", color="#424242",
               labelloc="b")
        for index, p in enumerate(graph.partitions):
            view.partition(c, index, p)
        view.switch_layers(c)
    _legend(dot, loads is not None)
    return dot


def _cluster_line(graph: ClusterGraph) -> str:
    budget = f" · budget {fmt(graph.power_budget, 'W')}" if graph.power_budget else ""
    return f"{graph.gpus:,} accelerators · PUE {graph.pue:g}{budget}"


class _View:
    def __init__(self, graph: ClusterGraph, fabrics: dict, design, loads: dict[str, float] | None = None):
        self.graph, self.fabrics, self.design, self.loads = graph, fabrics, design, loads

    def loaded(self, tier: str, style: dict, text: str = "", rail: int | None = None) -> dict:
        """An edge's attributes, coloured and labelled by its link's load at the plan (if drawn):
        rail k's own links where the loads have them, else the drawn node's links into `tier`."""
        if self.loads is None:
            return {**style, "label": text}
        load = self.loads.get((tier, rail), self.loads.get(tier, 0.0))
        colour = link_load.colour(load)
        busy = f"busy {percent(load)} of the step" if load else "idle at this plan"
        return {**style, "color": colour, "fontcolor": colour, "penwidth": str(round(1.2 + 4 * load, 2)),
                "label": label(text, busy) if text or rail in (None, 0) else (percent(load) if load else "idle"),
                "tooltip": busy}

    # ------------------------------------------------------------ units and speeds
    def bits(self, fabric: str, kind: str) -> bool:
        return in_bits(self.design, fabric, kind)

    def tier_speed(self, tier: Tier) -> str:
        return speed(tier.bandwidth, self.bits(tier.fabric, tier.kind))

    def rails(self, fabric_name: str) -> int:
        """Rails of a rail-optimized fabric (0 for any other)."""
        fabric = self.fabrics.get(fabric_name)
        if fabric is None or fabric.get("topology").name != "rail_optimized":
            return 0
        first = next(p for p in self.graph.partitions if _scaleout_fabric(p) == fabric_name)
        from ..compiler.lower import ports_per_node

        return ports_per_node(fabric, first.node)

    def oversubscription(self, fabric_name: str) -> str:
        fabric = self.fabrics.get(fabric_name)
        ratio = fabric.get("topology").args.get("oversubscription") if fabric is not None else None
        if ratio is None or float(ratio) == 1:
            return "1:1 non-blocking"
        return f"oversubscribed {float(ratio):g}:1"

    # ------------------------------------------------------------ partitions and nodes
    def partition(self, dot, index: int, p: Partition) -> None:
        head = f"partition {p.name}: " if len(self.graph.partitions) > 1 else ""
        with dot.subgraph(name=ident("cluster_p", index)) as c:
            # labels at the bottom of a partition, a unit and a node: their cables leave upwards
            c.attr(label=label(f"{head}{p.units:,} × {p.unit}", f"{p.gpus:,} GPUs"), style="rounded,dashed",
                   color="#616161", labelloc="t")
            if p.nodes_per_unit > 1:
                self.unit(c, index, p)
            else:
                self.node(c, index, p)
            _more(c, ident("p", index, "more"), p.units - 1, p.unit)
        self.scaleout_edges(dot, index, p)

    def unit(self, dot, index: int, p: Partition) -> None:
        with dot.subgraph(name=ident("cluster_p", index, "unit")) as c:
            c.attr(label=label(f"{p.unit} (supernode): 1 of {p.units:,}", count(p.nodes_per_unit, "node")),
                   style="rounded", color="#2e7d32", labelloc="t")
            self.node(c, index, p)
            _more(c, ident("p", index, "unit", "more"), p.nodes_per_unit - 1, p.node.name)
            tier = next((t for t in p.tiers if t.scope == "supernode"), None)
            if tier is not None:
                element = self.scaleup(c, ident("p", index, "unitfabric"), p, "supernode")
                source = ident("p", index, "nodefabric") if any(t.scope == "node" for t in p.tiers) else ident("p", index, "chip")
                c.edge(source, element, **self.loaded(tier.name, SCALE_UP, f"{self.tier_speed(tier)} per GPU"))

    def scaleup(self, c, element: str, p: Partition, scope: str) -> str:
        """The scale-up fabric of `scope`: a torus as its grid of chips and rings, a switched
        fabric as one hexagon; the element edges into it meet."""
        tiers = [t for t in p.tiers if t.scope == scope]
        if is_torus(tiers):
            return torus.draw(c, element, tiers, f"{tiers[0].name.rsplit(' dim ', 1)[0]} · {tiers[0].kind}",
                              self.tier_speed_link(tiers[0]))
        switches = [f"{s.count} × {s.name} per unit" for s in p.unit_switches] if scope == "supernode" else []
        c.node(element, label(self.tier_head(tiers[0]), *self.more_axes(p, scope), *switches), shape="hexagon",
               fillcolor="#e8f5e9")
        return element

    def tier_speed_link(self, tier: Tier) -> str:
        return speed(tier.link_bandwidth, self.bits(tier.fabric, tier.kind))

    def more_axes(self, p: Partition, scope: str) -> list[str]:
        """The further axes of a torus, drawn in the one scale-up element of their scope."""
        return [f"{t.name}: {t.group_gpus:,} GPUs · {self.tier_speed(t)} per GPU"
                for t in [t for t in p.tiers if t.scope == scope][1:]]

    def tier_head(self, tier: Tier) -> str:
        return f"{tier.name} · {tier.kind}\\n{tier.group_gpus:,} GPUs · {self.tier_speed(tier)} per GPU"

    def node(self, dot, index: int, p: Partition) -> None:
        node = p.node
        of = f"1 of {p.nodes_per_unit:,} per {p.unit}" if p.nodes_per_unit > 1 else f"1 of {p.units:,}"
        rails = self.rails(_scaleout_fabric(p) or "")
        with dot.subgraph(name=ident("cluster_p", index, "node")) as c:
            c.attr(label=f"{node.name} (node): {of}", style="rounded", color="#455a64", labelloc="t")
            chip = ident("p", index, "chip")
            c.node(chip, label(*_chip_lines(p)), shape="box3d", fillcolor="#fff8e1")
            for part in node.parts:
                element = ident("p", index, "part", part.kind, part.name)
                bits = part.kind in ("nic", "dpu")
                rate = f", {speed(part.bandwidth, bits)}" if part.bandwidth else ""
                text = f"{part.count} × {part.name} ({part.kind.upper()}{rate})"
                if rails and part is self.ports_part(p):
                    c.node(element, _ports_table(text, rails), shape="plain", style="")
                else:
                    c.node(element, text, fillcolor="#f5f5f5")
                if part.kind in ("nic", "dpu"):
                    c.edge(chip, element, **HOST_LINK)
            tier = next((t for t in p.tiers if t.scope == "node"), None)
            if tier is not None:
                element = self.scaleup(c, ident("p", index, "nodefabric"), p, "node")
                c.edge(chip, element, **self.loaded(tier.name, SCALE_UP, f"{self.tier_speed(tier)} per GPU"))

    def ports_part(self, p: Partition):
        """The NIC (else DPU) that carries the scale-out fabric."""
        return next((x for x in p.node.parts if x.kind == "nic"), None) or next(
            (x for x in p.node.parts if x.kind == "dpu"), None)

    # ------------------------------------------------------------ scale-out
    def scaleout_edges(self, dot, index: int, p: Partition) -> None:
        """From the node's NIC ports to the fabric's first switch layer (each rail to its
        own leaves), or through the tiers of a fabric without switches (tori)."""
        fabric = _scaleout_fabric(p)
        if fabric is None:
            return
        first = next(t for t in p.tiers if t.scope == "scaleout")
        port = self.ports_part(p)
        source = ident("p", index, "part", port.kind, port.name) if port else ident("p", index, "chip")
        layers = self.layers(fabric)
        links, rate = _link_rate(p, first, self.fabrics)
        per_link = speed(rate, self.bits(fabric, first.kind))
        if not layers:
            self.tier_chain(dot, index, p, source, per_link)
            return
        rails = self.rails(fabric)
        if rails:
            for k in _shown(rails):
                text = f"{p.nodes:,} links per rail × {per_link}" if k == 0 else ""
                style = {**SCALE_OUT, "color": PALETTE[k % len(PALETTE)], "fontcolor": "#1565c0"}
                dot.edge(f"{source}:r{k}:n", _rail_id(layers[0], k), **self.loaded(first.name, style, text, rail=k))
            return
        cables = f"{links * p.nodes:,} links × {per_link}"
        dot.edge(source, ident("sw", fabric, layers[0].level),
                 **self.loaded(first.name, SCALE_OUT, label(cables, f"{self.tier_speed(first)} per GPU")))

    def tier_chain(self, dot, index: int, p: Partition, source: str, per_link: str) -> None:
        tiers = [t for t in p.tiers if t.scope == "scaleout"]
        if is_torus(tiers):  # the nodes' ports are the torus's links: drawn as its grid and rings
            element = torus.draw(dot, ident("p", index, "torus"), tiers, f"{tiers[0].name.rsplit(' dim ', 1)[0]} · "
                                 f"{tiers[0].kind}", per_link, SCALE_OUT)
            dot.edge(source, element, **self.loaded(tiers[0].name, SCALE_OUT, f"{per_link} per link"))
            return
        for tier in tiers:
            dot.node(ident("p", index, "tier", tier.level), self.tier_head(tier), shape="hexagon", fillcolor="#e3f2fd")
        dot.edge(source, ident("p", index, "tier", tiers[0].level), label=f"{per_link} per link", **SCALE_OUT)
        for lower, upper in zip(tiers, tiers[1:]):
            dot.edge(ident("p", index, "tier", lower.level), ident("p", index, "tier", upper.level), **SCALE_OUT)

    def layers(self, fabric: str) -> list[SwitchLayer]:
        return sorted((layer for layer in self.graph.switch_layers if layer.fabric == fabric), key=lambda l: l.level)

    def switch_layers(self, dot) -> None:
        for fabric in sorted({layer.fabric for layer in self.graph.switch_layers}):
            layers = self.layers(fabric)
            rails = self.rails(fabric)
            for layer in layers:
                if rails and layer.level == 1:
                    self.rail_leaves(dot, layer, rails)
                else:
                    dot.node(ident("sw", layer.fabric, layer.level), label(layer.name, self.layer_line(layer),
                             *self.group_lines(ident("sw", layer.fabric, layer.level))),
                             shape="hexagon", fillcolor="#e3f2fd")
            for lower, upper in zip(layers, layers[1:]):
                self.uplinks(dot, fabric, lower, upper, rails)

    def layer_line(self, layer: SwitchLayer) -> str:
        if not layer.switches:
            return "no switches (direct links)"
        return f"{count(layer.switches, 'switch', 'switches')} · radix {layer.radix}"

    def rail_leaves(self, dot, layer: SwitchLayer, rails: int) -> None:
        per_rail = max(1, layer.switches // rails)
        fabric = self.fabrics.get(layer.fabric)
        switch = fabric.get("switch") if fabric is not None else None
        nodes = sum(p.nodes for p in self.graph.partitions if _scaleout_fabric(p) == layer.fabric)
        what = f"{per_rail} × {switch.name}" if switch is not None else count(per_rail, "leaf", "leaves")
        each = f"{math.ceil(nodes / per_rail):,} nodes each" if per_rail > 1 else f"{nodes:,} nodes"
        with dot.subgraph(name=ident("cluster_sw", layer.fabric, layer.level)) as c:
            # the title is a node beside the rails, not the cluster's label: the cables enter the
            # rails from below and leave them above, and dot routes edges around nodes only
            c.attr(label="", style="rounded", color="#1565c0", rank="same")
            c.node(ident("sw", layer.fabric, layer.level, "title"),
                   label(f"{layer.name}: {rails} rails", self.layer_line(layer), "rail k joins NIC k of every",
                         "node: one switch hop within a rail"), shape="plaintext", style="", fontcolor="#1565c0")
            for k in _shown(rails):
                c.node(_rail_id(layer, k), label(f"rail {k}", what, each), shape="hexagon",
                       fillcolor=PASTEL[k % len(PASTEL)], color=PALETTE[k % len(PALETTE)], penwidth="2")
            if rails > len(_shown(rails)):
                c.node(ident("sw", layer.fabric, layer.level, "more"), f"… {rails - len(_shown(rails))} more rails",
                       shape="plaintext", style="")

    def uplinks(self, dot, fabric: str, lower: SwitchLayer, upper: SwitchLayer, rails: int) -> None:
        entity = self.fabrics.get(fabric)
        rate = entity.get("bandwidth") if entity is not None else None
        kind = entity.get("kind").name if entity is not None else ""
        each = f" × {speed(float(rate), self.bits(fabric, kind))}" if rate is not None else ""
        text = label(f"{upper.links_below:,} links{each}", self.oversubscription(fabric))
        target = ident("sw", fabric, upper.level)
        if rails and lower.level == 1:
            for k in _shown(rails):
                attrs_ = self.loaded(upper.name, {**SCALE_OUT, "color": PALETTE[k % len(PALETTE)]},
                                     text if k == 0 else "", rail=k)
                dot.edge(_rail_id(lower, k), target, **attrs_)
            return
        dot.edge(ident("sw", fabric, lower.level), target, **self.loaded(upper.name, SCALE_OUT, text))

    def group_lines(self, element: str) -> list[str]:
        """Per partition: how many GPUs meet below this layer, at what bandwidth per GPU."""
        lines = []
        for index, p in enumerate(self.graph.partitions):
            tier = next((t for t in p.tiers if t.scope == "scaleout" and _tier_element(self.graph, t) == element), None)
            if tier is not None:
                head = f"{p.name}: " if len(self.graph.partitions) > 1 else ""
                lines.append(f"{head}{tier.group_gpus:,} GPUs per group · {self.tier_speed(tier)} per GPU")
        return lines


def _tier_element(graph: ClusterGraph, tier: Tier) -> str:
    layers = [layer for layer in graph.switch_layers if layer.fabric == tier.fabric]
    named = [layer for layer in layers if layer.name == tier.name]
    layer = (named or layers or [None])[0]
    return ident("sw", layer.fabric, layer.level) if layer is not None else ""


def _scaleout_fabric(p: Partition) -> str | None:
    return next((t.fabric for t in p.tiers if t.scope == "scaleout"), None)


def _rail_id(layer: SwitchLayer, k: int) -> str:
    return ident("sw", layer.fabric, layer.level, "r", k)


def _shown(rails: int) -> range:
    return range(min(rails, MAX_RAILS))


def _ports_table(text: str, rails: int) -> str:
    """A NIC box with one coloured port per rail (graphviz HTML-like label, ports `r0`...)."""
    cells = "".join(f'<TD PORT="r{k}" WIDTH="22" BGCOLOR="{PASTEL[k % len(PASTEL)]}" COLOR="{PALETTE[k % len(PALETTE)]}">{k}</TD>'
                    for k in _shown(rails))
    more = f"<TD>+{rails - MAX_RAILS}</TD>" if rails > MAX_RAILS else ""
    span = len(_shown(rails)) + (1 if more else 0)
    return (f'<<TABLE BORDER="1" CELLBORDER="1" CELLSPACING="2" CELLPADDING="4" STYLE="ROUNDED" BGCOLOR="#f5f5f5">'
            f'<TR>{cells}{more}</TR>'  # ports on top: the cables leave upwards without crossing the text
            f'<TR><TD COLSPAN="{span}" BORDER="0">{escape(text)}</TD></TR>'
            f'<TR><TD COLSPAN="{span}" BORDER="0"><FONT POINT-SIZE="9">port k → rail k</FONT></TD></TR></TABLE>>')


def _more(dot, element: str, n: int, what: str) -> None:
    if n > 0:
        dot.node(element, label(f"× {n:,} more", what), shape="box3d", style="filled", fillcolor="#eeeeee",
                 color="#757575")


def _chip_lines(p: Partition) -> list[str]:
    chip = p.node.accelerator
    peak = next(((name, value) for name, value in chip.peak if name == "bf16"), chip.peak[0] if chip.peak else None)
    lines = [f"{p.node.gpus} × {chip.name}", f"{datasheet_memory(chip.hbm_datasheet)} HBM · {fmt(chip.hbm_bandwidth, 'B/s')}"]
    if peak is not None:
        lines.append(f"{fmt(peak[1], 'FLOPS')} {peak[0]} · {fmt(chip.tdp, 'W')} TDP")
    return lines


def _link_rate(p: Partition, tier: Tier, fabrics: dict) -> tuple[int, float]:
    """(links per node, bytes/s per link) from a node into its first scale-out tier."""
    from ..compiler.lower import ports_per_node

    fabric = fabrics.get(tier.fabric)
    ports = ports_per_node(fabric, p.node) if fabric is not None else (p.node.nic_ports or 1)
    return ports, tier.bandwidth * tier.oversubscription * p.node.gpus / ports


def _legend(dot, loaded: bool = False) -> None:
    with dot.subgraph(name="cluster_legend") as c:
        if loaded:  # the links' colour is their load at the plan
            bands = (f"under {percent(link_load.BUSY)} of the step", f"{percent(link_load.BUSY)} to "
                     f"{percent(link_load.FULL)}", f"over {percent(link_load.FULL)}: near saturated")
            for i, (text, hue) in enumerate(zip(bands, link_load.COLOURS)):
                c.node(f"legend_load_{i}", f"links busy {text}", shape="plaintext", style="", fontcolor=hue)
            c.node("legend_load_what", "each drawn link: its own load at the plan (flow simulation)",
                   shape="plaintext", style="")
        c.attr(label="legend", style="rounded", color="#bdbdbd", fontsize="10")
        c.node("legend_a", "GPU", shape="plaintext", style="")
        c.node("legend_b", "scale-up (node / rack)", shape="plaintext", style="")
        c.node("legend_c", "NIC", shape="plaintext", style="")
        c.node("legend_d", "scale-out (switched fabric)", shape="plaintext", style="")
        c.edge("legend_a", "legend_b", **SCALE_UP)
        c.edge("legend_c", "legend_d", **SCALE_OUT)
