"""Host DRAM and the GPU-host link where a training job uses them: the checkpoint staging
buffer and activation offload.

- Checkpoint staging. The host path of a checkpoint (model/train/host.py) copies the node's
  share of the checkpoint (weights and optimizer state) into host DRAM before it writes it out (PyTorch
  Distributed Checkpoint and Megatron-Core's async save stage to CPU memory). A DPU that
  takes `storage` writes straight from the GPUs (GPUDirect Storage), with no host copy; the
  two paths split a checkpoint in proportion to their rates, so only the host's share is
  staged.
- Activation offload. Whatever a configuration keeps in host memory per GPU
  (`offload_bytes`, from the activation model) lives in the same DRAM; the copies over the
  GPU-host link are timed in model/train/offload.py.

The node's DRAM less `HOST_RESERVE` (operating system, framework, data-loader workers)
must hold both; a configuration that needs more does not fit (`solver/train/enumerate.py`), and
`shortfall` says why. A node that declares no DRAM constrains nothing: unknown is not small.
"""

from __future__ import annotations

import math


from ...compiler.ir import NodeType, Partition
from ...dsl.numbers import percent, quantity
from . import host
from ..config import TrainConfig
from ..shape import ModelShape
from ...dsl.records import frozen

# ASSUMPTION: host memory the job cannot use: the OS, the framework's CPU side and the
# data-loader worker processes, as a share of the node's DRAM.
HOST_RESERVE = 0.1
@frozen
class HostMemory:
    """Bytes of one node's DRAM a configuration needs, and what the node offers."""

    staging: float       # the host's share of a checkpoint
    offload: float       # offloaded activations (or optimizer state) of the node's GPUs
    available: float     # DRAM less the reserve (inf when the node declares none)

    @property
    def need(self) -> float:
        return self.staging + self.offload

    @property
    def fits(self) -> bool:
        return self.need <= self.available


def available(node: NodeType) -> float:
    """DRAM a job may use on one node (inf when undeclared)."""
    return node.dram * (1 - HOST_RESERVE) if node.dram > 0 else math.inf


def staging_bytes(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Bytes of a node's checkpoint that pass through host DRAM (0 without checkpoints)."""
    if cfg.checkpoint_every <= 0:
        return 0.0
    node = partition.node
    whole = host.node_checkpoint_bytes(shape, cfg, node)
    through_host = host.host_checkpoint_rate(node)
    return whole * through_host / host.checkpoint_rate(node) if through_host else 0.0


def host_memory(shape: ModelShape, cfg: TrainConfig, partition: Partition, offload_bytes: float = 0.0) -> HostMemory:
    """What a node's DRAM must hold for this configuration; `offload_bytes` per GPU."""
    node = partition.node
    return HostMemory(staging_bytes(shape, cfg, partition), offload_bytes * min(node.gpus, cfg.gpus), available(node))


def shortfall(need: HostMemory, node: NodeType) -> str | None:
    """Why a node's DRAM is too small for `need`, or None when it fits."""
    if need.fits:
        return None
    parts = []
    if need.staging:
        parts.append(f"{quantity(need.staging, 'B')} to stage its checkpoint share")
    if need.offload:
        parts.append(f"{quantity(need.offload, 'B')} of offloaded tensors")
    return (f"each `{node.name}` needs {' and '.join(parts)} in host DRAM, but has {quantity(need.available, 'B')} "
            f"({quantity(node.dram, 'B')} less a {percent(HOST_RESERVE)} reserve)")
