"""Where a job's ranks land: the tiers as its ranks see them.

Ranks fill GPUs in order, one scale-up domain after another. A domain whose size is not a
power-of-two multiple of its nodes (a 72-GPU NVL72 rack of 4-GPU trays) cannot be tiled by
the power-of-two groups that parallel layouts use: 64 consecutive ranks on 72-GPU racks
straddle two racks. Schedulers therefore place such jobs in segments (Slurm's `--segment`,
as NVIDIA's GB200 NVL72 reference deployments do with 16 of a rack's 18 compute trays,
keeping two as spares): every domain gets the same power-of-two multiple of a node's GPUs.
A job does so here whenever its GPUs fit in the segmented domains; the tiers from the
scale-up domain outward then group `segment` ranks per domain.
"""

from __future__ import annotations

import functools

import attrs

from ..compiler.ir import Partition


def segment(partition: Partition) -> int:
    """Ranks per scale-up domain when the job is segmented (the whole domain when it is a
    power-of-two multiple of a node's GPUs, or there is no scale-up domain beyond a node)."""
    unit = _unit_tier(partition)
    if unit is None:
        return 0
    size, node = unit.group_gpus, partition.node.gpus
    used = node
    while used * 2 <= size:
        used *= 2
    return used


@functools.lru_cache(maxsize=1024)
def rank_partition(partition: Partition, gpus: int) -> Partition:
    """`partition` as a job of `gpus` ranks sees it: segmented domains when they suffice."""
    unit = _unit_tier(partition)
    used = segment(partition)
    if unit is None or used in (0, unit.group_gpus) or gpus > partition.units * used:
        return partition
    first = partition.tiers.index(unit)
    tiers = tuple(t if i < first else attrs.evolve(t, group_gpus=max(used, t.group_gpus // unit.group_gpus * used))
                  for i, t in enumerate(partition.tiers))
    return attrs.evolve(partition, tiers=tiers)


def _unit_tier(partition: Partition):
    """The scale-up domain beyond one node (an NVL72 rack), if the partition has one."""
    for tier in partition.tiers:
        if tier.scope == "supernode" and tier.group_gpus > partition.node.gpus:
            return tier
    return None
