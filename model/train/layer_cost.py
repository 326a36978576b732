"""One layer's seconds per micro-batch on one GPU (forward, backward, recompute and the
exposed TP, CP and EP communication), the output layer's, and the memo that shares them
between the configurations a search estimates (model/train/step.py assembles the step)."""

from __future__ import annotations

from itertools import chain
from typing import NamedTuple

import attrs

from ...compiler.formats import is_narrow
from ...compiler.ir import Partition
from .. import comms
from .. import collectives
from . import context
from . import moe as routed
from . import recompute as recompute_model
from ..compute import op_time
from ..config import TrainConfig
from ..memo import remember as _remember
from ..network.placement import SCALE_UP_SCOPES
from ..shape import ModelShape
from .quantized import fp8_token_bytes, gemm_format
from .workload import after_routing_ops, backward_factor, layer_forward, logits_forward, mixer_ops, mlp_ops
from ...dsl.records import frozen

TP_OVERLAP_RESIDUE = 0.1   # share of overlapped TP traffic still exposed (chunk pipeline fill)
# While one micro-batch's all-to-all overlaps another's compute, the dispatch and combine
# kernels hold SMs the compute then lacks: DeepSeek-V3 dedicates 20 of H800's 132 SMs to them,
# enough to saturate InfiniBand and NVLink (DeepSeek-V3 Technical Report, Sec 3.2.2); DeepEP's
# V1 kernels took 24 for training (deepseek-ai/DeepEP README: "For V3-like legacy training, SM
# usage reduced from 24 to 4 - 6" in V2). ESTIMATE: the same share of any chip's SMs, whatever
# the dispatcher (NCCL's all-to-all runs one CTA per channel as well).
EP_COMM_SM_SHARE = 20 / 132


@frozen
class Layer:
    """Per micro-batch seconds of one layer on one GPU, by component."""

    forward: float
    backward: float
    recompute: float
    tp: float
    cp: float
    ep: float
    # What a pass that no other micro-batch's compute hides pays beyond `ep`: the overlapped
    # all-to-all bare (model/train/moe.py `unpaired_share` says how many passes; not in `total`).
    ep_alone: float = 0.0

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute + self.tp + self.cp + self.ep


# The MoE layer of a model without one: weighted by no layers, it adds nothing.
NO_LAYER = Layer(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def local_share(shape: ModelShape) -> float:
    """Share of the layers with sliding-window attention (model/shape.py)."""
    return shape.local_layers / shape.layers if shape.layers else 0.0


def blend(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool) -> Layer:
    """The mean layer over sliding-window and global-attention layers (model/shape.py)."""
    if moe and not shape.is_moe:
        return NO_LAYER
    local = local_share(shape)
    if local == 0:
        return layer(shape, cfg, partition, moe)
    windowed = layer(shape, cfg, partition, moe, True)
    if local == 1:
        return windowed
    full = layer(shape, cfg, partition, moe)
    return Layer(*(local * getattr(windowed, f.name) + (1 - local) * getattr(full, f.name)
                   for f in attrs.fields(Layer)))


def blend_compute(shape: ModelShape, cfg: TrainConfig, chip, moe: bool) -> tuple[float, float]:
    """(forward, backward) of `blend`'s mean layer, the same arithmetic without the rest."""
    if moe and not shape.is_moe:
        return (0.0, 0.0)
    local = local_share(shape)
    if local == 0:
        return layer_compute(shape, cfg, chip, moe)[:2]
    windowed = layer_compute(shape, cfg, chip, moe, True)
    if local == 1:
        return windowed[:2]
    full = layer_compute(shape, cfg, chip, moe)
    return (local * windowed[0] + (1 - local) * full[0], local * windowed[1] + (1 - local) * full[1])


# Per-layer costs are memoized by the fields they read (tuple keys: cheaper than hashing
# a TrainConfig). The fields in LAYER_NEUTRAL (batch, virtual stages, the schedule, the ZeRO stage, the
# shard group, the offloaded share, the host's inputs, the optimizer state's precisions, the DP overlap:
# step-level terms) never change a layer's micro-batch cost, so configurations differing only
# there share the work. The pipeline depth, the data-parallel width and the rank order reach a layer only through
# where its TP and CP groups sit (their strides; expert groups take consecutive ranks), so
# the key holds the strides instead of them. The arithmetic (forward, backward) does not
# depend on where the groups sit nor on the recompute either, so it is shared across
# pipeline depths, data-parallel widths, rank orders and recompute choices; a dense
# layer's, across expert-parallel widths too.
LAYER_NEUTRAL = frozenset({"batch", "vp", "gpipe", "zero", "sample_bytes", "checkpoint_every", "checkpoint_size",
                           "checkpoint_bandwidth", "checkpoint_keep", "dataset_bytes", "shard", "offload", "optimizer_state", "second_moment", "master_weights",
                           "main_grads", "precision_aware_optimizer", "non_tn_fp8", "fp8_params", "loss", "dp_overlap", "grad_reduce", "dropout",
                           "power_cap"})   # power_cap: through the partition (step.py `_running`)
PLACEMENT = frozenset({"pp", "dp", "order"})   # in the key through the TP and CP strides
_LAYERS: dict[tuple, Layer] = {}
_COMPUTE: dict[tuple, tuple[float, float, float, float, tuple[tuple[str, float], ...]]] = {}
_MIXER: dict[tuple, _Timed] = {}
_ROUTED: dict[tuple, _Timed] = {}
_AFTER_ROUTING: dict[tuple, _Timed] = {}
_ALL_TO_ALL: dict[tuple, float] = {}
_LOGITS: dict[tuple, float] = {}
_TP_ALL_REDUCE: dict[tuple, float] = {}
_RECOMPUTE_FLOPS: dict[tuple, float] = {}


def layer_key(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool) -> tuple:
    """Every input of a layer's cost: each TrainConfig field but LAYER_NEUTRAL's and
    PLACEMENT's, and the strides PLACEMENT's fields set (tests/model/train/test_moe_dense.py
    checks that no field is missing)."""
    return (shape, cfg.seq, cfg.tp, cfg.stride("tp") if cfg.tp > 1 else 0, cfg.cp,
            cfg.stride("cp") if cfg.cp > 1 else 0, cfg.ep, cfg.microbatch, cfg.recompute, cfg.sp,
            gemm_format(cfg), cfg.stack, cfg.cp_balanced, cfg.ep_overlap, cfg.dispatcher, cfg.tp_overlap, cfg.recompute_modules,
            cfg.recompute_every, partition, moe, local)


def layer(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool, local: bool = False) -> Layer:
    """One layer's seconds per micro-batch; `local`: a sliding-window layer. The key holds
    every field read below: pp, dp and the order through the strides, the recompute's
    variants through model/train/recompute.py, the rest through the ops and the collectives."""
    key = layer_key(shape, cfg, partition, moe, local)
    cost = _LAYERS.get(key)
    if cost is not None:
        return cost
    tiers = partition.tiers
    forward, backward, attention, gemms, ops = layer_compute(shape, cfg, partition.node.accelerator, moe, local)
    recompute = recompute_model.time(shape, cfg, moe, forward, ops)
    tp = _tp_exposed(shape, cfg, partition, gemms)
    cp = context.ring_exposed(shape, cfg, tiers, attention)
    ep = alone = 0.0
    if moe:
        exposed = _ep_exposed(shape, cfg, partition, forward + backward)
        ep = exposed + routed.host_exposed(shape, cfg)
        alone = ep_exchange(shape, cfg, partition) - exposed if cfg.overlaps_ep and cfg.ep > 1 else 0.0
    return _remember(_LAYERS, key, Layer(forward, backward, recompute, tp, cp, ep, alone))


def clear_caches() -> None:
    """Forget every memoized layer (benchmarks measure cold searches)."""
    _LAYERS.clear()
    _COMPUTE.clear()
    _MIXER.clear()
    _ROUTED.clear()
    _AFTER_ROUTING.clear()
    _ALL_TO_ALL.clear()
    _LOGITS.clear()
    _TP_ALL_REDUCE.clear()
    _RECOMPUTE_FLOPS.clear()


def layer_compute(shape: ModelShape, cfg: TrainConfig, chip, moe: bool,
                  local: bool = False) -> tuple[float, float, float, float, tuple[tuple[str, float], ...]]:
    """Seconds of one layer's forward, backward, attention and GEMMs per micro-batch, and
    each op's forward seconds by name (what a selective recompute redoes). The ops read
    the micro-batch, sequence, tp, cp, ep (MoE layers only), sp, precision and stack only;
    the causal balance of the CP chunks scales the attention."""
    key = (shape, cfg.seq, cfg.tp, cfg.cp, cfg.ep if moe else 0, cfg.microbatch, cfg.sp, gemm_format(cfg), cfg.stack,
           cfg.cp_balanced, chip, moe, local)
    parts = _COMPUTE.get(key)
    if parts is not None:
        return parts
    if shape.parallel_block and not moe:   # the MLP's first GEMM is fused into the first projection
        parts = (_timed(shape, cfg, chip, local, layer_forward(shape, cfg, moe, local)),)
    elif moe:   # the routed experts' ops depend on the tokens each GPU routes and ep alone
        parts = (_mixer(shape, cfg, chip, local), _routed(shape, cfg, chip), _after_routing(shape, cfg, chip))
    else:   # the same projections and attention in dense and MoE layers: timed once for both
        parts = (_mixer(shape, cfg, chip, local), _timed(shape, cfg, chip, local, mlp_ops(shape, cfg, moe)))
    # each sum over the layer's ops in order (the parts' terms were computed as they were timed)
    return _remember(_COMPUTE, key, tuple([sum(chain.from_iterable([part[i] for part in parts])) for i in range(4)])
                     + (tuple(chain.from_iterable([part.named for part in parts])),))


class _Timed(NamedTuple):
    """Ops timed in order: what `layer_compute` sums, term by term, for each op."""

    forward: tuple[float, ...]             # forward seconds
    backward: tuple[float, ...]            # forward seconds x the op's backward factor
    attention: tuple[float, ...]           # the attention ops' forward seconds
    gemms: tuple[float, ...]               # the GEMMs' forward seconds
    named: tuple[tuple[str, float], ...]   # (name, forward seconds)


def _mixer(shape: ModelShape, cfg: TrainConfig, chip, local: bool) -> _Timed:
    """The projections' and attention's forward seconds (workload.mixer_ops), by op."""
    key = (shape, cfg.seq, cfg.tp, cfg.cp, cfg.microbatch, cfg.sp, gemm_format(cfg), cfg.stack, cfg.cp_balanced, chip,
           local)
    timed = _MIXER.get(key)
    if timed is None:
        timed = _remember(_MIXER, key, _timed(shape, cfg, chip, local, mixer_ops(shape, cfg, local)))
    return timed


def _routed(shape: ModelShape, cfg: TrainConfig, chip) -> _Timed:
    """The routed experts' forward seconds by op (model/train/moe.py `layer_ops`: it reads the
    tokens one GPU routes, ep, the capacity factor and whether the stack runs the clamp and the
    experts' bias eager; the ops are timed at the precision)."""
    key = (shape, routed.moe_tokens(cfg), cfg.ep, gemm_format(cfg), routed.runs_unfused(cfg), chip)
    timed = _ROUTED.get(key)
    if timed is None:
        timed = _remember(_ROUTED, key, _timed(shape, cfg, chip, False, routed.layer_ops(shape, cfg)))
    return timed


def _after_routing(shape: ModelShape, cfg: TrainConfig, chip) -> _Timed:
    """The shared experts' and the elementwise work's forward seconds by op (workload.py
    `after_routing_ops`: they read the tokens of the micro-batch's CP chunk, tp, sp, the
    precision and the stack, not ep)."""
    key = (shape, cfg.microbatch * cfg.seq / cfg.cp, cfg.tp, cfg.sp, gemm_format(cfg), cfg.stack, chip)
    timed = _AFTER_ROUTING.get(key)
    if timed is None:
        timed = _remember(_AFTER_ROUTING, key, _timed(shape, cfg, chip, False, after_routing_ops(shape, cfg)))
    return timed


def _timed(shape: ModelShape, cfg: TrainConfig, chip, local: bool, ops) -> _Timed:
    # with contiguous CP chunks every ring step waits for the rank with the most causal work
    imbalance = context.causal_imbalance(cfg, shape.window if local else 0)
    times = [(op, op_time(op, chip, gemm_format(cfg)) * (imbalance if op.kind == "attention" else 1.0)) for op in ops]
    return _Timed(tuple([t for _, t in times]), tuple([t * backward_factor(op) for op, t in times]),
                  tuple([t for op, t in times if op.kind == "attention"]),
                  tuple([t for op, t in times if op.kind == "gemm"]), tuple([(op.name, t) for op, t in times]))


def logits(shape: ModelShape, cfg: TrainConfig, chip) -> float:
    """Seconds of the output layer and loss per micro-batch, forward and backward."""
    key = (shape, cfg.seq, cfg.tp, cfg.cp, cfg.microbatch, gemm_format(cfg), chip)
    seconds = _LOGITS.get(key)
    if seconds is None:
        seconds = _remember(_LOGITS, key, sum(op_time(op, chip, gemm_format(cfg)) * (1 + backward_factor(op))
                                              for op in logits_forward(shape, cfg)))
    return seconds


def recompute_flops(shape: ModelShape, cfg: TrainConfig) -> float:
    """Extra forward FLOPs per token that recomputation adds (for HFU)."""
    key = (shape, cfg.seq, cfg.recompute, cfg.recompute_modules, cfg.recompute_every)
    flops = _RECOMPUTE_FLOPS.get(key)
    if flops is None:
        flops = _remember(_RECOMPUTE_FLOPS, key, recompute_model.flops_per_token(shape, cfg))
    return flops


def activation_message(shape: ModelShape, cfg: TrainConfig) -> float:
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    return 2 * tokens * shape.hidden / (cfg.tp if cfg.sp else 1)


def _tp_exposed(shape: ModelShape, cfg: TrainConfig, partition: Partition, gemms: float) -> float:
    """Two all-reduces (or reduce-scatter + all-gather pairs) forward, two backward, two
    more when the forward is recomputed; overlapped with the GEMMs by stacks that can."""
    if cfg.tp == 1:
        return 0.0
    nbytes, stride = activation_message(shape, cfg) * (cfg.tp if cfg.sp else 1), cfg.stride("tp")
    # one all-reduce reads its bytes and where the group sits alone: shared by every recompute choice
    key = (nbytes, cfg.tp, stride, partition)
    one = _TP_ALL_REDUCE.get(key)
    if one is None:
        one = _remember(_TP_ALL_REDUCE, key, collectives.all_reduce(nbytes, comms.place(cfg.tp, stride, partition.tiers)))
    # With sequence parallelism the backward needs the layer input gathered again
    # (Korthikanti et al. 2022, Sec 4.2.2): half an all-reduce more.
    count = 4 + recompute_model.tp_collectives(cfg) + (0.5 if cfg.sp else 0)
    # A parallel block sums the attention and MLP outputs before one reduction: half of them
    total = count * one * (0.5 if shape.parallel_block else 1.0)
    if not cfg.overlaps_tp:
        return total
    # Overlapped, the GEMMs and their collectives take as long as the slower of the two,
    # so faster GEMMs or faster links can never lengthen the step.
    return max(total - gemms, 0.0) + TP_OVERLAP_RESIDUE * total


def _exchange(shape: ModelShape, cfg: TrainConfig, stages, dispatch: float) -> float:
    """Seconds of one MoE layer's four exchanges (dispatch and combine, forward and backward) as
    the dispatcher moves them: all-to-alls of the routed copies it sends (model/train/moe.py
    `sent_share`), or the allgather dispatcher's all-gather and reduce-scatter of the group's
    tokens (each one's backward is the other). The flex dispatchers (DeepEP, HybridEP) cross nodes once per
    destination node and forward inside it, as serving's DeepEP does (model/comms.py `forwarded_all_to_all`,
    model/train/moe.py `node_bytes`)."""
    if cfg.moe_dispatcher == "allgather":
        return sum(collectives.all_gather(routed.gathered_bytes(shape, cfg, b), stages) +
                   collectives.reduce_scatter(routed.gathered_bytes(shape, cfg, 2), stages) for b in (dispatch, 2))
    # the alltoall dispatcher forwards nothing: no forwarding domain, a plain all-to-all of what it sends
    flex = cfg.moe_dispatcher in routed.FLEX
    domain, most = (SCALE_UP_SCOPES, routed.FORWARDING[cfg.moe_dispatcher]) if flex else ((), None)
    per_node = comms.node_members(stages, domain, most)
    return sum(collectives.forwarded_all_to_all(routed.dispatch_bytes(shape, cfg, b),
                                                routed.node_bytes(shape, cfg, per_node, b), stages, domain, most)
               for b in (dispatch, 2, 2, 2))


def _ep_exposed(shape: ModelShape, cfg: TrainConfig, partition: Partition, compute: float) -> float:
    """Dispatch and combine all-to-all, forward and backward (four per MoE layer), of the
    busiest rank's routed copies (model/train/moe.py); fp8 recipes dispatch in fp8, everything
    else moves bf16. The all-to-all waits on the router before it and the experts wait on
    it, so within a micro-batch nothing hides it: only a run that overlaps one
    micro-batch's all-to-all with another's compute (`ep_overlap`) hides it, up to that
    compute, which then runs on the SMs the exchange leaves it (`overlap_contention`)."""
    if cfg.ep == 1:
        return 0.0
    total = ep_exchange(shape, cfg, partition)
    if not cfg.overlaps_ep:
        return total
    return max(total - compute, 0.0) + overlap_contention(total, compute)


def overlap_contention(exchange: float, compute: float) -> float:
    """Seconds an overlapped all-to-all adds to the compute beside it: while the two overlap
    (the shorter of them), the compute runs on 1 - EP_COMM_SM_SHARE of the SMs."""
    return EP_COMM_SM_SHARE / (1 - EP_COMM_SM_SHARE) * min(exchange, compute)


def ep_exchange(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """The four all-to-alls of one MoE layer and micro-batch on the wire, hidden or not (what
    keeps the NICs busy beside the data-parallel rings: model/train/incast.py)."""
    # the exchange reads the tokens one GPU routes, ep, the precision and the tiers alone:
    # shared by every tp, cp, micro-batch and recompute choice that routes as many tokens
    key = (shape, routed.moe_tokens(cfg), cfg.ep, cfg.precision, cfg.mx_fp8, cfg.moe_dispatcher, partition)
    total = _ALL_TO_ALL.get(key)
    if total is None:
        # dispatched in fp8 by every sub-16-bit recipe (docs/moe_dispatcher.md: Megatron-Core's
        # dispatchers send bf16 unless `moe_dispatch_fwd_dtype = mxfp8`, a known deviation), never
        # narrower, with its scales (1 + 1/32: model/train/quantized.py)
        dispatch = fp8_token_bytes(cfg) if is_narrow(cfg.precision) else 2
        stages = comms.place(cfg.ep, cfg.stride("ep"), partition.tiers)
        total = _remember(_ALL_TO_ALL, key, _exchange(shape, cfg, stages, dispatch))
    return total
