"""Power and energy of a training step.

Accelerator power follows activity: idle when nothing runs, TDP (or the chip's power
cap, model/dvfs.py) when the tensor cores are saturated. A GPU that waits on communication still draws well above idle (clocks
stay up, HBM and links are busy), so waiting counts as a fraction of full activity.
Everything else in the cluster comes from the IR's power breakdown, shared in
proportion to the GPUs the job uses, its host parts at the load the job's GPUs put on them
(compiler/host_load.py: an idle floor plus a part that follows the GPUs' heat), and cooling
from the PUE.

Memory energy: a phase that streams HBM rather than computing (the optimizer step reads and
writes the weights, gradients and moments at the HBM rate) draws the clocks' waiting share
plus the traffic's own power, bytes per second x the HBM generation's energy per byte
(compiler/hbm.py, from `hbm.type`). A chip that does not state its generation keeps the older
reading: the phase counts as computing.
"""

from __future__ import annotations

import functools


from ..compiler.ir import Accelerator, ClusterGraph, Partition
from ..compiler import hbm as hbm_generations, host_load
from ..compiler.metrics import power_breakdown
from . import dvfs
from .compute import hbm_rate
from ..dsl.records import frozen

WAITING_ACTIVITY = 0.4   # share of the idle-to-TDP range drawn while waiting on comms (assumption)
# A GPU running memory-bound kernels (a serving step's weight and KV-cache streaming) keeps its
# SMs stalled on HBM: it draws far less than one whose SMs wait with their clocks up. Ma, Afzal,
# Eitzinger, Wellein, "The Illusion of Power Capping in LLM Decode" (arXiv:2605.11999, abstract):
# decode draws 137-300 W on a 700 W H200, the low end where decode is purely memory-bound, i.e.
# (137 W - 70 W idle) / (700 W - 70 W) = 0.106 of the idle-to-full range (the idle is the std
# Hopper's ASSUMPTION); the high end is reached as larger batches add compute (`busy`).
STREAMING_ACTIVITY = 0.106


@frozen
class Power:
    accelerators: float      # W, the job's GPUs
    rest: float              # W, hosts, network, overheads attributed to the job
    cooling: float           # W, PUE - 1 of the above
    per_gpu: float           # W, one accelerator

    @property
    def total(self) -> float:
        return self.accelerators + self.rest + self.cooling


def memory_activity(chip: Accelerator) -> float:
    """The share of the idle-to-full range a chip draws while it streams HBM at its sustained
    rate: the waiting floor of its clocks plus the traffic's power (1 when the generation is
    not stated)."""
    energy, span = chip.hbm_joules_per_byte, dvfs.draw(chip) - chip.idle
    if energy is None or span <= 0:
        return 1.0
    return min(1.0, WAITING_ACTIVITY + hbm_rate(chip) * energy / span)


def busy_of(breakdown, step_time: float, chip: Accelerator) -> float:
    """The step's busy share (what `activity` reads): computing phases count whole, the HBM-bound
    optimizer at its memory activity, put on the same scale (activity = W + busy x (1 - W))."""
    if step_time <= 0:
        return 1.0
    streaming = (memory_activity(chip) - WAITING_ACTIVITY) / (1 - WAITING_ACTIVITY)
    b = breakdown
    return min(1.0, (b.compute + b.recompute + b.optimizer * streaming) / step_time)


def gpu_power(partition: Partition, busy: float) -> float:
    """Watts of one accelerator that computes for `busy` of the step and waits otherwise."""
    return power_at(partition, activity(busy))


def activity(busy: float) -> float:
    """The share of the idle-to-full range drawn by a GPU that computes for `busy` of its time
    and waits (or streams memory) for the rest."""
    return busy + (1 - busy) * WAITING_ACTIVITY


def serving_activity(busy: float, chip: Accelerator | None = None) -> float:
    """The share of the idle-to-full range drawn by a serving GPU that computes for `busy` of
    an iteration and streams weights and cache (memory-bound kernels) for the rest."""
    return busy + (1 - busy) * streaming_activity(chip)


def streaming_activity(chip: Accelerator | None) -> float:
    """STREAMING_ACTIVITY, measured on a 2.5D part (an H200's HBM3e beside its die), less what a chip
    whose HBM is stacked on it saves of that traffic's power: the sustained HBM rate times the energy
    per byte the stack no longer spends crossing the interposer (compiler/hbm.py)."""
    if chip is None or chip.hbm_packaging == "interposer" or chip.hbm_type is None:
        return STREAMING_ACTIVITY
    flat = hbm_generations.joules_per_byte(chip.hbm_type)
    span = dvfs.draw(chip) - chip.idle
    saved = hbm_rate(chip) * (flat - chip.hbm_joules_per_byte) / span if span > 0 else 0.0
    return max(0.0, STREAMING_ACTIVITY - saved)


def power_at(partition: Partition, share: float) -> float:
    """Watts of one accelerator drawing `share` of its idle-to-full range."""
    chip = partition.node.accelerator
    return chip.idle + (dvfs.draw(chip) - chip.idle) * min(1.0, max(0.0, share))


def job_power(graph: ClusterGraph, partition: Partition, gpus: int, busy: float) -> Power:
    return power_of(graph, partition, gpus, gpu_power(partition, busy))


def power_of(graph: ClusterGraph, partition: Partition, gpus: int, per_gpu: float) -> Power:
    """The power of a job whose `gpus` accelerators draw `per_gpu` each on average."""
    share = gpus / graph.gpus if graph.gpus else 0.0
    accelerators, rest = per_gpu * gpus, rest_at(graph, partition, per_gpu) * share
    return Power(accelerators, rest, (accelerators + rest) * (graph.pue - 1), per_gpu)


def rest_at(graph: ClusterGraph, partition: Partition, per_gpu: float) -> float:
    """Watts of the cluster's IT load other than its accelerators while the accelerators
    draw `per_gpu` each: affine in it (compiler/host_load.py)."""
    idle, busy = beside_accelerators(graph)
    return idle + (busy - idle) * load_of(partition, per_gpu)


def load_of(partition: Partition, per_gpu: float) -> float:
    """The host load of an accelerator drawing `per_gpu` (0 idle, 1 at its curve's top)."""
    chip = partition.node.accelerator
    return host_load.heat_load(chip.idle, dvfs.top(chip), per_gpu)


@functools.lru_cache(maxsize=32)
def beside_accelerators(graph: ClusterGraph) -> tuple[float, float]:
    """Watts of the cluster's IT load other than its accelerators, with every accelerator
    idle and with every one at its curve's top: the same for every job on the graph, and
    whole breakdowns to build (a split over 64 partitions asks for them hundreds of times)."""
    def rest(watts: dict[str, float]) -> float:
        rows = {row.key: row.value for row in power_breakdown(graph, watts)}
        return rows["power.it"] - rows["power.accelerators"]
    return (rest({p.name: p.node.accelerator.idle for p in graph.partitions}),
            rest({p.name: dvfs.top(p.node.accelerator) for p in graph.partitions}))


def gpu_watts_of(graph: ClusterGraph, partition: Partition, gpus: int, facility: float) -> float:
    """Watts per GPU of `gpus` GPUs whose job draws `facility` W (`job_power`'s total), read back:
    the rest is affine in the GPUs' draw, so the inverse is one division."""
    if gpus <= 0:
        return 0.0
    chip, share = partition.node.accelerator, gpus / graph.gpus
    idle, busy = beside_accelerators(graph)
    heat = dvfs.top(chip) - chip.idle
    slope = share * (busy - idle) / heat if heat > 0 else 0.0
    return (facility / graph.pue - share * idle + slope * chip.idle) / (gpus + slope)
