"""What the commands share: reading and checking the input, choosing the cluster, writing `-o`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..compiler.driver import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, check_file
from ..dsl.diagnostics import printable, render_all
from ..views import selection
from .output import write_atomic


def number_option(*, whole: bool = True, low: float | None = None, high: float | None = None,
                  low_open: bool = False, high_open: bool = False, percent: bool = False):
    """The argparse `type` of a numeric option: the one plain-number parser (`dsl/plain_number.py`:
    ASCII digits, GCL's ranges, `1e3` as 1000), then the option's bounds; a bad value is a usage
    error that names the option (`argument --seed: ...`). `percent`: `10%` is 0.1."""
    from ..dsl.plain_number import PlainNumberError, parse_plain

    def parse(text: str):
        scale = 100 if percent and text.strip().endswith("%") else 1
        written = text.strip().removesuffix("%") if scale == 100 else text
        try:
            value = parse_plain(written, whole=whole and scale == 1, what="the value")
        except PlainNumberError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        value = value / scale if scale != 1 else value
        if (low is not None and (value <= low if low_open else value < low)) or \
                (high is not None and (value >= high if high_open else value > high)):
            raise argparse.ArgumentTypeError(f"`{text}` is out of range: the value must be "
                                             f"{_range_text(low, high, low_open, high_open, percent)}")
        return value
    parse.__name__ = "number"  # argparse names the type in some messages
    return parse


def _range_text(low, high, low_open: bool, high_open: bool, percent: bool) -> str:
    def shown(x):
        return f"{x * 100:,g}%" if percent else f"{x:,}"
    parts = [f"{'above' if low_open else 'at least'} {shown(low)}" if low is not None else "",
             f"{'below' if high_open else 'at most'} {shown(high)}" if high is not None else ""]
    return " and ".join(p for p in parts if p)


def settings_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                         help='override a `param` (repeatable), e.g. --set racks=256 --set clock="1.5 GHz"')


def error(message: str) -> None:
    print(f"gclc: {printable(message)}", file=sys.stderr)  # names from the input may hold ESC, NUL


_COLOR = {"mode": "auto", "quiet": False}


def set_color(mode: str, quiet: bool = False) -> None:
    """`--color auto|always|never` and `--quiet`, for the whole run."""
    _COLOR["mode"], _COLOR["quiet"] = mode, quiet


def quiet() -> bool:
    """`--quiet`: errors only (no warnings, no `ok` lines, no progress)."""
    return bool(_COLOR["quiet"])


def colour(stream) -> bool:
    """Whether to colour what goes to `stream`: `--color`, else not under `NO_COLOR`
    (no-color.org: any non-empty value), else when the stream is a terminal."""
    mode = _COLOR["mode"]
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def diagnostics_text(diagnostics, sources, stream=None) -> str:
    """Rendered diagnostics, in colour when `stream` (stderr by default) wants it."""
    from ..views.color import paint_diagnostics

    if quiet():
        diagnostics = [d for d in diagnostics if d.is_error]
    text = render_all(diagnostics, sources)
    return paint_diagnostics(text) if colour(stream or sys.stderr) else text


def checked_design(path: str, settings: list[str]):
    """The checked design, or None after printing the diagnostics that stop it."""
    result = check_file(path, settings)
    shown = diagnostics_text(result.diagnostics, result.sources)
    if shown:
        print(shown, file=sys.stderr)
    return result.design


def checked_graph(args: argparse.Namespace):
    """(graph, exit code): the lowered cluster, or None after printing why not."""
    from ..compiler.lower import lower

    design = checked_design(args.file, args.set)
    if design is None:
        return None, EXIT_ERRORS
    problem = cluster_problem(design, args.cluster, args.file)
    if problem is not None:
        return None, problem
    return lower(design, args.cluster), EXIT_OK


def cluster_problem(design, name: str | None, path: str) -> int | None:
    """None when `--cluster NAME` (or, without it, the design's first cluster) can be lowered;
    else the exit code after saying why: 2 for a `--cluster` that names no cluster, 1 for a
    design without any."""
    clusters = [e.name for e in design.of_kind("cluster")]
    if name is None:
        if clusters:
            return None
        error(selection.no_cluster(path))
        return EXIT_ERRORS
    entity = next((e for e in design.entities if e.name == name), None)
    if entity is not None and entity.kind == "cluster":
        return None
    kind = None if entity is None else entity.kind + (" job" if entity.kind in ("train", "serve") else "")
    error(selection.unknown_cluster(name, path, kind, clusters))
    return EXIT_USAGE


def output_problem(args: argparse.Namespace) -> int | None:
    """Before any work: exit 2 for `-o` naming nothing or the input file, 1 for a directory."""
    out = args.output
    if not out:
        error("-o needs a file name")
        return EXIT_USAGE
    if _same_file(out, args.file):
        error(f"refusing to overwrite the input file {args.file} with the output")
        return EXIT_USAGE
    if Path(out).is_dir():
        error(f"cannot write `{out}`: it is a directory")
        return EXIT_ERRORS
    return None


def write_output(args: argparse.Namespace, data: str | bytes, summary: dict | None = None) -> int:
    """Write `-o` atomically; exit 1 with the reason when it cannot be written. With
    `--json`, what was written as one JSON document on stdout: the file, its size, `summary`."""
    out = args.output
    try:
        write_atomic(out, data)
    except OSError as problem:
        error(f"cannot write `{out}`: {problem.strerror or problem}")
        return EXIT_ERRORS
    size = len(data.encode("utf-8") if isinstance(data, str) else data)
    if getattr(args, "json", False):
        import json

        print(json.dumps({"output": out, "bytes": size} | (summary or {}), indent=2))
    else:
        wrote(out, size)
    return EXIT_OK


def wrote(path, size: int | None = None) -> None:
    """What a command wrote, on stdout with its other results (the CLI contract: results on
    stdout, diagnostics and progress on stderr); nothing under `--quiet`."""
    if quiet():
        return
    from ..dsl.numbers import quantity

    print(f"wrote {path}" + (f" ({quantity(size, 'B')})" if size is not None else ""))


def json_option(parser, what: str) -> None:
    """The one `--json` of a command that writes a file: a summary of what it wrote."""
    parser.add_argument("--json", action="store_true", help=f"print what was written as JSON ({what})")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return os.path.realpath(a) == os.path.realpath(b)
