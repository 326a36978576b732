"""Host DRAM and the GPU-host link where a training job uses them: the checkpoint staging
buffer and activation offload.

- Checkpoint staging. The host path of a checkpoint (model/host.py) copies the node's
  share of weights and optimizer state into host DRAM before it writes it out (PyTorch
  Distributed Checkpoint and Megatron-Core's async save stage to CPU memory). A DPU that
  takes `storage` writes straight from the GPUs (GPUDirect Storage), with no host copy; the
  two paths split a checkpoint in proportion to their rates, so only the host's share is
  staged.
- Activation offload. Whatever a configuration keeps in host memory per GPU
  (`offload_bytes`, from the activation model) lives in the same DRAM and crosses the
  GPU-host link each way per micro-batch: `offload_time` is that crossing.

The node's DRAM less `HOST_RESERVE` (operating system, framework, data-loader workers)
must hold both; a configuration that needs more does not fit (`solver/enumerate.py`), and
`shortfall` says why. A node that declares no DRAM constrains nothing: unknown is not small.
"""

from __future__ import annotations

import math

import attrs

from ..compiler.ir import NodeType, Partition
from . import host
from .config import TrainConfig
from .memory import model_state
from .shape import ModelShape

# ASSUMPTION: host memory the job cannot use: the OS, the framework's CPU side and the
# data-loader worker processes, as a share of the node's DRAM.
HOST_RESERVE = 0.1
# The GPU-host link, per GPU and direction. PCIe 5.0 x16: 32 GT/s x 16 lanes with
# 128b/130b coding = 63 GB/s (PCI-SIG PCIe 5.0 specification); NVIDIA Grace hosts attach
# each GPU over NVLink-C2C at 450 GB/s per direction (900 GB/s bidirectional, NVIDIA Grace
# Hopper Superchip architecture whitepaper). ASSUMPTION: a DMA stream reaches 80 % of it.
PCIE5_X16 = 32e9 * 16 * 128 / 130 / 8
NVLINK_C2C = 450e9
LINK_EFFICIENCY = 0.8


@attrs.frozen
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


def host_link(node: NodeType) -> float:
    """Bytes/s per GPU and direction between a GPU and host memory: the node's declared
    `host_link` where the IR carries one, else PCIe 5.0 x16 (NVLink-C2C behind Grace)."""
    declared = getattr(node, "host_link", None)
    if declared:
        return declared * LINK_EFFICIENCY
    grace = any("grace" in p.name.lower() for p in node.parts_of("cpu"))
    return (NVLINK_C2C if grace else PCIE5_X16) * LINK_EFFICIENCY


def offload_time(node: NodeType, nbytes_per_gpu: float) -> float:
    """Seconds to move `nbytes_per_gpu` one way between each GPU and host memory (the GPUs
    of a node move theirs at once, each on its own link)."""
    return nbytes_per_gpu / host_link(node) if nbytes_per_gpu > 0 else 0.0


def staging_bytes(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Bytes of a node's checkpoint that pass through host DRAM (0 without checkpoints)."""
    if cfg.checkpoint_every <= 0:
        return 0.0
    node = partition.node
    weights, _, optimizer = model_state(shape, cfg)
    whole = (weights + optimizer) * min(node.gpus, cfg.gpus)
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
        parts.append(f"{need.staging / 1e9:.1f} GB to stage its checkpoint share")
    if need.offload:
        parts.append(f"{need.offload / 1e9:.1f} GB of offloaded tensors")
    return (f"each `{node.name}` needs {' and '.join(parts)} in host DRAM, but has {need.available / 1e9:.1f} GB "
            f"({node.dram / 1e9:.0f} GB less a {HOST_RESERVE:.0%} reserve)")
