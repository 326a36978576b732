"""Sweep benchmark: design points per minute of `gclc sweep`'s engine on
benchmarks/designs/superpod_sweep.gcl (a DGX SuperPOD-sized design, Llama 3 405B), for a
job with every parallel choice pinned (compile + check + cost + one estimate per point)
and for one whose parallelism the search chooses, in this process and on a local Dask
cluster of 1 and 2 worker processes (goals: >= 10,000 pinned and >= 1,000 searched
points per minute on 2 cores).

    .venv/bin/python benchmarks/sweep.py [--pinned N] [--searched N] [--workers 1,2]

Points vary `nodes` (64..127) x `server` (DGX_H100, HGX_H200, DGX_B200) x the fabric's
`oversubscription` (1:1, 2:1); rows go to a throw-away Parquet/CSV table as in a real
sweep. The memory line is the largest resident set of this process, which the table's
streaming keeps flat in the number of points. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import itertools
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


def _rate(job: str, n: int, workers: int | None) -> float:
    """Points per minute; `workers` None runs in this process."""
    from gclc.solver.sweep import engine
    from gclc.views.sweep_table import TableWriter

    todo = _points(n)
    with tempfile.TemporaryDirectory() as folder:
        writer = TableWriter(folder, tuple(AXES))
        task = engine.Task(str(DESIGN), job)
        if workers is None:
            engine.run(task, todo[:2], 2, lambda rows: None, engine.InProcess())  # warm the caches
            start = time.perf_counter()
            engine.run(task, todo, n, writer.write, engine.InProcess())
            seconds = time.perf_counter() - start
        else:
            from distributed import Client

            with engine.local_cluster(workers) as cluster, Client(cluster) as client:
                executor = engine.Distributed(client)
                engine.run(task, _points(2 * workers), 2 * workers, lambda rows: None, executor, size=1)  # warm up
                start = time.perf_counter()
                engine.run(task, todo, n, writer.write, executor)
                seconds = time.perf_counter() - start
        writer.close()
    return n / seconds * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pinned", type=int, default=300, help="points for the pinned job (default 300)")
    parser.add_argument("--searched", type=int, default=60, help="points for the searched job (default 60)")
    parser.add_argument("--workers", default="1,2", help="local Dask worker counts (default 1,2)")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",") if w]
    results: dict[tuple[str, str], float] = {}
    print(f"{'job':10} {'executor':12} {'points':>7} {'points/min':>11}")
    for job, n in (("pinned", args.pinned), ("searched", args.searched)):
        for workers in [None, *counts]:
            label = "in-process" if workers is None else f"dask x{workers}"
            rate = _rate(job, n, workers)
            results[(job, label)] = rate
            print(f"{job:10} {label:12} {n:7d} {rate:11,.0f}", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {rss:,.0f} MB")
    top = f"dask x{max(counts)}" if counts else "in-process"
    scaling = (results[("pinned", top)] / results[("pinned", "dask x1")]) if 1 in counts and counts else float("nan")
    print(f"summary: pinned {results[('pinned', top)]:,.0f} points/min, searched {results[('searched', top)]:,.0f} "
          f"points/min on {top} (goals 10,000 and 1,000); 1 -> {max(counts) if counts else 1} workers x{scaling:.2f}")


if __name__ == "__main__":
    main()
