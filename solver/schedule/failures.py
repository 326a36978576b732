"""From the design to failure rates and checkpoints: the `mtbf` of the chips, nodes and
switches a partition is built from (defaults in `goodput`), the nodes' `mttr` and
checkpoint `storage` bandwidth, and a train job's `checkpoint { ... }` block.

A node writes (and, at a restart, reads back) its checkpoint over two paths
(model/train/host.py `checkpoint_rate`, the model the step's `checkpoint_every` share uses):
the host's, at the node's `storage` bandwidth (its NVMe's when only that is declared,
Llama 3's per-host figure when neither is), and its DPUs' whose `offload` lists `storage` (model/train/dpu.py `storage_rate`:
NVMe-oF through the DPU's ports, GPUDirect Storage, no host copy). A job's `checkpoint {
bandwidth }` states the whole job's rate instead (a storage system slower than its nodes'
paths, say); its `checkpoint_every` pins the interval."""

from __future__ import annotations

from ...compiler.design import Entity, Record
from ...compiler.ir import Accelerator, ClusterGraph, Partition
from ...compiler.lower import _partition_specs, _unit_shape
from ...model.train import host
from ...model.job import state_config
from ...model.shape import ModelShape
from .goodput import GPU_MTBF_S, NODE_MTBF_S, NODE_MTTR_S, RESTART_FIXED_S, SWITCH_MTBF_S, Checkpoint, Reliability


def _seconds(value: object, default: float) -> float:
    return float(value.value) if value is not None else default


def partition_parts(cluster: Entity, name: str) -> tuple[Entity, Entity, Entity | None]:
    """(node, chip, scale-out switch) entities of partition `name` of `cluster`."""
    for part_name, units, fabric, *_ in _partition_specs(cluster):
        if part_name == name:
            node = _unit_shape(units.part)[0]
            switch = fabric.get("switch") if fabric is not None else None
            return node, node.get("gpus").part, switch
    raise KeyError(name)


def reliability(cluster: Entity, graph: ClusterGraph, partition: Partition) -> Reliability:
    node, chip, switch = partition_parts(cluster, partition.name)
    switches = sum(layer.switches for layer in graph.switch_layers)
    return Reliability(
        gpu_mtbf=_seconds(chip.get("mtbf"), GPU_MTBF_S),
        node_mtbf=_seconds(node.get("mtbf"), NODE_MTBF_S),
        switch_mtbf=_seconds(switch.get("mtbf") if switch is not None else None, SWITCH_MTBF_S),
        node_mttr=_seconds(node.get("mttr"), NODE_MTTR_S),
        gpus_per_node=partition.node.gpus,
        switches_per_gpu=switches / graph.gpus if graph.gpus else 0.0)


def node_storage(cluster: Entity, partition: Partition) -> float:
    """Bytes/s one node of the partition writes its checkpoint at: host path plus DPU path."""
    return host.checkpoint_rate(partition.node)


def checkpoint(job: Entity, shape: ModelShape | None, storage_per_node: float, gpus: int,
               gpus_per_node: int, chip: Accelerator | None = None) -> Checkpoint:
    """The job's checkpoint at `gpus` GPUs on `chip`: what the file states, the rest derived."""
    block = job.get("checkpoint") or Record()
    size = block.get("size")
    size = float(size.value) if size is not None else \
        (host.checkpoint_bytes(shape, cfg=state_config(job, chip)) if shape else 0.0)
    nodes = -(-gpus // gpus_per_node)
    bandwidth = _seconds(block.get("bandwidth"), storage_per_node * nodes)
    restart = _seconds(block.get("restart"), RESTART_FIXED_S + size / bandwidth)
    interval = block.get("interval")
    every = float(job.get("checkpoint_every") or 0)
    pinned = float(interval.value) if interval is not None else (every or None)
    return Checkpoint(max(size, 1.0), bandwidth, restart, pinned, in_step=every > 0)


def job_goodput(job, gpus: int):
    """Goodput of a train `Job` (model.job) on `gpus` of its partition."""
    from .goodput import goodput

    target = job.entity.get("on")
    target = target[0] if isinstance(target, tuple) else target
    cluster = getattr(target, "cluster", target)
    rates = reliability(cluster, job.graph, job.partition)
    ckpt = checkpoint(job.entity, job.shape, node_storage(cluster, job.partition), gpus, job.partition.node.gpus,
                      job.partition.node.accelerator)
    return goodput(ckpt, rates.rate(gpus))
