"""Multi-head latent attention (DeepSeek-V2 Sec 2.1, V3 Sec 2.1) in training: the query
through a q_rank latent, keys and values through one kv_rank latent beside a shared
rotary key, expanded per head (no weight absorption in training: the up-projections run
as GEMMs). The down-projections are replicated over TP ranks (Megatron-Core's MLA keeps
`linear_q_down_proj` and `linear_kv_down_proj` unsplit); the up-projections and the
output are split by heads."""

from __future__ import annotations

from ..config import TrainConfig
from ..ops import Op, gemm
from ..shape import ModelShape


def projection_ops(shape: ModelShape, cfg: TrainConfig, tokens: float) -> list[Op]:
    """The projections before attention, on one GPU for one micro-batch."""
    t, h, a = cfg.tp, shape.hidden, shape.heads
    ops = []
    if shape.q_rank:
        ops += [gemm("q down", tokens, shape.q_rank, h), gemm("q up", tokens, a * shape.qk_dim / t, shape.q_rank)]
    else:
        ops.append(gemm("q", tokens, a * shape.qk_dim / t, h))
    ops += [gemm("kv down", tokens, shape.kv_rank + shape.rope_dim, h),
            gemm("kv up", tokens, a * 2 * shape.head_dim / t, shape.kv_rank)]
    return ops


def activation_elements(shape: ModelShape, cfg: TrainConfig) -> float:
    """Elements per token one layer keeps for the backward of its attention projections
    and core: the latents (replicated), then Q, K (qk_dim), V and the output (per head)."""
    latents = shape.q_rank + shape.kv_rank + shape.rope_dim
    per_head = 2 * shape.qk_dim + 2 * shape.head_dim
    return latents + shape.heads * per_head / cfg.tp
