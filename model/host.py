"""Hosts and DPUs where a training job uses them: loading its data and writing checkpoints.

What a DPU takes over here: it is a second path, beside the host CPUs, for the job's
input (when its `offload` lists `input`) and its checkpoints (`storage`); both are its
default. What that path carries is model/dpu.py's (`dpu.input_rate`, `dpu.storage_rate`),
like the network transport and collectives it takes over.

- Input pipeline. A step reads `sample_bytes` per sequence; a node reads its share of
  the batch (the job's GPUs share it evenly: ASSUMPTION, ranks of one tensor-parallel group
  read the same sequences but only one of them from storage). The host path runs at
  CPU cores x `BYTES_PER_CORE`, capped by the node's NVMe read bandwidth when declared;
  each DPU adds its own (its Arm cores x the same rate, at most its port's line rate).
  Loading is prefetched, so it costs the step only what the step cannot hide: a step
  whose data takes longer than its compute is data-bound (`Breakdown.data`).
- Checkpoints. Every `checkpoint_every`, each node writes its GPUs' weights and optimizer
  state. The host path writes at its CPU rate, capped by the NVMe (or NIC) bandwidth; a DPU
  writes straight to network storage at its line rate (GPUDirect Storage through the DPU,
  no host copy). The save stalls training (a synchronous checkpoint), so each step carries
  its share: checkpoint time x step / interval (`Breakdown.checkpoint`).

A node that declares no CPU, NVMe or DPU figures constrains nothing: unknown is not slow.
"""

from __future__ import annotations

import math

from ..compiler.ir import NodeType, Partition
from . import dpu
from .config import TrainConfig
from .dpu import BYTES_PER_CORE
from .memory import model_state
from .shape import ModelShape


def _cores(node: NodeType, kind: str) -> float:
    parts = node.parts_of(kind)
    if not parts or any(p.cores is None for p in parts):
        return math.inf
    return sum(p.count * p.cores for p in parts)


def _host_rate(node: NodeType, writing: bool) -> float:
    cpu = _cores(node, "cpu") * BYTES_PER_CORE if node.parts_of("cpu") else math.inf
    nics = sum(p.count * p.bandwidth for p in node.parts_of("nic") if p.bandwidth)
    device = node.nvme_bandwidth or (nics if writing and nics else math.inf)
    return min(cpu, device)


def input_rate(node: NodeType) -> float:
    """Bytes/s of samples a node can load: host path plus its DPUs."""
    return _host_rate(node, False) + dpu.input_rate(node)


def host_checkpoint_rate(node: NodeType) -> float:
    """Bytes/s of a checkpoint the host path writes (staged in host DRAM: model/offload_host.py)."""
    return _host_rate(node, True)


def checkpoint_rate(node: NodeType) -> float:
    return _host_rate(node, True) + dpu.storage_rate(node)


def data_time(cfg: TrainConfig, partition: Partition) -> float:
    """Seconds one node needs to load its share of a step's samples."""
    if cfg.sample_bytes <= 0:
        return 0.0
    node = partition.node
    share = min(1.0, node.gpus / cfg.gpus)
    return cfg.batch * cfg.sample_bytes * share / input_rate(node)


def checkpoint_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Seconds one node needs to write its GPUs' weights and optimizer state."""
    if cfg.checkpoint_every <= 0:
        return 0.0
    weights, _, optimizer = model_state(shape, cfg)
    node = partition.node
    return (weights + optimizer) * min(node.gpus, cfg.gpus) / checkpoint_rate(node)


def host_terms(shape: ModelShape, cfg: TrainConfig, partition: Partition, step: float) -> tuple[float, float]:
    """(data wait, checkpoint share) seconds per step added to a step of `step` seconds."""
    wait = max(0.0, data_time(cfg, partition) - step)
    saving = checkpoint_time(shape, cfg, partition)
    share = (step + wait) * saving / cfg.checkpoint_every if cfg.checkpoint_every > 0 else 0.0
    return wait, share
