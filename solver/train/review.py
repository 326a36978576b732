"""What a reviewer would say about a chosen training configuration, beyond its numbers:
GPUs left idle and why, stages that split the layers unevenly, TP or EP groups crossing
the scale-out fabric, pipelines with fewer micro-batches than stages, memory within 5 %
of the limit, and low MFU with its cause and the fix."""

from __future__ import annotations

import math

import attrs

from ...model import comms
from ...model.job import Job
from ...model.ranks import rank_partition
from ...model.train.step import Estimate
from ...dsl.numbers import duration, number, percent, quantity
from . import enumerate as space_def
from ...dsl.records import frozen

HEADROOM = 0.05       # warn when less than this share of the memory limit is left (unless the job's own limit keeps it)
LOW_MFU = 0.20        # well-tuned LLM pre-training runs at 35-55 % MFU (MODEL.md); below 20 % deserves a cause
BUBBLE_TARGET = 0.10  # the bubble share the low-MFU fix aims for
# The hosts' fixed work between steps (the node's `step_overhead`) is named where it is at least
# this share of the step: below it, it moves MFU by less than a measured run's own noise (5 %:
# solver/calibrate/observe.py NOISE["train"]), so it is no cause an operator could see.
VISIBLE_HOST = 0.05


@frozen
class Advice:
    kind: str       # idle-gpus | uneven-pipeline | scale-out-tp | scale-out-ep | few-microbatches | memory-headroom | low-mfu
    message: str


def review(job: Job, e: Estimate, objective: str = "throughput", lim: space_def.Limits | None = None) -> tuple[Advice, ...]:
    lim = lim or space_def.limits(job)
    out = [*_idle(job, e, objective), *_uneven(job, e), *_scale_out(job, e), *_few_microbatches(e),
           *_headroom(e, lim), *_low_mfu(job, e)]
    return tuple(out)


def _idle(job: Job, e: Estimate, objective: str):
    c, available = e.config, job.partition.gpus
    if c.gpus >= available:
        return
    why = []
    if job.gpus < available:
        why.append(f"the job's `gpus = {number(job.gpus)}` leaves {number(available - job.gpus)}")
    if c.gpus < job.gpus:
        why.append(fewer_gpus(job, c, objective)[0])
    yield Advice("idle-gpus", f"{number(available - c.gpus)} of {number(available)} GPUs idle ({number(c.gpus)} used): "
                 + "; ".join(why))


def fewer_gpus(job: Job, c, objective: str = "throughput") -> tuple[str, int | None]:
    """Why the plan `c` uses fewer GPUs than the job's `gpus`, and the dp that would fill them
    where one may (None where the batch or a pin rules it out)."""
    replica = c.tp * c.pp * c.cp
    most = job.gpus // replica
    if "dp" in job.pinned:
        return f"dp = {c.dp} is pinned", None
    widest = space_def.data_parallel(job, _space_of(job, c), c.tp, c.pp, c.cp, c.ep)
    if c.dp < widest:
        fill = most if most <= widest and most * replica == job.gpus else None
        return (f"the GPU count is searched: {objective} is best with {c.dp} replicas of tp x pp x cp = "
                f"{replica} GPUs (up to {widest} split the batch of {number(job.batch)})"), fill
    return (f"dp = {c.dp} is the most replicas of tp x pp x cp = {replica} GPUs whose micro-batches "
            f"split the batch of {number(job.batch)} (at most {number(most)} fit)"), None


def _space_of(job: Job, c):
    """The job's space with the searched choices (a shard group among them) as `c` takes them."""
    space = space_def.space(job)
    return attrs.evolve(space, pinned_only={k: getattr(c, k) for k in space.pinned_only})


def _uneven(job: Job, e: Estimate):
    c, layers = e.config, job.shape.layers
    if c.pp > 1 and layers % (c.pp * c.vp):
        stages = c.pp * c.vp
        yield Advice("uneven-pipeline", f"pp x vp = {c.pp} x {c.vp} stages do not split {layers} layers evenly: "
                     f"the largest holds {math.ceil(layers / stages)} layers, the model assumes {number(layers / stages)}")


def _scale_out(job: Job, e: Estimate):
    c = e.config
    tiers = rank_partition(job.partition, c.gpus).tiers
    for dim in ("tp", "ep"):
        size = getattr(c, dim)
        stages = comms.place(size, c.stride(dim), tiers)
        crossing = [s for s in stages if s.tier.scope == "scaleout"]
        if crossing:
            inside = size // math.prod(s.peers for s in crossing)
            yield Advice(f"scale-out-{dim}", f"{dim} = {size} crosses {crossing[0].tier.name} ({crossing[0].tier.kind}, "
                         f"the scale-out fabric): only {inside} of its {size} ranks share a scale-up domain")


def _few_microbatches(e: Estimate):
    c = e.config
    if c.pp > 1 and c.microbatches < c.pp:
        yield Advice("few-microbatches", f"{c.microbatches} micro-batches for {c.pp} pipeline stages: stages wait "
                     f"for work most of the step (the bubble is {percent(e.breakdown.bubble / e.step_time)})")


def _headroom(e: Estimate, lim: space_def.Limits):
    if lim.memory <= lim.hbm * (1 - HEADROOM):   # the job's own memory limit already keeps the margin
        return
    left = 1 - e.memory.total / lim.memory
    if left < HEADROOM:
        yield Advice("memory-headroom", f"memory {quantity(e.memory.total, 'B')} of the {quantity(lim.memory, 'B')} limit "
                     f"per GPU leaves {percent(left)} headroom: allocator fragmentation and NCCL buffers can run it out")


def _low_mfu(job: Job, e: Estimate):
    if e.mfu >= LOW_MFU:
        return
    c, b, step = e.config, e.breakdown, e.step_time
    comm = {"tp": b.tp, "cp": b.cp, "ep": b.ep, "pp": b.pp, "dp": b.dp}
    dim, seconds = max(comm.items(), key=lambda kv: kv[1])
    if c.pp > 1 and b.bubble >= max(seconds, b.recompute):
        # Micro-batches per pipeline that bring the bubble's share down to the target:
        # bubble / (work + bubble) = r with bubble = (pp - 1) / vp / m x work.
        need = math.ceil((c.pp - 1) / c.vp * (1 - BUBBLE_TARGET) / BUBBLE_TARGET)
        replicas = max(1, job.batch // (c.microbatch * need))
        batch = need * c.microbatch * c.dp
        cause = (f"batch {number(job.batch)} is too small for {number(c.gpus)} GPUs: the bubble is {percent(b.bubble / step)} "
                 f"of the step ({c.microbatches} micro-batches on {c.pp} stages)")
        fix = f"use <= {number(replicas * c.tp * c.pp * c.cp)} GPUs or batch >= {number(batch)}"
    elif seconds >= b.recompute:
        cause = f"{dim} communication is {percent(seconds / step)} of the step"
        fix = f"keep {dim} inside the scale-up domain or overlap it (a smaller {dim}, a faster tier)"
    else:
        cause = f"{c.recompute} recompute is {percent(b.recompute / step)} of the step"
        fix = "more memory per GPU (a higher ZeRO stage, more pp) to recompute less"
    host = _host_between_steps(e)
    if host and b.step_overhead >= max(seconds, b.recompute, b.bubble if c.pp > 1 else 0.0):
        cause, fix, host = host[0], host[1], None   # the largest part: the cause itself
    yield Advice("low-mfu", f"MFU {percent(e.mfu)}: {cause}; {fix}" + (f"; and {host[0]}: {host[1]}" if host else ""))


def _host_between_steps(e: Estimate) -> tuple[str, str] | None:
    """The hosts' fixed time between steps as a cause of low MFU, and its fix, where it is at
    least VISIBLE_HOST of the step."""
    fixed = e.breakdown.step_overhead
    if fixed < VISIBLE_HOST * e.step_time:
        return None
    return (f"the hosts' {duration(fixed)} per step (the node's `step_overhead`) is "
            f"{percent(fixed / e.step_time)} of the step",
            "more work per step spreads it (a larger batch), or a shorter host loop between steps "
            "(fewer loss and grad-norm reads that drain the GPU's queue, CUDA graphs, an asynchronous data loader)")
