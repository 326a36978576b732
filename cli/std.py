"""`gclc std [list [--kind KIND] | show NAME]`: browse the standard library, each part with
its data-sheet source. Exit codes: 0, 1 for a name the library does not have."""

from __future__ import annotations

import argparse
import json
import sys

from ..dsl.library import find_part, std_files, std_parts
from ..compiler.driver import EXIT_ERRORS, EXIT_OK
from ..compiler.names import nearest
from ..views.color import paint_gcl
from ..views.std import file_text, list_text, no_kind, no_part, part_json, show_text
from ..dsl.diagnostics import printable
from .common import colour


def add(commands) -> None:
    std = commands.add_parser("std", help="browse the standard library (std/): parts and their sources")
    std.add_argument("action", nargs="?", choices=("list", "show"), default="list",
                     help="list every part (default), or show one part's text")
    std.add_argument("name", nargs="?", metavar="NAME", help="with `show`: a part (H100_SXM) or a file (std/nvidia)")
    std.add_argument("--kind", metavar="KIND", help="with `list`: only parts of this kind (chip, node, fabric, ...)")
    std.add_argument("--json", action="store_true",
                     help="as JSON: `list` an array of parts, `show` one part (kind, name, import, path, line, "
                          "source, extends, text)")
    std.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        if not args.name:
            print("gclc std show: name a part, such as `gclc std show H100_SXM`", file=sys.stderr)
            return 2
        return _show(args.name, args.json)
    if args.name:
        print(printable(f"gclc std list: takes no name (did you mean `gclc std show {args.name}`?)"), file=sys.stderr)
        return 2
    kinds = sorted({p.kind for p in std_parts()})
    if args.kind is not None and args.kind not in kinds:
        print(printable(no_kind(args.kind, kinds)), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([part_json(p) for p in std_parts() if args.kind is None or p.kind == args.kind], indent=2))
    else:
        print(list_text(args.kind))
    return EXIT_OK


def _show(name: str, as_json: bool = False) -> int:
    name = name.removesuffix(".gcl")
    file = next((f for f in std_files() if f.library == name or f.library == f"std/{name}"), None)
    if file is not None:
        print(json.dumps([part_json(p) for p in file.parts], indent=2) if as_json else file_text(file, None, 10**6))
        return EXIT_OK
    part = find_part(name)
    if part is None:
        near = nearest(name, [p.name for p in std_parts()])
        print(printable(no_part(name, near)), file=sys.stderr)
        return EXIT_ERRORS
    if as_json:
        print(json.dumps(part_json(part, text=True), indent=2, ensure_ascii=False))
    else:
        print(show_text(part, paint_gcl if colour(sys.stdout) else None))
    return EXIT_OK
