"""`gclc sweep`: arguments, files and exit codes. The work is in `solver/sweep/` (axes,
points, the engine, the front) and `views/` (table, charts, report).

Exit codes: 0 done, 1 the design does not load or an output cannot be written, 2 bad
axes or options (nothing written), 3 no feasible point, 130 interrupted (the finished
points are in the table)."""

from __future__ import annotations

import argparse

from .common import number_option

MAX_WORKERS = 1024     # local processes; a machine with more cores uses --scheduler
MAX_CHUNK = 1_000_000  # points per task: more than a sweep holds


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
    sweep.add_argument("--json", action="store_true",
                       help="print the summary (counts, reasons, the Pareto front's rows, files written) as JSON")
    sweep.add_argument("--job", metavar="NAME", help="the job to plan at every point (default: the file's first)")
    sweep.add_argument("--objective", choices=("throughput", "time", "energy", "mfu", "goodput"), default="throughput",
                       help="what each point's plan optimizes (default: throughput)")
    sweep.add_argument("--pareto", metavar="A,B",
                       help="objectives of the front (default: the sweep block's `pareto`, else time_to_train,tco): "
                            "time_to_train tco capex cost_per_token cost_to_train power energy step_time gpus "
                            "throughput mfu goodput")
    where = sweep.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler, such as tcp://host:8786")
    where.add_argument("--in-process", action="store_true", help="run every point in this process (no Dask)")
    sweep.add_argument("--workers", type=number_option(low=1, high=MAX_WORKERS), metavar="N",
                       help="local Dask worker processes (default: cores)")
    sweep.add_argument("--chunk", type=number_option(low=1, high=MAX_CHUNK), metavar="N",
                       help="points per task (default: balanced)")
    sweep.add_argument("--resume", action="store_true", help="skip the points already in DIR/sweep.parquet")
    sweep.add_argument("--sensitivity", action="store_true",
                       help="vary each numeric param of the file by +-DELTA and draw a tornado chart (no --vary; "
                            "a whole number is rounded, and the chart says how far it moved)")
    sweep.add_argument("--delta", type=number_option(whole=False, low=0, high=1, low_open=True,
                                                        high_open=True, percent=True), default=0.1, metavar="SHARE",
                       help="the sensitivity step, such as 10%% or 0.1 (default: 10%%)")
    sweep.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .sweep_run import run_sweep

    return run_sweep(args)
