"""Sweep benchmark: design points per minute of `gclc sweep`'s engine on
benchmarks/designs/superpod_sweep.gcl (a DGX SuperPOD-sized design, Llama 3 405B), for a
job with every parallel choice pinned (compile + check + cost + one estimate per point)
and for one whose parallelism the search chooses, in this process and on a local Dask
cluster of 1 and 2 worker processes (goals: >= 10,000 pinned and >= 1,000 searched
points per minute on 2 cores).

    .venv/bin/python benchmarks/sweep.py [--pinned N] [--searched N] [--workers 1,2]

Points vary `nodes` (64..127) x `server` (DGX_H100, HGX_H200, DGX_B200) x the fabric's
`oversubscription` (1:1, 2:1); rows go to a throw-away Parquet/CSV table as in a real
sweep. Each row prints points per minute of wall time and per minute of CPU time (this
process's, plus the Dask workers' when they run the points): on a machine shared with other
work, wall time stretches and CPU time much less, so the second column is what the code
costs. The memory line samples this process's resident set half-way through an in-process
run of the pinned points and at its end: the table's streaming keeps it flat in the number
of points. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

DESIGN = HERE / "designs" / "superpod_sweep.gcl"
AXES = {"nodes": [str(n) for n in range(127, 63, -1)], "server": ["DGX_H100", "HGX_H200", "DGX_B200"],
        "oversubscription": ["1:1", "2:1"]}


def _points(n: int) -> list[tuple[int, dict[str, str]]]:
    names = list(AXES)
    combos = itertools.islice(itertools.cycle(itertools.product(*AXES.values())), n)
    return [(i, dict(zip(names, combo))) for i, combo in enumerate(combos)]


def _resident_mb() -> float:
    """This process's resident set now (Linux), else its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker_cpu() -> float:
    return time.process_time()


def _rate(job: str, n: int, workers: int | None, memory: list[float] | None = None) -> tuple[float, float]:
    """(points per wall minute, points per CPU minute); `workers` None runs in this process.
    `memory`, if given, receives the resident set half-way and at the end."""
    from gclc.solver.sweep import engine
    from gclc.views.sweep.table import TableWriter

    todo = _points(n)
    with tempfile.TemporaryDirectory() as folder:
        writer = TableWriter(folder, tuple(AXES))
        task = engine.Task(str(DESIGN), job)
        done = [0]

        def sink(rows: list[dict]) -> None:
            writer.write(rows)
            done[0] += len(rows)
            if memory is not None and (done[0] >= n // 2 and len(memory) == 0 or done[0] == n):
                memory.append(_resident_mb())
        if workers is None:
            engine.run(task, todo[:2], 2, lambda rows: None, engine.InProcess())  # warm the caches
            start, cpu = time.perf_counter(), time.process_time()
            engine.run(task, todo, n, sink, engine.InProcess())
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        else:
            from distributed import Client

            with engine.local_cluster(workers) as cluster, Client(cluster) as client:
                executor = engine.Distributed(client)
                engine.run(task, _points(2 * workers), 2 * workers, lambda rows: None, executor, size=1)  # warm up
                before = sum(client.run(_worker_cpu).values())
                start, cpu = time.perf_counter(), time.process_time()
                engine.run(task, todo, n, sink, executor)
                seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
                cpu += sum(client.run(_worker_cpu).values()) - before
        writer.close()
    return n / seconds * 60, n / cpu * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pinned", type=int, default=300, help="points for the pinned job (default 300)")
    parser.add_argument("--searched", type=int, default=60, help="points for the searched job (default 60)")
    parser.add_argument("--workers", default="1,2", help="local Dask worker counts (default 1,2)")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",") if w]
    results: dict[tuple[str, str], tuple[float, float]] = {}
    memory: list[float] = []
    print(f"{'job':10} {'executor':12} {'points':>7} {'points/min':>11} {'per CPU-min':>12}")
    for job, n in (("pinned", args.pinned), ("searched", args.searched)):
        for workers in [None, *counts]:
            label = "in-process" if workers is None else f"dask x{workers}"
            wall, cpu = _rate(job, n, workers, memory if (job, workers) == ("pinned", None) else None)
            results[(job, label)] = (wall, cpu)
            print(f"{job:10} {label:12} {n:7d} {wall:11,.0f} {cpu:12,.0f}", flush=True)
    half, end = (memory + [float("nan")] * 2)[:2]
    print(f"resident memory of this process, in-process pinned run: {half:,.0f} MB half-way, {end:,.0f} MB at the end "
          f"({args.pinned} points)")
    top = f"dask x{max(counts)}" if counts else "in-process"
    scaling = (results[("pinned", top)][0] / results[("pinned", "dask x1")][0]) if 1 in counts else float("nan")
    print(f"summary: pinned {results[('pinned', top)][0]:,.0f} points/min ({results[('pinned', top)][1]:,.0f} per "
          f"CPU-min), searched {results[('searched', top)][0]:,.0f} points/min ({results[('searched', top)][1]:,.0f} "
          f"per CPU-min) on {top} (goals 10,000 and 1,000 on 2 cores); 1 -> {max(counts) if counts else 1} workers "
          f"x{scaling:.2f}; memory {half:,.0f} -> {end:,.0f} MB")


if __name__ == "__main__":
    main()
