"""`gclc check FILE...`: parse and check; print every diagnostic (text on stderr, `--json` on stdout)
and `FILE: ok` on stdout for each file without any (one file or several alike). Exit 0 clean, 1 errors."""

from __future__ import annotations

import argparse
import sys

import attrs

from ..compiler.driver import EXIT_OK, check_file
from ..views.check import check_report
from ..views.color import paint_diagnostics
from .common import colour, quiet, settings_option


def add(commands) -> None:
    check = commands.add_parser("check", help="parse and check designs; print diagnostics")
    check.add_argument("files", nargs="*", metavar="FILE")
    check.add_argument("--list-codes", action="store_true", default=argparse.SUPPRESS,
                       help="list every diagnostic code and exit (as `gclc --list-codes`)")
    settings_option(check)
    check.add_argument("--format", choices=("text", "json"), default="text", help="diagnostics as text (default) or JSON")
    check.add_argument("--json", dest="format", action="store_const", const="json",
                       help="diagnostics as JSON (the same as --format json); several files: an object keyed by file")
    check.set_defaults(run=run, usage=check.error)


def run(args: argparse.Namespace) -> int:
    if not args.files:
        args.usage("give at least one FILE (or --list-codes)")  # argparse's usage error: exit 2
    args.files = list(dict.fromkeys(args.files))  # a file named twice is checked once (JSON keys are unique)
    results = [check_file(path, args.set) for path in args.files]
    if quiet():
        results = [attrs.evolve(r, diagnostics=tuple(d for d in r.diagnostics if d.is_error)) for r in results]
    if args.format == "json":  # the result: stdout
        print(check_report(results, args.files, "json"))
    else:  # diagnostics on stderr, as every command's; the verdict of a clean file on stdout, as results
        for path, result in zip(args.files, results):
            report = check_report([result], [path], "text")
            if report is not None:
                print(paint_diagnostics(report) if colour(sys.stderr) else report, file=sys.stderr)
            elif not quiet():
                print(f"{path}: ok")
    return max((r.exit_code for r in results), default=EXIT_OK)
