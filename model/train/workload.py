"""The operations one GPU runs for one micro-batch of one layer: GEMMs with their
shapes, attention, and memory-bound elementwise work, split by TP/SP/CP/EP."""

from __future__ import annotations

from ...compiler.formats import family
from . import context, mla
from . import moe as routed
from ..config import TrainConfig
from ..ops import ACT_BYTES, Op, elementwise, gemm
from ..shape import ModelShape, attended_keys

__all__ = ["ACT_BYTES", "Op", "backward_factor", "layer_forward", "logits_forward", "mixer_ops", "mlp_ops",
           "after_routing_ops",
           "moe_tokens"]
moe_tokens = routed.moe_tokens


def layer_forward(shape: ModelShape, cfg: TrainConfig, moe: bool, local: bool = False) -> tuple[Op, ...]:
    """One layer's forward ops on one GPU for one micro-batch; `local`: a sliding-window layer."""
    mixer, mlp = mixer_ops(shape, cfg, local), mlp_ops(shape, cfg, moe)
    if shape.parallel_block and not moe:
        # GPT-J / PaLM: attention and MLP read the same normed input, so the first projection
        # (QKV; MLA's query) and the MLP-up run as one GEMM of their summed width (PaLM,
        # Chowdhery et al. 2022, Sec 2)
        first, up = mixer[0], mlp.pop(0)
        mixer[0] = gemm(f"{first.name} + mlp up", cfg.microbatch * cfg.seq / cfg.cp, first.n + up.n, shape.hidden)
    return (*mixer, *mlp)


def mixer_ops(shape: ModelShape, cfg: TrainConfig, local: bool = False) -> list[Op]:
    """A layer's ops before its MLP, the same in dense and MoE layers: the projections,
    attention and its output projection."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    h, d, a, kv = shape.hidden, shape.head_dim, shape.heads, shape.kv_heads
    projections = mla.projection_ops(shape, cfg, tokens) if shape.is_mla else [
        gemm("qkv", tokens, (a + 2 * kv) * d / cfg.tp, h)]
    return [*projections, _attention(shape, cfg, tokens, local), gemm("attention out", tokens, h, a * d / cfg.tp)]


def mlp_ops(shape: ModelShape, cfg: TrainConfig, moe: bool) -> list[Op]:
    """A layer's ops from its MLP on: the dense MLP or the routed experts, then the elementwise work."""
    if moe:
        return [*routed.layer_ops(shape, cfg), *after_routing_ops(shape, cfg)]
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    return [*_dense_mlp(shape, cfg, tokens, shape.ffn), _elementwise(shape, cfg, tokens, False)]


def after_routing_ops(shape: ModelShape, cfg: TrainConfig) -> list[Op]:
    """An MoE layer's ops after its routed experts (model/train/moe.py `layer_ops`): the shared
    experts, a dense MLP beside them, and the elementwise work."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    shared = _dense_mlp(shape, cfg, tokens, shape.shared * shape.expert_ffn) if shape.shared else []
    return [*shared, _elementwise(shape, cfg, tokens, True)]


def _attention(shape: ModelShape, cfg: TrainConfig, tokens: float, local: bool = False) -> Op:
    """Scores and values: flash kernels skip the masked half (and, in a sliding-window layer,
    the tiles outside the window); unfused ones write s x s whatever the mask."""
    heads = shape.heads / cfg.tp
    # scores over the query/key width, values over the value width (both head_dim unless MLA)
    flops = 2.0 * tokens * cfg.seq * heads * (shape.qk_dim + shape.head_dim)
    kernel = cfg.behaviour("attention")
    if kernel != "unfused":
        keys = attended_keys(cfg.seq, shape.window) if local else cfg.seq
        traffic = ACT_BYTES * tokens * heads * (shape.qk_dim + shape.head_dim) * 2
        # the causal half, of the window's keys in a local layer (the busiest CP rank's
        # excess: model/train/step.py); n: the keys one kernel call sees (ring attention runs one
        # call per chunk pair; a window bounds it); k: the head width
        windowed = local and shape.window < context.kernel_keys(cfg)
        seen = shape.window if windowed else context.kernel_keys(cfg)
        return Op("attention", "attention", flops / 2 * keys / cfg.seq, traffic, 0, max(1, int(seen)), shape.qk_dim,
                  portable=kernel == "flash2", window=windowed)
    # Unfused (Megatron-LM 2021-22): QK^T writes the scores; the fused scale-mask-softmax
    # reads them and writes probabilities; dropout reads those and writes its output and
    # a 1-byte mask; AV reads the dropped probabilities.
    scores = tokens * cfg.seq * heads
    return Op("attention", "attention", flops, scores * (ACT_BYTES * 6 + 1), cfg.seq, cfg.seq, shape.head_dim)


def _dense_mlp(shape: ModelShape, cfg: TrainConfig, tokens: float, ffn: int) -> list[Op]:
    up = (shape.mlp_matrices - 1) * ffn / cfg.tp
    return [gemm("mlp up", tokens, up, shape.hidden), gemm("mlp down", tokens, shape.hidden, ffn / cfg.tp)]


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
    write each intermediate of a chain separately (about twice the traffic): `_chained`.
    """
    h = shape.hidden
    # two norms (read and write h each) and two fused bias-dropout-residual adds (read two
    # h-vectors, write one: 10 h elements per token), each writing a 1-byte mask of h/2
    # elements where the stack trains with dropout; at p = 0 PyTorch returns the input
    # untouched and draws no mask (aten/src/ATen/native/Dropout.cpp `_dropout_impl`)
    mask = 0.5 * h if cfg.behaviour("dropout") else 0.0
    norms, residual = 2 * (2 * h) * _norm_share(shape), 2 * (3 * h + mask)
    if cfg.sp and cfg.tp > 1:
        norms, residual = norms / cfg.tp, residual / cfg.tp
    ffn = shape.top_k * shape.expert_ffn if moe else shape.ffn
    parts = {"norm": norms, "residual": residual,
             "activation": (shape.mlp_matrices * ffn) / cfg.tp}     # read gate/up, write the product
    if rotary(shape):   # rotate the queries and keys in place: read and write each
        parts["rotary"] = 2 * (shape.heads + shape.kv_heads) * shape.head_dim / cfg.tp
    chained = _chained(shape, cfg)
    parts = {k: ACT_BYTES * v * (2 if k in chained else 1) for k, v in parts.items()}
    if family(cfg.precision) in ("fp8", "fp6", "fp4"):
        parts["cast"] = ACT_BYTES * 1.5 * (3 * h + ffn / cfg.tp)  # casts of GEMM inputs with amax
    return parts


def _chained(shape: ModelShape, cfg: TrainConfig) -> frozenset[str]:
    """The parts an unfused (eager) stack runs as a chain of kernels, each reading and writing
    the intermediate: none where the stack fuses. Eager PyTorch runs a LayerNorm as one kernel
    (aten/src/ATen/native/cuda/layer_norm_kernel.cu), a non-gated activation as one (the bias
    rides in the GEMM's epilogue: at::linear calls addmm, cuBLASLt's bias epilogue), and a
    residual add without dropout as one add (p = 0 returns its input): those move what a fused
    kernel moves. RMSNorm (composite: square, mean, rsqrt, two products), a gated activation
    (activation, then the product with the up projection), dropout before the add and the rotary
    embedding are chains."""
    if cfg.behaviour("fused"):
        return frozenset()
    chained = {"rotary"}
    if shape.normalization != "layernorm":
        chained.add("norm")
    if cfg.behaviour("dropout"):
        chained.add("residual")
    if shape.mlp_matrices > 2:
        chained.add("activation")
    return frozenset(chained)


def rotary(shape: ModelShape) -> bool:
    """Whether the layers rotate their queries and keys: rotary positions (stated, or unstated
    as modern models run), not a learned table added once at the embedding (GPT-2/3, Megatron-
    LM's default `--position-embedding-type learned_absolute`, MPT) nor none (ALiBi's bias
    rides inside the attention kernel)."""
    return shape.position_embedding in ("", "rope")


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
    backward recomputes scores (2.5x); elementwise reads and writes gradients (2x).
    Unfused attention (`op.m`: its scores went through HBM) recomputes nothing: the
    gradients of its two batched GEMMs are twice their forward FLOPs, and per score its
    backward moves about 19 bytes against the forward's 13 (AV's gradients write dP and read
    the dropped probabilities, dropout's reads dP and its mask and writes, the softmax's reads
    the probabilities and that and writes dS, QK^T's two gradients read dS): ESTIMATE 2x."""
    if op.backward:
        return op.backward
    if op.kind == "attention" and op.m:
        return 2.0
    return _BACKWARD_FACTOR[op.kind]


_BACKWARD_FACTOR = {"gemm": 2.0, "attention": 2.5, "elementwise": 2.0}
