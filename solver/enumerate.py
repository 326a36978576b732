"""The exhaustive reference enumerator: every valid configuration of a training job.

Slow on purpose and obviously correct: the oracle that tests compare the fast search
against. Valid means: the parallel sizes multiply to the GPUs used, divide what they
split (heads, layers, experts, batch, sequence), respect the pinned values, and the
configuration fits in HBM.
"""

from __future__ import annotations

import itertools
from typing import Iterator

from ..compiler.model.config import TrainConfig
from ..compiler.model.job import Job
from ..compiler.model.step import Estimate, estimate

RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (1, 3)
MAX_MICROBATCH = 16
MAX_VP = 8


def divisors(n: int, limit: int | None = None) -> list[int]:
    return [d for d in range(1, (limit or n) + 1) if n % d == 0]


def powers_of_two(limit: int) -> list[int]:
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def data_parallel(batch: int, most: int) -> int:
    """The most replicas (at most `most`) that split the batch evenly; GPUs beyond stay idle."""
    return next((d for d in range(most, 0, -1) if batch % d == 0), 0)


def _choices(job: Job, key: str, default: list) -> list:
    return [job.pinned[key]] if key in job.pinned else default


def configurations(job: Job) -> Iterator[TrainConfig]:
    """Every configuration that is valid for `job` (memory not yet checked)."""
    shape, gpus = job.shape, job.gpus
    tps = _choices(job, "tp", [t for t in powers_of_two(min(64, gpus)) if shape.heads % t == 0
                               and (shape.kv_heads % t == 0 or t % shape.kv_heads == 0)])
    pps = _choices(job, "pp", [p for p in divisors(shape.layers) if p <= gpus])
    cps = _choices(job, "cp", [c for c in powers_of_two(min(32, gpus)) if job.seq % (2 * c) == 0 or c == 1])
    eps = _choices(job, "ep", divisors(shape.routed) if shape.is_moe else [1])
    for tp, pp, cp in itertools.product(tps, pps, cps):
        dp = job.pinned.get("dp") or data_parallel(job.batch, gpus // (tp * pp * cp))
        if dp and tp * pp * cp * dp <= gpus:
            yield from _inner(job, tp, pp, cp, dp, eps)


def _inner(job: Job, tp: int, pp: int, cp: int, dp: int, eps: list[int]) -> Iterator[TrainConfig]:
    shape = job.shape
    if job.batch % dp:
        return
    per_replica = job.batch // dp
    mbs = _choices(job, "microbatch", divisors(per_replica, min(per_replica, MAX_MICROBATCH)))
    vps = _choices(job, "vp", [1] + [v for v in divisors(shape.layers // pp, MAX_VP) if v > 1 and pp > 1])
    for ep, mb, vp, recompute, zero in itertools.product(
            eps, mbs, vps, _choices(job, "recompute", list(RECOMPUTE)), _choices(job, "zero", list(ZERO_STAGES))):
        if (dp * cp) % ep or (vp > 1 and (per_replica // mb) % pp):
            continue
        yield TrainConfig(batch=job.batch, seq=job.seq, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, microbatch=mb,
                          recompute=recompute, sp=bool(job.pinned.get("sp", tp > 1)), zero=zero,
                          precision=job.precision, stack=job.stack)


def evaluate_all(job: Job) -> Iterator[Estimate]:
    for cfg in configurations(job):
        yield estimate(job.shape, cfg, job.partition)


def best(job: Job, key=lambda e: e.step_time) -> tuple[Estimate | None, int]:
    """The fastest configuration that fits, and how many configurations were evaluated."""
    chosen, count = None, 0
    for candidate in evaluate_all(job):
        count += 1
        if candidate.fits and (chosen is None or key(candidate) < key(chosen)):
            chosen = candidate
    return chosen, count
