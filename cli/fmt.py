"""`gclc fmt FILE... [--check|--write] [--diff]`: canonical formatting, comments kept, atomic writes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..compiler.driver import EXIT_ERRORS, EXIT_OK
from ..dsl import ParseError
from ..views.color import paint_gcl, unified_diff
from .common import colour, diagnostics_text, error, wrote
from .output import write_atomic


def add(commands) -> None:
    fmt = commands.add_parser("fmt", help="print designs in canonical form")
    fmt.add_argument("files", nargs="+", metavar="FILE")
    mode = fmt.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is not in canonical form")
    mode.add_argument("--write", action="store_true", help="rewrite files in place (atomically)")
    fmt.add_argument("--diff", action="store_true",
                     help="print what formatting changes as a unified diff (alone or with --check: exit 1 if "
                          "anything would change; with --write: what was changed)")
    fmt.add_argument("--json", action="store_true",
                     help="print per file whether it is canonical, whether it was written and the diff, as JSON "
                          "(one file: its object; several: keyed by file)")
    fmt.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    results = {path: _one(path, args) for path in dict.fromkeys(args.files)}
    if args.json:
        import json

        records = {path: record for path, (_, record) in results.items()}
        one = len(results) == 1
        print(json.dumps(next(iter(records.values()), None) if one else records, indent=2))
    return max((code for code, _ in results.values()), default=EXIT_OK)


def _one(path: str, args: argparse.Namespace) -> tuple[int, dict | None]:
    """(exit code, what `--json` says of the file; `canonical` null when it could not be read or
    parsed: the diagnostics say why, on stderr)."""
    from ..compiler.files import read_text
    from ..dsl.format import format_text
    from ..dsl.source import SourceFile

    diagnostics: list = []
    text = read_text(path, Path(path), None, diagnostics)
    if text is None:
        print(diagnostics_text(diagnostics, {}), file=sys.stderr)
        return EXIT_ERRORS, _unreadable(path)
    source = text.removeprefix("\ufeff")
    try:
        formatted = format_text(source, path)
    except ParseError as problem:
        print(diagnostics_text(problem.diagnostics, {path: SourceFile(path, source)}), file=sys.stderr)
        return EXIT_ERRORS, _unreadable(path)
    changed = formatted != text
    record = {"file": path, "canonical": not changed, "written": False,
              "diff": unified_diff(path, text, formatted, False) if changed else ""}
    if args.diff and changed and not args.json:
        sys.stdout.write(unified_diff(path, text, formatted, colour(sys.stdout)))
    if args.write:
        if changed:
            try:  # through a symlink, keeping mode and owner; this input only (compiler/writer.py)
                write_atomic(path, formatted, replaces=path)
            except OSError as problem:
                error(f"cannot write `{path}`: {problem.strerror or problem}")
                return EXIT_ERRORS, record
            record["written"] = True
            if not args.json:
                wrote(path)
    elif args.check or args.diff:
        if changed:
            if not args.diff and not args.json:
                print(f"{path}: not in canonical form (run `gclc fmt --write {path}`)")
            return EXIT_ERRORS, record
    elif not args.json:
        sys.stdout.write(paint_gcl(formatted) if colour(sys.stdout) else formatted)
    return EXIT_OK, record


def _unreadable(path: str) -> dict:
    return {"file": path, "canonical": None, "written": False, "diff": None}
