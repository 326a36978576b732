"""Memory at every choice of a grid without building each configuration: what a search asks of
every layout (model/train/memory.py's arithmetic, in the same order, so the totals are equal
to the last bit)."""

from __future__ import annotations

from collections.abc import Iterator

from ...compiler.ir import Accelerator
from ..config import TrainConfig
from ..shape import ModelShape
from .memory import (_binding, _flights, _kept, _logits_bytes, _state_total, _tokens, _total, gathered_bytes,
                     model_states, outside_allocator)


def memory_grid(shape: ModelShape, cfg: TrainConfig, recomputes, zeros, vps,
                microbatch: int | None = None, chip: Accelerator | None = None) -> dict[tuple[str, int, int], float]:
    """`memory(shape, cfg', chip).total` for every cfg' that is `cfg` with a (recompute, zero, vp)
    of the grid (and the micro-batch `microbatch`, if given), keyed (recompute, zero, vp):
    each part is computed once for the choices it depends on, without building cfg' (the
    same arithmetic in the same order, so the totals are equal to the last bit)."""
    mb = cfg.microbatch if microbatch is None else microbatch
    tokens = _tokens(cfg, mb)
    flights = _flights(cfg, vps, mb)
    layers = [(r, _kept(shape, cfg, r)) for r in recomputes]
    logits = _logits_bytes(shape, cfg, tokens)
    outside = outside_allocator(cfg, chip)
    out = {}
    for z in zeros:
        state, gathered = _state_total(shape, cfg, z), gathered_bytes(shape, cfg, z)
        for r, kept in layers:
            for v, flight in zip(vps, flights):
                out[r, z, v] = _total(cfg, state, *_binding(shape, cfg, kept, tokens, flight, logits)[0], gathered, outside)
    return out


def least_memory_by_microbatch(shape: ModelShape, cfg: TrainConfig, recompute: str, zero: int, vps,
                               microbatches, chip: Accelerator | None = None) -> Iterator[float]:
    """For each of `microbatches` in turn, the least over `vps` of `memory_grid(shape, cfg,
    (recompute,), (zero,), vps, microbatch, chip)` (equal to the last bit), what does not depend on
    the micro-batch computed once: a search asks it of every micro-batch of every layout."""
    least = _least_at(shape, cfg, recompute, zero, vps, chip)
    return map(least, microbatches)


def fitting_microbatches(shape: ModelShape, cfg: TrainConfig, recompute: str, zero: int, vps,
                         microbatches, limit: float, chip: Accelerator | None = None) -> int:
    """How many of `microbatches` (ascending) fit in `limit` bytes at their least memory
    (`least_memory_by_microbatch`'s values <= limit). Memory never grows as the micro-batch
    shrinks, so those that fit lead the list: the largest is tried first (every one fits,
    the usual case), then the edge is bisected, a few micro-batches computed instead of all."""
    least = _least_at(shape, cfg, recompute, zero, vps, chip)
    lo, hi = 0, len(microbatches) - 1   # the first `lo` fit; the one at `hi` does not
    if hi < 0 or least(microbatches[hi]) <= limit:
        return hi + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if least(microbatches[mid]) <= limit:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _least_at(shape: ModelShape, cfg: TrainConfig, recompute: str, zero: int, vps, chip: Accelerator | None):
    """micro-batch -> the least memory over `vps` at it, what does not depend on the micro-batch
    computed once."""
    state, gathered = _state_total(shape, cfg, zero), gathered_bytes(shape, cfg, zero)
    kept = _kept(shape, cfg, recompute)
    outside = outside_allocator(cfg, chip)

    def least(mb: int) -> float:
        tokens = _tokens(cfg, mb)
        logits = _logits_bytes(shape, cfg, tokens)
        return min([_total(cfg, state, *_binding(shape, cfg, kept, tokens, flight, logits)[0], gathered, outside)
                    for flight in _flights(cfg, vps, mb)])
    return least


def least_memory_by_zero(shape: ModelShape, cfg: TrainConfig, recompute: str, zeros, vps,
                         microbatch: int, chip: Accelerator | None = None) -> list[float]:
    """For each of `zeros` in turn, `least_memory_by_microbatch(shape, cfg, recompute, zero, vps,
    [microbatch], chip)`'s one value (equal to the last bit), the activations computed once: the
    ZeRO stage changes the model state and ZeRO-3's gathered layers alone."""
    tokens = _tokens(cfg, microbatch)
    kept = _kept(shape, cfg, recompute)
    logits = _logits_bytes(shape, cfg, tokens)
    held = [_binding(shape, cfg, kept, tokens, flight, logits)[0] for flight in _flights(cfg, vps, microbatch)]
    outside = outside_allocator(cfg, chip)
    # (Memory.total's order of addition: weights + grads + optimizer)
    states = [weights + grads + optimizer for weights, grads, optimizer in model_states(shape, cfg, zeros)]
    out = []
    for z, state in zip(zeros, states):
        gathered = gathered_bytes(shape, cfg, z)
        out.append(min(_total(cfg, state, *parts, gathered, outside) for parts in held))
    return out
