"""Context parallelism: ring attention over the CP ranks (Megatron-Core/Transformer
Engine `cp_comm_type = p2p`, the default).

Each rank holds seq / cp tokens. Attention runs in cp steps: the rank's own key/value
chunk, then cp - 1 chunks passed around the ring, each step's send overlapped with the
previous chunk's attention. A step takes the longer of the two, so the exchange is
exposed only where it is slower than one chunk's attention. The backward pass sends the
key/value chunk and its gradient (twice the bytes) against 2.5x the forward work.

Causal balance: with one contiguous chunk per rank, rank r attends to r + 1/2 chunks'
worth of keys and the last rank, which every ring step waits for, does 2 - 1/cp times
the mean work. Load-balanced chunking (TE, MaxText, torchtitan) gives each rank chunk r
and chunk 2cp - 1 - r of 2cp, so every rank does the mean work, in steps that each pair
half a chunk with a whole one (Megatron-Core `get_batch_on_this_cp_rank`). When the ring
is bound by its links, both layouts take the same time: the exchange paces every step.
"""

from __future__ import annotations

from ...compiler.ir import Tier
from .. import collectives
from ..config import TrainConfig
from ..ops import ACT_BYTES
from ..shape import ModelShape

BACKWARD_WORK = 2.5   # flash attention's backward relative to its forward (workload.backward_factor)


def causal_imbalance(cfg: TrainConfig, window: int = 0) -> float:
    """The busiest CP rank's attention work relative to the mean: the last rank's causal
    pairs, each query p seeing min(p, window) keys (window 0: all of them; 2 - 1/cp then)."""
    if cfg.cp == 1 or cfg.cp_balanced:
        return 1.0
    w = window if 0 < window < cfg.seq else cfg.seq

    def pairs(x: float) -> float:   # causal pairs of the first x queries
        return x * x / 2 if x <= w else w * x - w * w / 2

    chunk = cfg.seq / cfg.cp
    return (pairs(cfg.seq) - pairs(cfg.seq - chunk)) / (pairs(cfg.seq) / cfg.cp)


def kernel_keys(cfg: TrainConfig) -> int:
    """Keys one attention kernel call sees: the whole sequence without CP, else one ring
    step's chunk of seq / cp (load-balanced steps pair a rank's whole chunk with half of
    another's, queries or keys: as many tiles per call as a seq / cp square's causal half)."""
    return max(1, int(cfg.seq / cfg.cp))


def kv_chunk_bytes(shape: ModelShape, cfg: TrainConfig) -> float:
    """Bytes of the key and value chunk one GPU passes on per ring step (its TP share of
    the KV heads: at least one head each)."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    kv_heads = max(1.0, shape.kv_heads / cfg.tp)
    return tokens * kv_heads * (shape.qk_dim + shape.head_dim) * ACT_BYTES


def ring_exposed(shape: ModelShape, cfg: TrainConfig, tiers: tuple[Tier, ...], attention: float) -> float:
    """Seconds of the ring exchange not hidden by attention, forward and backward, for one
    layer and micro-batch (`attention`: this rank's forward attention time, the busiest
    rank's when unbalanced)."""
    if cfg.cp == 1:
        return 0.0
    # every step waits for the slowest hop of the ring (model/network/placement.py hop_rate)
    send = collectives.ring_send(kv_chunk_bytes(shape, cfg), cfg.cp, cfg.stride("cp"), tiers)
    step = attention / cfg.cp   # balanced: each of the cp steps does the mean share
    if not cfg.cp_balanced:     # contiguous: the busiest rank computes a full chunk pair every remote step
        step = attention / (cfg.cp - 0.5)
    forward = (cfg.cp - 1) * max(send - step, 0.0)
    backward = (cfg.cp - 1) * max(2 * send - BACKWARD_WORK * step, 0.0)
    return forward + backward
