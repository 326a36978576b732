"""The power view: facility power -> IT load and cooling -> categories -> rows, each edge
as wide as its share. With a plan, the accelerators draw what the plan runs them at (the
job's GPUs at the modelled per-GPU power, the rest idle) and each box gives its value
at TDP for reference; without one, everything is at full load (TDP).

The view draws the whole cluster; a plan's power (`gclc plan`, its JSON and the report) is
its job's alone: its GPUs and their share of the rest, the GPUs it leaves idle counted off
(docs/power.md). The title states the plan's figure and what the idle rest of the cluster
adds, so the two numbers read as one answer."""

from __future__ import annotations

import graphviz

from ..compiler.ir import ClusterGraph
from ..dsl.numbers import percent
from ..compiler.metrics import Metric, power_breakdown
from ..model.power import gpu_watts_of
from .diagram import FONT, fmt, ident, label
from ..dsl.records import frozen

_GROUPS = (("power.accelerators", "accelerators"), ("power.cpus", "hosts"), ("power.nics", "hosts"),
           ("power.dpus", "hosts"), ("power.dram", "hosts"), ("power.node_overhead", "hosts"),
           ("power.unit_overhead", "scale-up domains"), ("power.cluster_overhead", "cluster overhead"))


def _group_of(metric: Metric) -> str:
    if metric.key.startswith(("power.switches.", "power.optics.")):
        return "network: " + metric.label.rsplit(" ", 1)[0]
    return dict(_GROUPS).get(metric.key, metric.label)


@frozen
class Draw:
    """A partition's GPUs that run the plan, and what each draws there."""

    partition: str
    gpus: int
    watts: float
    clock: float = 1.0            # ratio of the chip's own clock the plan runs at
    cap: float | None = None      # W per GPU: the power cap that holds it there (None: full clock)


def draws(plan) -> tuple[str, tuple[Draw, ...]] | None:
    """(job name, its draws) for a train plan (solver.train.plan.Plan), a heterogeneous plan (one
    draw per partition of the split) or a serve plan; None without a feasible plan."""
    from ..solver.split.plan import HeteroPlan

    if plan is None or plan.best is None:
        return None
    if getattr(plan, "job_kind", "") == "rl":
        from .rl import draws as rl_draws

        return plan.name, tuple(Draw(*d) for d in rl_draws(plan))
    if isinstance(plan, HeteroPlan):
        return plan.name, tuple(Draw(s.partition, s.gpus, s.watts) for s in plan.best.shares if s.items and s.gpus)
    if hasattr(plan, "job"):      # a train plan
        if plan.power is None:
            return None
        return plan.job.name, (Draw(plan.job.partition.name, plan.best.config.gpus, plan.power.per_gpu,
                                    plan.clock, plan.best.config.power_cap),)
    return plan.name, (Draw(plan.partition.name, plan.used_gpus, serve_gpu_watts(plan)),)


def plan_power(plan) -> float | None:
    """The facility power the plan itself states (W): `power_w` of its JSON, for every job kind."""
    from ..solver.split.plan import HeteroPlan

    if getattr(plan, "job_kind", "") == "rl" or isinstance(plan, HeteroPlan):
        return plan.best.power
    if hasattr(plan, "job"):      # a train plan
        return plan.power.total if plan.power is not None else None
    return plan.power_w


def serve_gpu_watts(p) -> float:
    """Watts per GPU of a serve plan, from its facility power (model/power.job_power: the
    GPUs' draw plus their share of the rest of the IT load at that draw, times the PUE)."""
    return gpu_watts_of(p.graph, p.partition, p.used_gpus, p.power_w)


def operating_point(graph: ClusterGraph, plan) -> dict[str, float] | None:
    """Watts per accelerator, averaged over each partition, at the plan's operating point:
    the job's GPUs at the modelled draw, the partition's other GPUs idle."""
    drawn = draws(plan)
    if drawn is None:
        return None
    by_name = {d.partition: d for d in drawn[1]}
    out = {}
    for p in graph.partitions:
        idle, d = p.node.accelerator.idle, by_name.get(p.name)
        out[p.name] = idle if d is None else (d.gpus * d.watts + (p.gpus - d.gpus) * idle) / p.gpus
    return out


def power(graph: ClusterGraph, plan=None) -> graphviz.Digraph:
    point = operating_point(graph, plan)
    rows = power_breakdown(graph, point)
    at_tdp = {m.key: m.value for m in power_breakdown(graph)} if point is not None else {}
    by_key = {m.key: m for m in rows}
    facility = by_key["power.facility"].value or 1.0
    dot = graphviz.Digraph(ident(graph.name, "power"), graph_attr={
        "rankdir": "LR", "fontname": FONT, "fontsize": "14", "labelloc": "t", "ranksep": "0.6",
        "label": _title(graph, plan, point, facility)},
        node_attr={"fontname": FONT, "fontsize": "11", "shape": "box", "style": "rounded,filled"},
        edge_attr={"color": "#ef6c00", "arrowhead": "none"})

    def box(element: str, text: str, watts: float, fill: str, key: str | None = None) -> None:
        reference = at_tdp.get(key) if key else None
        tdp = f"at TDP: {fmt(reference, 'W')}" if reference is not None and abs(reference - watts) > 1e-6 * facility else ""
        dot.node(element, label(text, f"{fmt(watts, 'W')} ({percent(watts / facility)})", tdp), fillcolor=fill)

    def flow(a: str, b: str, watts: float) -> None:
        dot.edge(a, b, penwidth=f"{max(0.5, 16 * watts / facility):.2f}")

    budget = f" (budget {fmt(graph.power_budget, 'W')})" if graph.power_budget else ""
    box("facility", f"facility{budget}", facility, "#ffe0b2", "power.facility")
    for key, fill in (("power.it", "#fff3e0"), ("power.cooling", "#e1f5fe")):
        box(ident(key), by_key[key].label, by_key[key].value, fill, key)
        flow("facility", ident(key), by_key[key].value)
    groups: dict[str, list[Metric]] = {}
    for m in rows:
        if m.key not in ("power.it", "power.cooling", "power.facility"):
            groups.setdefault(_group_of(m), []).append(m)
    for name, members in groups.items():
        total = sum(m.value for m in members)
        key = members[0].key if len(members) == 1 else None
        box(ident("g", name), name, total, "#fff8e1", key)
        flow(ident("power.it"), ident("g", name), total)
        for m in members if len(members) > 1 else ():
            box(ident(m.key), m.label, m.value, "white", m.key)
            flow(ident("g", name), ident(m.key), m.value)
    return dot


def _title(graph: ClusterGraph, plan, point, facility: float) -> str:
    if point is None:
        return f"{graph.name}: where the watts go (full load, accelerators at TDP)"
    name, drawn = draws(plan)
    parts = {p.name: p for p in graph.partitions}
    lines = []
    for d in drawn:
        part = parts[d.partition]
        chip, idle = part.node.accelerator, part.gpus - d.gpus
        rest = f", {idle:,} idle at {fmt(chip.idle, 'W')}" if idle else ""
        where = f"{d.partition}: " if len(graph.partitions) > 1 else ""
        clock = f" at {percent(d.clock)} clock, power cap {fmt(d.cap, 'W')};" if d.cap is not None else ""
        lines.append(f"{where}{d.gpus:,} GPUs at {fmt(d.watts, 'W')} each ({clock} TDP {fmt(chip.tdp, 'W')}){rest}"
                     .replace("( ", "("))
    lines += [line for line in (_plan_line(plan_power(plan), facility),) if line]
    return f"{graph.name}: where the watts go at plan {name}'s operating point\\n" + "\\n".join(lines)


def _plan_line(job: float | None, facility: float) -> str:
    """How the facility drawn here meets the plan's own power figure."""
    if job is None:
        return ""
    rest = facility - job
    if rest <= 1e-3 * facility:
        return f"facility {fmt(facility, 'W')}: the plan's power"
    return (f"the plan's power {fmt(job, 'W')} (its GPUs and their share of the rest); the idle rest of the "
            f"cluster adds {fmt(rest, 'W')}")
