"""Memory per GPU by category: weights, gradients, optimizer state (Adam at the job's
state precisions, model/train/optimizer.py, sharded by the ZeRO stage), activations (Korthikanti
et al. 2022, generalized to GQA, gated MLPs, MoE and flash attention), pipeline in-flight
micro-batches, buffers."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import attrs

from ...compiler.formats import family, is_narrow, value_bytes
from ..config import TrainConfig
from ..memo import remember as _remember
from .optimizer import WEIGHT_BYTES, grad_bytes, state_bytes
from .recompute import kept_bytes, modules, op_level_kept
from .sharding import state_shards
from ..shape import ModelShape

BUFFER_BYTES = 4e9        # CUDA context, NCCL and allocator reserve: a fixed allowance


@attrs.frozen
class Memory:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    buffers: float
    offloaded: float = 0.0     # activations held in host memory (not on the GPU: not in `total`)

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits + self.buffers

    def rows(self) -> tuple[tuple[str, float], ...]:
        """The GPU's memory by category (host-resident activations apart)."""
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(Memory) if f.name != "offloaded")


def low_precision_copy(precision: str) -> float:
    """Bytes per parameter of the weights' copy in the GEMMs' format that fp8 and narrower
    recipes keep beside the bf16 weights (fp8: 1; NVFP4 4.5 bits; MXFP8 8.25: compiler/formats.py)."""
    return value_bytes(precision) if family(precision) in ("fp8", "fp6", "fp4") else 0.0


def params_per_gpu(shape: ModelShape, cfg: TrainConfig) -> float:
    """Parameters held by the most loaded GPU (a stage with the embedding, or the output
    layer and the MTP modules)."""
    return dense_params_per_gpu(shape, cfg) + expert_params_per_gpu(shape, cfg)


def expert_params_per_gpu(shape: ModelShape, cfg: TrainConfig) -> float:
    """Routed-expert parameters on one GPU: each EP rank holds routed / ep experts whole
    (MoE parallel folding: expert tensor parallelism 1, EP groups over the TP x CP x DP ranks)."""
    if not shape.is_moe:
        return 0.0
    layers = shape.moe_layers / cfg.pp + shape.mtp   # the MTP modules' layers sit on the last stage
    return layers * shape.routed * shape.expert_params / cfg.ep


def dense_params_per_gpu(shape: ModelShape, cfg: TrainConfig) -> float:
    """Everything but the routed experts, split by TP."""
    return _dense_params(shape, cfg.pp, cfg.tp)


@functools.lru_cache(maxsize=4096)   # read by every estimate and memory bound: it depends on pp and tp alone
def _dense_params(shape: ModelShape, pp: int, tp: int) -> float:
    layers = shape.layers / pp
    moe_share = shape.moe_layers / shape.layers if shape.layers else 0
    dense_layer = shape.layer_params(False)
    moe_layer = shape.layer_params(True) - shape.routed * shape.expert_params if shape.is_moe else 0.0
    per_stage = layers * ((1 - moe_share) * dense_layer + moe_share * moe_layer)
    mtp = shape.mtp_params - shape.mtp * shape.routed * shape.expert_params
    embedding = shape.vocab * shape.hidden * (2 if pp == 1 and not shape.tied_embeddings else 1)
    return (per_stage + mtp + embedding) / tp


# model_state and the bytes a layer keeps per token are read for every estimate and every
# memory bound of a search: memoized by the fields they read (bounded tables: model/memo.py).
_STATE: dict[tuple, tuple[float, float, float]] = {}
_KEPT: dict[tuple, float] = {}


def clear_caches() -> None:
    _STATE.clear()
    _KEPT.clear()
    _dense_params.cache_clear()


def model_state(shape: ModelShape, cfg: TrainConfig, zero: int | None = None) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per GPU after ZeRO sharding, at `cfg`'s ZeRO
    stage or `zero`: Megatron shards the distributed optimizer over dp x cp, hybrid sharding
    over a group of them; a routed expert's state over its replicas in one group
    (model/train/sharding.py `expert_shards`)."""
    zero = cfg.zero if zero is None else zero
    key = (shape, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.shard, cfg.precision, cfg.stack, zero,
           cfg.optimizer_state, cfg.master_weights, cfg.main_grads)
    state = _STATE.get(key)
    if state is None:
        dense, experts = dense_params_per_gpu(shape, cfg), expert_params_per_gpu(shape, cfg)
        per_param = (WEIGHT_BYTES + low_precision_copy(cfg.precision), grad_bytes(cfg), state_bytes(cfg))
        on_dense, on_experts = state_shards(cfg, zero=zero), state_shards(cfg, expert=True, zero=zero)
        state = _remember(_STATE, key, tuple(b * (dense / d + experts / e)
                                             for b, d, e in zip(per_param, on_dense, on_experts)))
    return state


def activation_bytes_per_layer(shape: ModelShape, cfg: TrainConfig, moe: bool = False,
                               recompute: str | None = None) -> float:
    """Bytes one layer keeps for backward, for one micro-batch, on one GPU, with `cfg`'s
    recompute choice or `recompute` (averaged over the layers when only every k-th
    recomputes: model/train/recompute.py)."""
    return _tokens(cfg, cfg.microbatch) * _kept_per_token(shape, cfg, moe, recompute)


def _tokens(cfg: TrainConfig, microbatch: int) -> float:
    """Tokens of one micro-batch of `microbatch` sequences on one GPU (its CP chunk)."""
    return microbatch * cfg.seq / cfg.cp


def _kept_per_token(shape: ModelShape, cfg: TrainConfig, moe: bool, recompute: str | None) -> float:
    """Bytes per token one layer keeps for backward (it does not depend on the micro-batch)."""
    recompute = cfg.recompute if recompute is None else recompute
    key = (shape, cfg.seq, cfg.tp, cfg.sp, cfg.precision, cfg.stack, moe, recompute, cfg.recompute_modules,
           cfg.recompute_every)
    kept = _KEPT.get(key)
    if kept is None:
        layer_input = 2 * shape.hidden / (cfg.tp if cfg.sp else 1)   # all that full recompute keeps
        op_level = op_level_kept(shape, cfg, moe) if "op_level" in modules(cfg) else 0.0
        kept = _remember(_KEPT, key, kept_bytes(activation_parts(shape, cfg, moe), cfg, layer_input, recompute,
                                                op_level))
    return kept


def activation_parts(shape: ModelShape, cfg: TrainConfig, moe: bool = False) -> dict[str, float]:
    """Bytes per token a layer keeps for backward without recompute, by tensor."""
    t = cfg.tp
    h, d = shape.hidden, shape.head_dim
    # fp8 recipes keep the inputs of the GEMMs in fp8 (1 byte) for the weight gradients.
    gemm_input = value_bytes(cfg.precision) if is_narrow(cfg.precision) else 2
    # Norm inputs and outputs (the latter feed the QKV and MLP GEMMs), dropout masks:
    # replicated over TP unless sequence parallel. A parallel block (GPT-J, PaLM) has one
    # norm whose output feeds both.
    norms = 1 if shape.parallel_block else 2
    replicated = {"norm in": norms * 2 * h, "norm out": norms * gemm_input * h,
                  "dropout": 2 * h if cfg.behaviour("dropout") else 0.0}
    if cfg.sp:
        replicated = {k: v / t for k, v in replicated.items()}
    ffn = shape.expert_ffn * shape.top_k + shape.expert_ffn * shape.shared if moe else shape.ffn
    parts = {**replicated,
             "qkv": 2 * (shape.heads + 2 * shape.kv_heads) * d / t,
             "attention out": 2 * shape.heads * d / t,
             "mlp up": 2 * (shape.mlp_matrices - 1) * ffn / t,    # MLP up (and gate) outputs
             "mlp act": gemm_input * ffn / t}                     # activation output
    if cfg.behaviour("attention") == "unfused":
        parts["scores"] = 5 * shape.heads * cfg.seq / t           # softmax in/out and dropout mask
    return parts


def in_flight(cfg: TrainConfig, vp: int | None = None, microbatches: int | None = None) -> float:
    """Micro-batches whose activations the first stage holds at once, with `cfg`'s virtual
    stages or `vp` (and its micro-batches per pipeline or `microbatches`): 1F1B at most pp (interleaved a little more: Narayanan et al. 2021, Sec
    2.2.2); GPipe all of them, since every forward runs before the first backward (Huang et
    al. 2019). Without a pipeline, gradient accumulation runs each micro-batch's backward
    right after its forward."""
    if cfg.pp == 1:
        return 1.0
    microbatches = cfg.microbatches if microbatches is None else microbatches
    if cfg.gpipe:
        return float(microbatches)
    flight = float(min(cfg.pp, microbatches))
    vp = cfg.virtual_stages if vp is None else vp
    if vp > 1:
        flight *= 1 + (cfg.pp - 1) / (cfg.pp * vp)
    return flight


def memory(shape: ModelShape, cfg: TrainConfig) -> Memory:
    weights, grads, optimizer = model_state(shape, cfg)
    per_layer = _per_layer(shape, cfg)
    activations, offloaded = _on_gpu(cfg, per_layer * (shape.layers / cfg.pp) * in_flight(cfg), per_layer)
    return Memory(weights, grads, optimizer, activations, _logits_bytes(shape, cfg), BUFFER_BYTES, offloaded)


def memory_grid(shape: ModelShape, cfg: TrainConfig, recomputes, zeros, vps,
                microbatch: int | None = None) -> dict[tuple[str, int, int], float]:
    """`memory(shape, cfg').total` for every cfg' that is `cfg` with a (recompute, zero, vp)
    of the grid (and the micro-batch `microbatch`, if given), keyed (recompute, zero, vp):
    each part is computed once for the choices it depends on, without building cfg' (the
    same arithmetic in the same order, so the totals are equal to the last bit)."""
    mb = cfg.microbatch if microbatch is None else microbatch
    tokens = _tokens(cfg, mb)
    flights = _flights(cfg, vps, mb)
    layers = [(r, _per_layer(shape, cfg, r, tokens)) for r in recomputes]
    logits = _logits_bytes(shape, cfg, tokens)
    stage_layers = shape.layers / cfg.pp
    out = {}
    for z in zeros:
        state = _state_total(shape, cfg, z)
        for r, per_layer in layers:
            for v, total in zip(vps, _stage_totals(cfg, state, per_layer, stage_layers, flights, logits)):
                out[r, z, v] = total
    return out


def least_memory_by_microbatch(shape: ModelShape, cfg: TrainConfig, recompute: str, zero: int, vps,
                               microbatches) -> Iterator[float]:
    """For each of `microbatches` in turn, the least over `vps` of `memory_grid(shape, cfg,
    (recompute,), (zero,), vps, microbatch)` (equal to the last bit), what does not depend on
    the micro-batch computed once: a search asks it of every micro-batch of every layout."""
    state = _state_total(shape, cfg, zero)
    kept = (_kept_per_token(shape, cfg, False, recompute), _kept_per_token(shape, cfg, True, recompute))
    stage_layers = shape.layers / cfg.pp
    for mb in microbatches:
        tokens = _tokens(cfg, mb)
        yield min(_stage_totals(cfg, state, _mean_layer(shape, tokens, *kept), stage_layers, _flights(cfg, vps, mb),
                                _logits_bytes(shape, cfg, tokens)))


def least_memory_by_zero(shape: ModelShape, cfg: TrainConfig, recompute: str, zeros, vps,
                         microbatch: int) -> list[float]:
    """For each of `zeros` in turn, `least_memory_by_microbatch(shape, cfg, recompute, zero, vps,
    [microbatch])`'s one value (equal to the last bit), the activations computed once: the
    ZeRO stage changes the model state alone."""
    tokens = _tokens(cfg, microbatch)
    per_layer = _mean_layer(shape, tokens, _kept_per_token(shape, cfg, False, recompute),
                            _kept_per_token(shape, cfg, True, recompute))
    stage = per_layer * (shape.layers / cfg.pp)
    held = [_on_gpu(cfg, stage * flight, per_layer)[0] for flight in _flights(cfg, vps, microbatch)]
    logits = _logits_bytes(shape, cfg, tokens)
    out = []
    for zero in zeros:
        state = _state_total(shape, cfg, zero)
        out.append(min([state + on_gpu + logits + BUFFER_BYTES for on_gpu in held]))   # (_stage_totals' order)
    return out


def _state_total(shape: ModelShape, cfg: TrainConfig, zero: int) -> float:
    weights, grads, optimizer = model_state(shape, cfg, zero)
    return weights + grads + optimizer    # (Memory.total's order of addition)


def _flights(cfg: TrainConfig, vps, microbatch: int) -> list[float]:
    """`in_flight` of `cfg` with micro-batch `microbatch`, for each vp of `vps`."""
    count = cfg.batch // (cfg.dp * microbatch)      # TrainConfig.microbatches
    count = count if count > 1 else 1
    return [in_flight(cfg, v, count) for v in vps]


def _stage_totals(cfg: TrainConfig, state: float, per_layer: float, stage_layers: float, flights: list[float],
                  logits: float) -> list[float]:
    """Memory.total for each in-flight count of `flights` (`state`: weights + gradients + optimizer)."""
    stage = per_layer * stage_layers
    return [state + _on_gpu(cfg, stage * flight, per_layer)[0] + logits + BUFFER_BYTES for flight in flights]


def _per_layer(shape: ModelShape, cfg: TrainConfig, recompute: str | None = None, tokens: float | None = None) -> float:
    """Bytes one micro-batch (of `tokens` per GPU, if given) leaves on a layer, averaged over dense and MoE layers."""
    tokens = _tokens(cfg, cfg.microbatch) if tokens is None else tokens
    return _mean_layer(shape, tokens, _kept_per_token(shape, cfg, False, recompute),
                       _kept_per_token(shape, cfg, True, recompute))


def _mean_layer(shape: ModelShape, tokens: float, kept_dense: float, kept_moe: float) -> float:
    moe_share = shape.moe_layers / shape.layers if shape.layers else 0
    return (1 - moe_share) * (tokens * kept_dense) + moe_share * (tokens * kept_moe)


def _on_gpu(cfg: TrainConfig, activations: float, per_layer: float) -> tuple[float, float]:
    """(activations on the GPU, activations in host memory). Offloaded layers keep their
    activations in host memory; one layer's stay on the GPU as the copy in flight
    (Megatron-Core's double-buffered CPU offloading)."""
    offloaded = cfg.offload * activations
    if offloaded:
        activations = activations - offloaded + per_layer
    return activations, offloaded


def _logits_bytes(shape: ModelShape, cfg: TrainConfig, tokens: float | None = None) -> float:
    tokens = _tokens(cfg, cfg.microbatch) if tokens is None else tokens
    return tokens * shape.vocab / cfg.tp * 4 * 2      # fp32 logits and their gradient, last stage
