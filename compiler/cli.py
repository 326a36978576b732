"""The `gclc` command line. Exit codes: 0 clean, 1 errors, 2 usage, 3 infeasible."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import __version__
from ..dsl import ParseError
from . import codes
from .diagnostics import render_all, to_json
from .driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE, check_file

EXIT_INTERNAL = 70
from .output import write_atomic
from .plan_command import infeasible_message, job_objective, run_plan


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "list_codes", False):
        return _list_codes()
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        status = args.run(args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except OSError as error:  # the environment, not a bug: stdout on a full disk, an unreadable std file
        _silence_stdout()
        where = f" `{error.filename}`" if error.filename else ""
        print(f"gclc: cannot {'write the output' if where == '' else 'use'}{where}: {error.strerror or error}",
              file=sys.stderr)
        return EXIT_ERRORS
    except Exception as error:  # a bug: say so in one line rather than print a traceback
        print(f"gclc: internal error: {type(error).__name__}: {error} (please report this with the input file)",
              file=sys.stderr)
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (captured in tests)
        pass


def _count(text: str) -> int:
    """argparse type of `--top`: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gclc", description="gclc — a compiler for GPU clusters: check, compile, plan and draw .gcl designs.",
        epilog="Run `gclc COMMAND --help` for a command's options. Exit codes: 0 clean, 1 errors, 2 usage, 3 infeasible.")
    parser.add_argument("--version", action="version", version=f"gclc {__version__}")
    parser.add_argument("--list-codes", action="store_true", help="list every diagnostic code and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="parse and check designs; print diagnostics")
    check.add_argument("files", nargs="+", metavar="FILE")
    _settings_option(check)
    check.add_argument("--format", choices=("text", "json"), default="text", help="diagnostics as text (default) or JSON")
    check.set_defaults(run=run_check)

    compile_ = commands.add_parser("compile", help="lower a design to the IR graph and write it as JSON")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("-o", "--output", metavar="OUT", help="write the IR here (default: stdout)")
    compile_.add_argument("--cluster", metavar="NAME", help="the cluster to lower (default: the file's first)")
    _settings_option(compile_)
    compile_.set_defaults(run=run_compile)

    explain = commands.add_parser("explain", help="every derived number of a cluster with its formula")
    explain.add_argument("file", metavar="FILE")
    explain.add_argument("--cluster", metavar="NAME", help="the cluster to explain (default: the file's first)")
    explain.add_argument("--json", action="store_true", help="print the numbers as JSON")
    _settings_option(explain)
    explain.set_defaults(run=run_explain)

    plan = commands.add_parser("plan", help="optimize a job's parallelism and report step time, MFU, memory, power, energy")
    plan.add_argument("file", metavar="FILE")
    plan.add_argument("--job", metavar="NAME",
                      help="the train or serve job to plan (default: the file's first train job, else its first serve job)")
    plan.add_argument("--objective", choices=("throughput", "time", "energy", "mfu", "goodput"),
                      help="override the job's objective")
    plan.add_argument("--top", type=_count, default=3, metavar="N", help="runner-up configurations to show")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON (stable keys)")
    _settings_option(plan)
    plan.set_defaults(run=run_plan)

    render = commands.add_parser("render", help="draw the topology, a plan's placement or the power flow (graphviz)")
    render.add_argument("file", metavar="FILE")
    render.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="write the diagram here; the suffix picks the format: .svg .png .pdf .dot")
    render.add_argument("--view", choices=("topology", "placement", "power"), default="topology",
                        help="what to draw (default: topology)")
    render.add_argument("--job", metavar="NAME", help="the train job whose plan `--view placement` draws")
    render.add_argument("--cluster", metavar="NAME", help="the cluster to draw (default: the file's first)")
    _settings_option(render)
    render.set_defaults(run=run_render)

    report = commands.add_parser("report", help="one self-contained HTML report: design, plan, plots, diagrams")
    report.add_argument("file", metavar="FILE")
    report.add_argument("-o", "--output", required=True, metavar="OUT", help="write the HTML here")
    report.add_argument("--job", metavar="NAME", help="the train job to plan (default: the file's first)")
    _settings_option(report)
    report.set_defaults(run=run_report)

    from .schedule_command import add_parser as add_schedule

    add_schedule(commands)

    fmt = commands.add_parser("fmt", help="print designs in canonical form")
    fmt.add_argument("files", nargs="+", metavar="FILE")
    mode = fmt.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is not in canonical form")
    mode.add_argument("--write", action="store_true", help="rewrite files in place (atomically)")
    fmt.set_defaults(run=run_fmt)
    return parser


def _settings_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                         help='override a `param` (repeatable), e.g. --set racks=256 --set clock="1.5 GHz"')


def run_check(args: argparse.Namespace) -> int:
    worst, reports = EXIT_OK, []
    for path in args.files:
        result = check_file(path, args.set)
        worst = max(worst, result.exit_code)
        if args.format == "json":
            reports.append(to_json(result.diagnostics))
        elif result.diagnostics:
            reports.append(render_all(result.diagnostics, result.sources))
        elif len(args.files) > 1 or sys.stdout.isatty():
            reports.append(f"{path}: ok")
    if args.format == "json" and len(args.files) == 1:
        print(reports[0])
    elif args.format == "json":
        print("[" + ",\n".join(reports) + "]")
    elif reports:
        print("\n\n".join(reports))
    return worst


def _checked_graph(args: argparse.Namespace):
    """(graph, exit code): the lowered cluster, or None after printing why not."""
    from .lower import lower

    result = check_file(args.file, args.set)
    if result.diagnostics:
        print(render_all(result.diagnostics, result.sources), file=sys.stderr)
    if result.design is None:
        return None, EXIT_ERRORS
    problem = _cluster_problem(result.design, args.cluster, args.file)
    if problem is not None:
        return None, problem
    return lower(result.design, args.cluster), EXIT_OK


def _cluster_problem(design, name: str | None, path: str) -> int | None:
    """None when `--cluster NAME` (or, without it, the design's first cluster) can be lowered;
    else the exit code after saying why: 2 for a `--cluster` that names no cluster, 1 for a
    design without any."""
    clusters = [e.name for e in design.of_kind("cluster")]
    if name is None:
        if clusters:
            return None
        print(f"gclc: {path} declares no cluster (nor does anything it imports)", file=sys.stderr)
        return EXIT_ERRORS
    entity = next((e for e in design.entities if e.name == name), None)
    if entity is not None and entity.kind == "cluster":
        return None
    kind = None if entity is None else entity.kind + (" job" if entity.kind in ("train", "serve") else "")
    what = f" (`{name}` is a {kind})" if kind else ""
    known = f"; the design has: {', '.join(clusters)}" if clusters else "; the design declares none"
    print(f"gclc: no cluster `{name}` in {path}{what}{known}", file=sys.stderr)
    return EXIT_USAGE


def _output_problem(args: argparse.Namespace) -> int | None:
    """Before any work: exit 2 for `-o` naming nothing or the input file, 1 for a directory."""
    out = args.output
    if not out:
        print("gclc: -o needs a file name", file=sys.stderr)
        return EXIT_USAGE
    if _same_file(out, args.file):
        print(f"gclc: refusing to overwrite the input file {args.file} with the output", file=sys.stderr)
        return EXIT_USAGE
    if Path(out).is_dir():
        print(f"gclc: cannot write `{out}`: it is a directory", file=sys.stderr)
        return EXIT_ERRORS
    return None


def _write(args: argparse.Namespace, data: str | bytes) -> int:
    """Write `-o` atomically; exit 1 with the reason when it cannot be written."""
    out = args.output
    try:
        write_atomic(out, data)
    except OSError as error:
        print(f"gclc: cannot write `{out}`: {error.strerror or error}", file=sys.stderr)
        return EXIT_ERRORS
    return EXIT_OK


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return os.path.realpath(a) == os.path.realpath(b)


def run_compile(args: argparse.Namespace) -> int:
    from .export import graph_json

    problem = None if args.output is None else _output_problem(args)
    if problem is not None:
        return problem
    graph, status = _checked_graph(args)
    if graph is None:
        return status
    text = graph_json(graph)
    if args.output is not None:
        return _write(args, text)
    sys.stdout.write(text)
    return EXIT_OK


def run_explain(args: argparse.Namespace) -> int:
    import json

    from .metrics import explain

    graph, status = _checked_graph(args)
    if graph is None:
        return status
    metrics = explain(graph)
    if args.json:
        rows = [{"key": m.key, "label": m.label, "value": m.value, "unit": m.unit, "text": m.text,
                 "formula": m.formula} for m in metrics]
        print(json.dumps({"cluster": graph.name, "metrics": rows}, indent=2, ensure_ascii=False))
    else:
        print(_table(graph.name, metrics))
    return EXIT_OK


def _table(name: str, metrics) -> str:
    width = max(len(m.label) for m in metrics)
    value_width = max(len(m.text) for m in metrics)
    lines = [f"cluster {name}", ""]
    lines += [f"  {m.label:<{width}}  {m.text:>{value_width}}  = {m.formula}" for m in metrics]
    return "\n".join(lines)


def _checked_design(path: str, settings: list[str]):
    """The checked design, or None after printing the diagnostics that stop it."""
    result = check_file(path, settings)
    if result.diagnostics:
        print(render_all(result.diagnostics, result.sources), file=sys.stderr)
    return result.design


def run_render(args: argparse.Namespace) -> int:
    from . import render
    from .model.job import JobError

    fmt = render.output_format(args.output)
    if fmt is None:
        print(f"gclc: cannot tell the format of `{args.output}`; use .svg, .png, .pdf or .dot", file=sys.stderr)
        return EXIT_USAGE
    problem = _output_problem(args)
    if problem is not None:
        return problem
    design = _checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    try:
        dot, status = _diagram(design, args)
    except JobError as error:
        print(f"gclc: {error}", file=sys.stderr)
        return EXIT_ERRORS
    if dot is None:
        return status
    try:
        data = render.render_bytes(dot, fmt)
    except render.DotMissing as error:
        print(f"gclc: {error}", file=sys.stderr)
        return EXIT_ERRORS
    return _write(args, data)


def _diagram(design, args: argparse.Namespace):
    """(graphviz graph or None, exit code) for `--view`."""
    from ..solver.plan import plan as make_plan
    from . import render
    from .lower import lower
    from .model.job import train_job

    fabrics = render.fabric_entities(design)
    if args.view != "placement":
        problem = _cluster_problem(design, args.cluster, args.file)
        if problem is not None:
            return None, problem
        graph = lower(design, args.cluster)
        return (render.topology(graph, fabrics) if args.view == "topology" else render.power(graph)), EXIT_OK
    job = train_job(design, args.job)
    chosen = make_plan(job, job_objective(job.entity))
    if chosen.best is None:
        print(infeasible_message(chosen), file=sys.stderr)
        return None, EXIT_INFEASIBLE
    return render.placement(chosen, fabrics), EXIT_OK


def run_report(args: argparse.Namespace) -> int:
    from .model.job import JobError
    from .report import report_html

    problem = _output_problem(args)
    if problem is not None:
        return problem
    design = _checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    problem = _cluster_problem(design, None, args.file)
    if problem is not None:
        return problem
    try:
        text = report_html(design, args.job, source=args.file)
    except JobError as error:
        print(f"gclc: {error}", file=sys.stderr)
        return EXIT_ERRORS
    return _write(args, text)


def run_fmt(args: argparse.Namespace) -> int:
    from ..dsl.format import format_text
    from .resolve import read_text

    status = EXIT_OK
    for path in args.files:
        diagnostics: list = []
        text = read_text(path, Path(path), None, diagnostics)
        if text is None:
            print(render_all(diagnostics, {}), file=sys.stderr)
            status = EXIT_ERRORS
            continue
        try:
            formatted = format_text(text.removeprefix("\ufeff"), path)
        except ParseError as error:
            from ..dsl.source import SourceFile
            print(render_all(error.diagnostics, {path: SourceFile(path, text.removeprefix("\ufeff"))}), file=sys.stderr)
            status = EXIT_ERRORS
            continue
        if args.check:
            if formatted != text:
                print(f"{path}: not in canonical form (run `gclc fmt --write {path}`)")
                status = EXIT_ERRORS
        elif args.write:
            if formatted != text:
                try:  # through a symlink to the file it names, not over the link
                    write_atomic(os.path.realpath(path), formatted)
                except OSError as error:
                    print(f"gclc: cannot write `{path}`: {error.strerror or error}", file=sys.stderr)
                    status = EXIT_ERRORS
        else:
            sys.stdout.write(formatted)
    return status


def _list_codes() -> int:
    for code in codes.REGISTRY.values():
        print(f"{code.name:22} {code.severity.value:8} {code.description}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
