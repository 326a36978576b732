"""One operation one GPU runs: a GEMM with its shape, attention, or memory-bound
elementwise work, with its FLOPs and HBM traffic (model/compute.py times it)."""

from __future__ import annotations

from ..dsl.records import frozen

ACT_BYTES = 2  # bf16 activations; fp8 runs keep activations in bf16 between GEMMs


@frozen
class Op:
    name: str
    kind: str             # gemm | attention | elementwise
    flops: float
    bytes: float          # HBM traffic
    m: int = 0
    n: int = 0
    k: int = 0
    count: int = 1        # identical GEMMs (grouped experts)
    tensor: float = 0.0   # bytes of one activation tensor of an elementwise chain (L2 residency)
    # A grouped GEMM: one persistent kernel schedules the tiles of all `count` GEMMs, so
    # the GPU fills as for one GEMM of count x m rows (model/train/moe.py).
    grouped: bool = False
    # Attention by a kernel written without the chip's asynchronous tensor-core instructions
    # (FlashAttention-2 on Hopper or Blackwell: model/compute.py PORTABLE_ATTENTION_SHARE).
    portable: bool = False
    # Attention whose `n` keys are a sliding window's, not a causal call's length (the tiles it
    # computes: model/compute.py ATTENTION_HALF_WINDOW).
    window: bool = False
    # Backward work over forward where the kind's default (model/train/workload.py
    # `backward_factor`) does not hold: a reorder of rows, whose backward is the inverse reorder
    # of the gradients (one read and one write, as its forward).
    backward: float = 0.0


def gemm(name: str, m: float, n: float, k: float, count: int = 1, grouped: bool = False) -> Op:
    m, n, k = max(1, int(m)), max(1, int(n)), max(1, int(k))
    traffic = ACT_BYTES * (m * k + k * n + m * n) * count
    return Op(name, "gemm", 2.0 * m * n * k * count, traffic, m, n, k, count, grouped=grouped)


def elementwise(name: str, bytes_: float, tensor: float = 0.0, backward: float = 0.0) -> Op:
    return Op(name, "elementwise", 0.0, bytes_, tensor=tensor, backward=backward)
