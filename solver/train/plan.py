"""`plan`: the best configuration of a training job under the cost model, with the
runner-ups, where each parallel dimension is placed, what binds, power and energy.
Infeasible is an answer, not a crash: `infeasibility` says which constraint fails, by
how much, and where in the source.

The optimum comes from `solver.train.search` (exact branch and bound); the exhaustive
enumerator (`solver.train.enumerate`) is only the oracle for tests and benchmarks.
"""

from __future__ import annotations


from ...dsl.numbers import binary_bytes, duration, hbm, memory, percent, quantity
from ...dsl import display
from ...model import comms, dvfs
from ...model.calibration import (Own, Reason, calibrated_as, cluster_of, error_band, own_reasons, power_capped,
                                  reasons)
from ...model.job import Job, stated_fields
from ...model.power import Power, job_power
from ...model.ranks import rank_partition
from ...model.train import guessed
from ...model.train.step import Estimate
from . import enumerate as space_def
from .explain import Infeasibility, explain
from ..schedule.failures import job_goodput
from ..schedule.goodput import Goodput
from .review import VISIBLE_HOST, Advice, review
from .least_memory import least_memory
from .search import SearchResult, search
from ...dsl.records import frozen

OBJECTIVES = space_def.OBJECTIVES
DIMENSIONS = ("tp", "cp", "dp", "pp", "ep")


@frozen
class Placement:
    """One parallel dimension on the hierarchy: its group size, the stride between its
    members, and the tiers the group spans (innermost first) with the peers met on each."""

    dim: str
    size: int
    stride: int
    tiers: tuple[str, ...]
    peers: tuple[int, ...]


@frozen
class Plan:
    job: Job
    objective: str
    status: str                         # optimal | evaluated (a space of one) | infeasible
    best: Estimate | None
    power: Power | None
    runners_up: tuple[Estimate, ...]
    considered: int                     # configurations in the space (evaluated + pruned)
    seconds: float
    binding: tuple[str, ...]
    smallest: Estimate | None = None    # the least memory any configuration needs (for infeasible)
    evaluated: int = 0
    pruned: int = 0
    pruned_by: tuple[tuple[str, int], ...] = ()   # (bound | memory | limits, count)
    proof: str = ""
    placement: tuple[Placement, ...] = ()
    infeasibility: Infeasibility | None = None
    goodput: Goodput | None = None      # of `best`: the share of time that trains under failures
    warnings: tuple[Advice, ...] = ()   # what a reviewer would point out (solver.train.review)

    @property
    def error_band(self) -> dict[str, tuple[float, float]]:
        """80 % bands of the predicted metrics, from the calibration residuals."""
        if self.best is None:
            return {}
        return error_band(self.best.step_time, self.best.tokens_per_s, self.best.mfu, self.band_reasons, self.own)

    @property
    def own(self) -> Own | None:
        """The band `gclc calibrate` fitted on the operator's runs (the cluster's `calibration`
        block), None when the cluster has none."""
        return Own.of(cluster_of(self.job.entity))

    @property
    def band_reasons(self) -> tuple[Reason, ...]:
        """Why the band is as wide as it is (empty: calibrated chip, precision and scale)."""
        if self.best is None:
            return ()
        cfg, job = self.best.config, self.job
        own = self.own
        if own is not None:
            # the operator's band is fitted on their own designs' residuals, whose unstated
            # fields were left out the same way: no widening for them twice
            # `gclc calibrate` writes its chip as `X_tag extends X` with the efficiencies it fitted:
            # whether the published fit calibrated X at this precision asks of the rest of X's physics
            chip = job.partition.node.accelerator
            parent, changed = calibrated_as(chip, ignoring=frozenset({"efficiency"}))
            shipped = reasons(parent, cfg.precision, False, 1, 1, True, changed=changed, shown=chip.name)
            return own_reasons(own, cfg.precision, job.shape.is_moe, cfg.gpus,
                               published=not any(r.key in ("chip", "precision") for r in shipped))
        chip = job.partition.node.accelerator
        parent, changed = calibrated_as(chip)   # the std chip whose published runs calibrate it, by its physics
        found = reasons(parent, cfg.precision, job.shape.is_moe, cfg.cp, cfg.gpus, job.stack_stated,
                        stack=cfg.stack, power_capped=power_capped(chip) or cfg.power_cap is not None,
                        changed=changed, shown=chip.name)
        # fields the design leaves out whose alternatives move the step (model/train/guessed.py)
        return found + guessed.reasons(job.shape, cfg, job.partition, stated_fields(job), found)

    @property
    def clock(self) -> float:
        """The clock the plan runs at, as a ratio of the chip's own (1.0: full clock, no cap set)."""
        if self.best is None:
            return 1.0
        return dvfs.clock_of(self.job.partition, self.best.config.power_cap)

    @property
    def energy_per_token(self) -> float | None:
        if self.best is None or self.power is None:
            return None
        return self.power.total / self.best.tokens_per_s

    def _repr_html_(self) -> str | None:
        """Jupyter: the plan as a table with its placement diagram."""
        return display.render(self, "html")

    def _repr_svg_(self) -> str | None:
        """Jupyter: the placement diagram (None when infeasible or without Graphviz's `dot`)."""
        return display.render(self, "svg")


def _busy(e: Estimate, partition) -> float:
    return space_def.busy(e, partition)


def plan(job: Job, objective: str = "throughput", top: int = 3, searched: SearchResult | None = None) -> Plan:
    """The plan of `job`; `searched`: the search's result when it is already known (a
    partition identical to one planned before, as the heterogeneous split has)."""
    if objective == "cost":
        space_def.cost_rates(job)     # a JobError that says so when the cluster has no `economics`
    result = searched if searched is not None else search(job, objective, top)
    pruned_by = (("bound", result.pruned_bound), ("memory", result.pruned_memory), ("limits", result.pruned_limits))
    common = dict(evaluated=result.evaluated, pruned=result.pruned, pruned_by=pruned_by, proof=result.proof)
    if result.best is None:
        smallest = least_memory(job)
        reason = explain(job, result, smallest)
        return Plan(job, objective, "infeasible", None, None, (), result.configurations, result.seconds,
                    (reason.constraint,), smallest, infeasibility=reason, **common)
    best = result.best
    running = space_def.at_cap(job, best.config.power_cap)   # its chips under the plan's power cap, if any
    power = job_power(running.graph, running.partition, best.config.gpus, _busy(best, running.partition))
    status = "evaluated" if result.configurations == 1 else "optimal"
    return Plan(job, objective, status, best, power, result.runners_up, result.configurations, result.seconds,
                binding(best, job, result, power), placement=placement(best, job),
                goodput=job_goodput(job, best.config.gpus), warnings=review(job, best, objective, result.limits),
                **common)


def placement(e: Estimate, job: Job) -> tuple[Placement, ...]:
    """Where each dimension of `e` lands: `comms.place` over the partition's tiers."""
    c = e.config
    tiers = rank_partition(job.partition, c.gpus).tiers
    out = []
    for dim in DIMENSIONS:
        size, stride = getattr(c, dim), c.stride(dim)
        stages = comms.place(size, stride, tiers)
        out.append(Placement(dim, size, stride, tuple(s.tier.name for s in stages), tuple(s.peers for s in stages)))
    return tuple(out)


def _comm_tier(e: Estimate, job: Job, dim: str):
    """The slowest tier that `dim`'s communication crosses (the outermost stage)."""
    c = e.config
    tiers = rank_partition(job.partition, c.gpus).tiers
    if dim == "pp":
        return comms.outermost(c.pp, c.stride("pp"), tiers)
    if dim == "dp":
        stages = comms.place(c.dp * c.cp, min(c.stride("dp"), c.stride("cp")), tiers)
    else:
        stages = comms.place(getattr(c, dim), c.stride(dim), tiers)
    return stages[-1].tier if stages else None


def _config(c) -> str:
    return (f"tp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp} ep={c.ep} vp={c.vp} mb={c.microbatch} "
            f"recompute={c.recompute} zero={c.zero}")


def _rival(rival, chosen) -> str:
    """A configuration the power limit rules out, told apart from the chosen one: a layout that
    differs only in its clock reads "the same layout at full clock", not the plan's own words."""
    clock = " at full clock" if rival.power_cap is None else f" under a power cap of {quantity(rival.power_cap, 'W')}"
    if rival.power_cap == chosen.power_cap:
        clock = ""
    return ("the same layout" if _config(rival) == _config(chosen) else _config(rival)) + clock


def _gb(x: float) -> str:
    return quantity(x, "B")


def _memory_limit(used: float, limit: float, job: Job) -> tuple[str, str]:
    """A memory figure and its limit; the chip's own HBM as its data sheet states it (`80 GB
    (79.6 GiB usable)`, as the plan's memory line prints it), not the driver's MiB in GB."""
    chip = job.partition.node.accelerator
    if limit != chip.hbm_capacity:
        return _gb(used), _gb(limit)
    return memory(used, binary_bytes(chip.hbm_datasheet)), hbm(chip.hbm_datasheet, limit)


def _mw(x: float) -> str:
    return quantity(x, "W")


def _better(r, e: Estimate, result: SearchResult | None) -> str:
    """How much better a configuration a limit excluded would have been."""
    if result is None or result.objective in ("throughput", "time"):
        return f"{percent(1 - r.estimate.step_time / e.step_time)} faster"
    return f"better for {result.objective} ({percent(abs(1 - r.value / result.value))})"


def binding(e: Estimate, job: Job, result: SearchResult | None = None, power: Power | None = None) -> tuple[str, ...]:
    """What limits the chosen configuration: memory (headroom, or faster configurations it
    excludes), the link tier of the largest exposed communication, the pipeline bubble,
    recomputation, and the job's power limit."""
    out = []
    lim = result.limits if result is not None and result.limits is not None else space_def.limits(job)
    step = e.step_time
    rejected = result.rejected if result is not None else ()
    by_memory = [r for r in rejected if r.limit.target == "memory"]
    if by_memory:
        r = by_memory[0]
        used, limit = _memory_limit(r.estimate.memory.total, lim.memory, job)
        out.append(f"memory: {_config(r.estimate.config)} would be {_better(r, e, result)} "
                   f"but needs {used} per GPU, over its limit of {limit}")
    elif e.memory.total > 0.9 * lim.memory:
        used, limit = _memory_limit(e.memory.total, lim.memory, job)
        out.append(f"memory: {used} of the {limit} per GPU limit "
                   f"({percent(e.memory.total / lim.memory)})")
    b = e.breakdown
    comm = {"tp": b.tp, "cp": b.cp, "ep": b.ep, "pp": b.pp, "dp": b.dp}
    dim, seconds = max(comm.items(), key=lambda kv: kv[1])
    if seconds > 0.01 * step:
        tier = _comm_tier(e, job, dim)
        where = f" on {tier.name} (level {tier.level}, {tier.kind})" if tier is not None else ""
        out.append(f"link: {dim} communication, {percent(seconds / step)} of the step{where}")
    if b.bubble > 0.05 * step:
        c = e.config
        out.append(f"bubble: {percent(b.bubble / step)} of the step (pp={c.pp}, vp={c.vp}, {c.microbatches} micro-batches)")
    if b.recompute > 0.05 * step:
        out.append(f"recompute: {percent(b.recompute / step)} of the step ({e.config.recompute})")
    if b.host > 0:
        out.append(f"host: the step is host-bound; the host CPUs finish its kernel launches and network proxy "
                   f"work {duration(b.host)} after the GPUs ({percent(b.host / step)} of the step; model/train/dpu.py)")
    if b.data > 0:
        out.append(f"data: the step is data-bound; the hosts (and DPUs) load its samples {duration(b.data)} after "
                   f"the compute is done ({percent(b.data / step)} of the step)")
    if b.checkpoint > 0.01 * step:
        out.append(f"checkpoint: synchronous saves take {percent(b.checkpoint / step)} of the step")
    if b.step_overhead >= VISIBLE_HOST * step:
        out.append(f"step_overhead: the hosts' fixed work between steps, {duration(b.step_overhead)}, is "
                   f"{percent(b.step_overhead / step)} of the step (the node's `step_overhead`)")
    limit = lim.get("power")
    if limit is not None and power is not None:
        by_power = [r for r in rejected if r.limit.target == "power"]
        line = f"power: {_mw(power.total)} of the {_mw(limit.value)} limit ({percent(power.total / limit.value)})"
        if by_power:
            line += f"; {_rival(by_power[0].estimate.config, e.config)} would be {_better(by_power[0], e, result)} but exceeds it"
        out.append(line)
    for other in rejected:
        if other.limit.target not in ("memory", "power"):
            out.append(f"{other.limit.target}: `{other.limit.target} {other.limit.op}` excludes faster configurations")
            break
    return tuple(out) or ("compute",)
