"""Power and energy of a training step.

Accelerator power follows activity: idle when nothing runs, TDP (or the chip's power
cap, model/dvfs.py) when the tensor cores are saturated. A GPU that waits on communication still draws well above idle (clocks
stay up, HBM and links are busy), so waiting counts as a fraction of full activity.
Everything else in the cluster comes from the IR's power breakdown, shared in
proportion to the GPUs the job uses, and cooling from the PUE.
"""

from __future__ import annotations

import functools

import attrs

from ..compiler.ir import ClusterGraph, Partition
from ..compiler.metrics import power_breakdown
from . import dvfs

WAITING_ACTIVITY = 0.4   # share of the idle-to-TDP range drawn while waiting on comms (assumption)


@attrs.frozen
class Power:
    accelerators: float      # W, the job's GPUs
    rest: float              # W, hosts, network, overheads attributed to the job
    cooling: float           # W, PUE - 1 of the above
    per_gpu: float           # W, one accelerator

    @property
    def total(self) -> float:
        return self.accelerators + self.rest + self.cooling


def gpu_power(partition: Partition, busy: float) -> float:
    """Watts of one accelerator that computes for `busy` of the step and waits otherwise."""
    chip = partition.node.accelerator
    activity = busy + (1 - busy) * WAITING_ACTIVITY
    return chip.idle + (dvfs.draw(chip) - chip.idle) * min(1.0, max(0.0, activity))


def job_power(graph: ClusterGraph, partition: Partition, gpus: int, busy: float) -> Power:
    per_gpu = gpu_power(partition, busy)
    others = _beside_accelerators(graph)
    share = gpus / graph.gpus if graph.gpus else 0.0
    accelerators, rest = per_gpu * gpus, others * share
    return Power(accelerators, rest, (accelerators + rest) * (graph.pue - 1), per_gpu)


@functools.lru_cache(maxsize=32)
def _beside_accelerators(graph: ClusterGraph) -> float:
    """Watts of the cluster's IT load other than its accelerators: the same for every
    job on the graph, and a whole breakdown to build (a split over 64 partitions asks
    for it hundreds of times)."""
    rows = {row.key: row.value for row in power_breakdown(graph)}
    return rows["power.it"] - rows["power.accelerators"]
