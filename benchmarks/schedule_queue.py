"""A trace that overloads the shared-cluster example (examples/shared_cluster.gcl: 512 GPUs,
two tenants, a service and failures on): arrivals every 30 s on average, 1 to 16 GPUs for
1 minute to 2 hours each, so the queue grows thousands long and every event finds it full.
This is the shape that bounds the rows of a workload trace (docs/hostile-input.md): each
scheduling pass meets the longest queue per row of any trace measured. Prints one row per
policy (wall and CPU time of the simulation) and a summary line of what it measured.

    .venv/bin/python benchmarks/schedule_queue.py [--rows 10000] [--policies fifo,priority,slurm,kueue,kube]

The trace is synthetic (an ESTIMATE of a notebook queue under load: the generator of
tests/cli/test_hostile_round3.py's long-queue test, longer); the jobs ask the example's
8-hour `time_limit`.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from gclc.compiler import trace as trace_reader
from gclc.compiler.driver import check_file
from gclc.solver.schedule.catalog import POLICIES
from gclc.solver.schedule.jobs import build
from gclc.solver.schedule.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]


def trace(rows: int, seed: int = 1) -> str:
    draw, now, out = random.Random(seed), 0.0, ["submit,duration,gpus,priority"]
    for _ in range(rows):
        now += draw.expovariate(1 / 30)
        out.append(f"{now:.0f},{draw.randint(60, 7200)},{draw.choice([1, 2, 4, 8, 16])},"
                   f"{draw.choice(['low', 'normal', 'high'])}")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args()
    trace_reader.MAX_ROWS = max(trace_reader.MAX_ROWS, args.rows)
    folder = Path(tempfile.mkdtemp(prefix="gclc-schedule-queue-"))
    design = (ROOT / "examples" / "shared_cluster.gcl").read_text().replace(
        "workload notebooks {", 'workload notebooks {\n  trace    = "w.csv"')
    (folder / "shared.gcl").write_text(design)
    (folder / "w.csv").write_text(trace(args.rows))
    result = check_file(str(folder / "shared.gcl"))
    assert result.design is not None, [d.summary for d in result.diagnostics]
    workload = build(result.design)
    print(f"{len(workload.jobs):,} jobs on {workload.graph.gpus:,} GPUs")
    print(f"{'policy':>9} {'simulate':>9} {'CPU':>8} {'changes':>8} {'longest queue':>13} {'makespan':>9}")
    cpus = {}
    for name in args.policies.split(","):
        start, cpu = time.perf_counter(), time.process_time()
        outcome = simulate(workload, POLICIES[name], seed=1, epochs=0)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        longest = max((s.pending for s in outcome.samples), default=0)
        print(f"{name:>9} {wall:>8.2f}s {cpu:>7.2f}s {outcome.changes:>8,} {longest:>13,} {outcome.end / 86400:>8.1f}d")
        cpus[name] = (cpu, wall)
    each = ", ".join(f"{name} {cpu:.1f} s CPU ({wall:.1f} s wall)" for name, (cpu, wall) in cpus.items())
    print(f"summary: {args.rows:,} overloading rows on the shared-cluster example, failures on; simulation per policy: {each}")


if __name__ == "__main__":
    main()
