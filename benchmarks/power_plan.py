"""Power-constrained planning: the planner's time and its agreement with the exhaustive
enumerator over (layout, GPU count, clock step), on a set of power limits.

    .venv/bin/python benchmarks/power_plan.py

Two designs, each planned at a set of facility power limits (`--set limit=...`):

- issue 28's example (tests/data/power_limit.gcl): 32 DGX H100 training a Llama-3.1-8B-shaped
  model. Per limit: the planner's wall and CPU seconds (the search over layout x GPU count x
  clock step, then the power section: the plan without the limit, the GP relaxation and the
  layout's curve), what it plans (GPUs, clock, power cap, tokens/s, facility power), what
  binds and the relaxation's gap. Its space (1.8 M configurations x 21 clock steps) is too big
  to enumerate.
- benchmarks/designs/power_small.gcl: one DGX H100, a GPT-3-XL-shaped model. Per limit: the
  planner's choice against the enumerator's best over every configuration at every clock step
  (solver/train/enumerate.py `ranked`), equal objective values or not, and both times.

The last line states what was measured in this run.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ISSUE = HERE.parent / "tests" / "data" / "power_limit.gcl"
SMALL = HERE / "designs" / "power_small.gcl"
ISSUE_LIMITS = ("50 kW", "100 kW", "150 kW", "200 kW", "250 kW", "400 kW", "600 kW")
SMALL_LIMITS = ("2 kW", "3 kW", "4.5 kW", "6 kW", "7.5 kW", "9 kW", "12 kW")


def _timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def issue_rows() -> list[tuple[float, float]]:
    """Plan the issue's design at each limit; print one row each; (wall, CPU) seconds."""
    from gclc.compiler.driver import check_file
    from gclc.dsl.numbers import big, percent, quantity
    from gclc.solver.jobs import plan_design

    print(f"issue 28's design ({ISSUE.name}): the planner per limit")
    times = []
    for limit in ISSUE_LIMITS:
        design = check_file(str(ISSUE), {"limit": limit}).design
        outcome, wall, cpu = _timed(lambda: plan_design(design))
        p, section = outcome.plan, outcome.power
        times.append((wall, cpu))
        if p.best is None:
            print(f"  {limit:>7}  infeasible  wall {wall:5.2f} s  cpu {cpu:5.2f} s")
            continue
        c = p.best.config
        gap = section.gap(p.best.tokens_per_s, p.energy_per_token) if section else None
        cap = "full clock" if c.power_cap is None else f"{percent(p.clock)} clock, cap {quantity(c.power_cap, 'W')}"
        print(f"  {limit:>7}  {c.gpus:>4} GPUs at {cap:<28} {big(p.best.tokens_per_s):>12} tokens/s  "
              f"{quantity(p.power.total, 'W'):>8}  binds {'+'.join(section.binds) or '-':<22} "
              f"GP gap {'-' if gap is None else percent(gap):>6}  wall {wall:5.2f} s  cpu {cpu:5.2f} s")
    return times


def small_rows() -> tuple[int, int, float, float]:
    """The planner against the enumerator on the small design; (agreements, limits, planner CPU, enumerator CPU)."""
    from gclc.compiler.driver import check_file
    from gclc.dsl.numbers import big, quantity
    from gclc.model.job import train_job
    from gclc.solver.train import enumerate as enumerator
    from gclc.solver.train.search import search

    print(f"{SMALL.name}: the planner against the enumerator per limit")
    agree, planner_cpu, enum_cpu = 0, 0.0, 0.0
    for limit in SMALL_LIMITS:
        job = train_job(check_file(str(SMALL), {"limit": limit}).design)
        found, _, cpu_search = _timed(lambda: search(job, "throughput", 0))
        ranked, _, cpu_enum = _timed(lambda: enumerator.ranked(job, "throughput"))
        planner_cpu, enum_cpu = planner_cpu + cpu_search, enum_cpu + cpu_enum
        size = enumerator.space_size(job, "throughput")
        if not ranked:
            same = found.best is None
            what = "infeasible"
        else:
            same = found.best is not None and math.isclose(found.value, ranked[0][0], rel_tol=1e-9)
            e = found.best
            what = (f"{e.config.gpus} GPUs, cap {'none' if e.config.power_cap is None else quantity(e.config.power_cap, 'W')}, "
                    f"{big(e.tokens_per_s)} tokens/s") if e is not None else "none"
        agree += same
        print(f"  {limit:>7}  {size:>7,} points  planner {what:<40} {'equal' if same else 'DIFFERENT':<9} "
              f"planner {cpu_search:5.2f} s cpu, {found.evaluated:,} evaluated  enumerator {cpu_enum:6.2f} s cpu")
    return agree, len(SMALL_LIMITS), planner_cpu, enum_cpu


def main() -> None:
    times = issue_rows()
    agree, limits, planner_cpu, enum_cpu = small_rows()
    walls, cpus = [w for w, _ in times], [c for _, c in times]
    print(f"power planning: issue design {len(times)} limits, median {statistics.median(walls):.2f} s wall / "
          f"{statistics.median(cpus):.2f} s CPU per plan; small design: planner equals the enumerator on "
          f"{agree}/{limits} limits ({planner_cpu:.2f} s vs {enum_cpu:.2f} s CPU)")
    sys.exit(0 if agree == limits else 1)


if __name__ == "__main__":
    main()
