"""Flow-level simulation speed and agreement: one step's communicators of a 16,384-GPU
training plan (2,048 DGX H100 on a 3-tier rail-optimized NDR fabric at 2:1 above the leaves, no SHARP,
tp 8 / dp 256 / pp 8) simulated on the fabric's links by max-min fair sharing
(model/network/flows.py), against the analytic rates the planner's model gives each stage
(goal: one step in <= 10 s on 2 cores).

    .venv/bin/python benchmarks/flow_sim.py [--nodes N] [--congestion ecn|pfc]

Each row: a stage of a dimension's collective (its ring over the stage's peers), the analytic
rate, the simulated rate alone and while every dimension's outermost stage runs at once, and
how far the analytic figure is from the simulated one. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

DESIGN = """
import "std/nvidia"
import "std/network"
fabric Pod extends NDR_FatTree {{
  topology = rail_optimized(tiers = 3, radix = 64, oversubscription = 2:1)
  in_network_reduction = false  # the simulation has rings, no SHARP
}}
cluster C {{ units = {nodes} x DGX_H100  scaleout = Pod }}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2048)
    parser.add_argument("--congestion", choices=("ecn", "pfc"), default="ecn",
                        help="ECN/DCQCN rate control (max-min) or PFC alone (pauses: model/network/flows.py)")
    args = parser.parse_args()
    from gclc.compiler.driver import check_text
    from gclc.compiler.lower import lower
    from gclc.model.network import flows

    result = check_text(DESIGN.format(nodes=args.nodes), str(HERE / "flow_sim.gcl"))
    assert result.ok, [str(d) for d in result.diagnostics]
    partition = lower(result.design).partitions[0]
    gpus = partition.gpus
    dp = gpus // 64
    dimensions = [("tp", 8, 1, True), ("dp", dp, 8, True), ("pp", 8, 8 * dp, False)]
    start, cpu = time.perf_counter(), time.process_time()
    rows = flows.compare(partition.tiers, gpus, dimensions, congestion=args.congestion)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{'stage':8} {'analytic GB/s':>14} {'alone':>8} {'together':>9} {'analytic off by':>16}")
    worst = 0.0
    for name, analytic, alone, together in rows:
        off = analytic / together - 1
        worst = max(worst, abs(off))
        print(f"{name:8} {analytic / 1e9:14.1f} {alone / 1e9:8.1f} {together / 1e9:9.1f} {off:+16.1%}")
    print(f"flow simulation ({args.congestion}): {gpus} GPUs, {len(rows)} stages of tp 8 / dp {dp} / pp 8, analytic off by at most "
          f"{worst:.1%} | wall {seconds:.1f} s, cpu {cpu:.1f} s")


if __name__ == "__main__":
    main()
