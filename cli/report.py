"""`gclc report FILE -o report.html`: one self-contained HTML report."""

from __future__ import annotations

import argparse
import html
import re

from ..compiler.driver import EXIT_ERRORS, EXIT_USAGE
from .common import checked_design, cluster_problem, error, json_option, output_problem, settings_option, write_output
from .progress import progress


def add(commands) -> None:
    report = commands.add_parser("report", help="one self-contained HTML report: design, plan, plots, diagrams")
    report.add_argument("file", metavar="FILE")
    report.add_argument("-o", "--output", required=True, metavar="OUT", help="write the HTML here")
    report.add_argument("--job", metavar="NAME", help="the train job to plan (default: the file's first)")
    settings_option(report)
    json_option(report, "the file, its size and its sections")
    report.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..model.job import JobError
    from ..views.report.page import report_html

    problem = output_problem(args)
    if problem is not None:
        return problem
    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    problem = cluster_problem(design, None, args.file)
    if problem is not None:
        return problem
    try:
        with progress("planning and drawing the report"):
            text = report_html(design, args.job, source=args.file)
    except JobError as problem:
        error(str(problem))
        return EXIT_USAGE if problem.usage else EXIT_ERRORS
    sections = [html.unescape(title) for title in re.findall(r"<h2>([^<]+)</h2>", text)]
    return write_output(args, text, {"sections": sections})
