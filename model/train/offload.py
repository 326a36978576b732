"""Activation offload to host memory (Megatron-Core 0.5+ `--cpu-offloading`, CHANGELOG
"Activation offloading to CPU"; MaxText's offloaded remat policies): a share of each
stage's layers copy the activations they keep for backward to host DRAM during forward and
back during backward, over the GPU's host link (PCIe, or NVLink-C2C on Grace superchips).

- GPU memory: the offloaded layers' activations leave HBM but one layer's stays as the
  copy in flight (model/train/memory.py); host memory holds them for every micro-batch in
  flight, and the node's DRAM shared by its GPUs bounds them (solver/train/enumerate.py).
- Time: each offloaded layer's copy overlaps the compute of the layers after it (forward)
  or before it (backward, prefetched); what a layer's copy takes beyond that layer's
  compute is exposed (`Breakdown.offload`).
"""

from __future__ import annotations

from ...compiler.ir import Partition
from ..config import TrainConfig
from .memory import activation_bytes_per_layer
from ..shape import ModelShape

from ..comms import host_rate

# The offloaded shares of each stage's layers the search tries where a job asks
# (solver/train/enumerate.py) and model/train/guessed.py weighs where a design leaves it out.
OFFLOAD_SHARES = (0.0, 0.25, 0.5, 1.0)


def exposed(shape: ModelShape, cfg: TrainConfig, partition: Partition, dense, moe) -> float:
    """Seconds per step of offload copies not hidden under compute. `dense` and `moe` are
    the per-micro-batch layer costs (forward, backward, recompute) of model/train/step.py."""
    if cfg.offload <= 0 or not shape.layers:
        return 0.0
    rate = host_rate(partition)
    moe_share = shape.moe_layers / shape.layers
    seconds = 0.0
    for share, layer, is_moe in ((1 - moe_share, dense, False), (moe_share, moe, True)):
        if share <= 0:
            continue
        copy = activation_bytes_per_layer(shape, cfg, is_moe) / rate
        per_layer = max(copy - layer.forward, 0.0) + max(copy - layer.backward - layer.recompute, 0.0)
        seconds += share * per_layer
    layers = cfg.offload * shape.layers / cfg.pp
    return cfg.microbatches * layers * seconds
