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
from .config import TrainConfig
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
    if min(cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.vp, cfg.microbatch, cfg.batch) < 1:
        raise ValueError(f"every parallel width, the micro-batch and the batch must be >= 1: {cfg}")
    partition = rank_partition(partition, cfg.gpus)
    chip, tiers = partition.node.accelerator, partition.tiers
    dense, moe = _blend(shape, cfg, partition, False), _blend(shape, cfg, partition, True)
    moe_layers = shape.moe_layers / cfg.pp
    dense_layers = shape.layers / cfg.pp - moe_layers
    logits = _logits(shape, cfg, chip)
    boundary = comms.outermost(cfg.pp, cfg.stride("pp"), tiers)
    # Megatron scatters the activation over the TP ranks' own links (scatter-gather in the
    # pipeline); each of the vp model chunks on a GPU sends forward and backward.
    message = _activation_message(shape, cfg) / (1 if cfg.sp else cfg.tp)
    vp = cfg.virtual_stages   # 1 without a pipeline: no bubble, no sends, whatever vp says
    p2p = 2 * vp * comms.point_to_point(message, boundary) if cfg.pp > 1 else 0.0
    # MTP modules sit after the output layer, on the last stage: a projection, one more
    # layer like the last, and the shared output head again (DeepSeek-V3 Sec 2.2). With a
    # pipeline, the layout gives that stage fewer decoder layers to carry them (Megatron's
    # `pipeline_model_parallel_layout`, as the DeepSeek-V3 recipes set it): their work is
    # spread over the pp stages like the layers'.
    mtp = shape.mtp * ((moe if shape.is_moe else dense).total + logits + _mtp_projection(shape, cfg, chip)) / cfg.pp
    stage = dense_layers * dense.total + moe_layers * moe.total + logits + mtp + p2p
    m = cfg.microbatches
    # The same bubble under GPipe and 1F1B (Narayanan et al. 2021, Sec 2.2.1); the schedules
    # differ in the activations held (model/memory.py `in_flight`). The step runs at the pace
    # of the last stage, which also carries the output layer; the fill and the drain pass
    # through the other p - 1 stages, which do not: the bubble is (p - 1) / v of a stage
    # without it (with stages of times t_i and the last the slowest, 1F1B takes
    # m x t_last + sum of the other t_i).
    bubble = (cfg.pp - 1) / vp * (stage - logits) if cfg.pp > 1 else 0.0
    # One micro-batch through this stage's layers, exposed communication included: the
    # window that gradient reduction and parameter gathering overlap with.
    layer_pass = dense_layers * dense.total + moe_layers * moe.total
    dp = _dp_exposed(shape, cfg, partition, layer_pass) + _embedding_sync(shape, cfg, tiers)
    optimizer = optimizer_time(shape, cfg, partition)
    per = lambda field: m * (dense_layers * getattr(dense, field) + moe_layers * getattr(moe, field))  # noqa: E731
    last = moe if shape.is_moe else dense
    extra = lambda field: m * shape.mtp / cfg.pp * getattr(last, field)  # noqa: E731
    compute = _compute_term(shape, cfg, chip, (dense.forward, dense.backward), (moe.forward, moe.backward), logits)
    breakdown = Breakdown(compute, per("recompute") + extra("recompute"), per("tp") + extra("tp"),
                          per("cp") + extra("cp"), per("ep") + extra("ep"), m * p2p, bubble, dp, optimizer,
                          offload=offload.exposed(shape, cfg, partition, dense, moe))
    waiting = max(0.0, dpu.host_time(shape, cfg, partition) - breakdown.total)
    data, checkpoint = host.host_terms(shape, cfg, partition, breakdown.total + waiting)
    if waiting or data or checkpoint:
        breakdown = attrs.evolve(breakdown, host=waiting, data=data, checkpoint=checkpoint)
    step = breakdown.total
    tokens = cfg.batch * cfg.seq
    model_flops = _model_flops_per_token(shape, cfg.seq) * tokens
    hardware_flops = model_flops + _recompute_flops(shape, cfg) * tokens
    denominator = step * cfg.gpus * peak(chip, cfg.precision)
    held = memory(shape, cfg)
    # the node's DRAM holds the checkpoint staging buffer and any offloaded activations
    dram = offload_host.host_memory(shape, cfg, partition, held.offloaded)
    return Estimate(cfg, step, breakdown, tokens / step, model_flops / denominator, hardware_flops / denominator,
                    model_flops / step / cfg.gpus, held, chip.hbm_capacity, dram.need, dram.available)


def compute_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> tuple[float, float]:
    """(the compute term of `estimate`'s breakdown, the step's model FLOPs over the GPUs'
    peak in seconds), without the rest of the estimate: what the search bounds with."""
    chip = partition.node.accelerator
    dense, moe = _blend_compute(shape, cfg, chip, False), _blend_compute(shape, cfg, chip, True)
    model_flops = _model_flops_per_token(shape, cfg.seq) * cfg.batch * cfg.seq
    return (_compute_term(shape, cfg, chip, dense, moe, _logits(shape, cfg, chip)),
            model_flops / peak(chip, cfg.precision))


def _compute_term(shape: ModelShape, cfg: TrainConfig, chip, dense: tuple[float, float], moe: tuple[float, float],
                  logits: float) -> float:
    """The breakdown's compute: the stage's layers forward and backward (`dense`, `moe`: one
    mean layer's), the output layer, and its share of the MTP modules (a layer like the
    last, the output head again and the projection), every micro-batch."""
    moe_layers = shape.moe_layers / cfg.pp
    dense_layers = shape.layers / cfg.pp - moe_layers
    m = cfg.microbatches
    compute = m * (dense_layers * dense[0] + moe_layers * moe[0]) + m * (dense_layers * dense[1] + moe_layers * moe[1])
    compute += m * logits
    if shape.mtp:
        last = moe if shape.is_moe else dense
        compute += m * shape.mtp / cfg.pp * (last[0] + last[1] + logits + _mtp_projection(shape, cfg, chip))
    return compute


def output_layer_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Seconds of the output layer and loss per micro-batch on the last stage, forward and
    backward: part of the step's pace, not of the pipeline's fill and drain (the bubble)."""
    return _logits(shape, cfg, partition.node.accelerator)


def moe_overhead_time(shape: ModelShape, cfg: TrainConfig) -> float:
    """A floor of `estimate`'s EP term: the host time of the stage's MoE layers (MTP's
    included), paid by every micro-batch whatever the placement (0 for a dense model)."""
    if not shape.is_moe:
        return 0.0
    return cfg.microbatches * (shape.moe_layers + shape.mtp) / cfg.pp * routed.host_exposed(shape, cfg)


def _local_share(shape: ModelShape) -> float:
    """Share of the layers with sliding-window attention (model/shape.py)."""
    return shape.local_layers / shape.layers if shape.layers else 0.0


def _blend(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool) -> _Layer:
    """The mean layer over sliding-window and global-attention layers (model/shape.py)."""
    local = _local_share(shape)
    if local == 0:
        return _layer(shape, cfg, partition, moe)
    windowed = _layer(shape, cfg, partition, moe, True)
    if local == 1:
        return windowed
    full = _layer(shape, cfg, partition, moe)
    return _Layer(*(local * getattr(windowed, f.name) + (1 - local) * getattr(full, f.name)
                    for f in attrs.fields(_Layer)))


def _blend_compute(shape: ModelShape, cfg: TrainConfig, chip, moe: bool) -> tuple[float, float]:
    """(forward, backward) of `_blend`'s mean layer, the same arithmetic without the rest."""
    local = _local_share(shape)
    if local == 0:
        return _layer_compute(shape, cfg, chip, moe)[:2]
    windowed = _layer_compute(shape, cfg, chip, moe, True)
    if local == 1:
        return windowed[:2]
    full = _layer_compute(shape, cfg, chip, moe)
    return (local * windowed[0] + (1 - local) * full[0], local * windowed[1] + (1 - local) * full[1])


# Per-layer costs are memoized by the fields they read (tuple keys: cheaper than hashing
# a TrainConfig). The fields in LAYER_NEUTRAL (batch, virtual stages, the schedule, the ZeRO stage, the
# shard group, the offloaded share and the host's inputs: step-level terms) never change a
# layer's micro-batch cost, so configurations differing only there share the work; the
# arithmetic (forward, backward) does not depend on where the groups sit nor on the
# recompute either, so it is shared across pipeline depths, data-parallel widths, rank
# orders and recompute choices.
LAYER_NEUTRAL = frozenset({"batch", "vp", "gpipe", "zero", "sample_bytes", "checkpoint_every", "checkpoint_size",
                           "checkpoint_bandwidth", "shard", "offload"})
_CACHE_LIMIT = 65536   # bounded: a long sweep must not grow memory without end
_LAYERS: dict[tuple, _Layer] = {}
_COMPUTE: dict[tuple, tuple[float, float, float, float, tuple[tuple[str, float], ...]]] = {}
_LOGITS: dict[tuple, float] = {}
_RECOMPUTE_FLOPS: dict[tuple, float] = {}


def _remember(cache: dict, key: tuple, value):
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def layer_key(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool) -> tuple:
    """Every input of a layer's cost: each TrainConfig field but LAYER_NEUTRAL's
    (tests/model/test_moe_dense.py checks that no field is missing)."""
    return (shape, cfg.seq, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.microbatch, cfg.recompute, cfg.sp,
            cfg.precision, cfg.stack, cfg.order, cfg.cp_balanced, cfg.ep_overlap, cfg.recompute_modules,
            cfg.recompute_every, partition, moe, local)


def _layer(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool = False) -> _Layer:
    """One layer's seconds per micro-batch; `local`: a sliding-window layer. The key holds
    every field read below: pp and dp through the strides, the recompute's variants
    through model/recompute.py, the rest through the ops and the collectives."""
    key = layer_key(shape, cfg, partition, moe, local)
    layer = _LAYERS.get(key)
    if layer is not None:
        return layer
    tiers = partition.tiers
    forward, backward, attention, gemms, ops = _layer_compute(shape, cfg, partition.node.accelerator, moe, local)
    recompute = recompute_model.time(shape, cfg, moe, forward, ops)
    tp = _tp_exposed(shape, cfg, tiers, gemms)
    cp = context.ring_exposed(shape, cfg, tiers, attention)
    ep = _ep_exposed(shape, cfg, tiers, forward + backward) + routed.host_exposed(shape, cfg) if moe else 0.0
    return _remember(_LAYERS, key, _Layer(forward, backward, recompute, tp, cp, ep))


def clear_caches() -> None:
    """Forget every memoized layer (benchmarks measure cold searches)."""
    _LAYERS.clear()
    _COMPUTE.clear()
    _LOGITS.clear()
    _RECOMPUTE_FLOPS.clear()
    dpu.clear_caches()


def _layer_compute(shape: ModelShape, cfg: TrainConfig, chip, moe: bool,
                   local: bool = False) -> tuple[float, float, float, float, tuple[tuple[str, float], ...]]:
    """Seconds of one layer's forward, backward, attention and GEMMs per micro-batch, and
    each op's forward seconds by name (what a selective recompute redoes). The ops read
    the micro-batch, sequence, tp, cp, ep, sp, precision and stack only; the causal
    balance of the CP chunks scales the attention."""
    key = (shape, cfg.seq, cfg.tp, cfg.cp, cfg.ep, cfg.microbatch, cfg.sp, cfg.precision, cfg.stack, cfg.cp_balanced,
           chip, moe, local)
    parts = _COMPUTE.get(key)
    if parts is not None:
        return parts
    # with contiguous CP chunks every ring step waits for the rank with the most causal work
    imbalance = context.causal_imbalance(cfg, shape.window if local else 0)
    times = [(op, op_time(op, chip, cfg.precision) * (imbalance if op.kind == "attention" else 1.0))
             for op in layer_forward(shape, cfg, moe, local)]
    forward = sum(t for _, t in times)
    backward = sum(t * backward_factor(op) for op, t in times)
    attention = sum(t for op, t in times if op.kind == "attention")
    gemms = sum(t for op, t in times if op.kind == "gemm")
    return _remember(_COMPUTE, key, (forward, backward, attention, gemms, tuple((op.name, t) for op, t in times)))


def _logits(shape: ModelShape, cfg: TrainConfig, chip) -> float:
    """Seconds of the output layer and loss per micro-batch, forward and backward."""
    key = (shape, cfg.seq, cfg.tp, cfg.cp, cfg.microbatch, cfg.precision, chip)
    seconds = _LOGITS.get(key)
    if seconds is None:
        seconds = _remember(_LOGITS, key, sum(op_time(op, chip, cfg.precision) * (1 + backward_factor(op))
                                              for op in logits_forward(shape, cfg)))
    return seconds


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


def optimizer_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """The optimizer term of `estimate`'s breakdown: Adam's pass over this GPU's shards (dense
    and routed-expert state shard over their own groups: model/sharding.py)."""
    dense = dense_params_per_gpu(shape, cfg) / sharding.optimizer_shards(cfg)
    experts = expert_params_per_gpu(shape, cfg) / sharding.optimizer_shards(cfg, expert=True)
    return (dense + experts) * ADAM_BYTES_PER_PARAM / hbm_rate(partition.node.accelerator)


def _mtp_projection(shape: ModelShape, cfg: TrainConfig, chip) -> float:
    """Forward and backward of one MTP module's projection of [hidden; embedding] to hidden."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    forward = op_time(gemm("mtp projection", tokens, shape.hidden / cfg.tp, 2 * shape.hidden), chip, cfg.precision)
    return 3 * forward


@functools.lru_cache(maxsize=1024)
def _model_flops_per_token(shape: ModelShape, seq: int) -> float:
    return shape.model_flops_per_token(seq)


def _recompute_flops(shape: ModelShape, cfg: TrainConfig) -> float:
    """Extra forward FLOPs per token that recomputation adds (for HFU)."""
    key = (shape, cfg.seq, cfg.recompute, cfg.recompute_modules, cfg.recompute_every)
    flops = _RECOMPUTE_FLOPS.get(key)
    if flops is None:
        flops = _remember(_RECOMPUTE_FLOPS, key, recompute_model.flops_per_token(shape, cfg))
    return flops
