"""How the heterogeneous split scales with the number of partitions (issue 12, class 9).

A cluster of N partitions (alternating DGX H100 and DGX A100 pods of 4 nodes: a fleet
bought over the years) runs one Llama-3-70B-shaped job over all of them; the script
times `plan_hetero` for each N and prints the seconds (wall and CPU; the first N also
pays for importing cvxpy) and the split's step time. Target: 64 partitions in <= 10 s. The design is synthetic: the shapes are Llama 3 70B's
(arXiv:2407.21783 Table 3), the servers std/nvidia's; the pod sizes are ASSUMPTIONs.

    .venv/bin/python benchmarks/hetero_scale.py [N ...]      (default: 2 8 16 32 64)
"""

from __future__ import annotations

import sys
import time

from gclc.compiler.driver import check_text
from gclc.solver.jobs import plan_design


def design(partitions: int) -> str:
    parts = "\n".join(f"  partition p{i} {{ units = 4 x {'DGX_H100' if i % 2 == 0 else 'DGX_A100'} }}"
                      for i in range(partitions))
    on = ", ".join(f"Lab.p{i}" for i in range(partitions))
    return f"""import "std/nvidia"

fabric Shared_NDR extends NDR_FatTree {{
  topology = fat_tree(tiers = 3, radix = 64)
}}

cluster Lab {{
  scaleout = Shared_NDR
{parts}
}}

model Llama3_70B {{
  arch     = dense
  layers   = 80
  hidden   = 8192
  heads    = 64
  kv_heads = 8
  ffn      = 28672
  vocab    = 128256
  seq      = 8192
  mlp      = swiglu
}}

train job {{
  model     = Llama3_70B
  on        = [{on}]
  tokens    = 15 T
  batch     = {16 * partitions}
  precision = bf16
  parallelism {{ tp = 8  recompute = selective }}
}}
"""


def main(counts: list[int]) -> None:
    worst = 0.0
    for n in counts:
        result = check_text(design(n), "hetero_scale.gcl")
        if result.design is None:
            raise SystemExit("\n".join(d.summary for d in result.diagnostics))
        start, cpu = time.perf_counter(), time.process_time()
        outcome = plan_design(result.design)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        worst = max(worst, seconds) if n == max(counts) else worst
        best = outcome.best
        print(f"{n:3d} partitions  {seconds:7.2f} s wall  {cpu:6.2f} s CPU  status {outcome.status:10s}  "
              f"step {best.step_time if best else float('nan'):.3f} s  split {best.mode if best else '-'}", flush=True)
    print(f"hetero split over {max(counts)} partitions: {worst:.2f} s (target <= 10 s)")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2, 8, 16, 32, 64])
