"""The configuration of a job that needs the least memory per GPU: what a plan reports when
nothing fits (solver/train/plan.py)."""

from __future__ import annotations

from ...model.config import TrainConfig
from ...model.job import Job
from ...model.train.memory import memory
from ...model.train.step import Estimate, estimate
from . import enumerate as space_def
from .enumerate import RECOMPUTE


def least_memory(job: Job, gpus: int | None = None) -> Estimate | None:
    """The valid configuration that needs the least memory per GPU (of those on `gpus` GPUs,
    when given), found with the same monotonicity as the search (more recompute, a higher ZeRO
    stage and a smaller micro-batch never need more), over every variant of the choices the job
    asks to search."""
    best_cfg, best_memory = None, float("inf")
    for space in space_def.variant_spaces(job, space_def.space(job)):
        frugal = max(space.recomputes, key=RECOMPUTE.index)
        top_zero = max(space.zeros)
        for tp, pp, cp, ep, dp in space_def.branches(job, space):
            if gpus is not None and tp * pp * cp * dp != gpus:
                continue
            order = space_def.orders(tp, pp, dp, cp, ep)[0]
            all_vps = space_def.vp_candidates(job, pp)
            for mb, vps in space_def.inner_choices(job, pp, dp):
                def need(v: int) -> tuple[float, TrainConfig]:
                    cfg = space_def.make_config(job, space, tp, pp, dp, cp, ep, mb, v, frugal, top_zero, order)
                    return memory(job.shape, cfg, job.partition.node.accelerator).total, cfg
                if min(need(v)[0] for v in all_vps) >= best_memory:
                    break       # no larger micro-batch needs less
                amount, cfg = min((need(v) for v in vps), key=lambda pair: pair[0])
                if amount < best_memory:
                    best_cfg, best_memory = cfg, amount
    return None if best_cfg is None else estimate(job.shape, best_cfg, job.partition)
