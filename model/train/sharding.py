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

Routed experts (MoE parallel folding, expert TP 1) have fewer replicas: expert_dp = tp x
cp x dp / ep, ep ranks apart. Hybrid sharding splits them like the dense state, into the
same dp x cp / shard instances (Megatron-Core divides the expert data-parallel group by
`--num-distributed-optimizer-instances` too): an expert's state is sharded over its replicas
inside one instance, expert_dp / instances = tp x shard / ep of them (at least 1: when an
EP group spans several instances an expert has no second replica in one, and all its
expert_dp replicas all-reduce across instances), and all-reduced across the instances.
"""

from __future__ import annotations

from ...compiler.ir import Tier
from .. import comms
from .. import collectives
from ..config import TrainConfig


def expert_dp(cfg: TrainConfig) -> int:
    """Replicas of each routed expert: the ranks of a TP x CP x DP slice over the EP width."""
    return max(1, cfg.dp * cfg.cp * cfg.tp // cfg.ep)


def expert_shards(cfg: TrainConfig) -> int:
    """Replicas of an expert that share one copy of its ZeRO-sharded state: those inside one
    hybrid-sharding instance (all of them without hybrid sharding)."""
    instances = max(1, cfg.dp * cfg.cp // cfg.shards)
    return max(1, expert_dp(cfg) // instances)


def shards(cfg: TrainConfig, expert: bool = False) -> int:
    """Ranks sharing one copy of the dense (or an expert's) ZeRO-sharded state."""
    return expert_shards(cfg) if expert else cfg.shards


def groups(cfg: TrainConfig, tiers: tuple[Tier, ...],
           expert: bool = False) -> tuple[tuple[comms.Stage, ...], tuple[comms.Stage, ...]]:
    """(shard group, replica group) stages of the dense state or (`expert`) a routed
    expert's. The data x context ranks form one group of consecutive members `base` ranks
    apart (an expert's replicas: expert_dp members ep apart); a shard group is `shard`
    consecutive members of it, a replica group links the members at the same place of each
    shard group."""
    if expert:
        base, replicas, sharded = cfg.ep, expert_dp(cfg), expert_shards(cfg)
    else:
        base, replicas, sharded = min(cfg.stride("dp"), cfg.stride("cp")), cfg.dp * cfg.cp, cfg.shards
    shards = sharded if cfg.zero >= 1 else replicas   # DDP all-reduces over every replica
    inner = comms.place(shards, base, tiers)
    outer = comms.place(replicas // shards, base * shards, tiers) if replicas > shards else ()
    if not cfg.behaviour("hierarchical"):   # every rank's traffic crosses the outermost tier
        inner, outer = comms.flat(inner), comms.flat(outer)
    return inner, outer


def fsdp_microbatch(params: float, grad_bytes: int, inner: tuple[comms.Stage, ...], weight_bytes: float = 2) -> float:
    """ZeRO-3 / FSDP per micro-batch: parameters gathered (`weight_bytes` each: bf16, or fp8
    parameters) for forward and again for backward, gradients reduce-scattered, all inside the
    shard group."""
    return (collectives.reduce_scatter(params * grad_bytes, inner)
            + 2 * collectives.all_gather(params * weight_bytes, inner))


def replicate(params: float, grad_bytes: int, sharded: int, outer: tuple[comms.Stage, ...]) -> float:
    """The all-reduce of each shard group's gradient shard (1 / `sharded` of them) across
    the groups, once a step (zero without hybrid sharding: no replica group)."""
    return collectives.all_reduce(params * grad_bytes / sharded, outer)


def optimizer_shards(cfg: TrainConfig, expert: bool = False) -> int:
    """Ranks the optimizer state (and the Adam step over it) is divided over."""
    return shards(cfg, expert) if cfg.zero >= 1 else 1


def state_shards(cfg: TrainConfig, expert: bool = False, zero: int | None = None) -> tuple[int, int, int]:
    """Divisors of (weights, gradients, optimizer state) per GPU for `cfg`'s ZeRO stage or
    `zero` (`expert`: routed-expert state, sharded over its own replicas)."""
    s, zero = shards(cfg, expert), cfg.zero if zero is None else zero
    return (s if zero >= 3 else 1), (s if zero >= 2 else 1), (s if zero >= 1 else 1)
