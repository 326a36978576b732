"""`gclc render FILE -o OUT [--view topology|placement|power]`: a graphviz diagram."""

from __future__ import annotations

import argparse
import sys

from ..compiler.driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE
from .common import checked_design, cluster_problem, error, output_problem, settings_option, write_output


def add(commands) -> None:
    render = commands.add_parser("render", help="draw the topology, a plan's placement or the power flow (graphviz)")
    render.add_argument("file", metavar="FILE")
    render.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="write the diagram here; the suffix picks the format: .svg .png .pdf .dot")
    render.add_argument("--view", choices=("topology", "placement", "power"), default="topology",
                        help="what to draw (default: topology)")
    render.add_argument("--job", metavar="NAME", help="the train job whose plan `--view placement` draws")
    render.add_argument("--cluster", metavar="NAME", help="the cluster to draw (default: the file's first)")
    settings_option(render)
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
        dot, status = _diagram(design, args)
    except JobError as problem:
        error(str(problem))
        return EXIT_USAGE if problem.usage else EXIT_ERRORS
    if dot is None:
        return status
    try:
        data = render.render_bytes(dot, fmt)
    except render.DotMissing as problem:
        error(str(problem))
        return EXIT_ERRORS
    return write_output(args, data)


def _diagram(design, args: argparse.Namespace):
    """(graphviz graph or None, exit code) for `--view`."""
    from ..compiler.lower import lower
    from ..model.job import train_job
    from ..solver.jobs import job_objective
    from ..solver.plan import plan
    from ..views import render
    from ..views.plan_text import infeasible_message

    fabrics = render.fabric_entities(design)
    if args.view != "placement":
        problem = cluster_problem(design, args.cluster, args.file)
        if problem is not None:
            return None, problem
        graph = lower(design, args.cluster)
        return (render.topology(graph, fabrics) if args.view == "topology" else render.power(graph)), EXIT_OK
    job = train_job(design, args.job)
    chosen = plan(job, job_objective(job.entity))
    if chosen.best is None:
        print(infeasible_message(chosen), file=sys.stderr)
        return None, EXIT_INFEASIBLE
    return render.placement(chosen, fabrics), EXIT_OK
