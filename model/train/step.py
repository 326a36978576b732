"""Step time of a training configuration on a partition: compute per micro-batch and
layer, exposed communication per parallel dimension, the pipeline bubble, gradient
synchronization and the optimizer, then throughput, MFU/HFU and memory."""

from __future__ import annotations

import functools
import math

import attrs

from ...compiler.ir import Partition
from . import dp_sync, dpu, host, offload, offload_host, pipeline, sharding
from . import incast
from . import optimizer as adam
from . import moe as routed
from .. import compute
from ..compute import hbm_rate, op_time, peak
from . import layer_cost
from . import memory as memory_model
from ..config import TrainConfig
from ..memo import remember
from .layer_cost import LAYER_NEUTRAL, Layer, blend, blend_compute, layer_key, logits, recompute_flops
from .memory import Memory, dense_params_per_gpu, expert_params_per_gpu, memory
from .quantized import gemm_format
from ..ops import gemm
from ..dvfs import with_cap
from ..ranks import rank_partition
from ..shape import ModelShape
from ...dsl.records import frozen

__all__ = ["LAYER_NEUTRAL", "Breakdown", "Estimate", "clear_caches", "compute_by_depth", "compute_time", "estimate",
           "layer_key",
           "moe_overhead_time", "optimizer_time"]


@frozen
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
    host: float = 0.0          # waiting for the host CPUs: launches and network proxy work (model/train/dpu.py)
    data: float = 0.0          # waiting for input the hosts (and DPUs) could not load in time
    checkpoint: float = 0.0    # this step's share of the synchronous checkpoint saves
    offload: float = 0.0       # activation copies to and from host memory that compute does not hide
    step_overhead: float = 0.0  # the hosts' fixed work between two steps (the node's `step_overhead`)

    @property
    def total(self) -> float:
        return sum((self.compute, self.recompute, self.tp, self.cp, self.ep, self.pp, self.bubble, self.dp,
                    self.optimizer, self.host, self.data, self.checkpoint, self.offload,
                    self.step_overhead))   # the fields' order

    def rows(self) -> tuple[tuple[str, float], ...]:
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(Breakdown))


@frozen
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
    host_memory: float = 0.0      # bytes of one node's DRAM the configuration needs (model/train/offload_host.py)
    host_dram: float = math.inf   # ... and what the node offers
    nvme_need: float = 0.0        # bytes of one node's local NVMe its retained checkpoints fill (model/train/host.py)
    nvme: float = math.inf        # ... and what the node offers
    paused: incast.Held | None = None   # data-parallel rings held behind an expert all-to-all under PFC
    alltoall: incast.AllToAll | None = None   # its expert all-to-all as an incast on a `pfc` fabric

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.config.gpus

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.hbm and self.host_fits and self.nvme_fits

    @property
    def host_fits(self) -> bool:
        return self.host_memory <= self.host_dram

    @property
    def nvme_fits(self) -> bool:
        return self.nvme_need <= self.nvme


def _running(partition: Partition, cfg: TrainConfig) -> Partition:
    """The partition as `cfg` runs on it: its chips under the configuration's power cap."""
    return with_cap(partition, cfg.power_cap) if cfg.power_cap is not None else partition


def estimate(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> Estimate:
    _check(cfg)
    partition = rank_partition(_running(partition, cfg), cfg.gpus)
    chip, tiers = partition.node.accelerator, partition.tiers
    dense, moe = blend(shape, cfg, partition, False), blend(shape, cfg, partition, True)
    moe_layers = shape.moe_layers / cfg.pp
    dense_layers = shape.layers / cfg.pp - moe_layers
    head = logits(shape, cfg, chip)
    # each of the vp model chunks on a GPU sends forward and backward, as the stack's
    # pipeline engine moves them (model/train/pipeline.py)
    vp = cfg.virtual_stages   # 1 without a pipeline: no bubble, no sends, whatever vp says
    p2p = pipeline.micro_batch_sends(shape, cfg, tiers)
    # One micro-batch through this stage's layers, exposed communication included: the
    # window that gradient reduction and parameter gathering overlap with.
    layers = dense_layers * dense.total + moe_layers * moe.total
    stage = layers + head + _mtp_time(shape, cfg, chip, dense, moe, head) + p2p
    # The same bubble under GPipe and 1F1B (Narayanan et al. 2021, Sec 2.2.1); the schedules
    # differ in the activations held (model/train/memory.py `in_flight`). The step runs at the pace
    # of the last stage, which also carries the output layer; the fill and the drain pass
    # through the other p - 1 stages, which do not: the bubble is (p - 1) / v of a stage
    # without it (with stages of times t_i and the last the slowest, 1F1B takes
    # m x t_last + sum of the other t_i). Those fill and drain passes are warm-up forwards and
    # cool-down backwards, which the 1F1B all-to-all overlap (`ep_overlap`) runs without a partner
    # (Megatron-Core core_r0.15.0 schedules.py `get_pp_rank_microbatches`, combined_1f1b.py): their
    # all-to-all is bare, not the paired pass's (`_bare`).
    bubble = (cfg.pp - 1) / vp * (stage - head + _bare(shape, cfg, dense, moe)) if cfg.pp > 1 else 0.0
    dp, paused, wire = _data_parallel_time(shape, cfg, partition, moe_layers, layer_pass=layers)
    optimizer = optimizer_time(shape, cfg, partition)
    compute = _compute_term(shape, cfg, chip, (dense.forward, dense.backward), (moe.forward, moe.backward), head)
    breakdown = Breakdown(compute, *_per_step(shape, cfg, dense, moe, ("recompute", "tp", "cp", "ep")),
                          cfg.microbatches * p2p, bubble, dp, optimizer,
                          offload=offload.exposed(shape, cfg, partition, dense, moe))
    return _estimate_of(shape, cfg, partition, _with_host(shape, cfg, partition, breakdown), paused, wire)


def _mtp_time(shape: ModelShape, cfg: TrainConfig, chip, dense, moe, head: float) -> float:
    """The multi-token-prediction modules' share of a stage. They sit after the output layer,
    on the last stage: a projection, one more layer like the last, and the shared output head
    again (DeepSeek-V3 Sec 2.2). With a pipeline, the layout gives that stage fewer decoder
    layers to carry them (Megatron's `pipeline_model_parallel_layout`, as the DeepSeek-V3
    recipes set it): their work is spread over the pp stages like the layers'."""
    if not shape.mtp:
        return 0.0
    return shape.mtp * ((moe if shape.is_moe else dense).total + head + _mtp_projection(shape, cfg, chip)) / cfg.pp


def _data_parallel_time(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe_layers: float,
                        layer_pass: float) -> tuple[float, incast.Held | None, float]:
    """(the data-parallel sync a step exposes, the PFC pause that slowed it or None, the
    seconds a step's expert all-to-all is on the wire)."""
    traffic = dp_sync.traffic(shape, cfg, partition)
    dp = dp_sync.exposed(traffic, cfg.zero, cfg.microbatches, cfg.overlaps_dp, layer_pass)
    # the all-to-all pauses the rings while it is on the wire, overlapped with compute or not
    wire = moe_layers * layer_cost.ep_exchange(shape, cfg, partition) if shape.is_moe and cfg.ep > 1 else 0.0
    paused = incast.held(cfg, partition.tiers, wire, layer_pass) if shape.is_moe else None
    if paused is not None:   # PFC: the rings beside the expert all-to-all move at the incast's pace
        slowed = dp_sync.exposed(dp_sync.Traffic(*(x * paused.factor for x in traffic)), cfg.zero, cfg.microbatches,
                                 cfg.overlaps_dp, layer_pass)
        paused, dp = attrs.evolve(paused, seconds=slowed - dp), slowed
    return dp + dp_sync.embedding_sync(shape, cfg, partition.tiers), paused, wire


def _with_host(shape: ModelShape, cfg: TrainConfig, partition: Partition, breakdown: Breakdown) -> Breakdown:
    """The step with what the hosts add: waiting on a DPU-bound host, the data loader, the
    checkpoint writes, and the fixed host work between two steps (the node's `step_overhead`:
    the loss and grad-norm reads that drain the GPU's queue, the optimizer's and the data
    loader's Python, the next step's first launches), which no GPU work hides."""
    fixed = partition.node.step_overhead   # the loader and the checkpoint's interval run through it too
    waiting = max(0.0, dpu.host_time(shape, cfg, partition) - breakdown.total)
    data, checkpoint = host.host_terms(shape, cfg, partition, breakdown.total + waiting + fixed)
    if waiting or data or checkpoint or fixed:
        breakdown = attrs.evolve(breakdown, host=waiting, data=data, checkpoint=checkpoint, step_overhead=fixed)
    return breakdown


def _estimate_of(shape: ModelShape, cfg: TrainConfig, partition: Partition, breakdown: Breakdown,
                 paused: incast.Held | None, wire: float) -> Estimate:
    """The step's rates, FLOP utilizations and memory (HBM, host DRAM, NVMe) beside its breakdown."""
    chip = partition.node.accelerator
    step = breakdown.total
    tokens = cfg.batch * cfg.seq
    model_flops = _model_flops_per_token(shape, cfg.seq) * tokens
    hardware_flops = model_flops + recompute_flops(shape, cfg) * tokens
    denominator = step * cfg.gpus * peak(chip, cfg.precision)
    held = memory(shape, cfg, chip)
    # the node's DRAM holds the checkpoint staging buffer and any offloaded activations
    dram = offload_host.host_memory(shape, cfg, partition, held.offloaded)
    return Estimate(cfg, step, breakdown, tokens / step, model_flops / denominator, hardware_flops / denominator,
                    model_flops / step / cfg.gpus, held, chip.hbm_capacity, dram.need, dram.available,
                    host.nvme_need(shape, cfg, partition.node), host.nvme_capacity(partition.node), paused,
                    incast.on_fabric(cfg, partition.tiers, wire, step))


def clear_caches() -> None:
    """Forget every memoized layer and host cost (benchmarks measure cold searches)."""
    compute.clear_caches()
    layer_cost.clear_caches()
    dp_sync.clear_caches()
    pipeline.clear_caches()
    _OPTIMIZER.clear()
    memory_model.clear_caches()
    dpu.clear_caches()


def bound_terms(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> tuple[float, float, float, float]:
    """(compute, TP, EP, optimizer) of `estimate`'s breakdown, the same arithmetic without
    the rest of the estimate: what the search bounds a micro-batch branch with."""
    _check(cfg)
    partition = rank_partition(_running(partition, cfg), cfg.gpus)
    chip = partition.node.accelerator
    dense, moe = blend(shape, cfg, partition, False), blend(shape, cfg, partition, True)
    compute = _compute_term(shape, cfg, chip, (dense.forward, dense.backward), (moe.forward, moe.backward),
                            logits(shape, cfg, chip))
    return (compute, *_per_step(shape, cfg, dense, moe, ("tp", "ep")), optimizer_time(shape, cfg, partition))


def _check(cfg: TrainConfig) -> None:
    if min(cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.vp, cfg.microbatch, cfg.batch) < 1:
        raise ValueError(f"every parallel width, the micro-batch and the batch must be >= 1: {cfg}")


def _per_step(shape: ModelShape, cfg: TrainConfig, dense: Layer, moe: Layer, fields: tuple[str, ...]) -> list[float]:
    """Components of the layers' cost over a step, one per field: the stage's layers and its
    share of the MTP modules' layers (like the last), every micro-batch."""
    moe_layers = shape.moe_layers / cfg.pp
    dense_layers = shape.layers / cfg.pp - moe_layers
    m = cfg.microbatches
    last = moe if shape.is_moe else dense
    mtp_share = m * shape.mtp / cfg.pp
    terms = [m * (dense_layers * getattr(dense, f) + moe_layers * getattr(moe, f)) + mtp_share * getattr(last, f)
             for f in fields]
    if "ep" in fields and moe.ep_alone:
        # the passes the 1F1B overlap leaves without a partner pay their all-to-all bare
        terms[fields.index("ep")] += routed.unpaired_share(cfg) * m * _bare(shape, cfg, dense, moe)
    return terms


def _bare(shape: ModelShape, cfg: TrainConfig, dense: Layer, moe: Layer) -> float:
    """Seconds one micro-batch's pass through the stage's layers (and its share of the MTP modules' layer,
    like the last) adds where no other micro-batch's pass runs beside it under the 1F1B all-to-all overlap:
    every MoE layer's exchange bare instead of hidden (`Layer.ep_alone`; 0 without the overlap)."""
    last = moe if shape.is_moe else dense
    return shape.moe_layers / cfg.pp * moe.ep_alone + shape.mtp / cfg.pp * last.ep_alone


def compute_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> tuple[float, float]:
    """(the compute term of `estimate`'s breakdown, the step's model FLOPs over the GPUs'
    peak in seconds), without the rest of the estimate: what the search bounds with."""
    chip = _running(partition, cfg).node.accelerator
    dense, moe = blend_compute(shape, cfg, chip, False), blend_compute(shape, cfg, chip, True)
    model_flops = _model_flops_per_token(shape, cfg.seq) * cfg.batch * cfg.seq
    return (_compute_term(shape, cfg, chip, dense, moe, logits(shape, cfg, chip)),
            model_flops / peak(chip, cfg.precision))


def compute_by_depth(shape: ModelShape, cfg: TrainConfig, partition: Partition,
                     pps) -> list[tuple[float, float, float]]:
    """For `cfg` with each pipeline depth of `pps` in turn: `compute_time`'s two terms and
    `moe_overhead_time` (the same arithmetic), the per-layer work shared by every depth."""
    chip = _running(partition, cfg).node.accelerator
    dense, moe = blend_compute(shape, cfg, chip, False), blend_compute(shape, cfg, chip, True)
    head = logits(shape, cfg, chip)
    flops = _model_flops_per_token(shape, cfg.seq) * cfg.batch * cfg.seq / peak(chip, cfg.precision)
    return [(_compute_term(shape, cfg, chip, dense, moe, head, pp), flops, moe_overhead_time(shape, cfg, pp))
            for pp in pps]


def _compute_term(shape: ModelShape, cfg: TrainConfig, chip, dense: tuple[float, float], moe: tuple[float, float],
                  logits: float, pp: int | None = None) -> float:
    """The breakdown's compute: the stage's layers forward and backward (`dense`, `moe`: one
    mean layer's), the output layer, and its share of the MTP modules (a layer like the
    last, the output head again and the projection), every micro-batch (`pp`: for `cfg`
    with that many stages)."""
    pp = cfg.pp if pp is None else pp
    moe_layers = shape.moe_layers / pp
    dense_layers = shape.layers / pp - moe_layers
    m = cfg.microbatches
    compute = m * (dense_layers * dense[0] + moe_layers * moe[0]) + m * (dense_layers * dense[1] + moe_layers * moe[1])
    compute += m * logits
    if shape.mtp:
        last = moe if shape.is_moe else dense
        compute += m * shape.mtp / pp * (last[0] + last[1] + logits + _mtp_projection(shape, cfg, chip))
    return compute


def output_layer_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Seconds of the output layer and loss per micro-batch on the last stage, forward and
    backward: part of the step's pace, not of the pipeline's fill and drain (the bubble)."""
    return logits(shape, cfg, _running(partition, cfg).node.accelerator)


def moe_overhead_time(shape: ModelShape, cfg: TrainConfig, pp: int | None = None) -> float:
    """A floor of `estimate`'s EP term: the host time of the stage's MoE layers (MTP's
    included), paid by every micro-batch whatever the placement (0 for a dense model)."""
    if not shape.is_moe:
        return 0.0
    pp = cfg.pp if pp is None else pp
    return cfg.microbatches * (shape.moe_layers + shape.mtp) / pp * routed.host_exposed(shape, cfg)


def optimizer_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """The optimizer term of `estimate`'s breakdown: Adam's pass over this GPU's shards (dense
    and routed-expert state shard over their own groups: model/train/sharding.py), the bytes it moves
    per parameter at the state's precisions (model/train/optimizer.py)."""
    # read for every estimate and bound: memoized by the fields it reads (the layout, the shard
    # group, the ZeRO stage, and what model/train/optimizer.py `step_bytes` reads)
    partition = _running(partition, cfg)
    key = (shape, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.shard, cfg.zero, cfg.optimizer_state,
           cfg.second_moment, cfg.master_weights, cfg.main_grads, cfg.precision_aware_optimizer, cfg.stack, cfg.precision,
           cfg.mx_fp8, partition)
    seconds = _OPTIMIZER.get(key)
    if seconds is None:
        dense = dense_params_per_gpu(shape, cfg) / sharding.optimizer_shards(cfg)
        experts = expert_params_per_gpu(shape, cfg) / sharding.optimizer_shards(cfg, expert=True)
        seconds = remember(_OPTIMIZER, key, (dense + experts) * adam.step_bytes(cfg)
                           / hbm_rate(partition.node.accelerator))
    return seconds


_OPTIMIZER: dict[tuple, float] = {}


def _mtp_projection(shape: ModelShape, cfg: TrainConfig, chip) -> float:
    """Forward and backward of one MTP module's projection of [hidden; embedding] to hidden."""
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    forward = op_time(gemm("mtp projection", tokens, shape.hidden / cfg.tp, 2 * shape.hidden), chip, gemm_format(cfg))
    return 3 * forward


@functools.lru_cache(maxsize=1024)
def _model_flops_per_token(shape: ModelShape, seq: int) -> float:
    return shape.model_flops_per_token(seq)
