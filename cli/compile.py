"""`gclc compile FILE [-o ir.json]`: the lowered cluster graph as versioned JSON."""

from __future__ import annotations

import argparse
import sys

from ..compiler.driver import EXIT_OK
from .common import checked_graph, output_problem, settings_option, write_output


def add(commands) -> None:
    compile_ = commands.add_parser("compile", help="lower a design to the IR graph and write it as JSON")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("-o", "--output", metavar="OUT", help="write the IR here (default: stdout)")
    compile_.add_argument("--json", action="store_true",
                          help="the IR as JSON (what compile always prints; the flag every command with results takes)")
    compile_.add_argument("--cluster", metavar="NAME", help="the cluster to lower (default: the file's first)")
    settings_option(compile_)
    compile_.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler.ir_json import graph_json

    problem = None if args.output is None else output_problem(args)
    if problem is not None:
        return problem
    graph, status = checked_graph(args)
    if graph is None:
        return status
    text = graph_json(graph)
    if args.output is not None:
        return write_output(args, text)
    sys.stdout.write(text)
    return EXIT_OK
