"""`gclc explain FILE [--json]`: every derived number of a cluster with its formula."""

from __future__ import annotations

import argparse

from ..compiler.driver import EXIT_OK
from .common import checked_design, cluster_problem, settings_option


def add(commands) -> None:
    explain = commands.add_parser("explain", help="every derived number of a cluster with its formula")
    explain.add_argument("file", metavar="FILE")
    explain.add_argument("--cluster", metavar="NAME", help="the cluster to explain (default: the file's first)")
    explain.add_argument("--json", action="store_true", help="print the numbers as JSON")
    settings_option(explain)
    explain.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler.driver import EXIT_ERRORS
    from ..compiler.lower import lower, pick_cluster
    from ..compiler.metrics import explain
    from ..model.chip_metrics import chip_metrics
    from ..compiler.cost.tco import cost_metrics
    from ..views.explain import explain_json, explain_text

    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    problem = cluster_problem(design, args.cluster, args.file)
    if problem is not None:
        return problem
    graph = lower(design, args.cluster)
    # the cluster's numbers, the chip's derivations, the bill of materials and the TCO
    metrics = explain(graph) + chip_metrics(graph) + cost_metrics(pick_cluster(design, args.cluster), graph)
    print(explain_json(graph.name, metrics) if args.json else explain_text(graph.name, metrics))
    return EXIT_OK
