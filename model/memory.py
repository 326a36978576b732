"""Memory per GPU by category: weights, gradients, optimizer state (mixed-precision
Adam, sharded by the ZeRO stage), activations (Korthikanti et al. 2022, generalized to
GQA, gated MLPs, MoE and flash attention), pipeline in-flight micro-batches, buffers."""

from __future__ import annotations

import attrs

from ..compiler.formats import family, is_narrow, value_bytes
from .config import TrainConfig
from .shape import ModelShape

WEIGHT_BYTES = 2          # bf16 weights used by the forward pass
OPTIMIZER_BYTES = 12      # fp32 master weights + Adam first and second moments
BUFFER_BYTES = 4e9        # CUDA context, NCCL and allocator reserve: a fixed allowance


@attrs.frozen
class Memory:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    buffers: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits + self.buffers

    def rows(self) -> tuple[tuple[str, float], ...]:
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(Memory))


def low_precision_copy(precision: str) -> float:
    """Bytes per parameter of the weights' copy in the GEMMs' format that fp8 and narrower
    recipes keep beside the bf16 weights (fp8: 1; NVFP4 4.5 bits; MXFP8 8.25: compiler/formats.py)."""
    return value_bytes(precision) if family(precision) in ("fp8", "fp6", "fp4") else 0.0


def params_per_gpu(shape: ModelShape, cfg: TrainConfig) -> float:
    """Parameters held by the most loaded GPU (a stage with the embedding, or the output layer)."""
    layers = shape.layers / cfg.pp
    moe_share = shape.moe_layers / shape.layers if shape.layers else 0
    dense_layer = shape.layer_params(False) / cfg.tp
    if shape.is_moe:
        expert_part = (shape.routed * shape.expert_params) / (cfg.ep * cfg.tp)
        moe_layer = (shape.layer_params(True) - shape.routed * shape.expert_params) / cfg.tp + expert_part
    else:
        moe_layer = 0.0
    per_stage = layers * ((1 - moe_share) * dense_layer + moe_share * moe_layer)
    embedding = shape.vocab * shape.hidden / cfg.tp
    return per_stage + embedding * (2 if cfg.pp == 1 and not shape.tied_embeddings else 1)


def model_state(shape: ModelShape, cfg: TrainConfig, zero: int | None = None) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per GPU after ZeRO sharding over dp (and cp),
    at `cfg`'s ZeRO stage or `zero`."""
    zero = cfg.zero if zero is None else zero
    params = params_per_gpu(shape, cfg)
    shards = cfg.dp * cfg.cp  # Megatron shards the distributed optimizer over dp x cp
    weight_bytes = WEIGHT_BYTES + low_precision_copy(cfg.precision)
    weights = params * weight_bytes / (shards if zero >= 3 else 1)
    grads = params * int(cfg.behaviour("grad_bytes")) / (shards if zero >= 2 else 1)
    optimizer = params * OPTIMIZER_BYTES / (shards if zero >= 1 else 1)
    return weights, grads, optimizer


def activation_bytes_per_layer(shape: ModelShape, cfg: TrainConfig, moe: bool = False,
                               recompute: str | None = None) -> float:
    """Bytes one layer keeps for backward, for one micro-batch, on one GPU (with `cfg`'s
    recompute choice or `recompute`)."""
    recompute = cfg.recompute if recompute is None else recompute
    t = cfg.tp
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    h, d = shape.hidden, shape.head_dim
    if recompute == "full":
        return 2 * tokens * h / (t if cfg.sp else 1)   # only the layer input is kept
    # fp8 recipes keep the inputs of the GEMMs in fp8 (1 byte) for the weight gradients.
    gemm_input = value_bytes(cfg.precision) if is_narrow(cfg.precision) else 2
    # Norm inputs and outputs (the latter feed the QKV and MLP GEMMs), dropout masks:
    # replicated over TP unless sequence parallel.
    replicated = 2 * h + 2 * h + gemm_input * h + gemm_input * h
    if cfg.behaviour("dropout"):
        replicated += h + h
    if cfg.sp:
        replicated /= t
    ffn = shape.expert_ffn * shape.top_k + shape.expert_ffn * shape.shared if moe else shape.ffn
    split = (2 * (shape.heads + 2 * shape.kv_heads) * d      # Q, K, V
             + 2 * shape.heads * d                            # attention output
             + 2 * (shape.mlp_matrices - 1) * ffn             # MLP up (and gate) outputs
             + gemm_input * ffn) / t                          # activation output
    scores = 0.0
    if recompute != "selective" and cfg.behaviour("attention") == "unfused":
        scores = 5 * shape.heads * cfg.seq / t                # softmax in/out and dropout mask
    return tokens * (replicated + split + scores)


def in_flight(cfg: TrainConfig, vp: int | None = None) -> float:
    """Micro-batches whose activations the first stage holds at once (1F1B: pp; interleaved
    more), with `cfg`'s virtual stages or `vp`."""
    vp = cfg.vp if vp is None else vp
    if cfg.pp == 1:
        return 1.0
    flight = float(min(cfg.pp, cfg.microbatches))
    if vp > 1:
        flight *= 1 + (cfg.pp - 1) / (cfg.pp * vp)
    return flight


def memory(shape: ModelShape, cfg: TrainConfig) -> Memory:
    weights, grads, optimizer = model_state(shape, cfg)
    activations = _stage_activations(shape, cfg) * in_flight(cfg)
    return Memory(weights, grads, optimizer, activations, _logits_bytes(shape, cfg), BUFFER_BYTES)


def memory_grid(shape: ModelShape, cfg: TrainConfig, recomputes, zeros, vps) -> dict[tuple[str, int, int], float]:
    """`memory(shape, cfg').total` for every cfg' that is `cfg` with a (recompute, zero, vp)
    of the grid, keyed so: each part is computed once for the choices it depends on (the
    same arithmetic in the same order, so the totals are equal to the last bit)."""
    states = {z: model_state(shape, cfg, z) for z in zeros}
    stages = {r: _stage_activations(shape, cfg, r) for r in recomputes}
    flights = {v: in_flight(cfg, v) for v in vps}
    logits = _logits_bytes(shape, cfg)
    out = {}
    for z, (weights, grads, optimizer) in states.items():
        for r, stage in stages.items():
            for v, flight in flights.items():
                out[r, z, v] = weights + grads + optimizer + stage * flight + logits + BUFFER_BYTES
    return out


def _stage_activations(shape: ModelShape, cfg: TrainConfig, recompute: str | None = None) -> float:
    """Bytes one micro-batch leaves on a pipeline stage's layers."""
    layers = shape.layers / cfg.pp
    moe_share = shape.moe_layers / shape.layers if shape.layers else 0
    per_layer = ((1 - moe_share) * activation_bytes_per_layer(shape, cfg, False, recompute)
                 + moe_share * activation_bytes_per_layer(shape, cfg, True, recompute))
    return per_layer * layers


def _logits_bytes(shape: ModelShape, cfg: TrainConfig) -> float:
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    return tokens * shape.vocab / cfg.tp * 4 * 2      # fp32 logits and their gradient, last stage
