"""The report's diagrams as SVG text, each with its caption: the topology, the placement of
the plan (a train plan's rank grid, a heterogeneous job's grid per partition, a serve plan's
pools) and the power view. Each is drawn at its natural size; the report lets wide ones
scroll rather than shrinking their text."""

from __future__ import annotations

from .. import render
from .plots import scope_ids


def diagrams(design, graph, planned, outcome) -> list[tuple[str, str]]:
    """(svg, caption) per diagram; raises `render.DotMissing` without Graphviz's `dot`.
    `planned`: a feasible train plan or None; `outcome`: a serve or heterogeneous plan or None."""
    fabrics = render.fabric_entities(design)
    views = [("topology", render.topology(graph, fabrics, design), "The cluster: one of each repeated unit expanded.")]
    if planned is not None:
        views.append(("placement", render.placement(planned, fabrics),
                      "The rank grid: GPUs by scale-up domain and pipeline stage, the tiers each group crosses."))
    views += _other_placement(outcome)
    running = planned if planned is not None else outcome if getattr(outcome, "best", None) is not None else None
    views.append(("power", render.power(graph, running),
                  "Where the watts go at the plan's operating point (TDP for reference)." if running is not None
                  else "Where the watts go at full load."))
    return [(scope_ids(render.svg_text(dot), f"diagram-{name}"), f"{name}: {caption}") for name, dot, caption in views]


def _other_placement(outcome) -> list[tuple[str, object, str]]:
    """The placement of a heterogeneous or serve plan that has one, as `gclc render --view
    placement` draws it."""
    from ...solver.split.plan import HeteroPlan
    from ...solver.serve.plan import ServePlan

    if isinstance(outcome, HeteroPlan) and outcome.best is not None:
        from ..placement_hetero import hetero_placement

        return [("placement", hetero_placement(outcome),
                 f"One rank grid per partition under the {outcome.best.mode} split: what each partition "
                 "holds, its GPUs by scale-up domain and pipeline stage, and what crosses between them.")]
    if getattr(outcome, "job_kind", "") == "rl" and outcome.best is not None:
        from ..rl_placement import rl_placement

        return [("placement", rl_placement(outcome), "The RL pools: where each runs, its layout, and the weights' "
                 "path from the training pool to the generation pool.")]
    if isinstance(outcome, ServePlan) and outcome.best is not None:
        return [("placement", render.serve_placement(outcome),
                 "The serving pools: each replica's pipeline stages over its scale-up domains, GPUs by "
                 "tensor-parallel group, the tiers its groups cross"
                 + (" and the tier the KV cache crosses from prefill to decode." if outcome.prefill is not None
                    else "."))]
    return []
