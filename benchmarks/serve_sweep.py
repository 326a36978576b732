"""A rate sweep of one serve plan: the latency knee and the simulation's speed.

    .venv/bin/python benchmarks/serve_sweep.py [FILE] [--job NAME] [--requests N]

Plans the job (default: examples/deepseek_v3_serve.gcl at its stated rate), then offers the
chosen pools 0.25x to 3x that rate and prints the simulated P50/P99 TTFT, TPOT and E2E,
the goodput and the seconds each simulation took. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

from gclc.compiler.driver import check_file
from gclc.model.serve.inference import kv_transfer_time
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.solver.serve.demand import demand_of, lifetime
from gclc.solver.serve.sim import Pool, simulate

FACTORS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)


def pool(side, limit: float) -> Pool:
    r = side.replica
    return Pool(r, side.count, r.config.batch, r.kv_capacity_tokens(limit * r.hbm if limit <= 1 else limit))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=str(HERE.parent / "examples" / "deepseek_v3_serve.gcl"))
    parser.add_argument("--job")
    parser.add_argument("--requests", type=int, default=0,
                        help="requests per rate (default: four request lifetimes of arrivals, at most 20,000)")
    args = parser.parse_args()
    entity = serve_entity(check_file(args.file).design, args.job)
    plan = plan_serve(entity)
    if plan.best is None or plan.demand is None:
        sys.exit(f"{args.file}: needs a feasible serve job with a rate ({'; '.join(plan.binding)})")
    demand = plan.demand
    decode = pool(plan.decode, plan.limits.memory)
    prefill = pool(plan.prefill, plan.limits.memory) if plan.prefill else None
    transfer = (lambda p: kv_transfer_time(plan.prefill.replica, plan.decode.replica, p)) if prefill else None
    print(f"{plan.name}: {plan.mode}, {plan.used_gpus} GPUs, planned for {demand.rate:,.4g} requests/s")
    print(f"{'rate':>8} {'TTFT P50':>9} {'TTFT P99':>9} {'TPOT P50':>9} {'TPOT P99':>9} {'E2E P99':>8} "
          f"{'goodput':>8} {'sim s':>6}")
    knee, seconds = None, 0.0
    for factor in FACTORS:
        rate = demand.rate * factor
        started = time.perf_counter()
        life = lifetime(entity, plan.output_tokens)
        count = args.requests or int(min(20_000, max(600, 4 * life * rate)))
        out = simulate(demand_of(entity, count).at_rate(rate).requests, decode, prefill, transfer, plan.limits.slo, life)
        took = time.perf_counter() - started
        seconds += took
        if knee is None and out.goodput < 0.9 * rate:
            knee = rate
        print(f"{rate:>8,.4g} {out.percentile('ttft', 50):>9.3f} {out.percentile('ttft', 99):>9.3f} "
              f"{out.percentile('tpot', 50) * 1e3:>8.1f}m {out.percentile('tpot', 99) * 1e3:>8.1f}m "
              f"{out.percentile('e2e', 99):>8.1f} {out.goodput:>8,.4g} {took:>6.2f}")
    knee_text = f"goodput falls below 90 % of the offered rate at {knee:,.4g} requests/s" if knee else "no knee up to 3x"
    print(f"serve sweep: {len(FACTORS)} rates simulated in {seconds:.1f} s; {knee_text}")


if __name__ == "__main__":
    main()
