"""`gclc diff A.gcl B.gcl [-o diff.svg]`: parts, bill of materials, plan, power and cost side
by side; `-o` draws the two designs' topologies side by side under the changes, as one SVG.
Exit codes: 0 (whether or not they differ), 1 a design does not check or the picture cannot
be written, 2 usage."""

from __future__ import annotations

import argparse
import sys

from ..compiler.driver import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, check_file
from ..dsl.diagnostics import render_all
from .common import error, wrote
from .output import write_atomic
from .progress import progress


def add(commands) -> None:
    diff = commands.add_parser("diff", help="compare two designs: parts, bill of materials, plan, power and cost")
    diff.add_argument("a", metavar="A.gcl")
    diff.add_argument("b", metavar="B.gcl")
    diff.add_argument("--job", metavar="NAME", help="the job to plan in both (default: each file's first)")
    diff.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a param in both")
    diff.add_argument("--json", action="store_true", help="print the comparison as JSON")
    diff.add_argument("-o", "--output", metavar="OUT.svg",
                      help="also draw both designs side by side under the changes (an SVG picture)")
    diff.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from ..solver.compare import compare
    from ..views.diff import diff_json, diff_text

    if args.output is not None and not args.output.lower().endswith(".svg"):
        error(f"-o {args.output}: the side-by-side picture is an SVG (name it .svg)")
        return EXIT_USAGE
    designs = []
    for path in (args.a, args.b):
        result = check_file(path, args.set)
        if result.design is None:
            print(render_all(result.diagnostics, result.sources), file=sys.stderr)
            return EXIT_ERRORS
        designs.append(result.design)
    from ..compiler.settings import parse_settings

    settings, _ = parse_settings(args.set)
    with progress("planning both designs"):
        comparison = compare(args.a, args.b, args.job, settings)
    print(diff_json(comparison) if args.json else diff_text(comparison))
    if args.output is None:
        return EXIT_OK
    return _picture(args, comparison, tuple(designs))


def _picture(args: argparse.Namespace, comparison, designs: tuple) -> int:
    from ..views import render
    from ..views.diff_picture import picture

    try:
        with progress("drawing both designs (graphviz)"):
            data = picture(comparison, designs)
    except (render.DotMissing, LookupError) as problem:
        error(str(problem))
        return EXIT_ERRORS
    try:
        write_atomic(args.output, data)
    except OSError as problem:
        error(f"cannot write `{args.output}`: {problem.strerror or problem}")
        return EXIT_ERRORS
    if not args.json:
        wrote(args.output, len(data))
    return EXIT_OK
