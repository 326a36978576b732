"""What the power GP (solver/power/program.py) reads from a planned configuration: the step's
shares, the second point that checks them, the power per GPU and of the rest of the
cluster, and the job's power budget; the model, evaluated in plain numbers."""

from __future__ import annotations

import bisect
import math

import attrs

from ...model import dvfs
from ...model.compute import measured
from ...model.job import Job
from ...compiler.ir import Accelerator
from ...model.power import beside_accelerators, busy_of, gpu_power
from ...model.train.step import Estimate, estimate
from ..train import enumerate as space_def
from ...dsl.records import frozen

F_MIN = dvfs.DEFAULT_FLOOR  # lowest clock ratio when the chip declares no `power.min_clock`


@frozen
class PowerInputs:
    """Everything the GP needs, as plain numbers (W, tokens/s, GPUs)."""

    name: str
    tokens_per_s: float          # T0 at N0 GPUs, full clock
    gpus: float                  # N0
    min_gpus: float              # n_min: one replica
    max_gpus: float              # n_max
    shares: tuple[float, float, float, float]   # a1..a4 of the step (see the module docstring)
    p_idle: float                # W per GPU, idle
    p_full: float                # W per GPU at full clock, this job's activity
    p_rest: float                # W per GPU, the rest of the cluster with the GPUs idle
    pue: float
    gamma: float = 1.0           # throughput ~ n^gamma (monomial model only)
    f_min: float = F_MIN
    gpus_per_unit: int = 1       # GPUs per scale-up unit or node (reporting only)
    tokens: float | None = None  # tokens to train (for time to train)
    gamma_source: str = "given"
    fit_error: float | None = None   # step model at the second point vs its estimate, relative
    exponent: float = dvfs.DEFAULT_EXPONENT  # the chip's DVFS curve: dynamic power ~ f^exponent
    # W of the rest per W a GPU draws above idle: the host parts follow the GPUs' heat
    # (compiler/host_load.py), so per-GPU power is p_idle + p_rest + (1 + rest_slope) x (gpu - p_idle)
    rest_slope: float = 0.0
    # The GPU counts the plan may run: whole data-parallel replicas of `replica_gpus` GPUs,
    # `counts` of them (ascending; empty: every whole number from `min_gpus` to `max_gpus`).
    replica_gpus: float = 0.0    # 0: `min_gpus`
    counts: tuple[int, ...] = ()

    @classmethod
    def from_plan(cls, job: Job, best: Estimate, f_min: float | None = None) -> PowerInputs:
        """From a job and its planned estimate (`plan(job).best`). The clock ratio f is relative
        to the plan's own clock; its floor is the chip's DVFS floor (`f_min` overrides), raised to the
        clock at which this job draws the chip's `min_cap`."""
        cfg, partition, graph = best.config, job.partition, job.graph
        chip = partition.node.accelerator
        idle_rest, busy_rest = beside_accelerators(graph)
        rest = idle_rest / graph.gpus if graph.gpus else 0.0
        heat = dvfs.top(chip) - chip.idle
        slope = (busy_rest - idle_rest) / graph.gpus / heat if graph.gpus and heat > 0 else 0.0
        if f_min is None:
            planned = dvfs.sustained(chip, measured(chip, cfg.precision))
            f_min = min(1.0, dvfs.floor(chip) / planned) if planned > 0 else dvfs.floor(chip)
        replica, counts = cfg.tp * cfg.pp * cfg.cp, replica_counts(job, best)
        p_full = gpu_power(partition, busy_share(best, chip))
        if chip.min_cap:  # the firmware refuses a lower cap: no clock below the one this job draws it at
            f_min = max(f_min, dvfs.clock_at(chip.idle, p_full, chip.min_cap, dvfs.exponent(chip)))
        inputs = cls(name=job.name, tokens_per_s=best.tokens_per_s, gpus=float(cfg.gpus),
                     min_gpus=float(replica * counts[0]), max_gpus=float(cfg.gpus), shares=step_shares(best),
                     p_idle=chip.idle, p_full=p_full, p_rest=rest, pue=graph.pue,
                     f_min=f_min, gpus_per_unit=partition.nodes_per_unit * partition.node.gpus, tokens=job.tokens,
                     exponent=dvfs.exponent(chip), replica_gpus=float(replica), counts=counts, rest_slope=slope)
        second = _second_point(job, best)
        if second is None:
            return attrs.evolve(inputs, gamma_source="gamma = 1: dp cannot be reduced, so no second point")
        n1, t1 = float(second.config.gpus), second.tokens_per_s
        gamma = math.log(best.tokens_per_s / t1) / math.log(cfg.gpus / n1) if t1 > 0 else 1.0
        source = f"fitted from dp {cfg.dp} ({cfg.gpus} GPUs) and dp {second.config.dp} ({second.config.gpus} GPUs)"
        fit_error = inputs.throughput(n1, 1.0) / t1 - 1 if t1 > 0 else None
        return attrs.evolve(inputs, gamma=min(1.0, max(1e-3, gamma)), fit_error=fit_error, gamma_source=source)

    @property
    def alpha(self) -> float:
        """The clock-scaled share of the planned step."""
        return self.shares[0] + self.shares[2]

    # ------------------------------------------------------------ the model, evaluated
    def gpu_watts(self, f: float) -> float:
        return dvfs.power(self.p_idle, self.p_full, f, self.exponent)

    def facility(self, n: float, f: float) -> float:
        return self.pue * n * self.per_gpu(self.gpu_watts(f))

    def per_gpu(self, gpu: float) -> float:
        """IT watts per GPU, the rest included, while a GPU draws `gpu`."""
        return self.p_idle + self.p_rest + (1 + self.rest_slope) * (gpu - self.p_idle)

    def throughput(self, n: float, f: float, clock: str = "step") -> float:
        x = n / self.gpus
        if clock == "monomial":
            return self.tokens_per_s * x ** self.gamma * f ** self.alpha
        a1, a2, a3, a4 = self.shares
        return self.tokens_per_s / (a1 / (x * f) + a2 / x + a3 / f + a4)

    def allowed_gpus(self) -> list[float]:
        """The GPU counts the plan may run, ascending."""
        replica = self.replica_gpus or self.min_gpus
        if self.counts:
            return [replica * k for k in self.counts]
        first, last = round(self.min_gpus / replica), math.floor(self.max_gpus / replica + 1e-9)
        return [replica * k for k in range(max(1, first), max(first, last) + 1)]

    def allowed_near(self, n: float, most: int, side: int) -> list[float]:
        """`allowed_gpus`, whole when at most `most` counts, else the `side` counts on each side
        of `n` (below n, then from n up), without listing the rest (up to 10^5 counts)."""
        if self.counts:
            counts = self.allowed_gpus()
            total, first = len(counts), 0
        else:
            replica = self.replica_gpus or self.min_gpus
            first = max(1, round(self.min_gpus / replica))
            total = max(first, math.floor(self.max_gpus / replica + 1e-9)) - first + 1
            counts = None
        if total <= most:
            return counts if counts is not None else self.allowed_gpus()
        if counts is not None:
            i = bisect.bisect_left(counts, n)
            return counts[max(0, i - side): i + side]
        value = lambda j: replica * (first + j)   # noqa: E731 - the j-th allowed count
        i = min(total, max(0, math.ceil(n / replica) - first))
        while i > 0 and value(i - 1) >= n:       # the first index whose count is at least n, as bisect_left
            i -= 1
        while i < total and value(i) < n:
            i += 1
        return [value(j) for j in range(max(0, i - side), min(total, i + side))]

    def clock_within(self, n: float, budget: float) -> float | None:
        """The highest clock ratio (at most 1) at which `n` GPUs stay within `budget` W
        of facility power; None when even the lowest clock exceeds it."""
        if self.facility(n, self.f_min) > budget * (1 + 1e-12):
            return None
        cap = self.p_idle + (budget / (self.pue * n) - self.p_idle - self.p_rest) / (1 + self.rest_slope)
        return min(1.0, max(self.f_min, dvfs.clock_at(self.p_idle, self.p_full, cap, self.exponent)))

    @property
    def least_power(self) -> float:
        """Facility watts of one replica at the lowest clock: below this nothing runs."""
        return self.facility(self.min_gpus, self.f_min)

    @property
    def full_power(self) -> float:
        return self.facility(self.max_gpus, 1.0)


def busy_share(e: Estimate, chip: Accelerator) -> float:
    """Share of the step at full activity (as `solver.train.plan` attributes power, model/power.py)."""
    return busy_of(e.breakdown, e.step_time, chip)


def step_shares(e: Estimate) -> tuple[float, float, float, float]:
    """(a1, a2, a3, a4): per-micro-batch clocked, per-micro-batch other, fixed clocked,
    fixed other shares of the step (see the module docstring); they sum to 1."""
    b, cfg = e.breakdown, e.config
    if e.step_time <= 0:
        return (1.0, 0.0, 0.0, 0.0)
    math_time = b.compute + b.recompute
    comms = b.tp + b.cp + b.ep + b.pp
    bubble_clocked = b.bubble * math_time / (math_time + comms) if math_time + comms > 0 else 0.0
    sharded_optimizer = b.optimizer if cfg.zero >= 1 else 0.0
    parts = [math_time, comms + sharded_optimizer, bubble_clocked]
    parts.append(max(0.0, e.step_time - sum(parts)))
    total = sum(parts)
    return tuple(p / total for p in parts)  # type: ignore[return-value]


def replica_counts(job: Job, best: Estimate) -> tuple[int, ...]:
    """The data-parallel replica counts a power plan may run the planned layout with,
    ascending, up to the planned dp: those the parallelism allows (the batch splits into
    whole micro-batches of the planned size, interleaving still fills whole rounds, expert
    groups fold over tp x cp x dp, shard groups tile dp x cp) and whose configuration still
    fits the memory limit and the node's DRAM (fewer replicas shard ZeRO state over fewer
    GPUs). A pinned dp is the only count; the planned dp is always one."""
    cfg = best.config
    if job.pinned.get("dp") is not None:
        return (cfg.dp,)
    lim = space_def.limits(job)
    count = job.pinned.get("microbatches")
    gpu_limits = [limit for limit in lim.items if limit.target == "gpus"]
    out = []
    for dp in space_def.divisors(job.batch, cfg.dp):
        per_replica, gpus = job.batch // dp, cfg.gpus // cfg.dp * dp
        if (per_replica % cfg.microbatch or (cfg.tp * cfg.cp * dp) % cfg.ep or (dp * cfg.cp) % max(1, cfg.shard)
                or not space_def.vp_valid(cfg.virtual_stages, cfg.pp, per_replica // cfg.microbatch)
                or (count is not None and per_replica // cfg.microbatch != int(count))
                or not all(limit.holds(gpus) for limit in gpu_limits)):
            continue
        if dp == cfg.dp:
            out.append(dp)
            continue
        fewer = estimate(job.shape, attrs.evolve(cfg, dp=dp), job.partition)
        if fewer.memory.total <= lim.memory and fewer.host_fits:
            out.append(dp)
    return tuple(out) if cfg.dp in out else (*out, cfg.dp)


def _second_point(job: Job, best: Estimate) -> Estimate | None:
    """The same configuration with fewer data-parallel replicas (the next divisor of dp)."""
    cfg = best.config
    fewer = [d for d in range(cfg.dp - 1, 0, -1) if cfg.dp % d == 0 and (d * cfg.cp) % cfg.ep == 0]
    if not fewer:
        return None
    return estimate(job.shape, attrs.evolve(cfg, dp=fewer[0]), job.partition)


def budget_of(job: Job) -> float | None:
    """The job's facility power limit in W: the lowest of its `subject to { power <= X }`, its
    partition's and its cluster's `power.budget` (solver/train/limits.py)."""
    limit = space_def.limits(job).get("power")
    return limit.value if limit is not None and limit.upper else None
