"""Step time of a training configuration on a partition: compute per micro-batch and
layer, exposed communication per parallel dimension, the pipeline bubble, gradient
synchronization and the optimizer, then throughput, MFU/HFU and memory."""

from __future__ import annotations

import functools
import math

import attrs

from ..compiler.formats import is_narrow, value_bytes
from ..compiler.ir import Partition
from . import comms, context, dpu, host, offload, offload_host, sharding
from . import moe as routed
from . import recompute as recompute_model
from .compute import hbm_rate, op_time, peak
from .config import DEFAULT_ORDER, TrainConfig
from .memory import Memory, dense_params_per_gpu, expert_params_per_gpu, memory
from .ops import gemm
from .ranks import rank_partition
from .shape import ModelShape
from .workload import backward_factor, layer_forward, logits_forward

TP_OVERLAP_RESIDUE = 0.1   # share of overlapped TP traffic still exposed (chunk pipeline fill)
DP_BUCKET_RESIDUE = 0.1    # share of overlapped gradient traffic exposed (the last bucket)
ADAM_BYTES_PER_PARAM = 30  # read fp32 param, grad, m, v; write param, m, v; write bf16 copy
# ZeRO-3/FSDP gathers and scatters parameters for every layer of every micro-batch, in
# parallel with that compute; the collectives' kernels take SMs and HBM bandwidth from it,
# so the overlapped part still costs this share of the shorter of the two. Fitted on the
# ZeRO-3, FSDP and MaxText runs (benchmarks/calibrate.py).
GATHER_CONTENTION = 0.5
EP_OVERLAP_RESIDUE = 0.2   # share of overlapped all-to-all still exposed (dispatch of the first chunk)


@attrs.frozen
class Breakdown:
    """Seconds per step on the critical path."""

    compute: float
    recompute: float
    tp: float
    cp: float
    ep: float
    pp: float
    bubble: float
    dp: float
    optimizer: float
    host: float = 0.0          # waiting for the host CPUs: launches and network proxy work (model/dpu.py)
    data: float = 0.0          # waiting for input the hosts (and DPUs) could not load in time
    checkpoint: float = 0.0    # this step's share of the synchronous checkpoint saves
    offload: float = 0.0       # activation copies to and from host memory that compute does not hide

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in attrs.fields(Breakdown))

    def rows(self) -> tuple[tuple[str, float], ...]:
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(Breakdown))


@attrs.frozen
class Estimate:
    config: TrainConfig
    step_time: float
    breakdown: Breakdown
    tokens_per_s: float
    mfu: float
    hfu: float
    model_flops_per_gpu: float   # FLOP/s per GPU counted the model's way
    memory: Memory
    hbm: float
    host_memory: float = 0.0      # bytes of one node's DRAM the configuration needs (model/offload_host.py)
    host_dram: float = math.inf   # ... and what the node offers

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.config.gpus

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.hbm and self.host_fits

    @property
    def host_fits(self) -> bool:
        return self.host_memory <= self.host_dram


@attrs.frozen
class _Layer:
    """Per micro-batch seconds of one layer on one GPU, by component."""

    forward: float
    backward: float
    recompute: float
    tp: float
    cp: float
    ep: float

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute + self.tp + self.cp + self.ep


def estimate(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> Estimate:
    partition = rank_partition(partition, cfg.gpus)
    chip, tiers = partition.node.accelerator, partition.tiers
    dense, moe = _blend(shape, cfg, partition, False), _blend(shape, cfg, partition, True)
    moe_layers = shape.moe_layers / cfg.pp
    dense_layers = shape.layers / cfg.pp - moe_layers
    logits = sum(op_time(op, chip, cfg.precision) * (1 + backward_factor(op)) for op in logits_forward(shape, cfg))
    boundary = comms.outermost(cfg.pp, cfg.stride("pp"), tiers)
    # Megatron scatters the activation over the TP ranks' own links (scatter-gather in the
    # pipeline); each of the vp model chunks on a GPU sends forward and backward.
    message = _activation_message(shape, cfg) / (1 if cfg.sp else cfg.tp)
    p2p = 2 * cfg.vp * comms.point_to_point(message, boundary) if cfg.pp > 1 else 0.0
    # MTP modules sit after the output layer, on the last stage: a projection, one more
    # layer like the last, and the shared output head again (DeepSeek-V3 Sec 2.2). With a
    # pipeline, the layout gives that stage fewer decoder layers to carry them (Megatron's
    # `pipeline_model_parallel_layout`, as the DeepSeek-V3 recipes set it): their work is
    # spread over the pp stages like the layers'.
    mtp = shape.mtp * ((moe if shape.is_moe else dense).total + logits + _mtp_projection(shape, cfg, chip)) / cfg.pp
    stage = dense_layers * dense.total + moe_layers * moe.total + logits + mtp + p2p
    m = cfg.microbatches
    bubble = (cfg.pp - 1) / cfg.vp * stage if cfg.pp > 1 else 0.0
    # One micro-batch through this stage's layers, exposed communication included: the
    # window that gradient reduction and parameter gathering overlap with.
    layer_pass = dense_layers * dense.total + moe_layers * moe.total
    dp = _dp_exposed(shape, cfg, partition, layer_pass) + _embedding_sync(shape, cfg, tiers)
    optimizer = _optimizer_time(shape, cfg, partition)
    per = lambda field: m * (dense_layers * getattr(dense, field) + moe_layers * getattr(moe, field))  # noqa: E731
    last = moe if shape.is_moe else dense
    extra = lambda field: m * shape.mtp / cfg.pp * getattr(last, field)  # noqa: E731
    mtp_compute = m * shape.mtp / cfg.pp * (logits + _mtp_projection(shape, cfg, chip))
    breakdown = Breakdown(per("forward") + per("backward") + m * logits + extra("forward") + extra("backward")
                          + mtp_compute, per("recompute") + extra("recompute"), per("tp") + extra("tp"),
                          per("cp") + extra("cp"), per("ep") + extra("ep"), m * p2p, bubble, dp, optimizer,
                          offload=offload.exposed(shape, cfg, partition, dense, moe))
    waiting = max(0.0, dpu.host_time(shape, cfg, partition) - breakdown.total)
    data, checkpoint = host.host_terms(shape, cfg, partition, breakdown.total + waiting)
    if waiting or data or checkpoint:
        breakdown = attrs.evolve(breakdown, host=waiting, data=data, checkpoint=checkpoint)
    step = breakdown.total
    tokens = cfg.batch * cfg.seq
    model_flops = shape.model_flops_per_token(cfg.seq) * tokens
    hardware_flops = model_flops + _recompute_flops(shape, cfg) * tokens
    denominator = step * cfg.gpus * peak(chip, cfg.precision)
    held = memory(shape, cfg)
    # the node's DRAM holds the checkpoint staging buffer and any offloaded activations
    dram = offload_host.host_memory(shape, cfg, partition, held.offloaded)
    return Estimate(cfg, step, breakdown, tokens / step, model_flops / denominator, hardware_flops / denominator,
                    model_flops / step / cfg.gpus, held, chip.hbm_capacity, dram.need, dram.available)


def _blend(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool) -> _Layer:
    """The mean layer over sliding-window and global-attention layers (model/shape.py)."""
    local = shape.local_layers / shape.layers if shape.layers else 0.0
    if local == 0:
        return _layer(shape, cfg, partition, moe)
    windowed = _layer(shape, cfg, partition, moe, True)
    if local == 1:
        return windowed
    full = _layer(shape, cfg, partition, moe)
    return _Layer(*(local * getattr(windowed, f.name) + (1 - local) * getattr(full, f.name)
                    for f in attrs.fields(_Layer)))


# Fields that never change a layer's micro-batch cost (batch, virtual stages, the ZeRO
# stage and its groups, host work, offload: step-level terms), set to these values before
# the layer is computed so that configurations differing only there share the work.
LAYER_NEUTRAL = {"batch": 0, "vp": 1, "zero": 0, "sample_bytes": 0.0, "checkpoint_every": 0.0, "shard": 0,
                 "offload": 0.0}


def layer_key(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool) -> tuple:
    """Every input of a layer's cost: each TrainConfig field but LAYER_NEUTRAL's (a tuple:
    cheaper than evolve; tests/model/test_moe_dense.py checks that no field is missing)."""
    return (shape, cfg.seq, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.microbatch, cfg.recompute, cfg.sp,
            cfg.precision, cfg.stack, cfg.order, cfg.cp_balanced, cfg.ep_overlap, cfg.recompute_modules,
            cfg.recompute_every, partition, moe, local)


def _layer(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool = False) -> _Layer:
    key = layer_key(shape, cfg, partition, moe, local)
    layer = _LAYERS.get(key)
    if layer is None:
        if len(_LAYERS) >= 65536:  # bounded, like the lru caches beside it
            _LAYERS.clear()
        layer = _LAYERS[key] = _layer_cached(shape, attrs.evolve(cfg, **LAYER_NEUTRAL), partition, moe, local)
    return layer


_LAYERS: dict[tuple, _Layer] = {}


def clear_caches() -> None:
    """Forget every memoized layer (benchmarks measure cold searches)."""
    _LAYERS.clear()
    dpu.clear_caches()
    _layer_cached.cache_clear()
    _layer_compute.cache_clear()


@functools.lru_cache(maxsize=65536)
def _layer_cached(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool) -> _Layer:
    tiers = partition.tiers
    # The layer's arithmetic does not depend on where its groups sit: share it across
    # pipeline depths, data-parallel widths, rank orders and recompute choices.
    compute_cfg = attrs.evolve(cfg, pp=1, dp=1, order=DEFAULT_ORDER, recompute="none", recompute_modules=(),
                               recompute_every=1)
    forward, backward, attention, gemms, ops = _layer_compute(shape, compute_cfg, partition.node.accelerator, moe,
                                                              local)
    recompute = recompute_model.time(shape, cfg, moe, forward, ops)
    tp = _tp_exposed(shape, cfg, tiers, gemms)
    cp = context.ring_exposed(shape, cfg, tiers, attention)
    ep = 0.0
    if moe:
        ep = _ep_exposed(shape, cfg, tiers, forward + backward)
        ep += routed.host_exposed()
    return _Layer(forward, backward, recompute, tp, cp, ep)


@functools.lru_cache(maxsize=16384)
def _layer_compute(shape: ModelShape, cfg: TrainConfig, chip, moe: bool,
                   local: bool = False) -> tuple[float, float, float, float, tuple[tuple[str, float], ...]]:
    """Seconds of one layer's forward, backward, attention and GEMMs per micro-batch, and
    each op's forward seconds by name (what a selective recompute redoes)."""
    # with contiguous CP chunks every ring step waits for the rank with the most causal work
    imbalance = context.causal_imbalance(cfg, shape.window if local else 0)
    times = [(op, op_time(op, chip, cfg.precision) * (imbalance if op.kind == "attention" else 1.0))
             for op in layer_forward(shape, cfg, moe, local)]
    forward = sum(t for _, t in times)
    backward = sum(t * backward_factor(op) for op, t in times)
    attention = sum(t for op, t in times if op.kind == "attention")
    gemms = sum(t for op, t in times if op.kind == "gemm")
    return forward, backward, attention, gemms, tuple((op.name, t) for op, t in times)


def _activation_message(shape: ModelShape, cfg: TrainConfig) -> float:
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    return 2 * tokens * shape.hidden / (cfg.tp if cfg.sp else 1)


def _tp_exposed(shape: ModelShape, cfg: TrainConfig, tiers, gemms: float) -> float:
    """Two all-reduces (or reduce-scatter + all-gather pairs) forward, two backward, two
    more when the forward is recomputed; overlapped with the GEMMs by stacks that can."""
    if cfg.tp == 1:
        return 0.0
    stages = comms.place(cfg.tp, cfg.stride("tp"), tiers)
    one = comms.all_reduce(_activation_message(shape, cfg) * (cfg.tp if cfg.sp else 1), stages)
    # With sequence parallelism the backward needs the layer input gathered again
    # (Korthikanti et al. 2022, Sec 4.2.2): half an all-reduce more.
    count = 4 + recompute_model.tp_collectives(cfg) + (0.5 if cfg.sp else 0)
    # A parallel block sums the attention and MLP outputs before one reduction: half of them
    total = count * one * (0.5 if shape.parallel_block else 1.0)
    if not cfg.behaviour("tp_overlap"):
        return total
    # Overlapped, the GEMMs and their collectives take as long as the slower of the two,
    # so faster GEMMs or faster links can never lengthen the step.
    return max(total - gemms, 0.0) + TP_OVERLAP_RESIDUE * total


def _ep_exposed(shape: ModelShape, cfg: TrainConfig, tiers, compute: float) -> float:
    """Dispatch and combine all-to-all, forward and backward (four per MoE layer), of the
    busiest rank's routed copies (model/moe.py); fp8 recipes dispatch in fp8, everything
    else moves bf16. The all-to-all waits on the router before it and the experts wait on
    it, so within a micro-batch nothing hides it: only a run that overlaps one
    micro-batch's all-to-all with another's compute (`ep_overlap`) hides it, up to that
    compute."""
    if cfg.ep == 1:
        return 0.0
    # dispatched in fp8 (1 byte, an MX format's 1.03) by every sub-16-bit recipe; never narrower
    dispatch = max(1.0, value_bytes(cfg.precision)) if is_narrow(cfg.precision) else 2
    stages = comms.place(cfg.ep, cfg.stride("ep"), tiers)
    total = sum(comms.all_to_all(routed.dispatch_bytes(shape, cfg, b), stages) for b in (dispatch, 2, 2, 2))
    if not cfg.overlaps_ep:
        return total
    return max(total - compute, 0.0) + EP_OVERLAP_RESIDUE * total


def _dp_exposed(shape: ModelShape, cfg: TrainConfig, partition: Partition, layer_pass: float) -> float:
    """Gradient reduction (and parameter gathering) across data-parallel replicas.

    Bucketed reduction overlaps with the backward half of the last micro-batch (about
    two thirds of its pass); FSDP gathers and reduces every micro-batch, overlapped with
    all of them. Windows are shares of passes that count fully in the step, so a faster
    pass can expose more communication but never lengthen the step.
    """
    grad_bytes = int(cfg.behaviour("grad_bytes"))
    # Dense and routed-expert state reduce over different replica groups (routed experts over
    # fewer ranks, ep apart: model/sharding.py expert_dp); hybrid sharding splits each into
    # shard groups (ZeRO collectives inside) and all-reduces every shard across the groups
    # once a step (no groups: plain ZeRO).
    gathers = reduces = all_reduces = fsdp = across = 0.0
    for params, expert in ((dense_params_per_gpu(shape, cfg), False), (expert_params_per_gpu(shape, cfg), True)):
        if not params:
            continue
        inner, outer = sharding.groups(cfg, partition.tiers, expert)
        if cfg.zero >= 1:
            across += sharding.replicate(params, grad_bytes, sharding.shards(cfg, expert), outer)
        reduces += comms.reduce_scatter(params * grad_bytes, inner)
        gathers += comms.all_gather(params * 2, inner)
        all_reduces += comms.all_reduce(params * grad_bytes, inner)
        fsdp += sharding.fsdp_microbatch(params, grad_bytes, inner)
    if cfg.zero >= 3:
        per_step = fsdp * cfg.microbatches
        if not cfg.behaviour("dp_overlap"):
            return per_step + across
        hidden_by = cfg.microbatches * layer_pass
        exposed = max(per_step - hidden_by, 0.0) + GATHER_CONTENTION * min(per_step, hidden_by)
        return exposed + max(across - 2 / 3 * layer_pass, 0.0) + DP_BUCKET_RESIDUE * across
    if cfg.zero >= 1:  # reduce-scatter gradients during the last backward, gather the
        # updated parameters during the next step's first forward (Megatron's distributed optimizer)
        parts = ((reduces + across, 2 / 3), (gathers, 1 / 3))
    else:
        parts = ((all_reduces, 2 / 3),)
    if not cfg.behaviour("dp_overlap"):
        return sum(seconds for seconds, _ in parts)
    return sum(max(seconds - share * layer_pass, 0.0) + DP_BUCKET_RESIDUE * seconds for seconds, share in parts)


def _embedding_sync(shape: ModelShape, cfg: TrainConfig, tiers) -> float:
    """Tied input and output embeddings live on the first and last stage; their gradients
    are all-reduced between the two every step."""
    if cfg.pp == 1 or not shape.tied_embeddings:
        return 0.0
    stages = (comms.Stage(comms.outermost(2, cfg.stride("pp") * (cfg.pp - 1), tiers), 2),)
    return comms.all_reduce(shape.vocab * shape.hidden / cfg.tp * 4, stages)


def _optimizer_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    dense = dense_params_per_gpu(shape, cfg) / sharding.optimizer_shards(cfg)
    experts = expert_params_per_gpu(shape, cfg) / sharding.optimizer_shards(cfg, expert=True)
    return (dense + experts) * ADAM_BYTES_PER_PARAM / hbm_rate(partition.node.accelerator)


def _mtp_projection(shape: ModelShape, cfg: TrainConfig, chip) -> float:
    """Forward and backward of one MTP module's projection of [hidden; embedding] to hidden."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    forward = op_time(gemm("mtp projection", tokens, shape.hidden / cfg.tp, 2 * shape.hidden), chip, cfg.precision)
    return 3 * forward


def _recompute_flops(shape: ModelShape, cfg: TrainConfig) -> float:
    """Extra forward FLOPs per token that recomputation adds (for HFU)."""
    return recompute_model.flops_per_token(shape, cfg)
