"""Observations: each measured number beside the model's prediction of it on the design's
partition, and the constants it informs. A kernel row informs its chip's efficiency of
that kind, a collective's time the efficiency and latency of the fabrics it crosses, a
training run's throughput the chip's GEMM efficiency at the run's precision."""

from __future__ import annotations

import math
from typing import Callable

import attrs

from ...compiler.ir import Partition
from ...compiler.measure.records import CollectiveRun, KernelPoint, KernelRun
from ...dsl.source import Span
from ...model import collectives, comms, compute
from ...model.network import nccl
from ...model.ops import ACT_BYTES, Op, elementwise, gemm
from ...model.ranks import rank_partition
from .params import gemm_key
from ...dsl.records import frozen

# A kernel benchmark runs faster than the same GEMMs inside a training step: the chips'
# stated (training) efficiencies are about 0.80 of their best-shape kernel shares where both
# were measured (H100 bf16 65 % of 80.3 %, fp8 57 % of 70.9 %: MAMF, dsl/std/nvidia.gcl [mb];
# B200 fp8's fit, 48 % of 76.3 %, is the outlier); dsl/std/ uses the same 0.80 for B200 and
# GB200 bf16. A kernel row is predicted at the chip's efficiency / TRAINING_SHARE, so that it
# moves the training efficiency by what it measures relative to that.
TRAINING_SHARE = 0.80
# Fused attention likewise: a Hopper's training attention efficiency (its kernels times the
# in-training share, model/compute.py) of the FlashAttention-3 forward kernel's 616 of 989
# TFLOP/s (Shah et al. 2024, Fig. 5: causal, head dim 128, 16k keys). ASSUMPTION: one
# generation's ratio holds for others.
ATTENTION_TRAINING_SHARE = compute.generation_efficiency("hopper") * compute.training_share("hopper") / (616 / 989)
# How far a prediction of each kind is trusted (standard deviation of log measured /
# predicted, ASSUMPTIONS): a training step as the shipped band's scale (model/calibration.py
# BAND_SCALE), a kernel row as close, a collective time further (protocols, channels and
# algorithm switches NCCL's tables simplify). Not the shipped band's deviation (8.4 %): that
# spreads runs around another system's fit, the between-system offset the constants' prior
# spread already carries; counted again as each run's noise, the fit pulled less toward the
# operator's runs (calibrate_own.py held-back median 5.1 -> 5.3 %) and the band over-covered
# (82 -> 87 %).
NOISE = {"kernel": 0.05, "collective": 0.10, "train": 0.05, "serve": 0.10}
# What nccl-tests runs that the model times (model/comms.py).
MODELLED = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")


@frozen(eq=False)
class Observation:
    kind: str                    # kernel | collective | train | serve
    group: str                   # the run it belongs to (held out together)
    what: str                    # the measurement in words
    measured: float
    unit: str                    # s | tokens/s
    informs: tuple[tuple[str, str, str], ...]
    predict: Callable[[Partition], float]   # on `partition` with the constants under trial
    partition: Partition
    span: Span
    end_to_end: bool = False     # a whole step or serving run: counted in the band
    covers: tuple[str, int, bool] | None = None   # an end-to-end run's precision, GPUs and MoE
    # A prediction that reads the constants themselves (a serving run: the engine's host time
    # is no part of the partition), and how to re-anchor it at fitted values (observe_serve.py)
    predict_values: Callable[[dict], float] | None = None
    settle: Callable[[dict], None] | None = None
    priors: tuple = ()           # Params of constants that are neither a chip's nor a fabric's
    # A training run's model (its architecture, observe_train.architecture): the run's step time
    # carries that model's offset (params.model_param) where the fit has one, a nuisance term that
    # keeps one model's miss out of the cluster's constants
    model: str = ""
    step_tokens: float = 0.0     # a training run's tokens per GPU a step: its step length is step_tokens / measured
    # ... and its work per GPU a step: model FLOPs per GPU (step_overhead.separable), recompute left
    # out (the step model adds it): runs of one recompute setting differ in it by the same factor, so
    # their works compare alike; two runs of different recompute and the same model FLOPs read as one work
    step_flops: float = 0.0

    @property
    def noise(self) -> float:
        return NOISE[self.kind]


def kernel_observations(run: KernelRun, partition: Partition) -> tuple[list[Observation], list[str]]:
    """One observation per kernel row; the rows the chip cannot run, explained."""
    chip, out, skipped = partition.node.accelerator, [], []
    device = run.about("gpu") or ""
    if device.lower().startswith("cpu"):
        # `gclc probe` on a machine without a GPU (its format check in CI): nothing of the chip's
        return [], [f"{run.span.path}: measured on `{device}`, not on a GPU; run `gclc probe` on a host of "
                    f"the design's `{chip.name}`"]
    for point in run.points:
        if point.kind != "hbm_copy" and not chip.runs(point.precision):
            skipped.append(f"{point.span}: `{chip.name}` does not run {point.precision}")
            continue
        key = {"gemm": gemm_key(point.precision), "attention": "attention", "hbm_copy": "hbm"}[point.kind]
        out.append(Observation("kernel", f"{run.span.path}", _kernel_words(point), point.seconds, "s",
                               (("chip", chip.name, key),), _kernel_time(point), partition, point.span))
    return out, skipped


def _kernel_words(p: KernelPoint) -> str:
    if p.kind == "gemm":
        return f"GEMM {p.precision} {p.m}x{p.n}x{p.k}"
    if p.kind == "attention":
        return f"attention {p.batch}x{p.heads} x {p.seq} tokens, head dim {p.head_dim}"
    return f"HBM copy of {p.nbytes:,} bytes"


def _kernel_time(point: KernelPoint) -> Callable[[Partition], float]:
    def predict(partition: Partition) -> float:
        chip = partition.node.accelerator
        if point.kind == "gemm":
            share = compute.gemm_efficiency(chip, point.precision) / TRAINING_SHARE
            op = gemm("kernel", point.m, point.n, point.k)
            return compute.op_time(op, _with(chip, gemm_key(point.precision), share), point.precision)
        if point.kind == "attention":
            share = compute.attention_efficiency(chip) / ATTENTION_TRAINING_SHARE
            qkv = 4 * point.batch * point.heads * point.seq * point.head_dim * ACT_BYTES
            op = Op("kernel", "attention", point.work, qkv, n=point.seq, k=point.head_dim)
            return compute.op_time(op, _with(chip, "attention", share), "bf16")
        return compute.op_time(elementwise("kernel", point.nbytes), chip, "bf16")
    return predict


def _with(chip, key: str, share: float):
    """The chip with `key`'s efficiency at a kernel's share (above 1 means the training
    efficiency implies a kernel faster than peak: the prediction says so plainly)."""
    efficiency = dict(chip.efficiency)
    efficiency[key] = min(share, 1.0)
    return attrs.evolve(chip, efficiency=tuple(sorted(efficiency.items())))


def collective_observations(run: CollectiveRun, partition: Partition) -> tuple[list[Observation], list[str]]:
    """One observation per message size of a run the model times on this partition."""
    where = f"{run.span}"
    if run.op not in MODELLED:
        return [], [f"{where}: gclc models {', '.join(MODELLED)}, not {run.op}"]
    node = partition.node.gpus
    if run.gpus_per_node > node or node % run.gpus_per_node:
        return [], [f"{where}: {run.gpus_per_node} GPUs per host; the design's node has {node}"]
    if run.ranks > partition.gpus:
        return [], [f"{where}: {run.ranks} GPUs; the design's partition has {partition.gpus}"]
    stride = node // run.gpus_per_node   # ranks spread over the hosts as the run placed them
    tiers = rank_partition(partition, run.ranks * stride).tiers
    informs = collective_informs(comms.place(run.ranks, stride, tiers))
    group = f"{run.span.path}:{run.span.line}"
    out = [Observation("collective", group, f"{run.op} of {_size(p.size)} over {run.ranks} GPUs on {run.nodes} "
                                            f"host{'s' if run.nodes > 1 else ''}",
                       p.best_time, "s", informs, _collective_time(run, p.size, stride), partition, p.span)
           for p in run.points if p.size > 0]
    return out, []


def collective_informs(placement) -> tuple[tuple[str, str, str], ...]:
    """The fabric constants a collective's price reads (model/collectives.py): the efficiency
    of every tier any of its placements crosses, a ring in rank order's tiled tiers included
    (its rate is capped by the tier where consecutive members meet, and NCCL's view of it is
    its tiled nodes), and the latency of the outermost tier where it is the network's
    (NCCL's tables carry the scale-up's latencies; a torus axis keeps its own)."""
    options = [option for option in getattr(placement, "options", (placement,)) if option]
    tiled = [tuple(t.tier for s in option for t in (s.tiled or (s,))) for option in options]
    efficiency = dict.fromkeys(tier.fabric for tiers in tiled for tier in tiers)
    latency = dict.fromkeys(tier.fabric for tiers in tiled for i, tier in enumerate(tiers)
                            if tier.ring or i == len(tiers) - 1 and tier.scope == "scaleout")
    return tuple([("fabric", f, "efficiency") for f in efficiency] + [("fabric", f, "latency") for f in latency])


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def _collective_time(run: CollectiveRun, size: int, stride: int) -> Callable[[Partition], float]:
    """The call as the training step prices it (model/collectives.py: NCCL's algorithm and
    protocol on the tiers' rates), so that what the fit moves is what plans read."""
    def predict(partition: Partition) -> float:
        tiers = rank_partition(partition, run.ranks * stride).tiers
        if run.op == "sendrecv":   # each rank sends to the next: a ring of sends
            return collectives.ring_send(size, run.ranks, stride, tiers)
        stages = comms.place(run.ranks, stride, tiers)
        if run.op == "alltoall":   # NCCL's p2p latency: no NVLS channels
            return collectives.all_to_all(size, stages)
        return getattr(collectives, run.op)(size, stages, nccl=run.nccl)   # the NCCL that ran: its NVLS channels
    return predict


def collective_notes(run: CollectiveRun, partition: Partition) -> list[str]:
    """What a run's prediction assumed: where its output names no NCCL version and NCCL's versions
    price some of its sizes differently (beyond a collective's noise) on the design's GPUs (Blackwell's NVLS channels,
    nccl.nvls_channels), the newest's, as the training step prices every call."""
    if run.nccl or run.op not in ("all_reduce", "reduce_scatter", "all_gather") or run.ranks > partition.gpus:
        return []
    node = partition.node.gpus
    if run.gpus_per_node > node or node % run.gpus_per_node:
        return []
    stride = node // run.gpus_per_node
    stages = comms.place(run.ranks, stride, rank_partition(partition, run.ranks * stride).tiers)
    found = [c for option in getattr(stages, "options", (stages,))
             if (c := collectives.communicator(tuple(option))) is not None and c.nvls]
    vary = next((c for c in found if nccl.nvls_channels_vary(c.generation)), None)
    if vary is None:
        return []
    older = "2.26"   # the last release before Blackwell's NVLS channels changed (nccl.nvls_channels)
    price = getattr(collectives, run.op)
    # a version matters where it moves a size's price by more than the noise the fit reads a
    # collective with (the channels' NVLS fill moves every size a little: not an assumption to flag)
    moved = [p.size for p in run.points if p.size > 0 and abs(math.log(
        price(p.size, stages) / price(p.size, stages, nccl=older))) > NOISE["collective"]]
    if not moved:
        return []
    return [f"{run.span}: the output names no NCCL version; priced with the newest NCCL's {vary.nvls_channels} "
            f"NVLS channels on {vary.generation}, where NCCL up to {older} opens "
            f"{nccl.nvls_channels(vary.generation, older)} and prices {len(moved)} of its sizes "
            f"({_size(min(moved))} to {_size(max(moved))}) otherwise; keep the `# nccl-tests version` line "
            "nccl-tests 2.17 on prints, or run it with NCCL_DEBUG=VERSION"]
