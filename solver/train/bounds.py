"""Lower bounds on the objective for the exact search (solver/train/search.py): from a lower
bound on the step time and on its computing time to a lower bound on the objective, for
every objective, and the facts about the cost model they rest on (listed in search.py's
docstring, checked by tests/solver/train/test_bounds.py)."""

from __future__ import annotations

import functools

from ...model.job import Job
from ...model.power import job_power
from ...model.shape import ModelShape
from ...model.train.step import Estimate
from . import enumerate as space_def

SAFETY = 1 - 1e-12   # bounds are scaled down by this, so rounding never makes one exceed a true value


def fixed_time(e: Estimate) -> float:
    """Compute + recompute + TP: what every configuration sharing e's (tp, pp, cp, ep, dp,
    micro-batch, recompute) spends, whatever its ZeRO stage, vp or placement."""
    b = e.breakdown
    return b.compute + b.recompute + b.tp


def bubble_share(work: float, pp: int, vp: int, microbatches: int, head: float = 0.0) -> float:
    """A lower bound on the bubble: (pp - 1) / vp of one micro-batch's share of `work`, less
    `head`, at least the output layer's seconds per micro-batch (the last stage's, outside
    the fill and drain: model/train/step.py)."""
    return (pp - 1) / vp * max(work / microbatches - head, 0.0) if pp > 1 else 0.0


def step_bound(fixed: float, optimizer: float, pp: int, vp: int, microbatches: int, head: float = 0.0) -> float:
    """A lower bound on the step's GPU time: the fixed work, the optimizer and the bubble's share
    of it (`head`: see bubble_share); `ObjectiveBound` adds the node's fixed per-step host time."""
    return (fixed + optimizer + bubble_share(fixed, pp, vp, microbatches, head)) * SAFETY


class JobPower:
    """Job power as a function of the GPU count and the busy share: `job_power`, read as
    P0 + (P1 - P0) x busy where it is affine (it is: activity is linear in busy)."""

    def __init__(self, job: Job) -> None:
        self.job, self.table = job, {}

    def ends(self, gpus: int) -> tuple[float, float, bool]:
        if gpus not in self.table:
            job = self.job
            p0, half, p1 = (job_power(job.graph, job.partition, gpus, b).total for b in (0.0, 0.5, 1.0))
            self.table[gpus] = (p0, p1, abs(half - (p0 + p1) / 2) <= 1e-9 * max(abs(p0), abs(p1), 1.0))
        return self.table[gpus]

    def __call__(self, e: Estimate) -> float:
        p0, p1, affine = self.ends(e.config.gpus)
        if not affine:
            return space_def.power_of(self.job, e)
        return p0 + (p1 - p0) * space_def.busy(e, self.job.partition)

    def floor(self, gpus: int) -> float:
        p0, p1, _ = self.ends(gpus)
        return min(p0, p1)

    def least_step(self, gpus: int, step: float, work: float, limit: float) -> float:
        """A lower bound on the step of a configuration on `gpus` GPUs that draws at most `limit`
        W, whose step is at least `step` s with at least `work` s computing: power is
        P0 + (P1 - P0) x busy with busy = work / step, so within the limit busy is at most
        (limit - P0) / (P1 - P0), and the step at least work over that share (a configuration
        that computes too much of its step draws too much; within a limit, slower is cooler)."""
        p0, p1, affine = self.ends(gpus)
        if not affine or p1 <= p0 or limit >= p1:
            return step
        if limit < p0:
            return float("inf")
        share = (limit - p0) / (p1 - p0)
        if share <= 0:
            return float("inf") if work > 0 else step
        return max(step, work / share * SAFETY)

    def energy_bound(self, gpus: int, step: float, work: float) -> float:
        """Joules per step at least, for a step of at least `step` s with at least `work`
        s of computing (busy = work / step, capped at 1)."""
        p0, p1, affine = self.ends(gpus)
        if not affine or p1 < p0:
            return min(p0, p1) * step * SAFETY
        return (p0 * step + (p1 - p0) * min(step, work)) * SAFETY


class ObjectiveBound:
    """From bounds on a configuration's step to a bound on its objective value (lower is
    better), for each objective the search minimizes."""

    def __init__(self, job: Job, objective: str, power: JobPower, limit: float | None = None) -> None:
        self.job, self.objective, self.power, self.limit = job, objective, power, limit
        self.tokens = job.batch * job.seq
        # the hosts' fixed work between two steps (the node's `step_overhead`): every
        # configuration's step carries it, beside the GPU work the search's step bounds count
        self.fixed = job.partition.node.step_overhead * SAFETY

    def __call__(self, gpus: int, step: float, work: float, flops_seconds: float) -> float:
        """A lower bound on the objective of a configuration on `gpus` GPUs whose step is at
        least `step` s of GPU work and the node's fixed per-step time (`fixed`), of which at least
        `work` s compute (compute + recompute + optimizer); `flops_seconds` is the step's model
        FLOPs over the GPUs' peak (MFU x step time x GPUs: fixed by the job and the chip,
        whatever the configuration)."""
        objective = self.objective
        step += self.fixed
        if self.limit is not None:   # the job's power limit: only configurations within it count
            step = self.power.least_step(gpus, step, work, self.limit)
            if step == float("inf"):
                return step
        if objective in ("throughput", "time"):
            return step
        if objective == "mfu":
            return -flops_seconds / gpus / step if step > 0 else float("-inf")
        if objective == "goodput":  # the share depends on the GPU count alone
            share = space_def.goodput_share(self.job, gpus)
            return -self.tokens / step * share if step > 0 else float("-inf")
        if objective == "cost":   # USD per second at load over the step, USD per joule over its energy
            per_second, per_joule = space_def.cost_rates(self.job)
            return (per_second * step * SAFETY + per_joule * self.power.energy_bound(gpus, step, work)) / self.tokens
        return self.power.energy_bound(gpus, step, work) / self.tokens


def compute_monotone(job: Job, tp: int, cp: int, ep: int, microbatches) -> bool:
    """Whether the search may take compute per step not to grow with the micro-batch: for
    dense layers always (bigger GEMMs are never slower per token); for MoE layers only
    where every micro-batch routes whole tokens to every local expert, even split over the
    TP ranks (tokens x top_k divisible by the local experts), so no grouped GEMM rounds
    its rows, and dropless (a capacity factor pads each expert's rows to whole M tiles, a
    cost per token that rises and falls with the micro-batch: model/train/moe.py)."""
    if not job.shape.is_moe:   # (asked for every layout: no key to build for a dense model)
        return True
    return _compute_monotone(job.shape, job.seq, tp, cp, ep, tuple(microbatches))


@functools.lru_cache(maxsize=16384)   # asked for every layout of a search
def _compute_monotone(shape: ModelShape, seq: int, tp: int, cp: int, ep: int, microbatches: tuple[int, ...]) -> bool:
    if not shape.is_moe:
        return True
    if shape.capacity_factor:
        return False
    if shape.routed % ep:
        return False
    local, split = shape.routed // ep, cp * tp
    for mb in microbatches:
        if (mb * seq) % split or (mb * seq // split * shape.top_k) % local:
            return False
    return True
