"""Search benchmark: time, configurations and optimum of the exact parallelism search on
four published-scale training jobs (goal: <= 1 s each on one core).

    .venv/bin/python benchmarks/search.py [--oracle SECONDS] [--objective throughput]
                                          [--search shard,recompute_modules,recompute_every,offload]

Designs (benchmarks/designs/*.gcl, sources in their comments): MT-NLG 530B on 5,128 A100,
GPT-3 175B on 4,096 A100, Llama 3 405B on 16,384 H100, a DeepSeek-V3-style MoE on 2,048
H800. Nothing in them is pinned, so the search covers the whole space. `--search` asks the
planner to search those choices as well (as `parallelism { search = [...] }` does; offload
only on nodes that declare a `host_link`).

For each design the script prints the search's wall and CPU time (cold: the model's layer
cache is cleared first), the size of the space, how many configurations were evaluated and
pruned, and the optimum. The exhaustive enumerator (`solver.train.enumerate`) is run as well when
its projected time (space size x the measured cost of one estimate) is under `--oracle`
seconds (default 60); otherwise its projected time is printed instead. With the
enumerator's answer, the script checks that both optima are equal.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

DESIGNS = ("mt_nlg_530b", "gpt3_175b", "llama3_405b", "deepseek_v3")


def _clear_caches() -> None:
    from gclc.model.train import step

    step.clear_caches()


def _config(c) -> str:
    return (f"tp={c.tp} pp={c.pp} vp={c.vp} dp={c.dp} cp={c.cp} ep={c.ep} mb={c.microbatch} {c.recompute} "
            f"zero={c.zero} order={','.join(c.order)}")


def run(name: str, objective: str, oracle_budget: float, asked: tuple[str, ...] = ()) -> dict:
    from gclc.compiler.driver import check_file
    from gclc.model.job import train_job
    from gclc.solver.train import enumerate as enumerator
    from gclc.solver.train.search import search

    checked = check_file(str(HERE / "designs" / f"{name}.gcl"))
    if checked.design is None:
        raise SystemExit(f"{name}: the design does not check")
    job = train_job(checked.design)
    if asked:
        import attrs

        job = attrs.evolve(job, pinned={**job.pinned, "search": asked})
    _clear_caches()
    wall, cpu = time.perf_counter(), time.process_time()
    result = search(job, objective)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    row = {"name": name, "job": job, "gpus": job.gpus, "wall": wall, "cpu": cpu, "result": result}
    per_estimate = cpu / max(1, result.estimates)
    row["oracle_projected"] = result.configurations * per_estimate
    if row["oracle_projected"] <= oracle_budget:
        start = time.perf_counter()
        best, count = enumerator.best(job, objective)
        row["oracle"] = (best, count, time.perf_counter() - start)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", type=float, default=60.0, metavar="SECONDS",
                        help="run the exhaustive enumerator when its projected time is below this (default 60)")
    parser.add_argument("--objective", default="throughput", choices=("throughput", "time", "energy", "mfu"))
    parser.add_argument("--search", default="", metavar="CHOICES",
                        help="comma-separated choices the planner also searches (shard, recompute_modules, "
                             "recompute_every, offload)")
    parser.add_argument("designs", nargs="*", default=list(DESIGNS), help="design names (default: all four)")
    args = parser.parse_args(argv)
    asked = tuple(a for a in args.search.split(",") if a)
    from gclc.solver.train import enumerate as enumerator

    failures, compared, total_cpu, total_estimates = 0, 0, 0.0, 0
    print(f"{'design':<13} {'GPUs':>6} {'wall s':>7} {'CPU s':>6} {'space':>9} {'evaluated':>9} {'pruned':>9} "
          f"{'estimates':>9}  optimum")
    for name in args.designs:
        row = run(name, args.objective, args.oracle, asked)
        r = row["result"]
        total_cpu, total_estimates = total_cpu + row["cpu"], total_estimates + r.estimates
        if r.best is None:
            optimum = f"{r.status}"
        else:
            e = r.best
            optimum = (f"{e.step_time:.3f} s/step, {e.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, MFU {e.mfu:.1%}, "
                       f"{e.config.gpus} GPUs: {_config(e.config)}")
        print(f"{name:<13} {row['gpus']:>6} {row['wall']:>7.3f} {row['cpu']:>6.3f} {r.configurations:>9,} "
              f"{r.evaluated:>9,} {r.pruned:>9,} {r.estimates:>9,}  {optimum}")
        if "oracle" in row:
            best, count, seconds = row["oracle"]
            value = None if best is None else enumerator.objective_value(row["job"], args.objective, best)
            same = (best is None and r.best is None) or (
                best is not None and r.value is not None and abs(value - r.value) <= 1e-9 * abs(value))
            failures += not same
            compared += 1
            print(f"{'':<13} enumerator: {count:,} configurations in {seconds:.1f} s; optimum "
                  f"{'equal' if same else 'DIFFERENT: ' + _config(best.config)}")
        else:
            print(f"{'':<13} enumerator: {r.configurations:,} configurations, projected "
                  f"{row['oracle_projected']:.0f} s on one core (not run; --oracle {row['oracle_projected']:.0f} runs it)")
    print(summary(len(args.designs), total_cpu, total_estimates, asked, compared, failures))
    return 1 if failures else 0


def summary(designs: int, cpu: float, estimates: int, asked: tuple[str, ...], compared: int, failures: int) -> str:
    """The last line: only what this run measured. Optima the enumerator did not compute
    are "not compared", never counted as agreeing."""
    if compared == 0:
        verdict = "optima not compared (the enumerator did not run; --oracle SECONDS runs it)"
    else:
        verdict = (f"{failures} of {compared} optima differ from the enumerator's"
                   + (f", {designs - compared} not compared" if compared < designs else ""))
    return (f"search: {designs} designs, {cpu:.2f} s CPU, {estimates:,} estimates"
            f"{', searching ' + '+'.join(asked) if asked else ''}; {verdict}")


if __name__ == "__main__":
    sys.exit(main())
