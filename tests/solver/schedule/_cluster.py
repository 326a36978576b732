"""A small two-partition cluster (lowered once) and hand-made jobs for the scheduler
tests: no std import and no planning, so each simulation runs in milliseconds."""

from __future__ import annotations

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower_cluster
from gclc.solver.schedule.failures import reliability
from gclc.solver.schedule.records import Option, SchedJob, Workload
from gclc.dsl.source import no_span

DESIGN = """\
chip C {
  hbm   { capacity = 80 GB  bandwidth = 2 TB/s }
  peak  { bf16 = 400 TFLOPS }
  power { tdp = 500 W  idle = 60 W }
  mtbf  = 100 h  # failures every few simulated hours, so the laws see many
}
switch Sw { radix = 8  port_speed = 200 Gb/s  power = 1 kW  mtbf = 50000 h }
fabric Up { kind = nvlink  topology = switched  bandwidth = 400 GB/s  latency = 1 us }
fabric Out {
  kind      = infiniband
  topology  = fat_tree(tiers = 2, radix = 8)
  bandwidth = 200 Gb/s
  latency   = 1 us
  switch    = Sw
}
node Box { gpus = 4 x C  scaleup = Up  mttr = 2 h }
cluster K {
  scaleout = Out
  partition a { units = 8 x Box }
  partition b { units = 4 x Box }
}
"""

_checked = check_text(DESIGN, "cluster.gcl")
assert _checked.ok, _checked.diagnostics
CLUSTER = _checked.design["K"]
GRAPH = lower_cluster(CLUSTER)
RELIABILITY = {p.name: reliability(CLUSTER, GRAPH, p) for p in GRAPH.partitions}
HOUR = 3600.0


def job(name: str, gpus: int, hours: float = 1.0, priority: int = 1, submit: float = 0.0,
        partitions: tuple[str, ...] = ("a", "b"), gang: bool = True, interval: float = float("inf"),
        restart: float = 0.0, limit: float = float("inf"), unit: str = "GPU-s") -> SchedJob:
    """A job of `gpus` GPUs that runs `hours` on any of `partitions` (rate = its GPUs), asking
    for `limit` hours; `unit = "tokens"` makes it a train job (requeued at its limit)."""
    options = tuple(Option(p, gpus, float(gpus), interval, 0.0, restart, None) for p in partitions)
    return SchedJob(name, priority, str(priority), submit * HOUR, hours * HOUR * gpus, unit, gang, options,
                    (), no_span(), limit * HOUR)


def workload(jobs) -> Workload:
    return Workload(GRAPH, CLUSTER, tuple(jobs), RELIABILITY)
