"""`gclc sweep`'s run: axes and points checked, the engine started, table, charts and
report written, exit codes chosen (see `cli/sweep.py` for the options)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..compiler.driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE
from ..dsl.diagnostics import render_all

DEFAULT_PARETO = "time_to_train,tco"


def _usage(message: str) -> int:
    print(f"gclc: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_sweep(args: argparse.Namespace) -> int:
    from ..compiler.settings import parse_settings
    from ..solver.sweep import study
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
            if args.vary:  # never dropped silently: a sensitivity study moves every param by +-delta
                return _usage(f"--sensitivity moves every numeric param of {args.file} by +-{args.delta:g} and "
                              f"takes no --vary ({', '.join(args.vary)}); sweep those values without "
                              "--sensitivity, or fix a param for the study with --set NAME=VALUE")
            plan = study.sensitivity_points(args.file, base, args.delta)
            swept = tuple(dict.fromkeys(p for _, _, p, _, _ in plan[1:]))
            todo = [(i, s) for i, s, _, _, _ in plan]
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
    from ..views.sweep.table import TableWriter, iter_rows

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
    from ..views.sweep.report import summary_json, summary_text

    if sys.stderr.isatty():
        print(file=sys.stderr)
    show = summary_json if getattr(args, "json", False) else summary_text
    print(show(collected, total, objectives, files, interrupted))
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
    from ..views.sweep.report import progress_line

    if not sys.stderr.isatty():
        return None

    def show(p) -> None:
        print(f"\r{progress_line(p)}", end="", file=sys.stderr, flush=True)

    return show


def _charts(args, out: Path, collected, objectives, total, axes_values, plan, kept) -> list[str]:
    from ..views.sweep import plots as sweep_plots
    from ..views.sweep.report import report_html
    from .output import write_atomic

    written, svg = [], None
    if len(objectives) >= 2 and collected.plotted:
        front = [(r[sweep_plots.axis(objectives[0])[0]], r[sweep_plots.axis(objectives[1])[0]],
                  sweep_plots.point_label(r, collected.labels)) for r in collected.front_rows()]
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
    from ..views.sweep import plots as sweep_plots
    from ..views.sweep.report import tornado_text
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
        print(tornado_text(bars, name, delta))
    return written
