"""Where the data-parallel ranks keep and exchange the model state: plain ZeRO / FSDP over
all dp x cp ranks, or hybrid sharding (HSDP; MaxText's ici_fsdp x dcn_data; Megatron-Core's
`--num-distributed-optimizer-instances`) over groups of `shard` consecutive ranks,
replicated across the dp x cp / shard groups.

With hybrid sharding the state a ZeRO stage shards is divided by the group's size, not by
all replicas; reduce-scatter and all-gather run inside the group (on the tiers it spans,
usually the scale-up domain), and each group's gradient shard is all-reduced across the
groups (on the tiers that the replica group spans, usually the scale-out network), on
1 / shard of the gradients (PyTorch FSDP2 HSDP, torch.distributed.fsdp `HYBRID_SHARD`:
reduce-scatter in the shard group, all-reduce in the replicate group).
"""

from __future__ import annotations

from ..compiler.ir import Tier
from . import comms
from .config import TrainConfig


def groups(cfg: TrainConfig, tiers: tuple[Tier, ...]) -> tuple[tuple[comms.Stage, ...], tuple[comms.Stage, ...]]:
    """(shard group, replica group) stages. The data x context ranks form one group of
    consecutive members `base` ranks apart; a shard group is `shard` consecutive members of
    it, a replica group links the members at the same place of each shard group."""
    base = min(cfg.stride("dp"), cfg.stride("cp"))
    replicas = cfg.dp * cfg.cp
    shards = cfg.shards if cfg.zero >= 1 else replicas   # DDP all-reduces over every replica
    inner = comms.place(shards, base, tiers)
    outer = comms.place(replicas // shards, base * shards, tiers) if replicas > shards else ()
    if not cfg.behaviour("hierarchical"):   # every rank's traffic crosses the outermost tier
        inner, outer = comms.flat(inner), comms.flat(outer)
    return inner, outer


def fsdp_microbatch(params: float, grad_bytes: int, inner: tuple[comms.Stage, ...]) -> float:
    """ZeRO-3 / FSDP per micro-batch: parameters gathered for forward and again for backward,
    gradients reduce-scattered, all inside the shard group."""
    return comms.reduce_scatter(params * grad_bytes, inner) + 2 * comms.all_gather(params * 2, inner)


def replicate(params: float, grad_bytes: int, cfg: TrainConfig, outer: tuple[comms.Stage, ...]) -> float:
    """The all-reduce of each shard group's gradient shard across the groups, once a step
    (zero without hybrid sharding: no replica group)."""
    return comms.all_reduce(params * grad_bytes / cfg.shards, outer)


def optimizer_shards(cfg: TrainConfig) -> int:
    """Ranks the optimizer state (and the Adam step over it) is divided over."""
    return cfg.shards if cfg.zero >= 1 else 1


def state_shards(cfg: TrainConfig, zero: int | None = None) -> tuple[int, int, int]:
    """Divisors of (weights, gradients, optimizer state) per GPU for `cfg`'s ZeRO stage or `zero`."""
    s, zero = cfg.shards, cfg.zero if zero is None else zero
    return (s if zero >= 3 else 1), (s if zero >= 2 else 1), (s if zero >= 1 else 1)
