"""`gclc plan FILE`: plan a train job (search, power budget), a job across partitions or a
serve job, and print it as a table or as stable JSON. Exit 0, 1 errors, 3 infeasible."""

from __future__ import annotations

import argparse
import json
import sys

from ..compiler.driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE
from .common import checked_design, error, number_option, settings_option
from .progress import progress


def add(commands) -> None:
    plan = commands.add_parser("plan", help="optimize a job's parallelism (under `subject to { power <= ... }` or a `power.budget`, "
                                  "its GPU count and clock too) and report step time, MFU, memory, power, energy")
    plan.add_argument("file", metavar="FILE")
    plan.add_argument("--job", metavar="NAME",
                      help="the train or serve job to plan (default: the file's first train job, else its first serve job)")
    plan.add_argument("--objective", choices=("throughput", "time", "energy", "mfu", "goodput", "cost"),
                      help="override the job's objective")
    plan.add_argument("--top", type=number_option(low=0), default=3, metavar="N",
                      help="runner-up configurations to show (a count: more than there are shows them all)")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON (stable keys)")
    plan.add_argument("--timings", action="store_true",
                      help="add the search's wall-clock seconds (left out by default: output is repeatable)")
    settings_option(plan)
    plan.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..model.job import JobError
    from ..solver.jobs import feasible, plan_design
    from ..views.plan_json import outcome_json
    from ..views.plan_text import infeasible_message, outcome_text

    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    try:
        with progress("planning"):
            outcome = plan_design(design, args.job, args.objective, args.top)
    except JobError as problem:
        error(str(problem))
        return EXIT_USAGE if problem.usage else EXIT_ERRORS
    if args.json:
        print(json.dumps(outcome_json(outcome, args.timings), indent=2, allow_nan=False))
    else:
        print(outcome_text(outcome, args.timings))
    if not feasible(outcome):
        print(infeasible_message(outcome), file=sys.stderr)
        return EXIT_INFEASIBLE
    return EXIT_OK


