"""`gclc sweep`: arguments, files and exit codes. The work is in `solver/sweep/` (axes,
points, the engine, the front) and `views/` (table, charts, report).

Exit codes: 0 done, 1 the design does not load or an output cannot be written, 2 bad
axes or options (nothing written), 3 no feasible point, 130 interrupted (the finished
points are in the table)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..compiler.driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE
from ..dsl.diagnostics import render_all


def add(commands) -> None:
    sweep = commands.add_parser(
        "sweep", help="compile, check and plan every point of a design space; table, Pareto front, report",
        description="Axes: the design's `sweep { }` block and --vary NAME=a,b,c | NAME=low..high | "
                    "NAME=low..high+step | NAME=low..high*factor. "
                    "Points run on a local Dask cluster (one process per core) unless --in-process or --scheduler.")
    sweep.add_argument("file", metavar="FILE")
    sweep.add_argument("--vary", action="append", default=[], metavar="NAME=VALUES",
                       help="a param and its values (repeatable; the points are every combination)")
    sweep.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="fix a param for every point")
    sweep.add_argument("-o", "--output", default="sweep", metavar="DIR",
                       help="folder for sweep.parquet, sweep.csv, pareto.svg/.png, report.html (default: ./sweep)")
    sweep.add_argument("--job", metavar="NAME", help="the job to plan at every point (default: the file's first)")
    sweep.add_argument("--objective", choices=("throughput", "time", "energy", "mfu"), default="throughput",
                       help="what each point's plan optimizes (default: throughput)")
    sweep.add_argument("--pareto", metavar="A,B",
                       help="objectives of the front (default: the sweep block's `pareto`, else time_to_train,tco): "
                            "time_to_train tco capex cost_per_token cost_to_train power energy step_time gpus "
                            "throughput mfu")
    where = sweep.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler, such as tcp://host:8786")
    where.add_argument("--in-process", action="store_true", help="run every point in this process (no Dask)")
    sweep.add_argument("--workers", type=_positive, metavar="N", help="local Dask worker processes (default: cores)")
    sweep.add_argument("--chunk", type=_positive, metavar="N", help="points per task (default: balanced)")
    sweep.add_argument("--resume", action="store_true", help="skip the points already in DIR/sweep.parquet")
    sweep.add_argument("--sensitivity", action="store_true",
                       help="vary each numeric param of the file by +-DELTA and draw a tornado chart")
    sweep.add_argument("--delta", type=_share, default=0.1, metavar="SHARE",
                       help="the sensitivity step, such as 10%% or 0.1 (default: 10%%)")
    sweep.set_defaults(run=run_sweep)


DEFAULT_PARETO = "time_to_train,tco"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid share: {text!r} (write 10% or 0.1)") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100 %, not {text}")
    return value


def _usage(message: str) -> int:
    print(f"gclc: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_sweep(args: argparse.Namespace) -> int:
    from ..solver.sweep import study
    from ..compiler.settings import parse_settings

    from ..solver.sweep.pareto import OBJECTIVES

    objectives = tuple(o.strip() for o in (args.pareto or DEFAULT_PARETO).split(",") if o.strip())
    unknown = [o for o in objectives if o not in OBJECTIVES]
    if unknown or not objectives:
        return _usage(f"--pareto: unknown objective {', '.join(unknown) or '(none)'}; "
                      f"choose from {', '.join(OBJECTIVES)}")
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        return _usage(f"-o {args.output}: not a folder")
    base, problems = parse_settings(args.set)
    try:
        if problems:
            raise study.UsageError(problems, {})
        if args.sensitivity:
            plan = study.sensitivity_points(args.file, base, args.delta)
            swept = tuple(dict.fromkeys(p for _, _, p, _ in plan[1:]))
            todo = [(i, s) for i, s, _, _ in plan]
            axes_values = {n: ("-", "+") for n in swept}
        else:
            axes, sources = study.parse_axes(args.vary)
            study.check_axes(args.file, axes, sources, base)
            block, block_objectives = study.block_axes(args.file, base)
            axes = tuple(a for a in block if a.name not in {v.name for v in axes}) + axes  # --vary wins
            if not axes:
                return _usage(f"nothing to sweep: give --vary NAME=VALUES, a `sweep {{ }}` block in {args.file}, "
                              "or --sensitivity")
            if block_objectives and args.pareto is None:
                objectives = block_objectives
            swept = tuple(a.name for a in axes)
            plan, todo = None, None
            axes_values = {a.name: a.values for a in axes}
    except study.UsageError as error:
        print(render_all(error.diagnostics, error.sources), file=sys.stderr)
        return EXIT_USAGE
    except study.DesignError as error:
        print(render_all(error.diagnostics, error.sources), file=sys.stderr)
        return EXIT_ERRORS
    if todo is None:
        return _run(args, out, objectives, swept, axes_values, lambda done: study.todo(axes, base, done), _total(axes))
    return _run(args, out, objectives, swept, axes_values, lambda done: iter(todo), len(todo), plan)


def _total(axes) -> int:
    from ..solver.sweep.axes import count

    return count(axes)


def _run(args, out: Path, objectives, swept, axes_values, make_points, total: int, plan=None) -> int:
    from ..solver.sweep import engine
    from ..solver.sweep.point import column
    from ..solver.sweep.study import Collected
    from ..views.sweep_table import TableWriter, iter_rows

    out.mkdir(parents=True, exist_ok=True)
    collected = Collected(objectives, swept)
    writer = TableWriter(out, swept)
    done: set[tuple[str, ...]] = set()
    kept: list[dict] = []
    interrupted = False
    try:
        if args.resume:
            for rows in iter_rows(out):
                rows = [r for r in rows if tuple(r.get(column(n)) for n in swept) not in done]
                done |= {tuple(r.get(column(n)) for n in swept) for r in rows}
                writer.write(rows)
                collected.add(rows)
                collected.resumed += len(rows)
                if plan is not None:
                    kept += rows

        def sink(rows: list[dict]) -> None:
            writer.write(rows)
            collected.add(rows)
            if plan is not None:
                kept.extend(rows)

        with _executor(args) as executor:
            engine.run(engine.Task(str(Path(args.file)), args.job, args.objective), make_points(done),
                       total - len(done), sink, executor, args.chunk, _progress_printer())
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        writer.abort()
        raise
    writer.close()
    files = [str(out / "sweep.parquet"), str(out / "sweep.csv")] + _charts(args, out, collected, objectives, total,
                                                                             axes_values, plan, kept)
    from ..views.sweep_report import summary_text

    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(summary_text(collected, total, objectives, files, interrupted))
    if interrupted:
        return 130
    return EXIT_OK if collected.statuses["ok"] else EXIT_INFEASIBLE


class _executor:
    """The executor `--in-process`, `--scheduler` or `--workers` asks for, closed on exit."""

    def __init__(self, args):
        self.args, self.client, self.cluster = args, None, None

    def __enter__(self):
        from ..solver.sweep import engine

        if self.args.in_process:
            return engine.InProcess()
        from distributed import Client

        if self.args.scheduler:
            self.client = Client(self.args.scheduler, timeout="10s")
        else:
            self.cluster = engine.local_cluster(self.args.workers)
            self.client = Client(self.cluster)
        return engine.Distributed(self.client)

    def __exit__(self, *exc) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _progress_printer():
    """Points done / infeasible / ETA on one stderr line; nothing when stderr is not a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(p) -> None:
        eta = "" if p.eta is None else f"  ETA {int(p.eta) // 60}m{int(p.eta) % 60:02d}s"
        print(f"\r  {p.done}/{p.total} points  {p.infeasible} infeasible{eta}   ", end="", file=sys.stderr, flush=True)

    return show


def _charts(args, out: Path, collected, objectives, total, axes_values, plan, kept) -> list[str]:
    from ..solver.sweep.point import column
    from ..views import sweep_plots
    from ..views.sweep_report import report_html
    from .output import write_atomic

    written, svg = [], None
    if len(objectives) >= 2 and collected.plotted:
        front = [(r[sweep_plots.axis(objectives[0])[0]], r[sweep_plots.axis(objectives[1])[0]],
                  " ".join(f"{n}={r.get(column(n))}" for n in collected.labels)) for r in collected.front_rows()]
        fig = sweep_plots.pareto_figure(collected.plotted, front, objectives[:2])
        for fmt in ("svg", "png"):
            data = sweep_plots.save(fig, fmt)
            write_atomic(out / f"pareto.{fmt}", data)
            written.append(str(out / f"pareto.{fmt}"))
        svg = sweep_plots.save(fig, "svg").decode("utf-8")
        svg = svg[svg.index("<svg"):]
    if plan is not None:
        written += _tornado(out, kept, plan, args.delta)
    write_atomic(out / "report.html", report_html(args.file, collected, total, objectives, svg, axes_values))
    return written + [str(out / "report.html")]


def _tornado(out: Path, rows, plan, delta: float) -> list[str]:
    from ..solver.sweep.study import tornado
    from ..views import sweep_plots
    from .output import write_atomic

    written = []
    for column, name in (("time_to_train_s", "time to train"), ("tco_usd", "cost of ownership")):
        bars = tornado(rows, plan, column)
        if not bars:
            continue
        fig = sweep_plots.tornado_figure(bars, name, delta)
        path = out / f"tornado_{column.removesuffix('_s').removesuffix('_usd')}.svg"
        write_atomic(path, sweep_plots.save(fig, "svg"))
        written.append(str(path))
        print(f"sensitivity of {name} to +-{delta:.0%}:")
        for param, low, high in sorted(bars, key=lambda b: -max(abs(b[1]), abs(b[2]))):
            print(f"  {param:24} {low:+8.1%} {high:+8.1%}")
    return written
