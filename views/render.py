"""Diagrams with graphviz, and their output: the topology of a cluster graph
(`views/topology.py`), a plan's rank grid (`views/placement.py`) and where the watts go
(`views/power_view.py`).

A view returns a `graphviz.Digraph`; `render_bytes` turns it into DOT (no `dot` needed,
byte-identical across runs), SVG, PNG or PDF. Element ids and label text depend only on
the graph, never on dictionaries' or sets' iteration order.
"""

from __future__ import annotations

from pathlib import Path

import graphviz

from ..compiler.ir import ClusterGraph
from . import placement as _placement, power_view, topology as _topology
from .diagram import fmt
from .placement import DIM_ORDER, dimension_stages, tier_traffic

FORMATS = ("svg", "png", "pdf", "dot")
__all__ = ["DIM_ORDER", "FORMATS", "DotMissing", "design_svg", "dimension_stages", "fabric_entities", "fmt",
           "job_placement", "output_format", "placement", "plan_svg", "power", "render_bytes", "serve_placement",
           "svg_text", "tier_traffic", "topology"]


class DotMissing(RuntimeError):
    """Graphviz's `dot` program is not installed (DOT output still works)."""


def fabric_entities(design) -> dict:
    return {} if design is None else {e.name: e for e in design.of_kind("fabric")}


def topology(graph: ClusterGraph, fabrics: dict | None = None, design=None, plan=None) -> graphviz.Digraph:
    """The cluster; with `design`, link speeds in the units its fabrics are written in; with a
    train `plan` on it, its links coloured by how busy the plan keeps them (views/link_load.py)."""
    loads = None
    if plan is not None:
        from .link_load import link_loads

        loads = link_loads(plan, _rails(fabrics or {}, graph))
    return _topology.topology(graph, fabrics, design, loads=loads)


def _rails(fabrics: dict, graph: ClusterGraph) -> dict[str, int]:
    """Fabric name -> rails, for the rail-optimized fabrics the cluster's nodes use."""
    from ..compiler.lower import ports_per_node

    out = {}
    for p in graph.partitions:
        for tier in p.tiers:
            fabric = fabrics.get(tier.fabric)
            shape = fabric.get("topology") if fabric is not None else None
            if shape is not None and shape.name == "rail_optimized":
                out[tier.fabric] = ports_per_node(fabric, p.node)
    return out


def placement(plan, fabrics: dict | None = None) -> graphviz.Digraph:
    """The plan's rank grid (`fabrics` is accepted for the callers of the older view)."""
    return _placement.placement(plan)


def job_placement(outcome, fabrics: dict | None = None) -> graphviz.Digraph:
    """The placement of any job's feasible plan (`solver.jobs.plan_design`): a train job's rank
    grid, one grid per partition for a job on several, a serve job's pools and replicas."""
    if outcome.job_kind == "train":
        return placement(outcome.plan, fabrics)
    if outcome.job_kind == "hetero":
        from .placement_hetero import hetero_placement

        return hetero_placement(outcome)
    if outcome.job_kind == "rl":
        from .rl_placement import rl_placement

        return rl_placement(outcome)
    return serve_placement(outcome)


def serve_placement(plan) -> graphviz.Digraph:
    """A serve plan's pools and replicas (`views/serve_placement.py`)."""
    from .serve_placement import serve_placement as draw

    return draw(plan)


def power(graph: ClusterGraph, plan=None) -> graphviz.Digraph:
    """Where the watts go: at the plan's operating point when given, else at full load."""
    return power_view.power(graph, plan)


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
        return svg_text(topology(lower(design, cluster), fabric_entities(design), design))
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
