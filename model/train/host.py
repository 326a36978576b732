"""Hosts and DPUs where a training job uses them: loading its data and writing checkpoints.

What a DPU takes over here: it is a second path, beside the host CPUs, for the job's
input (when its `offload` lists `input`) and its checkpoints (`storage`); both are its
default. What that path carries is model/train/dpu.py's (`dpu.input_rate`, `dpu.storage_rate`),
like the network transport and collectives it takes over.

- Input pipeline. A step reads `sample_bytes` per sequence; a node reads its share of
  the batch (the job's GPUs share it evenly: ASSUMPTION, ranks of one tensor-parallel group
  read the same sequences but only one of them from storage). The host path runs at
  CPU cores x `BYTES_PER_CORE`, capped by the node's NVMe read bandwidth when declared;
  each DPU adds its own (its Arm cores x the same rate, at most its port's line rate).
  Loading is prefetched, so it costs the step only what the step cannot hide: a step
  whose data takes longer than its compute is data-bound (`Breakdown.data`).
- Checkpoints. One model of them serves the step (`checkpoint_every`) and goodput
  (solver/schedule): the job's checkpoint (`checkpoint { size }`, else
  `CHECKPOINT_BYTES_PER_PARAM` per parameter) is written by all its nodes at once, an even
  share each (ASSUMPTION: PyTorch Distributed Checkpoint's planner writes each replicated
  tensor once and spreads the shards). A node writes over two paths: the host's, at its
  `storage` bandwidth (its local NVMe when only that is declared; Llama 3's per-host figure
  when neither is), capped by its CPU copy rate; and its storage DPUs' at their line rate
  (GPUDirect Storage through the DPU, no host copy). The save stalls training (a
  synchronous checkpoint), so each step carries its share: checkpoint time x step /
  interval (`Breakdown.checkpoint`).
- Retention. Checkpoints the host path writes to the node's own NVMe (`nvme_bandwidth`
  without a remote `storage`) stay there: the node's share of each of the `keep` it retains
  must fit in its `nvme` (`nvme_need`), or the configuration does not fit, as one whose
  memory does not (Estimate.nvme_fits); more nodes mean smaller shares.
- Staging. A node that reads its input from its own NVMe holds its share of the job's data
  there (`tokens` / seq x `sample_bytes`: one pass, ASSUMPTION), in the same NVMe.

A node that declares no CPU, NVMe or DPU figures constrains nothing but its checkpoint,
which a job that asks for one always pays at the default storage bandwidth.
"""

from __future__ import annotations

import math

from ...compiler.ir import NodeType, Partition
from . import dpu, optimizer
from ..config import TrainConfig
from .dpu import BYTES_PER_CORE
from ..shape import ModelShape

# The checkpoint: bf16 weights, fp32 master weights and Adam's two moments, 14 bytes per
# parameter (Rajbhandari et al., ZeRO, SC'20, section 3.1: 16 bytes per parameter with the
# fp16 gradients, which a checkpoint does not keep); a job's narrower state, fewer
# (model/train/optimizer.py `checkpoint_bytes`).
CHECKPOINT_BYTES_PER_PARAM = 14
# Storage write bandwidth per node: Llama 3's Tectonic sustains 2 TB/s for the 2,048 hosts
# of a 16K-GPU job (Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783, section
# 3.3.1) -> ~1 GB/s per host.
NODE_STORAGE_BPS = 2e12 / 2_048


def _cores(node: NodeType, kind: str) -> float:
    parts = node.parts_of(kind)
    if not parts or any(p.cores is None for p in parts):
        return math.inf
    return sum(p.count * p.cores for p in parts)


def _host_rate(node: NodeType, writing: bool) -> float:
    cpu = _cores(node, "cpu") * BYTES_PER_CORE if node.parts_of("cpu") else math.inf
    if writing:
        return min(cpu, node.storage or node.nvme_bandwidth or NODE_STORAGE_BPS)
    return min(cpu, node.nvme_bandwidth or math.inf)


def input_rate(node: NodeType) -> float:
    """Bytes/s of samples a node can load: host path plus its DPUs."""
    return _host_rate(node, False) + dpu.input_rate(node)


def host_checkpoint_rate(node: NodeType) -> float:
    """Bytes/s of a checkpoint the host path writes (staged in host DRAM: model/train/offload_host.py)."""
    return _host_rate(node, True)


def checkpoint_rate(node: NodeType) -> float:
    """Bytes/s one node writes (or reads back) its checkpoint share at: host path plus DPU path."""
    return _host_rate(node, True) + dpu.storage_rate(node)


def checkpoint_bytes(shape: ModelShape, stated: float = 0.0, cfg: TrainConfig | None = None) -> float:
    """Bytes of the whole job's checkpoint: as stated, else derived from the parameters and
    the optimizer state's precisions (`cfg`; None: mixed-precision Adam's)."""
    return stated or optimizer.checkpoint_bytes(cfg) * shape.params


def node_checkpoint_bytes(shape: ModelShape, cfg: TrainConfig, node: NodeType) -> float:
    """One node's even share of the job's checkpoint."""
    return checkpoint_bytes(shape, cfg.checkpoint_size, cfg) / math.ceil(cfg.gpus / node.gpus)


def data_time(cfg: TrainConfig, partition: Partition) -> float:
    """Seconds one node needs to load its share of a step's samples."""
    if cfg.sample_bytes <= 0:
        return 0.0
    node = partition.node
    share = min(1.0, node.gpus / cfg.gpus)
    return cfg.batch * cfg.sample_bytes * share / input_rate(node)


def checkpoint_time(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> float:
    """Seconds the job's nodes need to write its checkpoint (0 when it takes none): at the
    job's stated `checkpoint { bandwidth }`, else each node its share over its paths."""
    if cfg.checkpoint_every <= 0:
        return 0.0
    if cfg.checkpoint_bandwidth > 0:
        return checkpoint_bytes(shape, cfg.checkpoint_size, cfg) / cfg.checkpoint_bandwidth
    node = partition.node
    return node_checkpoint_bytes(shape, cfg, node) / checkpoint_rate(node)


def local_checkpoint_share(node: NodeType, cfg: TrainConfig) -> float:
    """Share of a node's checkpoint that lands on its own NVMe: the host path's, when that path is
    the local NVMe (`nvme_bandwidth` declared, no remote `storage`, no job-wide bandwidth stated);
    its storage DPUs write the rest to remote storage (GPUDirect Storage)."""
    if cfg.checkpoint_bandwidth > 0 or node.storage or not node.nvme_bandwidth:
        return 0.0
    host = _host_rate(node, True)
    return host / (host + dpu.storage_rate(node))


def nvme_need(shape: ModelShape, cfg: TrainConfig, node: NodeType) -> float:
    """Bytes of one node's local NVMe the job fills: its share of each checkpoint it retains there
    (`checkpoint { keep }`; one when the job checkpoints and does not say), and its shard of the
    training data when it reads its input from that NVMe (`staged_data`)."""
    keep = cfg.checkpoint_keep or (1 if cfg.checkpoint_every > 0 else 0)
    share = local_checkpoint_share(node, cfg) if keep else 0.0
    kept = keep * share * node_checkpoint_bytes(shape, cfg, node) if share else 0.0
    return kept + staged_data(cfg, node)


def staged_data(cfg: TrainConfig, node: NodeType) -> float:
    """Bytes of training data one node stages on its NVMe: the node's even share of the job's data
    (as `data_time` reads it), the part its host path reads from the NVMe (`nvme_bandwidth`); its
    input DPUs read the rest from remote storage."""
    if cfg.dataset_bytes <= 0 or not node.nvme_bandwidth:
        return 0.0
    host = _host_rate(node, False)
    return cfg.dataset_bytes * min(1.0, node.gpus / cfg.gpus) * host / (host + dpu.input_rate(node))


def nvme_capacity(node: NodeType) -> float:
    """Bytes of local NVMe a node offers (unbounded when it declares none)."""
    return node.nvme or math.inf


def host_terms(shape: ModelShape, cfg: TrainConfig, partition: Partition, step: float) -> tuple[float, float]:
    """(data wait, checkpoint share) seconds per step added to a step of `step` seconds."""
    wait = max(0.0, data_time(cfg, partition) - step)
    saving = checkpoint_time(shape, cfg, partition)
    share = (step + wait) * saving / cfg.checkpoint_every if cfg.checkpoint_every > 0 else 0.0
    return wait, share
