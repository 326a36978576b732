"""The operations one GPU runs for one micro-batch of one layer: GEMMs with their
shapes, attention, and memory-bound elementwise work, split by TP/SP/CP/EP."""

from __future__ import annotations

import attrs

from ..compiler.formats import family
from .config import TrainConfig
from .shape import ModelShape, attended_keys

ACT_BYTES = 2  # bf16 activations; fp8 runs keep activations in bf16 between GEMMs


@attrs.frozen
class Op:
    name: str
    kind: str             # gemm | attention | elementwise
    flops: float
    bytes: float          # HBM traffic
    m: int = 0
    n: int = 0
    k: int = 0
    count: int = 1        # identical GEMMs (grouped experts)
    tensor: float = 0.0   # bytes of one activation tensor of an elementwise chain (L2 residency)


def gemm(name: str, m: float, n: float, k: float, count: int = 1) -> Op:
    m, n, k = max(1, int(m)), max(1, int(n)), max(1, int(k))
    traffic = ACT_BYTES * (m * k + k * n + m * n) * count
    return Op(name, "gemm", 2.0 * m * n * k * count, traffic, m, n, k, count)


def elementwise(name: str, bytes_: float, tensor: float = 0.0) -> Op:
    return Op(name, "elementwise", 0.0, bytes_, tensor=tensor)


def layer_forward(shape: ModelShape, cfg: TrainConfig, moe: bool, local: bool = False) -> tuple[Op, ...]:
    """One layer's forward ops on one GPU for one micro-batch; `local`: a sliding-window layer."""
    t = cfg.tp
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    h, d, a, kv = shape.hidden, shape.head_dim, shape.heads, shape.kv_heads
    mlp = _moe_mlp(shape, cfg, tokens) if moe else _dense_mlp(shape, cfg, tokens, shape.ffn)
    qkv = gemm("qkv", tokens, (a + 2 * kv) * d / t, h)
    if shape.parallel_block and not moe:
        # GPT-J / PaLM: attention and MLP read the same normed input, so the QKV and MLP-up
        # projections run as one GEMM of their summed width (PaLM, Chowdhery et al. 2022, Sec 2)
        up = mlp.pop(0)
        qkv = gemm("qkv + mlp up", tokens, qkv.n + up.n, h)
    ops = [qkv, _attention(shape, cfg, tokens, local), gemm("attention out", tokens, h, a * d / t), *mlp]
    ops.append(_elementwise(shape, cfg, tokens, moe))
    return tuple(ops)


def _attention(shape: ModelShape, cfg: TrainConfig, tokens: float, local: bool = False) -> Op:
    """Scores and values: flash kernels skip the masked half (and, in a sliding-window layer,
    the tiles outside the window); unfused ones write s x s whatever the mask."""
    heads = shape.heads / cfg.tp
    flops = 4.0 * tokens * cfg.seq * heads * shape.head_dim
    if cfg.behaviour("attention") == "flash":
        keys = attended_keys(cfg.seq, shape.window) if local else cfg.seq
        traffic = ACT_BYTES * tokens * heads * shape.head_dim * 4
        # n: the keys one kernel call sees (the rank's chunk: ring attention over CP
        # ranks runs one call per chunk pair; a window bounds it)
        seen = min(cfg.seq / cfg.cp, shape.window) if local else cfg.seq / cfg.cp
        return Op("attention", "attention", flops / 2 * keys / cfg.seq, traffic, 0, max(1, int(seen)), shape.head_dim)
    # Unfused (Megatron-LM 2021-22): QK^T writes the scores; the fused scale-mask-softmax
    # reads them and writes probabilities; dropout reads those and writes its output and
    # a 1-byte mask; AV reads the dropped probabilities.
    scores = tokens * cfg.seq * heads
    return Op("attention", "attention", flops, scores * (ACT_BYTES * 6 + 1), cfg.seq, cfg.seq, shape.head_dim)


def _dense_mlp(shape: ModelShape, cfg: TrainConfig, tokens: float, ffn: int) -> list[Op]:
    up = (shape.mlp_matrices - 1) * ffn / cfg.tp
    return [gemm("mlp up", tokens, up, shape.hidden), gemm("mlp down", tokens, shape.hidden, ffn / cfg.tp)]


def moe_tokens(cfg: TrainConfig) -> float:
    """Tokens one GPU routes per micro-batch. Experts are not tensor-parallel (Megatron's
    MoE parallel folding, expert TP = 1): the TP ranks' sequence shards route separately."""
    return cfg.microbatch * cfg.seq / cfg.cp / cfg.tp


def _moe_mlp(shape: ModelShape, cfg: TrainConfig, tokens: float) -> list[Op]:
    """Routed experts as grouped GEMMs (tokens spread evenly), shared experts as a dense MLP."""
    local_experts = max(1, shape.routed // cfg.ep)
    routed = moe_tokens(cfg) * shape.top_k
    per_expert = routed / local_experts
    up = (shape.mlp_matrices - 1) * shape.expert_ffn
    ops = [gemm("router", tokens, shape.routed, shape.hidden),
           # softmax and top-k over the experts (fp32), then permute tokens into expert
           # order and back (read and write each routed copy twice)
           elementwise("routing", tokens * shape.routed * 4 * 3 + routed * shape.hidden * ACT_BYTES * 4),
           gemm("experts up", per_expert, up, shape.hidden, local_experts),
           gemm("experts down", per_expert, shape.hidden, shape.expert_ffn, local_experts)]
    if shape.shared:
        ops += _dense_mlp(shape, cfg, tokens, shape.shared * shape.expert_ffn)
    return ops


def _elementwise(shape: ModelShape, cfg: TrainConfig, tokens: float, moe: bool) -> Op:
    """Norms, residual adds, activation, dropout, rotary: HBM traffic per token (the
    parts in `elementwise_parts`)."""
    per_token = sum(elementwise_parts(shape, cfg, moe).values())
    tensor = ACT_BYTES * tokens * shape.hidden / (cfg.tp if cfg.sp and cfg.tp > 1 else 1)
    return elementwise("elementwise", tokens * per_token, tensor)


def elementwise_parts(shape: ModelShape, cfg: TrainConfig, moe: bool) -> dict[str, float]:
    """HBM bytes per token of a layer's elementwise work, by what it belongs to.

    Norm and residual work is replicated across TP ranks unless sequence parallelism
    splits it; the activation function's work is split by TP. Unfused stacks read and
    write each intermediate separately (about twice the traffic).
    """
    h = shape.hidden
    # two norms (read and write h each) and two fused bias-dropout-residual adds (read two
    # h-vectors, write one, and a 1-byte mask of h/2 elements): 11 h elements per token
    norms, residual = 2 * (2 * h) * _norm_share(shape), 2 * (3.5 * h)
    if cfg.sp and cfg.tp > 1:
        norms, residual = norms / cfg.tp, residual / cfg.tp
    ffn = shape.top_k * shape.expert_ffn if moe else shape.ffn
    unfused = 1 if cfg.behaviour("fused") else 2
    parts = {"norm": norms, "residual": residual,
             "activation": (shape.mlp_matrices * ffn) / cfg.tp,     # read gate/up, write the product
             "rotary": 2 * (shape.heads + shape.kv_heads) * shape.head_dim / cfg.tp}
    parts = {k: ACT_BYTES * v * unfused for k, v in parts.items()}
    if family(cfg.precision) in ("fp8", "fp6", "fp4"):
        parts["cast"] = ACT_BYTES * 1.5 * (3 * h + ffn / cfg.tp)  # casts of GEMM inputs with amax
    return parts


def _norm_share(shape: ModelShape) -> float:
    """Norms per layer relative to a sequential block's two: a parallel block has one."""
    return 0.5 if shape.parallel_block else 1.0


def logits_forward(shape: ModelShape, cfg: TrainConfig) -> tuple[Op, ...]:
    """Output projection and cross-entropy on the last pipeline stage."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    vocab = shape.vocab / cfg.tp
    return (gemm("logits", tokens, vocab, shape.hidden),
            elementwise("cross entropy", tokens * vocab * 4 * 3))


def backward_factor(op: Op) -> float:
    """Backward work relative to forward: dgrad + wgrad for GEMMs; flash attention's
    backward recomputes scores (2.5x); elementwise reads and writes gradients (2x)."""
    return {"gemm": 2.0, "attention": 2.5, "elementwise": 2.0}[op.kind]
