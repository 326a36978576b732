"""`gclc render FILE -o OUT [--view topology|placement|power]`: a graphviz diagram."""

from __future__ import annotations

import argparse
import sys

from ..compiler.driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE
from .common import checked_design, cluster_problem, error, json_option, output_problem, settings_option, write_output
from .progress import progress


def add(commands) -> None:
    render = commands.add_parser("render", help="draw the topology, a plan's placement or the power flow (graphviz)")
    render.add_argument("file", metavar="FILE")
    render.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="write the diagram here; the suffix picks the format: .svg .png .pdf .dot")
    render.add_argument("--view", choices=("topology", "placement", "power"), default="topology",
                        help="what to draw (default: topology)")
    render.add_argument("--job", metavar="NAME",
                        help="the train, serve or rl job whose plan `--view placement` draws (one grid per partition "
                             "for a job on several; `--view power` runs at its plan; `--view topology` colours "
                             "the links by how busy a train job's plan keeps them)")
    render.add_argument("--cluster", metavar="NAME", help="the cluster to draw (default: the file's first)")
    settings_option(render)
    json_option(render, "the file, its size, format and view")
    render.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..model.job import JobError
    from ..views import render

    fmt = render.output_format(args.output)
    if fmt is None:
        error(f"cannot tell the format of `{args.output}`; use .svg, .png, .pdf or .dot")
        return EXIT_USAGE
    problem = output_problem(args)
    if problem is not None:
        return problem
    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    try:
        with progress(f"drawing the {args.view}"):
            dot, status = _diagram(design, args)
    except JobError as problem:
        error(str(problem))
        return EXIT_USAGE if problem.usage else EXIT_ERRORS
    if dot is None:
        return status
    try:
        with progress(f"laying out the {args.view} (graphviz)"):
            data = render.render_bytes(dot, fmt)
    except render.DotMissing as problem:
        error(str(problem))
        return EXIT_ERRORS
    return write_output(args, data, {"format": fmt, "view": args.view})


def _diagram(design, args: argparse.Namespace):
    """(graphviz graph or None, exit code) for `--view`."""
    from ..compiler.lower import lower
    from ..views import render

    fabrics = render.fabric_entities(design)
    if args.view == "topology":
        problem = cluster_problem(design, args.cluster, args.file)
        if problem is not None:
            return None, problem
        graph = lower(design, args.cluster)
        if args.job is None:
            return render.topology(graph, fabrics, design), EXIT_OK
        chosen, status = _train_plan_on(design, args, graph)
        if chosen is None:
            return None, status
        return render.topology(graph, fabrics, design, chosen), EXIT_OK
    if args.view == "power":
        problem = cluster_problem(design, args.cluster, args.file)
        if problem is not None:
            return None, problem
        graph = lower(design, args.cluster)
        chosen = _power_plan(design, args, graph)
        return render.power(graph, chosen), EXIT_OK
    from ..solver.jobs import feasible, plan_design
    from ..views.plan_text import infeasible_message

    outcome = plan_design(design, args.job, power=False)
    if not feasible(outcome):
        print(infeasible_message(outcome), file=sys.stderr)
        return None, EXIT_INFEASIBLE
    return render.job_placement(outcome, fabrics), EXIT_OK


def _train_plan_on(design, args: argparse.Namespace, graph):
    """(the `--job` train plan whose link loads the topology draws, exit code): it must be a
    train job on one partition of the drawn cluster, and feasible."""
    from ..solver.jobs import TrainOutcome, feasible, plan_design
    from ..views import selection
    from ..views.plan_text import infeasible_message

    outcome = plan_design(design, args.job, power=False)
    if not isinstance(outcome, TrainOutcome):
        error(selection.not_a_drawn_train_plan(args.job))
        return None, EXIT_USAGE
    if not feasible(outcome):
        print(infeasible_message(outcome), file=sys.stderr)
        return None, EXIT_INFEASIBLE
    if outcome.plan.job.graph.name != graph.name:
        error(selection.on_another_cluster(args.job, outcome.plan.job.graph.name, graph.name))
        return None, EXIT_USAGE
    return outcome.plan, EXIT_OK


def _power_plan(design, args: argparse.Namespace, graph):
    """The plan whose operating point the power view draws: `--job`'s, else the design's
    first job's (train, serve or rl, as `--view placement` and the report pick it) when it runs
    on this cluster; None (full load) without one
    or when it is infeasible (said on stderr)."""
    from ..solver.jobs import TrainOutcome, feasible, plan_design
    from ..views.plan_text import infeasible_message

    if args.job is None and not any(e.kind in ("train", "serve", "rl") for e in design.entities):
        return None
    outcome = plan_design(design, args.job, power=False)
    if not feasible(outcome):
        print(infeasible_message(outcome), file=sys.stderr)
        return None
    chosen = outcome.plan if isinstance(outcome, TrainOutcome) else outcome
    clusters = {p.job.graph.name for p in chosen.plans} if hasattr(chosen, "plans") else {
        (chosen.job if hasattr(chosen, "job") else chosen).graph.name}
    return chosen if clusters == {graph.name} else None
