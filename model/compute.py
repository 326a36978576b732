"""Time of one operation on one accelerator: a roofline per operation, with GEMM
efficiency that depends on precision and on the matrix shape.

Calibrated physics, not per-run constants: the best-shape GEMM efficiency of each chip
and precision comes from the chip's `efficiency { ... }` block (measured MAMF figures
in std/); the shape penalty and the kernel overheads below are the same for every chip.
"""

from __future__ import annotations

from ..compiler.ir import Accelerator
from . import cache, dvfs
from .workload import ACT_BYTES, Op

# Undeclared chips: the median of the efficiencies fitted on the published runs
# (benchmarks/calibrate.py; A100, H100, B200/GB200/GB300 fp8 and bf16, fused attention).
DEFAULT_GEMM_EFFICIENCY = 0.61   # share of the dense peak a sustained training GEMM reaches
DEFAULT_ATTENTION_EFFICIENCY = 0.32  # share of the bf16 peak fused attention reaches
DEFAULT_HBM_EFFICIENCY = 0.85    # share of HBM bandwidth a streaming kernel reaches, when undeclared
HALF_SATURATION = 96             # a GEMM dimension of this size runs at half the per-dimension rate
BEST_SHAPE = (2048, 2048, 13312)  # the shape at which the MAMF efficiencies were measured
KERNEL_OVERHEAD_S = 4e-6         # launch and tail per kernel


class UnsupportedPrecision(ValueError):
    """A precision the chip has no peak for; `compiler.rules` reports it with the job's span."""


def peak(chip: Accelerator, precision: str) -> float:
    """Dense peak for `precision` (stated or derived from the microarchitecture). A chip that
    lacks it is an error, never a silent fallback to another format's rate."""
    value = chip.peak_of(precision)
    if not value:
        raise UnsupportedPrecision(f"`{chip.name}` does not run {precision}; it runs {', '.join(chip.formats)}")
    return value


def attention_peak(chip: Accelerator) -> float:
    """Fused attention runs its matrix math in 16-bit (bf16, else fp16, else the chip's widest
    format it declares after them): the softmax needs the range whatever the GEMMs use."""
    for candidate in ("bf16", "fp16", "tf32", "fp32", "fp8"):
        if chip.peak_of(candidate):
            return chip.peak_of(candidate)
    return max((v for _, v in chip.peak), default=1.0)


def clock(chip: Accelerator, precision: str) -> float:
    """The clock ratio the chip computes at (model/dvfs.py): below 1 under a power cap, or at
    the base clock when nothing measured says what the chip sustains."""
    return dvfs.sustained(chip, measured(chip, precision))


def measured(chip: Accelerator, precision: str) -> bool:
    """Whether the chip's sustained rate for `precision` was measured (fp16 shares bf16's)."""
    return chip.efficiency_of(precision) is not None or (precision == "fp16" and chip.efficiency_of("bf16") is not None)


def gemm_efficiency(chip: Accelerator, precision: str) -> float:
    declared = chip.efficiency_of(precision)
    if declared is None and precision in ("fp16",):
        declared = chip.efficiency_of("bf16")
    return declared or DEFAULT_GEMM_EFFICIENCY


def attention_efficiency(chip: Accelerator) -> float:
    """Share of the bf16 peak fused attention (forward and backward) sustains on this chip."""
    declared = chip.efficiency_of("attention")
    return declared or DEFAULT_ATTENTION_EFFICIENCY


def hbm_rate(chip: Accelerator) -> float:
    return chip.hbm_bandwidth * (chip.efficiency_of("hbm") or DEFAULT_HBM_EFFICIENCY)


def shape_factor(m: int, n: int, k: int) -> float:
    """How close a GEMM of this shape gets to the best shape's rate (1.0 at best)."""
    def f(x: int) -> float:
        return x / (x + HALF_SATURATION)
    best = f(BEST_SHAPE[0]) * f(BEST_SHAPE[1]) * f(BEST_SHAPE[2])
    return min(1.0, f(m) * f(n) * f(k) / best)


def gemm_rate(chip: Accelerator, precision: str, m: int, n: int, k: int) -> float:
    return peak(chip, precision) * gemm_efficiency(chip, precision) * shape_factor(m, n, k) * clock(chip, precision)


def attention_rate(chip: Accelerator) -> float:
    return attention_peak(chip) * attention_efficiency(chip) * clock(chip, "attention")


def op_time(op: Op, chip: Accelerator, precision: str) -> float:
    """Seconds for `op`: the slowest of its compute, its HBM traffic and its L2 traffic (a
    two-level roofline, model/cache.py), plus overhead."""
    memory = op.bytes / hbm_rate(chip)
    if op.kind == "gemm":
        compute = op.flops / gemm_rate(chip, precision, op.m, op.n, op.k)
        memory = cache.gemm_bytes(op.m, op.n, op.k, op.count, ACT_BYTES, chip) / hbm_rate(chip)
    elif op.kind == "attention":
        compute = op.flops / attention_rate(chip)
        if op.m:  # unfused: the scores go through HBM between kernels, not overlapped with math
            return compute + memory + 4 * KERNEL_OVERHEAD_S
    else:
        compute = 0.0
        memory = cache.elementwise_hbm_bytes(op.bytes, op.tensor, chip) / hbm_rate(chip)
    return max(compute, memory, cache.l2_time(op.bytes, chip)) + op.count * KERNEL_OVERHEAD_S
