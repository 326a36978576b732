"""The on-chip L2 / SRAM as the second memory level of the roofline.

The model follows the hierarchical roofline (Yang, Kurth and Williams, "Hierarchical
Roofline Analysis for GPUs: Accelerating Performance Optimization for the NERSC-9 Perlmutter
System", CCPE 2020, arXiv:2009.05257): an operation takes the longest of its compute, its
HBM traffic over the HBM bandwidth and its L2 traffic over the L2 bandwidth. The
capacity of the level decides how much traffic reaches HBM:

- GEMM tile reuse: with output tiles of side t whose A, B and C tiles are resident
  (3 t^2 b <= L2 bytes), A is read n/t times and B m/t times, so HBM sees
  b (m k max(1, n/t) + k n max(1, m/t) + m n): the blocked-matrix-multiply traffic whose
  order Hong and Kung's I/O lower bound (STOC 1981) shows optimal. More L2, larger tiles,
  less traffic, down to the compulsory b (m k + k n + m n). A chip without a declared
  L2 keeps the compulsory traffic (perfect reuse), as the model always did.
- Producer-consumer reuse in elementwise chains (norms, residual adds, activation): a
  tensor one kernel writes and the next reads stays in L2 when it fits; those reads, half
  of the chain's traffic, hit in proportion to min(1, (L2 / 2) / tensor). Counted only
  when the chip declares `l2_bandwidth`: the level's own ceiling is part of the model.
- KV reuse in decode: the KV cache that fits in SRAM beside the streamed weights is read
  from SRAM, not HBM, every step (`decode_bytes`); needs `l2_bandwidth` likewise.

A chip that states `l2` but not `l2_bandwidth` may take its generation's measured L2
bandwidth (`GENERATION_L2_BANDWIDTH`, NVIDIA only: Ampere 7219 GB/s, Hopper 8986 GB/s,
Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture", IPDPS 2024,
PMC10448217 Table 3). Whether it does is `USE_GENERATION_L2`, decided by the cross-validated
accuracy (benchmarks/accuracy.py, 196 runs, 2026-12-06): with it on, median 6.2 -> 6.3 %,
p90 15.1 -> 15.8 %, band 81 -> 79 %; serve_accuracy.py held out by model 10.1 -> 10.4 %;
so it is off, and such a chip keeps one memory level.
`l2_source` says which it took, and `gclc explain` prints it.
"""

from __future__ import annotations

import math

from ..compiler import hbm
from ..compiler.formats import generation
from ..compiler.ir import Accelerator

TILE_OPERANDS = 3          # A, B and C tiles resident at once
REUSED_SHARE = 0.5         # share of an elementwise chain's traffic that reads a producer's output
RESIDENT_SHARE = 0.5       # share of the L2 a tensor (or the KV cache) may occupy; the rest streams


def tile_side(chip: Accelerator, element_bytes: float) -> float:
    """Side of the square GEMM tile the L2 holds (infinite when the L2 is not declared)."""
    if chip.l2 <= 0:
        return math.inf
    return math.sqrt(chip.l2 / (TILE_OPERANDS * element_bytes))


def gemm_bytes(m: int, n: int, k: int, count: int, element_bytes: float, chip: Accelerator) -> float:
    """HBM traffic of `count` m x n x k GEMMs tiled through the L2."""
    t = tile_side(chip, element_bytes)
    return element_bytes * count * (m * k * max(1.0, n / t) + k * n * max(1.0, m / t) + m * n)


GENERATION_L2_BANDWIDTH = {"ampere": 7219e9, "hopper": 8986e9}   # B/s, PMC10448217 Table 3 (A100, H100)
USE_GENERATION_L2 = False


def l2_bandwidth(chip: Accelerator) -> float | None:
    """The L2 bandwidth the roofline uses: stated, else the generation's where that is on."""
    if chip.l2_bandwidth or chip.l2 <= 0:
        return chip.l2_bandwidth
    if not USE_GENERATION_L2:   # (read for every op a plan times: the generation only where it is used)
        return None
    return GENERATION_L2_BANDWIDTH.get(generation(chip))   # (compiler/formats.py: none for Blackwell)


def l2_source(chip: Accelerator) -> str:
    """Where the L2 bandwidth comes from, for `explain`."""
    if chip.l2_bandwidth:
        return "stated"
    measured, memory = generation(chip), _memory(chip)
    if measured not in GENERATION_L2_BANDWIDTH or chip.l2 <= 0:
        return f"not stated: one memory level ({memory}) only"
    if USE_GENERATION_L2:
        return f"not stated: the {measured} generation's, PMC10448217 Table 3"
    return (f"not stated: one memory level ({memory}) only; the {measured} generation's measured "
            f"{GENERATION_L2_BANDWIDTH[measured] / 1e12:g} TB/s (PMC10448217 Table 3) made the "
            "cross-validated error worse (p90 15.1 -> 15.8 %), so it is not assumed")


def _memory(chip: Accelerator) -> str:
    """The off-chip level's name: the board memory's type as stated (GDDR6), else HBM."""
    return chip.hbm_type.strip() if hbm.on_board(chip.hbm_type) else "HBM"


def two_level(chip: Accelerator) -> bool:
    return chip.l2 > 0 and bool(l2_bandwidth(chip))


def elementwise_hbm_bytes(total: float, tensor: float, chip: Accelerator) -> float:
    """HBM traffic of an elementwise chain of `total` bytes whose tensors are `tensor` bytes each."""
    if not two_level(chip) or tensor <= 0:
        return total
    resident = min(1.0, RESIDENT_SHARE * chip.l2 / tensor)
    return total * (1 - REUSED_SHARE * resident)


def l2_time(l2_bytes: float, chip: Accelerator) -> float:
    """Seconds the L2 level needs for the bytes that pass through it (0 without a declared bandwidth)."""
    return l2_bytes / l2_bandwidth(chip) if two_level(chip) else 0.0


def decode_bytes(weights: float, kv: float, chip: Accelerator) -> float:
    """HBM bytes of one decode step: the weights stream, the KV cache that fits in SRAM stays."""
    if not two_level(chip):
        return weights + kv
    return weights + max(0.0, kv - RESIDENT_SHARE * chip.l2)
