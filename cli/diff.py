"""`gclc diff A.gcl B.gcl`: parts, bill of materials, plan, power and cost side by side.
Exit codes: 0 (whether or not they differ), 1 a design does not check, 2 usage."""

from __future__ import annotations

import argparse
import sys

from ..compiler.driver import EXIT_ERRORS, EXIT_OK, check_file
from ..dsl.diagnostics import render_all
from .progress import progress


def add(commands) -> None:
    diff = commands.add_parser("diff", help="compare two designs: parts, bill of materials, plan, power and cost")
    diff.add_argument("a", metavar="A.gcl")
    diff.add_argument("b", metavar="B.gcl")
    diff.add_argument("--job", metavar="NAME", help="the job to plan in both (default: each file's first)")
    diff.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a param in both")
    diff.add_argument("--json", action="store_true", help="print the comparison as JSON")
    diff.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from ..solver.compare import compare
    from ..views.diff import diff_json, diff_text

    for path in (args.a, args.b):
        result = check_file(path, args.set)
        if result.design is None:
            print(render_all(result.diagnostics, result.sources), file=sys.stderr)
            return EXIT_ERRORS
    from ..compiler.settings import parse_settings

    settings, _ = parse_settings(args.set)
    with progress("planning both designs"):
        comparison = compare(args.a, args.b, args.job, settings)
    print(diff_json(comparison) if args.json else diff_text(comparison))
    return EXIT_OK
