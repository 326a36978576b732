"""Jobs that share a fabric (solver/schedule/contention.py): how much the running train jobs
slow each other under each policy, on two small fabrics where it shows.

    .venv/bin/python benchmarks/contention.py

The cluster: 18 nodes of 4 GPUs (400 TFLOPS bf16 chips, ASSUMPTION: a made-up small part, so
that communication weighs) on a 2-tier fat tree of radix-8 switches, either InfiniBand at 3:1
(adaptive routing: uplinks pooled) or Ethernet at 1:1 (ECMP: flows hashed). Three or four train
jobs of an 8-layer, 2048-wide dense model (data-parallel groups across nodes), 8 to 32 GPUs,
arriving a minute apart, sized so that two of them span one leaf. On a third fabric, RoCE at 3:1 with
ECMP, the first job is an MoE model whose 32-GPU expert all-to-all climbs the spine, once under ECN
and once under PFC alone (`congestion = pfc`: its pauses hold the neighbours' flows on the shared
uplinks). Failures off (seed-free). Per policy: each job's
network slowdown (wall time over its own time while it ran), the mean and the largest, and the
makespan. The last line is a one-line summary.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))  # the folder holding the `gclc` package

from gclc.compiler.driver import check_text  # noqa: E402
from gclc.solver.schedule.catalog import policy  # noqa: E402
from gclc.solver.schedule.jobs import build  # noqa: E402
from gclc.solver.schedule.simulate import simulate  # noqa: E402
from gclc.testing.contention import design  # noqa: E402
from gclc.views.schedule import schedule_json  # noqa: E402

# (GPUs, submit s) per fabric, sized so that two jobs span one leaf (24 GPUs at 3:1, 16 at 1:1)
MOE_FIRST = [(32, 0), (32, 60), (8, 120)]   # the first job is model E's, with ep = 32; batch 256
FABRICS = {"InfiniBand 3:1, adaptive": ("infiniband", "3:1", [(32, 0), (32, 60), (8, 120)], "", False),
           "Ethernet 1:1, ECMP": ("ethernet", "1:1", [(8, 0), (16, 60), (16, 120), (8, 180), (16, 240)], "", False),
           "RoCE 3:1, ECMP, MoE, ECN": ("ethernet", "3:1", MOE_FIRST, "", True),
           "RoCE 3:1, ECMP, MoE, PFC": ("ethernet", "3:1", MOE_FIRST, "congestion = pfc", True)}
POLICIES = ("fifo", "priority", "kube")


def workload(kind: str, oversubscription: str, sizes, fabric: str = "", moe: bool = False):
    def job(i: int, gpus: int, submit: int) -> str:
        model, parallel = ("E", "tp = 1  ep = 32") if moe and i == 0 else ("M", "tp = 4")
        return (f"train j{i} {{ model = {model}  on = K  batch = {256 if moe else 192}  gpus = {gpus}  steps = 2000  submit = {submit} s "
                f" parallelism {{ {parallel} }} }}")

    jobs = "\n".join(job(i, g, s) for i, (g, s) in enumerate(sizes))
    checked = check_text(design(jobs, kind, oversubscription, fabric=fabric), "contention.gcl")
    assert checked.ok, [str(d) for d in checked.diagnostics]
    return build(checked.design)


def main() -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    worst = (1.0, "")
    print(f"{'fabric':<26} {'policy':<9} {'slowdowns (per job)':<44} {'mean':>7} {'max':>7} {'makespan':>9}")
    for label, (kind, oversubscription, sizes, fabric, moe) in FABRICS.items():
        w = workload(kind, oversubscription, sizes, fabric, moe)
        for name in POLICIES:
            data = schedule_json(w, simulate(w, policy(name), failures=False), [])
            slow = [j["network_slowdown"] or 1.0 for j in data["jobs"]]
            shown = " ".join(f"{s:.3f}" for s in slow)
            print(f"{label:<26} {name:<9} {shown:<44} {statistics.fmean(slow):>7.3f} {max(slow):>7.3f} "
                  f"{data['cluster_metrics']['makespan_s'] / 60:>7.1f} m")
            worst = max(worst, (max(slow), f"{label}, {name}"))
    print(f"summary: {len(POLICIES)} policies x {len(FABRICS)} fabrics simulated in "
          f"{time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU; largest network slowdown "
          f"{worst[0]:.3f} ({worst[1]})")


if __name__ == "__main__":
    main()
