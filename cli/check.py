"""`gclc check FILE...`: parse and check; print every diagnostic. Exit 0 clean, 1 errors."""

from __future__ import annotations

import argparse
import sys

from ..compiler.driver import EXIT_OK, check_file
from ..views.check import check_report
from .common import settings_option


def add(commands) -> None:
    check = commands.add_parser("check", help="parse and check designs; print diagnostics")
    check.add_argument("files", nargs="+", metavar="FILE")
    settings_option(check)
    check.add_argument("--format", choices=("text", "json"), default="text", help="diagnostics as text (default) or JSON")
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    results = [check_file(path, args.set) for path in args.files]
    report = check_report(results, args.files, args.format, sys.stdout.isatty())
    if report is not None:
        print(report)
    return max((r.exit_code for r in results), default=EXIT_OK)
