"""`plan`: the best configuration of a training job under the cost model, with the
runner-ups, what binds, power and energy. Infeasible is an answer, not a crash."""

from __future__ import annotations

import time

import attrs

from ..compiler.model.job import Job, is_fully_pinned, pinned_config
from ..compiler.model.power import Power, job_power
from ..compiler.model.step import Estimate, estimate
from . import enumerate as enumerator

OBJECTIVES = ("throughput", "time", "energy", "mfu")


@attrs.frozen
class Plan:
    job: Job
    objective: str
    status: str                         # optimal | evaluated | infeasible
    best: Estimate | None
    power: Power | None
    runners_up: tuple[Estimate, ...]
    considered: int
    seconds: float
    binding: tuple[str, ...]
    smallest: Estimate | None = None    # the least memory any configuration needs (for infeasible)

    @property
    def energy_per_token(self) -> float | None:
        if self.best is None or self.power is None:
            return None
        return self.power.total / self.best.tokens_per_s

    def _repr_html_(self) -> str:
        """Jupyter: the plan as a table with its placement diagram."""
        from ..compiler.report import plan_html

        return plan_html(self)

    def _repr_svg_(self) -> str | None:
        """Jupyter: the placement diagram (None when infeasible or without Graphviz's `dot`)."""
        from ..compiler.render import plan_svg

        return plan_svg(self)


def _key(objective: str, job: Job):
    def energy(e: Estimate) -> float:
        return job_power(job.graph, job.partition, e.config.gpus, _busy(e)).total / e.tokens_per_s
    return {"throughput": lambda e: e.step_time, "time": lambda e: e.step_time,
            "mfu": lambda e: -e.mfu, "energy": energy}[objective]


def _busy(e: Estimate) -> float:
    b = e.breakdown
    return min(1.0, (b.compute + b.recompute + b.optimizer) / e.step_time)


def plan(job: Job, objective: str = "throughput", top: int = 3) -> Plan:
    start = time.perf_counter()
    if is_fully_pinned(job) and all(k in job.pinned for k in ("microbatch", "recompute")):
        candidates, status = [estimate(job.shape, pinned_config(job), job.partition)], "evaluated"
    else:
        candidates, status = list(enumerator.evaluate_all(job)), "optimal"
    fitting = sorted((c for c in candidates if c.fits), key=_key(objective, job))
    seconds = time.perf_counter() - start
    if not fitting:
        smallest = min(candidates, key=lambda c: c.memory.total, default=None)
        return Plan(job, objective, "infeasible", None, None, (), len(candidates), seconds, ("memory",), smallest)
    best = fitting[0]
    power = job_power(job.graph, job.partition, best.config.gpus, _busy(best))
    return Plan(job, objective, status, best, power, tuple(fitting[1 : 1 + top]), len(candidates), seconds,
                binding(best))


def binding(e: Estimate) -> tuple[str, ...]:
    """What limits the chosen configuration: memory headroom, and the largest overheads."""
    out = []
    if e.memory.total > 0.9 * e.hbm:
        out.append(f"memory: {e.memory.total / e.hbm:.0%} of HBM")
    b = e.breakdown
    overheads = {"tp": b.tp, "cp": b.cp, "ep": b.ep, "pp": b.pp, "dp": b.dp, "bubble": b.bubble,
                 "recompute": b.recompute}
    for name, seconds in sorted(overheads.items(), key=lambda kv: -kv[1])[:2]:
        if seconds > 0.05 * e.step_time:
            out.append(f"{name}: {seconds / e.step_time:.0%} of the step")
    return tuple(out) or ("compute",)
