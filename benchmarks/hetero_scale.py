"""How the heterogeneous split scales with the number of partitions (issue 12, class 9).

A cluster of N partitions (alternating DGX H100 and DGX A100 pods of 4 nodes: a fleet
bought over the years) runs one Llama-3-70B-shaped job over all of them; the script
times planning it for each N (each kind's own search and the split) and prints the seconds
(wall and CPU; judge by CPU on a shared machine) and the split's step time. Target: 64
partitions in <= 10 s. The design is synthetic: the shapes are Llama 3 70B's (arXiv:2407.21783
Table 3), the servers std/nvidia's; the pod sizes are ASSUMPTIONs.

    .venv/bin/python benchmarks/hetero_scale.py [N ...] [--kinds K ...]
        [--fabric NAME]   (default: 2 8 16 32 64 partitions, of 2 and of 16 kinds, NDR_FatTree)

With --fabric SpectrumX_RoCE (no in-network reduction) the gradient exchange grows with the
number of partitions taking part, so every count is a range of its own for the split.
With --kinds K the pods also differ in size (1 to K/2 nodes): K kinds of partition. Each kind
is planned once and is one class of the split (solver/split/search.py). The last line gives the
largest N's CPU seconds for each K (64 of 16 kinds: 18 s CPU in the split's MILP before the
exact search replaced it).
"""

from __future__ import annotations

import sys
import time

from gclc.compiler.driver import check_text
from gclc.solver.jobs import plan_design


def design(partitions: int, kinds: int = 2, fabric: str = "NDR_FatTree") -> str:
    """`kinds` kinds of partition: H100 and A100 pods of 4 nodes (2), or also of 1 to kinds/2 nodes."""
    def units(i: int) -> int:
        return 4 if kinds <= 2 else 1 + (i % kinds) // 2

    parts = "\n".join(f"  partition p{i} {{ units = {units(i)} x {'DGX_H100' if i % 2 == 0 else 'DGX_A100'} }}"
                      for i in range(partitions))
    on = ", ".join(f"Lab.p{i}" for i in range(partitions))
    return f"""import "std/nvidia"

fabric Shared_NDR extends {fabric} {{
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


def main(counts: list[int], kinds: int = 2, fabric: str = "NDR_FatTree") -> tuple[float, float]:
    """(wall, CPU) seconds of the largest count."""
    last = (0.0, 0.0)
    for n in counts:
        result = check_text(design(n, kinds, fabric), "hetero_scale.gcl")
        if result.design is None:
            raise SystemExit("\n".join(d.summary for d in result.diagnostics))
        start, cpu = time.perf_counter(), time.process_time()
        outcome = plan_design(result.design)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        last = (seconds, cpu) if n == max(counts) else last
        best = outcome.best
        print(f"{n:3d} partitions of {kinds:2d} kinds  {seconds:7.2f} s wall  {cpu:6.2f} s CPU  "
              f"status {outcome.status:10s}  step {best.step_time if best else float('nan'):.3f} s  "
              f"split {best.mode if best else '-'}", flush=True)
    return last


if __name__ == "__main__":
    args = sys.argv[1:]
    options = {"--kinds", "--fabric"}
    kinds = [int(a) for i, a in enumerate(args) if i and args[i - 1] == "--kinds"] or [2, 16]
    fabric = next((a for i, a in enumerate(args) if i and args[i - 1] == "--fabric"), "NDR_FatTree")
    counts = [int(a) for i, a in enumerate(args) if a not in options and not (i and args[i - 1] in options)]
    counts = counts or [2, 8, 16, 32, 64]
    figures = {k: main(counts, k, fabric) for k in kinds}
    print(f"hetero split over {max(counts)} partitions on {fabric}: "
          + ", ".join(f"{k} kinds {cpu:.2f} s CPU ({wall:.2f} s wall)" for k, (wall, cpu) in figures.items())
          + " (target <= 10 s)")
