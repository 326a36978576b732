"""What a training configuration must satisfy and what the planner minimizes: the job's
`subject to { ... }` limits in base units (memory within HBM first), the measures they
bound, and the objective (lower is better). Part of the problem `solver.train.enumerate`
defines; the search (`solver.train.search`) and its bounds read the same functions."""

from __future__ import annotations

import attrs

from ...compiler.design import Bound
from ...dsl.units import NONE, Quantity
from ...model.job import Job, JobError
from ...model.dvfs import with_cap
from ...compiler.ir import Partition
from ...model.power import busy_of, job_power
from ...model.train.step import Estimate
from ...dsl.records import frozen

OBJECTIVES = ("throughput", "time", "energy", "mfu", "goodput", "cost")   # cost: where the cluster has `economics`


@frozen
class Limit:
    target: str          # memory | power | mfu | time | energy | gpus
    op: str              # <=, <, >=, >
    value: float         # base units (bytes, W, share, s, J, count)
    share: bool = False  # memory given as a share of HBM
    span: object = attrs.field(default=None, eq=False)
    source: str = attrs.field(default="", eq=False)   # where it is written, in words (power budgets)

    @property
    def upper(self) -> bool:
        return self.op in ("<=", "<", "==")

    def holds(self, x: float) -> bool:
        return {"<=": x <= self.value, "<": x < self.value, ">=": x >= self.value, ">": x > self.value,
                "==": x <= self.value}[self.op]


@frozen
class Limits:
    hbm: float                   # bytes per GPU on the chip
    memory: float                # bytes per GPU a configuration may use: HBM, or less under `subject to`
    items: tuple[Limit, ...] = ()

    def get(self, target: str) -> Limit | None:
        return next((i for i in self.items if i.target == target), None)


def limits(job: Job) -> Limits:
    """The job's `subject to { ... }` bounds in base units, and the memory cap they imply."""
    hbm = job.partition.node.accelerator.hbm_capacity
    block = job.entity.get("subject to")
    items = []
    for item in getattr(block, "items", ()):
        bound = item.value
        if not isinstance(bound, Bound):
            continue
        # a count (`gpus <= 8`) is checked as a plain int, a figure as a Quantity: both bind
        quantity = bound.value if isinstance(bound.value, Quantity) else Quantity.of(bound.value)
        value = float(quantity.value)
        share = bound.target == "memory" and quantity.dim == NONE
        if share:
            value *= hbm
        source = f"`subject to {{ {bound.target} {bound.op} ... }}`"
        items.append(Limit(bound.target, bound.op, value, share, item.span, source))
    items = _tightest_power(items + budgets(job))
    memory = hbm
    for limit in items:
        if limit.target == "memory" and limit.upper:
            memory = min(memory, limit.value)
    return Limits(hbm, memory, tuple(items))


def budgets(job: Job) -> list[Limit]:
    """The power budgets the job's GPUs sit under, as limits on its facility power: its
    partition's `power.budget` and its cluster's (the GPUs and hosts it does not use count as
    powered off, as job power does: model/power.py)."""
    from ...compiler.cost.tco import job_cluster

    cluster, partition, out = job_cluster(job.entity), job.partition, []
    if partition.power_budget is not None:
        named = cluster.get("partition") if cluster is not None else None
        item = next((i for i in getattr(named, "items", ()) if i.name == partition.name), None)
        span = item.value.span_of("power.budget") if item is not None else partition.span
        out.append(Limit("power", "<=", partition.power_budget, span=span,
                         source=f"partition `{partition.name}` `power.budget`"))
    if job.graph.power_budget is not None:
        span = cluster.span_of("power.budget") if cluster is not None else job.graph.span
        out.append(Limit("power", "<=", job.graph.power_budget, span=span,
                         source=f"cluster `{job.graph.name}` `power.budget`"))
    return out


def _tightest_power(items: list[Limit]) -> list[Limit]:
    """`items` with one upper limit on power, the lowest (the job's own first among equals)."""
    upper = [i for i in items if i.target == "power" and i.upper]
    if len(upper) <= 1:
        return items
    keep = min(upper, key=lambda i: i.value)
    return [i for i in items if not (i.target == "power" and i.upper) or i is keep]


def max_gpus(job: Job, lim: Limits) -> int:
    gpus = job.gpus
    for limit in lim.items:
        if limit.target == "gpus" and limit.upper:
            gpus = min(gpus, int(limit.value) - (1 if limit.op == "<" else 0))
    return max(0, gpus)


def busy(e: Estimate, partition: Partition) -> float:
    """Share of the step the chips draw at full activity (what power follows, model/power.py)."""
    return busy_of(e.breakdown, e.step_time, partition.node.accelerator)


def power_of(job: Job, e: Estimate) -> float:
    """Facility watts of the job running `e`, its chips under `e`'s power cap."""
    partition = with_cap(job.partition, e.config.power_cap)
    return job_power(job.graph, partition, e.config.gpus, busy(e, partition)).total


def objective_value(job: Job, objective: str, e: Estimate) -> float:
    """What the optimizer minimizes: step time (throughput, time), energy per token, -MFU."""
    if objective in ("throughput", "time"):
        return e.step_time
    if objective == "mfu":
        return -e.mfu
    if objective == "energy":
        return power_of(job, e) / e.tokens_per_s
    if objective == "goodput":
        return -e.tokens_per_s * goodput_share(job, e.config.gpus)
    if objective == "cost":
        per_second, per_joule = cost_rates(job)
        return (per_second + per_joule * power_of(job, e)) / e.tokens_per_s
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


_RATES: dict[int, tuple[object, tuple[float, float] | None]] = {}


def cost_rates(job: Job) -> tuple[float, float]:
    """(USD per second at load, USD per facility joule) of the job's cluster
    (compiler/cost/tco.py `cost_rates`); a JobError when it has no `economics`."""
    key = id(job.entity)
    held = _RATES.get(key)
    if held is None or held[0] is not job.entity:
        from ...compiler.cost.tco import cost_rates as rates

        held = _RATES[key] = (job.entity, rates(job.entity, job.graph))
    if held[1] is None:
        raise JobError(f"`minimize = cost` needs the cluster's `economics {{ years, energy_price }}` block: "
                       f"the cost of `{job.name}` is not defined without it ({job.entity.span})")
    return held[1]


def objectives(job: Job) -> tuple[str, ...]:
    """The objectives the job can be planned for: cost only where its cluster has `economics`."""
    try:
        cost_rates(job)
    except JobError:
        return tuple(o for o in OBJECTIVES if o != "cost")
    return OBJECTIVES


def goodput_share(job: Job, gpus: int) -> float:
    """The share of wall time a job on `gpus` GPUs trains, under failures and checkpoints."""
    from ..schedule.failures import job_goodput

    return job_goodput(job, gpus).efficiency


def measure(job: Job, e: Estimate, target: str, power=None) -> float | None:
    """The value of a job-level quantity that a `subject to` bound constrains; `power`
    (Estimate -> W) replaces `power_of` where a caller has a faster equivalent."""
    watts = lambda: (power or (lambda x: power_of(job, x)))(e)  # noqa: E731
    if target == "memory":
        return e.memory.total
    if target == "host_dram":
        return e.host_memory
    if target == "host_nvme":
        return e.nvme_need
    if target == "power":
        return watts()
    if target == "mfu":
        return e.mfu
    if target == "gpus":
        return float(e.config.gpus)
    if target == "time":
        return job.tokens / e.tokens_per_s if job.tokens else None
    if target == "energy":
        return job.tokens * watts() / e.tokens_per_s if job.tokens else None
    return None


def violated(job: Job, lim: Limits, e: Estimate, power=None) -> Limit | None:
    """The first limit `e` breaks (memory first), or None when it is admissible."""
    if e.memory.total > lim.memory:
        return lim.get("memory") if e.memory.total <= lim.hbm and lim.get("memory") else Limit("memory", "<=", lim.hbm)
    if not e.host_fits:  # the node's DRAM: checkpoint staging, offloaded tensors (model/train/offload_host.py)
        return Limit("host_dram", "<=", e.host_dram)
    if not e.nvme_fits:  # the node's NVMe: the checkpoints it retains (model/train/host.py `nvme_need`)
        return Limit("host_nvme", "<=", e.nvme)
    for limit in lim.items:
        if limit.target == "memory":
            continue
        value = measure(job, e, limit.target, power)
        if value is not None and not limit.holds(value):
            return limit
    return None


def admissible(job: Job, lim: Limits, e: Estimate) -> bool:
    return violated(job, lim, e) is None
