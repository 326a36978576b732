"""`gclc schedule`: simulate the design's jobs on its shared cluster under a policy, hold
the result against the MILP optimum, print it as text or JSON and draw it. Exit codes:
0, 1 errors (bad input is a located diagnostic; nothing is written), 2 usage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .progress import progress
from ..compiler.driver import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, check_file
from ..dsl.diagnostics import render_all
from .common import cluster_problem, number_option, output_problem, settings_option

PLOT_FORMATS = {".svg": "svg", ".png": "png"}
MAX_SEED = 2**64 - 1   # numpy's generators take any; 64 bits is what a seed is elsewhere
MAX_EPOCHS = 100       # a MILP solve each: 8 by default


def add(commands) -> None:
    from ..solver.schedule.catalog import POLICIES

    cmd = commands.add_parser("schedule", help="simulate the jobs of a shared cluster under a scheduling policy")
    cmd.add_argument("file", metavar="FILE")
    cmd.add_argument("--policy", choices=tuple(POLICIES), default="priority",
                     help="fifo, priority (+ topology-aware best fit, preemption), slurm (main loop with partition "
                          "blocking, multifactor priority, backfill with reservations from time limits), kueue "
                          "(ClusterQueues per tenant with quotas and cohorts, topology-aware) or kube "
                          "(kube-scheduler's default profile); a `scheduler NAME { ... }` block sets its settings; "
                          "default priority")
    cmd.add_argument("--cluster", metavar="NAME", help="the cluster to schedule on (default: the file's first)")
    cmd.add_argument("--json", action="store_true", help="print the schedule as JSON (views/schedule.schema.json)")
    cmd.add_argument("-o", "--output", metavar="OUT", help="draw utilization and a Gantt chart here (.svg or .png)")
    cmd.add_argument("--seed", type=number_option(low=0, high=MAX_SEED), default=0,
                     help="seed of the failure process, 0 to 2**64-1 (default 0)")
    cmd.add_argument("--no-failures", action="store_true", help="simulate without node and switch failures")
    cmd.add_argument("--export", nargs=2, metavar=("KIND", "DIR"),
                     help="write what makes the real scheduler take the simulated decisions into DIR: `slurm` (node, "
                          "partition and GRES lines, one sbatch script per run with its begin time, node list, GPUs, "
                          "time limit and priority, and submit.sh) or `kubernetes` (Kueue's queues, flavors and priority "
                          "classes, the nodes' labels, one JobSet per run pinned to its nodes, and submit.sh)")
    cmd.add_argument("--epochs", type=number_option(low=0, high=MAX_EPOCHS), default=8, metavar="N",
                     help=f"decision epochs at which the MILP optimum is solved (default 8; 0: none; at most {MAX_EPOCHS})")
    cmd.add_argument("--degrade", action="append", default=[], metavar="[PARTITION/]PART[:INDEX]=SHARE@START-END",
                     help="a part slow or down for a while, repeatable: `nic:D` or `gpu:D` (scale-up domain D), "
                          "`link:L` (one uplink of leaf L) or `spine` (one spine switch) at SHARE (`down`, 0-1 or a "
                          "percentage) from START to END (`90min`, `2h`); the jobs on it run at their degraded step "
                          "(`gclc degrade`) meanwhile, e.g. `--degrade nic:3=50%%@1h-3h`")
    settings_option(cmd)
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json

    from ..solver.schedule.degraded import EventError, parse_event
    from ..solver.schedule.milp import solve
    from ..views.schedule import schedule_json, schedule_text

    problem = _usage_problem(args)
    if problem is not None:
        return problem
    try:
        events = tuple(parse_event(text) for text in args.degrade)
    except EventError as bad:
        print(f"gclc: --degrade {bad}", file=sys.stderr)
        return EXIT_USAGE
    design_or_code, workload = _workload(args)
    if workload is None:
        return design_or_code   # the diagnostics are printed
    design = design_or_code
    outcome = _simulated(args, design, workload, events)
    if isinstance(outcome, int):
        return outcome
    with progress("solving the MILP optimum at each epoch"):
        optimum = [solve(epoch) for epoch in outcome.epochs[:args.epochs]]
    data = schedule_json(workload, outcome, optimum)
    code = _draw(args, data) if args.output else EXIT_OK
    if code == EXIT_OK and args.export:
        code = _export(args, design, workload, data)
    if code != EXIT_OK:
        return code
    print(json.dumps(data, indent=2, allow_nan=False) if args.json else schedule_text(data))
    if args.output and not args.json:
        from .common import wrote

        wrote(args.output)
    return EXIT_OK


def _workload(args: argparse.Namespace):
    """(design, workload) of the checked design on `--cluster`; (exit code, None) after
    printing why there is none."""
    from ..solver.schedule.jobs import ScheduleError, build

    result = check_file(args.file, args.set)
    if result.diagnostics:
        print(render_all(result.diagnostics, result.sources), file=sys.stderr)
    if result.design is None:
        return EXIT_ERRORS, None
    problem = cluster_problem(result.design, args.cluster, args.file)  # as plan, export and render say it
    if problem is not None:
        return problem, None
    try:
        return result.design, build(result.design, args.cluster)
    except ScheduleError as error:
        sources = dict(result.sources) | {s.path: s for s in error.sources}
        print(render_all(error.diagnostics, sources), file=sys.stderr)
        return EXIT_ERRORS, None


def _simulated(args: argparse.Namespace, design, workload, events):
    """The simulation under `--policy`, or the usage exit code for a `--degrade` event this
    cluster cannot place (a partition, node or leaf it lacks)."""
    from ..solver.schedule.catalog import policy
    from ..solver.schedule.degraded import EventError
    from ..solver.schedule.settings import settings_of
    from ..solver.schedule.simulate import simulate

    chosen = policy(args.policy, settings_of(design, workload.cluster, args.policy))
    try:
        return simulate(workload, chosen, seed=args.seed, failures=not args.no_failures, epochs=args.epochs,
                        progress=_progress_bar(len(workload.jobs)), degradations=events)
    except EventError as bad:
        print(f"gclc: --degrade {bad}", file=sys.stderr)
        return EXIT_USAGE


def _draw(args: argparse.Namespace, data: dict) -> int:
    """Utilization and the Gantt chart into `-o`, in the format its suffix names."""
    from .output import write_atomic
    from ..views.schedule_plot import schedule_figure

    suffix = args.output[args.output.rfind("."):].lower()
    try:
        write_atomic(args.output, schedule_figure(data, PLOT_FORMATS[suffix]))
    except OSError as error:
        print(f"gclc: cannot write `{args.output}`: {error.strerror or error}", file=sys.stderr)
        return EXIT_ERRORS
    return EXIT_OK


def _export(args: argparse.Namespace, design, workload, data: dict) -> int:
    """`--export KIND DIR`: the files that make the real scheduler take the simulated decisions."""
    from ..views.export import ExportError
    from ..views.export.kube_replay import kubernetes_replay
    from ..views.export.replay import slurm_replay
    from .export import write_all

    replay = slurm_replay if args.export[0] == "slurm" else kubernetes_replay
    try:
        files = replay(design, workload, data, args.file)
    except ExportError as problem:  # a setting the scheduler cannot state (`bf_resolution = 0.5 s`)
        print(f"gclc: cannot export to {args.export[0]}: {problem}", file=sys.stderr)
        return EXIT_USAGE if getattr(problem, "usage", False) else EXIT_ERRORS
    return write_all(Path(args.export[1]), files, announce=not args.json)


def _usage_problem(args: argparse.Namespace) -> int | None:
    if args.export and args.export[0] not in ("slurm", "kubernetes"):
        print(f"gclc: --export {args.export[0]}: the simulated decisions export to `slurm` or `kubernetes`",
              file=sys.stderr)
        return EXIT_USAGE
    if args.export and (not args.export[1] or (Path(args.export[1]).exists() and not Path(args.export[1]).is_dir())):
        # checked before the simulation: the replay is several files, so DIR names a folder
        print(f"gclc: --export {args.export[0]} `{args.export[1]}`: DIR names a folder (new or existing) for the replay's files",
              file=sys.stderr)
        return EXIT_USAGE
    if not args.output:
        return None
    suffix = args.output[args.output.rfind("."):].lower() if "." in args.output else ""
    if suffix not in PLOT_FORMATS:
        print(f"gclc: cannot draw `{args.output}`: the suffix picks the format, one of {', '.join(PLOT_FORMATS)}",
              file=sys.stderr)
        return EXIT_USAGE
    return output_problem(args)


def _progress_bar(total: int):
    """A one-line bar on stderr for long simulations in a terminal; None otherwise."""
    from ..views.schedule import progress_line

    if total < 1000 or not sys.stderr.isatty():
        return None
    step = max(1, total // 50)

    def show(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            end = "\n" if done == total else ""
            print(f"\r{progress_line(done, total)}", end=end, file=sys.stderr, flush=True)
    return show
