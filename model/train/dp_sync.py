"""Data-parallel synchronization of one training step: the seconds of each collective the
replicas run (`traffic`), how much of it the layers' passes hide (`exposed`), where that
exposure changes slope (`kinks`, what the search's bound reads), and the tied embeddings'
all-reduce between the first and last pipeline stage."""

from __future__ import annotations

from typing import NamedTuple

from ...compiler.ir import Partition
from .. import comms
from .. import collectives
from . import optimizer, sharding
from ..config import TrainConfig
from ..memo import remember
from .memory import dense_params_per_gpu, expert_params_per_gpu
from .quantized import gather_bytes
from ..shape import ModelShape

DP_BUCKET_RESIDUE = 0.1    # share of overlapped gradient traffic exposed (the last bucket)
# ZeRO-3/FSDP gathers and scatters parameters for every layer of every micro-batch, in
# parallel with that compute; the collectives' kernels take SMs and HBM bandwidth from it,
# so the overlapped part still costs this share of the shorter of the two. Fitted on the
# ZeRO-3, FSDP and MaxText runs (benchmarks/calibrate.py).
GATHER_CONTENTION = 0.5


class Traffic(NamedTuple):
    """Seconds of the dense and routed-expert state's data-parallel collectives (0 for those
    the configuration's ZeRO stage does not run)."""

    gathers: float       # parameter all-gathers in the shard group (ZeRO >= 1)
    reduces: float       # gradient reduce-scatters in the shard group
    all_reduces: float   # gradient all-reduces over every replica (ZeRO-0)
    fsdp: float          # ZeRO-3 / FSDP per micro-batch
    across: float        # all-reduce of each shard across the shard groups, once a step


def exposed(traffic: Traffic, zero: int, microbatches: int, overlap: bool, layer_pass: float) -> float:
    """Gradient reduction (and parameter gathering) across data-parallel replicas, for a
    layer pass (one micro-batch through the stage's layers) of `layer_pass` seconds.

    Bucketed reduction overlaps with the backward half of the last micro-batch (about
    two thirds of its pass); FSDP gathers and reduces every micro-batch, overlapped with
    all of them. Windows are shares of passes that count fully in the step, so a faster
    pass can expose more communication but never lengthen the step.
    """
    gathers, reduces, all_reduces, fsdp, across = traffic
    if zero >= 3:
        per_step = fsdp * microbatches
        if not overlap:
            return per_step + across
        hidden_by = microbatches * layer_pass
        exposed = max(per_step - hidden_by, 0.0) + GATHER_CONTENTION * min(per_step, hidden_by)
        return exposed + max(across - 2 / 3 * layer_pass, 0.0) + DP_BUCKET_RESIDUE * across
    if zero >= 1:  # reduce-scatter gradients during the last backward, gather the
        # updated parameters during the next step's first forward (Megatron's distributed optimizer)
        parts = ((reduces + across, 2 / 3), (gathers, 1 / 3))
    else:
        parts = ((all_reduces, 2 / 3),)
    if not overlap:
        return sum(seconds for seconds, _ in parts)
    return sum(max(seconds - share * layer_pass, 0.0) + DP_BUCKET_RESIDUE * seconds for seconds, share in parts)


def kinks(traffic: Traffic, zero: int, overlap: bool) -> tuple[float, ...]:
    """The layer passes at which `exposed` changes slope: between them (and beyond the last)
    it is linear in the layer pass, and constant past the last."""
    if not overlap:
        return ()
    if zero >= 3:
        return (traffic.fsdp, 1.5 * traffic.across)
    if zero >= 1:
        return (1.5 * (traffic.reduces + traffic.across), 3 * traffic.gathers)
    return (1.5 * traffic.all_reduces,)


# The collectives' seconds depend on the layout, whether ZeRO shards the state (stages 1 to 3
# run the same collectives; `exposed` reads the stage), the shard group, where the
# data-parallel groups sit and the stack, not on the micro-batch, recompute or vp: memoized
# (configurations of one branch differ there). Bounded, and emptied by `clear_caches`.
_TRAFFIC: dict[tuple, Traffic] = {}


def traffic(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> Traffic:
    """The seconds of `cfg`'s data-parallel collectives on `partition`."""
    key = (shape, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.shard, min(cfg.zero, 1), cfg.stack, cfg.main_grads,
           cfg.grad_reduce, gather_bytes(cfg), min(cfg.stride("dp"), cfg.stride("cp")), partition)
    found = _TRAFFIC.get(key)
    if found is not None:
        return found
    grad_bytes = optimizer.grad_bytes(cfg)   # the stack's, or the bf16 main gradients'
    # parameters are gathered in bf16, or as what fp8 parameters send (model/train/quantized.py:
    # per-tensor fp8 1 B, MX parameters bf16 or, under ZeRO-3, both usages)
    weight_bytes = gather_bytes(cfg)
    # Dense and routed-expert state reduce over different replica groups (routed experts over
    # fewer ranks, ep apart: model/train/sharding.py expert_dp); hybrid sharding splits each into
    # shard groups (ZeRO collectives inside) and all-reduces every shard across the groups
    # once a step (no groups: plain ZeRO).
    # Only the collectives the stage runs are priced (`exposed` and `kinks` read no other):
    # ZeRO-0 all-reduces, stages 1 to 3 reduce-scatter, gather and all-reduce across groups.
    gathers = reduces = all_reduces = fsdp = across = 0.0
    for params, expert in ((dense_params_per_gpu(shape, cfg), False), (expert_params_per_gpu(shape, cfg), True)):
        if not params:
            continue
        inner, outer = sharding.groups(cfg, partition.tiers, expert)
        if cfg.zero >= 1:
            across += sharding.replicate(params, grad_bytes, sharding.shards(cfg, expert), outer)
            reduces += collectives.reduce_scatter(params * grad_bytes, inner)
            gathers += collectives.all_gather(params * weight_bytes, inner)
            fsdp += sharding.fsdp_microbatch(params, grad_bytes, inner, weight_bytes)
        else:
            all_reduces += collectives.all_reduce(params * grad_bytes, inner)
    return remember(_TRAFFIC, key, Traffic(gathers, reduces, all_reduces, fsdp, across))


class Call(NamedTuple):
    """One data-parallel collective of a step as NCCL would run it (model/collectives.py)."""

    collective: str       # reduce_scatter, all_gather or all_reduce
    state: str            # dense or expert
    nbytes: float         # the buffer: the whole vector (gathered, for all-gather)
    seconds: float
    algorithm: str        # NCCL's pick: ring, tree, pat, nvls, nvls_tree, collnet; the tiers' own on a torus
    protocol: str

    @property
    def in_network(self) -> bool:
        """The switches reduce and multicast it (NVLS in an NVLink domain, SHARP across nodes)."""
        return self.algorithm in ("nvls", "nvls_tree", "collnet")


def calls(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> tuple[Call, ...]:
    """The collectives `traffic` prices for `cfg`'s data-parallel state, each with the
    algorithm and protocol it runs (ZeRO >= 1: reduce-scatter and all-gather in the shard
    group, then the shards' all-reduce across groups when hybrid; ZeRO-0: one all-reduce)."""
    grad_bytes = optimizer.grad_bytes(cfg)
    weight_bytes = gather_bytes(cfg)
    found = []
    for params, state in ((dense_params_per_gpu(shape, cfg), "dense"), (expert_params_per_gpu(shape, cfg), "expert")):
        if not params:
            continue
        inner, outer = sharding.groups(cfg, partition.tiers, state == "expert")
        wanted = ((("reduce_scatter", params * grad_bytes, inner), ("all_gather", params * weight_bytes, inner),
                   ("all_reduce", params * grad_bytes / sharding.shards(cfg, state == "expert"), outer))
                  if cfg.zero >= 1 else (("all_reduce", params * grad_bytes, inner),))
        for collective, nbytes, stages in wanted:
            seconds = getattr(collectives, collective)(nbytes, stages)
            if seconds > 0:
                pick = collectives.choice(collective, nbytes, stages)
                found.append(Call(collective, state, nbytes, seconds, *((pick.algorithm, pick.protocol)
                                                                          if pick else ("torus", "-"))))
    return tuple(found)


def embedding_sync(shape: ModelShape, cfg: TrainConfig, tiers) -> float:
    """Tied input and output embeddings live on the first and last stage; their gradients
    are all-reduced between the two every step."""
    if cfg.pp == 1 or not shape.tied_embeddings:
        return 0.0
    key = (shape, cfg.tp, cfg.pp, cfg.stride("pp"), tiers)   # read for every estimate: memoized by what it reads
    seconds = _EMBEDDING.get(key)
    if seconds is None:
        stages = (comms.Stage(comms.outermost(2, cfg.stride("pp") * (cfg.pp - 1), tiers), 2),)
        seconds = remember(_EMBEDDING, key, collectives.all_reduce(shape.vocab * shape.hidden / cfg.tp * 4, stages))
    return seconds


_EMBEDDING: dict[tuple, float] = {}


def unhidden(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Seconds per step the data-parallel collectives take with nothing overlapping them
    (`exposed` without overlap, and the tied embeddings' sync): the step's `dp` term is
    what of this the backward pass does not hide. `partition` as the estimate ranks it."""
    return (exposed(traffic(shape, cfg, partition), cfg.zero, cfg.microbatches, False, 0.0)
            + embedding_sync(shape, cfg, partition.tiers))


def clear_caches() -> None:
    _TRAFFIC.clear()
    _EMBEDDING.clear()
