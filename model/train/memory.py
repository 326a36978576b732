"""Memory per GPU by category: weights, gradients, optimizer state (Adam at the job's
state precisions, model/train/optimizer.py, sharded by the ZeRO stage), activations (Korthikanti
et al. 2022, generalized to GQA, gated MLPs, MoE and flash attention), pipeline in-flight
micro-batches; what the peak adds (model/train/peak.py: the stage that binds, the loss's
logits, the layer a recompute rebuilds, ZeRO-3's gathered layers, the allocator's slack, and the
CUDA context and NCCL buffers outside it)."""

from __future__ import annotations

import functools

import attrs

from ...compiler.formats import family
from ..config import TrainConfig
from ..memo import remember as _remember
from . import peak
from .optimizer import WEIGHT_BYTES, grad_bytes, state_bytes
from .quantized import CAST_AT_USE, gathered_width, gemm_bytes, held_weight_bytes
from .moe import runs_unfused
from .recompute import kept_bytes, modules, op_level_kept
from .sharding import state_shards
from ..shape import ModelShape
from ...compiler.ir import Accelerator
from ...dsl.records import frozen

# PyTorch FSDP stacks: under a pipeline torchtitan keeps each stage's parameters unsharded from
# forward to backward ("For PP, by default do not reshard after forward to avoid per-microbatch
# all-gathers": torchtitan/distributed/parallel_dims / parallelize.py, `reshard_after_forward =
# not pp_enabled`), and torch.distributed.pipelining accumulates unsharded gradients until the
# last micro-batch's backward (`set_requires_gradient_sync(last_backward)`, stage.py
# `backward_maybe_with_nosync`): weights and gradients are held as ZeRO-1 holds them.
FSDP_STACKS = ("fsdp", "fsdp_compiled")
# ... and FSDP2 accumulates those unsharded gradients in its reduce dtype (torch/distributed/fsdp/
# _fully_shard/_fsdp_param.py `to_accumulated_grad_if_needed`), float32 in torchtitan
# (`training.mixed_precision_reduce`, its default and only choice) and in Composer's DEFAULT policy;
# without FSDP (ZeRO 0) torchtitan's parameters, so their gradients, are fp32 too.
FSDP_ACCUMULATION_BYTES = 4


@frozen
class Memory:
    weights: float
    gradients: float
    optimizer: float
    activations: float         # held for backward by the stage that binds (model/train/peak.py)
    logits: float              # the loss's peak, when the last stage binds and it exceeds `rebuilt`
    buffers: float             # outside the framework's allocator: CUDA context, NCCL buffers
    rebuilt: float = 0.0       # the layer a recompute rebuilds in its backward, when it binds
    gathered: float = 0.0      # ZeRO-3's gathered layers and their unsharded gradients
    allocator: float = 0.0     # reserved by the caching allocator and not handed out
    offloaded: float = 0.0     # activations held in host memory (not on the GPU: not in `total`)

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.logits + self.rebuilt
                + self.gathered + self.allocator + self.buffers)

    @property
    def reserved(self) -> float:
        """What a framework reports as its peak (torch.cuda.max_memory_reserved): all but the
        memory outside its allocator."""
        return self.total - self.buffers

    @property
    def allocated(self) -> float:
        """The tensors' own peak (torch.cuda.max_memory_allocated)."""
        return self.reserved - self.allocator

    def rows(self) -> tuple[tuple[str, float], ...]:
        """The GPU's memory by category (host-resident activations apart)."""
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(Memory) if f.name != "offloaded")


def low_precision_copy(cfg: TrainConfig) -> float:
    """Bytes per parameter of the weights' copies in the GEMMs' format that Transformer Engine's fp8
    and narrower recipes keep beside the bf16 weights across micro-batches: rowwise and columnwise,
    each `gemm_bytes` (per-tensor fp8 on Hopper its data and transpose, 2; MXFP8 2 x (1 + 1/32):
    model/train/quantized.py). torchao's float8 and MX training (PyTorch FSDP stacks) and XLA cast
    the weights at each use and keep no copy."""
    if cfg.stack in CAST_AT_USE:
        return 0.0
    return held_weight_bytes(cfg) if family(cfg.precision) in ("fp8", "fp6", "fp4") else 0.0


def weight_bytes(cfg: TrainConfig) -> float:
    """Bytes per parameter of the weights a GPU holds: bf16 and the GEMMs' low-precision copies, or
    with `fp8_params` the fp8 weights alone, both usages (Megatron-LM --fp8-param-gather:
    Transformer Engine's fp8 parameters; the optimizer's master keeps the precision: optimizer.py)."""
    if cfg.fp8_params:
        return held_weight_bytes(cfg)
    return WEIGHT_BYTES + low_precision_copy(cfg)


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
_GATHERED: dict[tuple, float] = {}


def clear_caches() -> None:
    _STATE.clear()
    _KEPT.clear()
    _GATHERED.clear()
    _dense_params.cache_clear()


def model_state(shape: ModelShape, cfg: TrainConfig, zero: int | None = None) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per GPU after ZeRO sharding, at `cfg`'s ZeRO
    stage or `zero`: Megatron shards the distributed optimizer over dp x cp, hybrid sharding
    over a group of them; a routed expert's state over its replicas in one group
    (model/train/sharding.py `expert_shards`)."""
    return model_states(shape, cfg, (cfg.zero if zero is None else zero,))[0]


def model_states(shape: ModelShape, cfg: TrainConfig, zeros) -> list[tuple[float, float, float]]:
    """`model_state(shape, cfg, zero)` for each of `zeros` in turn (the parameters and the bytes
    per parameter, which no ZeRO stage changes, read once: a search asks every stage of a layout)."""
    common = (shape, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.shard, cfg.precision, cfg.stack)
    tail = (cfg.optimizer_state, cfg.master_weights, cfg.main_grads, cfg.fp8_params, cfg.grad_reduce,
            cfg.precision_aware_optimizer, cfg.second_moment, cfg.mx_fp8, cfg.non_tn_fp8)
    out, parts = [], None
    for zero in zeros:
        key = common + (zero,) + tail
        state = _STATE.get(key)
        if state is None:
            if parts is None:
                grads = FSDP_ACCUMULATION_BYTES if cfg.pp > 1 and cfg.stack in FSDP_STACKS else held_grad_bytes(cfg)
                parts = (dense_params_per_gpu(shape, cfg), expert_params_per_gpu(shape, cfg), (weight_bytes(cfg), grads))
            dense, experts, per_param = parts
            # the master's remainders depend on the stage (ZeRO 1-2 only): the state's bytes at `zero`, not cfg's
            per_param += (state_bytes(cfg if zero == cfg.zero else attrs.evolve(cfg, zero=zero)),)
            on_dense, on_experts = _divisors(cfg, zero), _divisors(cfg, zero, expert=True)
            state = _remember(_STATE, key, tuple(b * (dense / d + experts / e)
                                                 for b, d, e in zip(per_param, on_dense, on_experts)))
        out.append(state)
    return out


def held_grad_bytes(cfg: TrainConfig) -> int:
    """Bytes per gradient element the step holds: `grad_bytes`, except that FSDP's reduction dtype
    (`grad_reduce`) moves through its collective only: the reduced shard is cast to its flat
    parameter's dtype (torch FSDP1 _runtime_utils.py `_cast_grad_to_param_dtype`; FSDP2 casts the
    reduce-scatter output to the parameter's original dtype), so it sets no held buffer there."""
    if cfg.stack in FSDP_STACKS and cfg.grad_reduce is not None:
        return grad_bytes(attrs.evolve(cfg, grad_reduce=None))
    return grad_bytes(cfg)


def _divisors(cfg: TrainConfig, zero: int, expert: bool = False) -> tuple[int, int, int]:
    """`state_shards`, but weights and gradients held whole where FSDP runs under a pipeline."""
    weights, grads, optimizer = state_shards(cfg, expert=expert, zero=zero)
    if _unsharded_under_pipeline(cfg, zero):
        weights, grads, _ = state_shards(cfg, expert=expert, zero=1)
    return weights, grads, optimizer


def _unsharded_under_pipeline(cfg: TrainConfig, zero: int) -> bool:
    return zero >= 2 and cfg.pp > 1 and cfg.stack in FSDP_STACKS


def gathered_bytes(shape: ModelShape, cfg: TrainConfig, zero: int | None = None) -> float:
    """ZeRO-3's working set on one GPU at `cfg`'s stage or `zero` (model/train/peak.py `gathered`):
    a layer is the stage's parameters less its embedding or output layer over its layers; FSDP
    stacks keep that root module whole."""
    zero = cfg.zero if zero is None else zero
    if zero < 3 or _unsharded_under_pipeline(cfg, zero):
        return 0.0
    key = (shape, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.shard, cfg.precision, cfg.stack, cfg.main_grads,
           cfg.fp8_params, cfg.grad_reduce, cfg.mx_fp8, cfg.non_tn_fp8)
    held = _GATHERED.get(key)
    if held is None:
        root = shape.vocab * shape.hidden * (2 if cfg.pp == 1 and not shape.tied_embeddings else 1) / cfg.tp
        layers = max(1.0, shape.layers / cfg.pp)
        layer = (dense_params_per_gpu(shape, cfg) - root + expert_params_per_gpu(shape, cfg)) / layers
        saved = model_state(shape, cfg, 2)[0] - model_state(shape, cfg, 3)[0]
        if cfg.stack in ("deepspeed", "deepspeed_2022"):   # gathered module by module: its largest matrix (model/train/peak.py)
            layer = min(layer, shape.hidden * max(shape.ffn, (shape.heads + 2 * shape.kv_heads) * shape.head_dim)
                        / cfg.tp)
        width = gathered_width(cfg)
        held = _remember(_GATHERED, key, peak.gathered(saved, layer, root if cfg.stack in FSDP_STACKS else 0.0,
                                                       width, grad_bytes(cfg)))
    return held


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
    key = (shape, cfg.seq, cfg.tp, cfg.sp, cfg.precision, cfg.mx_fp8, cfg.stack, moe, recompute, cfg.recompute_modules,
           cfg.recompute_every, cfg.dropout)
    kept = _KEPT.get(key)
    if kept is None:
        layer_input = 2 * shape.hidden / (cfg.tp if cfg.sp else 1)   # all that full recompute keeps
        op_level = op_level_kept(shape, cfg, moe) if "op_level" in modules(cfg) else 0.0
        kept = _remember(_KEPT, key, kept_bytes(activation_parts(shape, cfg, moe), cfg, layer_input, recompute,
                                                op_level, moe))
    return kept


def activation_parts(shape: ModelShape, cfg: TrainConfig, moe: bool = False) -> dict[str, float]:
    """Bytes per token a layer keeps for backward without recompute, by tensor."""
    t = cfg.tp
    h, d = shape.hidden, shape.head_dim
    # fp8 recipes keep the inputs of the GEMMs in fp8 for the weight gradients: their columnwise
    # usage alone (TE linear.py: "Discard row-wise data since it is not needed in backward pass"),
    # `gemm_bytes` each (per-tensor 1, MXFP8 1 + 1/32).
    gemm_input = gemm_bytes(cfg)
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
    if moe and shape.expert_clamp and runs_unfused(cfg):
        # the eager clamp (model/train/moe.py `unfused_expert_ops`; Megatron-Core core_v0.15.0 and
        # core_v0.16.1 fusions/fused_bias_geglu.py `weighted_bias_quick_geglu_impl`): each clamp saves
        # its input for its masked gradient (PyTorch derivatives.yaml, clamp: clamp_backward(grad, self,
        # min, max)), views that keep the first projection's output alive, and the fused activation
        # saves the cat of the clamped halves it is given instead of that output: one more bf16 copy
        # of the routed copies' up and gate outputs (as much with `activation_func_fp8_input_store`: the
        # activation's fp8 copy of the cat replaces its fp8 copy of the output, which the clamps keep in bf16)
        parts["expert clamp"] = 2 * (shape.mlp_matrices - 1) * shape.expert_ffn * shape.top_k / t
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


def memory(shape: ModelShape, cfg: TrainConfig, chip: Accelerator | None = None) -> Memory:
    """Memory per GPU at the step's peak, on `chip` (None: a CUDA device) for what lies outside
    the framework's allocator."""
    weights, grads, optimizer = model_state(shape, cfg)
    tokens = _tokens(cfg, cfg.microbatch)
    kept = _kept(shape, cfg, None)
    first = in_flight(cfg)
    (activations, logits, rebuilt), offloaded = _binding(shape, cfg, kept, tokens,
                                                         (first, peak.last_flight(cfg, first)),
                                                         _logits_bytes(shape, cfg, tokens))
    gathered = gathered_bytes(shape, cfg)
    allocated = weights + grads + optimizer + activations + logits + rebuilt + gathered
    return Memory(weights, grads, optimizer, activations, logits, outside_allocator(cfg, chip), rebuilt, gathered,
                  _slack(cfg, allocated, logits), offloaded)


def _slack(cfg: TrainConfig, allocated: float, logits: float) -> float:
    """The caching allocator's reserved-but-unallocated bytes at the peak (model/train/peak.py):
    its general slack, and the blocks the loss leaves stranded when the loss's peak binds."""
    return peak.FRAGMENTATION * allocated + peak.stranded_share(cfg) * logits


def outside_allocator(cfg: TrainConfig, chip: Accelerator | None) -> float:
    """Device memory outside the framework's allocator on `chip` (None: a CUDA device)."""
    return peak.outside_allocator(cfg, chip.vendor if chip is not None else None)


def _total(cfg: TrainConfig, state: float, activations: float, logits: float, rebuilt: float, gathered: float,
           outside: float) -> float:
    """Memory.total from its parts (the same additions in the same order)."""
    allocated = state + activations + logits + rebuilt + gathered
    return allocated + _slack(cfg, allocated, logits) + outside


def _state_total(shape: ModelShape, cfg: TrainConfig, zero: int) -> float:
    weights, grads, optimizer = model_state(shape, cfg, zero)
    return weights + grads + optimizer    # (Memory.total's order of addition)


def _flights(cfg: TrainConfig, vps, microbatch: int) -> list[tuple[float, float]]:
    """(first stage, last stage) micro-batches held with micro-batch `microbatch`, for each vp of `vps`."""
    count = cfg.batch // (cfg.dp * microbatch)      # TrainConfig.microbatches
    count = count if count > 1 else 1
    out = []
    for v in vps:
        first = in_flight(cfg, v, count)
        out.append((first, peak.last_flight(cfg, first, v)))
    return out


def _kept(shape: ModelShape, cfg: TrainConfig, recompute: str | None) -> tuple[float, float, float]:
    """Bytes per token a dense and an MoE layer keep with the recompute, and the most one layer
    rebuilds during its backward (what recompute does not keep, on the layer kind that drops more)."""
    dense, moe = _kept_per_token(shape, cfg, False, recompute), _kept_per_token(shape, cfg, True, recompute)
    rebuilt = _kept_per_token(shape, cfg, False, "none") - dense
    if shape.is_moe:
        rebuilt_moe = _kept_per_token(shape, cfg, True, "none") - moe
        rebuilt = rebuilt_moe if rebuilt_moe > rebuilt else rebuilt
    return dense, moe, rebuilt


def _binding(shape: ModelShape, cfg: TrainConfig, kept: tuple[float, float, float], tokens: float,
             flight: tuple[float, float], logits: float) -> tuple[tuple[float, float, float], float]:
    """((activations, logits, rebuilt) of the stage that binds (model/train/peak.py `stage_peaks`),
    the first stage's activations in host memory)."""
    per_layer = _mean_layer(shape, tokens, kept[0], kept[1])
    stage = per_layer * (shape.layers / cfg.pp)
    first, offloaded = _on_gpu(cfg, stage * flight[0], per_layer)
    last = _on_gpu(cfg, stage * flight[1], per_layer)[0] if cfg.pp > 1 else first
    return peak.stage_peaks(first, last, logits, tokens * kept[2], cfg.pp > 1), offloaded


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
    """The loss's peak for one micro-batch on the last stage (model/train/peak.py `logits`)."""
    tokens = _tokens(cfg, cfg.microbatch) if tokens is None else tokens
    return peak.logits(shape, cfg, tokens)
