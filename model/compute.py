"""Time of one operation on one accelerator: a roofline per operation, with GEMM
efficiency that depends on precision and on the matrix shape.

Calibrated physics, not per-run constants: the best-shape GEMM efficiency of each chip
and precision comes from the chip's `efficiency { ... }` block (measured MAMF figures
in std/); the shape penalty and the kernel overheads below are the same for every chip.
"""

from __future__ import annotations

import functools

from ..compiler.formats import family, generation as chip_generation
from ..compiler import hbm as hbm_packaging
from ..compiler.ir import Accelerator
from ..compiler.vendors import vendor_of
from . import cache, dvfs
from .ops import ACT_BYTES, Op

# Undeclared chips: the median of the efficiencies fitted on the published runs
# (benchmarks/calibrate.py, 2026-12-06; Blackwell fp8 refit 2026-12-07; GEMMs of every precision together). Attention apart:
# the median over the calibrated chips (model/calibration.py CALIBRATED) of the efficiency each
# runs at, its generation's kernels times its in-training share where it has kernel data (H100
# 0.314, B200/GB200/GB300 0.253: ATTENTION_TRAINING_SHARES, 2026-12-07), else its fitted value (A100
# 40/80 GB 0.50/0.375, TPU v5e/v5p 0.79/0.375): not of the fitted ones alone, which leaves out the newer parts.
DEFAULT_GEMM_EFFICIENCY = 0.75  # share of the dense peak a sustained training GEMM reaches
DEFAULT_ATTENTION_EFFICIENCY = 0.3445  # share of the bf16 peak fused attention reaches
# Undeclared chips of a vendor with fitted chips: the median of that vendor's fitted values
# for the key (same fit): NVIDIA bf16 of A100 40/80 GB and H100; fp8 of H100, B200, GB200,
# GB300; attention as above over NVIDIA's six calibrated parts; Google of TPU v5e and v5p. Their compilers and matrix
# units are shared across a vendor's parts, so this is the nearer prior (leave-one-group-
# out: TPU v5e and v5p predicted from each other miss by 9 % and 7 % median, from the
# all-vendor default by 27 % and 20 %).
VENDOR_DEFAULTS = {("NVIDIA", "bf16"): 0.75, ("NVIDIA", "fp8"): 0.5825, ("NVIDIA", "attention"): 0.2835,
                   ("Google", "bf16"): 0.8725, ("Google", "attention"): 0.5825}
DEFAULT_HBM_EFFICIENCY = 0.85    # share of HBM bandwidth a streaming kernel reaches, when undeclared
# Flash attention's rate rises with the key/value length one kernel call sees (tiles of
# 128 keys: the causal diagonal's masked half-tiles and the per-query-block prologue and
# epilogue are amortized over fewer tiles when it is short): FlashAttention-3 paper
# (Shah et al. 2024, Fig. 5, H100 SXM5, causal, head dim 128, forward) measures 292, 423,
# 521, 579, 602, 616 TFLOP/s at 512, 1k, 2k, 4k, 8k, 16k; s / (s + 430) fits the ratios
# to the 16k figure within 0.04 from 1k up. The chips' `attention` efficiencies are the
# long-sequence asymptote.
ATTENTION_HALF_SEQ = 430
# A sliding-window call (w keys, w well below the sequence) reaches a different share, from the
# same law read by tiles: the fused kernels compute 128 x 128 score tiles (FlashAttention-3's and
# cuDNN's bf16 blocks on Hopper and Blackwell). A causal call over s keys computes s/2N + 1/2
# tiles per query block for s/2N tiles' worth of kept scores and pays P tiles' worth of prologue
# and epilogue (loading Q, the softmax's last rescale, writing O): share s / (s + N (1 + 2P)), so
# N (1 + 2P) = 430. A window's band crosses two key blocks per query block (w/N + 1 tiles computed,
# w/N kept): share w / (w + N (1 + P)), whose half length is (430 + N) / 2 = 279 keys.
ATTENTION_TILE = 128
ATTENTION_HALF_WINDOW = (ATTENTION_HALF_SEQ + ATTENTION_TILE) / 2
# Narrow heads run flash attention slower: each tile's softmax (exponentials, rescaling)
# costs the same whatever the head width while its two matrix products scale with it, so
# the rate goes as d / (d + d0). The kernels whose rates the model uses (cuDNN, ATTENTION_KERNELS
# below) measure at head dim 64 against 128, 16k keys, H100 SXM5 (Shah et al. 2024, FlashAttention-3,
# arXiv:2407.08608, Figs. "Attention forward / backward speed, head dim 64 / 128"): forward 413
# against 595 TFLOP/s (d0 = 101), backward 433 against 516 (d0 = 30: the backward's five products
# per score share the exponential that the forward's two do). Widths above 128 keep the 128 rate
# (FlashAttention-3 at 256 gains less than the law: register pressure), which is what the chips'
# `attention` efficiencies were fitted at.
HEAD_DIM_64_KERNELS = (413.0, 433.0)   # cuDNN at head dim 64 on the H100 (forward, backward), as above
# d0 is set by the tensor cores' FLOPs per exponential: per score, 4d FLOPs of the forward against
# one MUFU.EX2 (4096 / 16 / 4 = 64 on H100). It scales with the generation's tensor FLOPs per SM
# and clock over its exponentials per SM and clock, relative to Hopper's (4096 bf16 FLOPs,
# dsl/std/nvidia.gcl H100 ops_per_clock, over 16):
# - blackwell: the tensor cores doubled, the SFUs did not ("BF16 tensor core throughput
#   increases from 1 to 2.25 PFLOPs, while both the SFU count and shared memory bandwidth
#   remains unchanged"; MUFU 16 ops per clock per SM on both: Zadouri et al. 2026,
#   FlashAttention-4, arXiv:2603.05451, and together.ai/blog/flashattention-4): x2;
# - blackwell_ultra (B300, GB300): "doubling SFU throughput over the standard NVIDIA Blackwell
#   architecture" for MUFU.EX2 (NVIDIA technical blog, "Making Softmax More Efficient with
#   NVIDIA Blackwell Ultra", 2026): back to Hopper's balance, x1.
# Chips without kernel data (Ampere, TPUs) keep Hopper's law (ASSUMPTION).
EXP_BOUND_SCALE = {"hopper": 1.0, "blackwell": 2.0, "blackwell_ultra": 1.0}
ATTENTION_BACKWARD_FLOPS = 2.5   # a flash backward's FLOPs over its forward's (model/train/workload.py backward_factor)
# FlashAttention-2's kernels use Ampere's synchronous mma instructions; on chips with
# asynchronous warp-group tensor cores (Hopper, Blackwell) they leave much of the rate
# the vendor's kernels reach: 370 against cuDNN's 595 TFLOP/s at 16k keys, head dim 128,
# on an H100 SXM5 (Shah et al. 2024, arXiv:2407.08608, "Attention forward speed, head dim
# 128"). The fitted `attention` efficiencies are those of cuDNN's fused attention, which
# the current stacks run through Transformer Engine.
PORTABLE_ATTENTION_SHARE = 370 / 595
# Fused attention kernels' rates by tensor-core generation (bf16, head dim 128, long sequences,
# the vendor's kernels the current stacks call: cuDNN through Transformer Engine), forward and
# backward, TFLOP/s, on the part measured and its bf16 peak:
# - hopper: H100 SXM5, cuDNN: 595 forward and 516 backward at 16k keys (Shah et al. 2024,
#   FlashAttention-3, arXiv:2407.08608, Figs. "Attention forward / backward speed, head dim 128
#   (H100 80GB SXM5)");
# - blackwell: B200, cuDNN 9.13: FlashAttention-4 reaches 1613 TFLOP/s forward, "up to 1.3x"
#   cuDNN 9.13's (Zadouri et al. 2026, arXiv:2603.05451, abstract): 1613 / 1.3; backward not
#   read, ASSUMPTION cuDNN's backward / forward ratio on Hopper (516 / 595).
# A training step runs one forward and a backward of 2.5x its FLOPs (workload.py
# `backward_factor`): the kernels' combined share of peak is 3.5 / (1/fwd + 2.5/bwd) / peak.
# Ampere has no kernel data here: its chips keep fitted `attention` efficiencies.
ATTENTION_KERNELS = {"hopper": (595.0, 516.0, 989.0), "blackwell": (1613 / 1.3, 1613 / 1.3 * 516 / 595, 2250.0)}
# The share of those kernels' combined rate that attention reaches inside a training step
# (causal masking, grouped queries, heads split by TP, chunks of context-parallel rings, the
# variable lengths of packed documents): one number for every chip with kernel data, fitted on
# the published runs of those chips (benchmarks/calibrate.py `attention_share`).
ATTENTION_TRAINING_SHARE = 0.57
# The same share fitted per generation (benchmarks/calibrate.py PER_GENERATION_SHARE, 2026-12-07, 56
# Hopper and 46 Blackwell runs): the generations' kernel rates are not measured alike (Hopper's forward
# and backward read from one paper's figures; Blackwell's forward from a ratio in an abstract, its
# backward ASSUMED at Hopper's backward / forward ratio), so one share cannot carry both. The single
# share above stays the rate of a generation without its own.
ATTENTION_TRAINING_SHARES = {"hopper": 0.58, "blackwell": 0.50}   # refit with ep_overlap's unpaired passes
# Absorbed-MLA decode kernels (DeepSeek-V2/V3: 128 query heads against one shared 576-wide latent
# key, 512-wide values) by tensor-core generation: the kernel's sustained TFLOP/s in a compute-bound
# configuration and the bf16 peak of the part measured. Decode attention is a different kernel from
# the training-time FMHA above (one query row per head, every head against the same cache): its rate
# does not follow the FMHA's. github.com/deepseek-ai/FlashMLA README, "Performance" (2025-09-29):
# - hopper: the dense MLA decoding kernel "660 TFLOPS in computation-bound configuration on H800 SXM5"
#   (bf16 cache; H800's tensor cores are H100's, 989 dense bf16);
# - blackwell: FlashMLA has no dense decoding kernel for SM100; its token-level SPARSE decoding kernel
#   (DSA, FP8 cache, bf16 math, MQA mode) reaches "up to 350 TFlops on B200 (which is not really
#   optimized yet)", against 410 on H800 where the dense kernel reaches 660. That is the one published
#   Blackwell MLA decode rate, so it stands in for the dense rate: ESTIMATE (a sparse kernel's rate for
#   a dense one; TensorRT-LLM's own Blackwell decode kernels publish none). 2250: B200's dense bf16
#   peak, half the 4.5 PFLOPS with sparsity per GPU of NVIDIA's HGX B200 data sheet (36 PFLOPS / 8).
MLA_DECODE_KERNELS = {"hopper": (660.0, 989.0), "blackwell": (350.0, 2250.0)}
# The bf16 GEMM share of peak of the part each generation's decode kernel was measured on, as
# dsl/std/nvidia.gcl states it (H100_SXM 65 %, which H800 inherits, B200 77.6 % x 0.80). Another part of the generation
# has the same tensor cores at the clock it holds under load, so the kernel reaches that part's own
# measured bf16 share relative to this one: GB200 is B200 silicon whose 2.5 PF bf16 peak is quoted at
# a clock it does not hold (MAMF 1822 of 2500 TFLOP/s, 72.9 %, against B200's 1745 of 2250, 77.6 %,
# [mb]), so FlashMLA's B200 rate runs 1.04x on it, not the peaks' 1.11x.
KERNEL_PART_SHARE = {"hopper": 0.65, "blackwell": 0.776 * 0.80}
# An MXFP8 GEMM's rate over a per-tensor fp8 GEMM's on the same shapes, both on inputs quantized
# beforehand: Transformer Engine v2.17 docs/examples/gemm_profiling/gemm_profiling.rst ("Autocast vs
# Pre-quantized", NVIDIA B300, a 5B model's 12 GEMM shapes, M = 15,872 tokens): per-layer GEMM time
# 6.812 ms FP8 CurrentScaling, 7.161 ms MXFP8 (tex.generic_gemm on pre-quantized operands,
# benchmarks/gemm/benchmark_gemm.py `benchmark_fp8_current_prequantized`, `benchmark_fp8_prequantized`:
# the block-scaled MMA and the swizzle of its E8M0 scales, no quantization). A chip's fitted `fp8`
# efficiency is its per-tensor fp8 GEMMs' share; an MXFP8 GEMM reaches this share of it.
# ASSUMPTION: B200, GB200 and GB300 run the same block-scaled tcgen05 MMA as the B300 measured;
# other vendors' MX kernels were not measured (1.0 there).
MXFP8_GEMM_SHARE = 6.812 / 7.161
HALF_SATURATION = 96             # a GEMM dimension of this size runs at half the per-dimension rate
BEST_SHAPE = (2048, 2048, 13312)  # the shape at which the MAMF efficiencies were measured
KERNEL_OVERHEAD_S = 4e-6         # launch and tail per kernel
# ESTIMATE: 5-25 us of CPU per eager PyTorch op before its kernel is queued (Python, pybind,
# autograd recording, ATen dispatch, launch: J. Lin, "From PyTorch op to kernel launch",
# jiahuanglin.xyz gpu_kernel_serving lesson 18); the midpoint. A GPU whose kernels the host
# issues one by one (no CUDA graph) waits for them whenever they are shorter than this.
EAGER_OP_S = 15e-6


class UnsupportedPrecision(ValueError):
    """A precision the chip has no peak for; `compiler.rules.entity` reports it with the job's span."""


@functools.lru_cache(maxsize=1024)   # read by every estimate and compute bound; chips are immutable IR values
def peak(chip: Accelerator, precision: str) -> float:
    """Dense peak for `precision` (stated or derived from the microarchitecture). A chip that
    lacks it is an error, never a silent fallback to another format's rate."""
    value = chip.peak_of(precision) if chip.runs(precision) else None
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
    return chip.efficiency_of(precision) is not None or (family(precision) == "fp16" and chip.efficiency_of("bf16") is not None)


# Wider formats whose calibrated share of peak bounds a narrower format's default.
_WIDER = {"fp4": ("fp6", "fp8", "bf16"), "fp6": ("fp8", "bf16"), "fp8": ("bf16",), "int8": ("bf16",)}


def gemm_efficiency(chip: Accelerator, precision: str) -> float:
    """Share of the precision's dense peak a sustained training GEMM reaches on `chip`: the share of its
    family (`per_tensor_efficiency`), times MXFP8_GEMM_SHARE for an MXFP8 GEMM on NVIDIA Blackwell."""
    share = MXFP8_GEMM_SHARE if precision == "mxfp8" and chip_generation(chip) == "blackwell" else 1.0
    return per_tensor_efficiency(chip, precision) * share


def per_tensor_efficiency(chip: Accelerator, precision: str) -> float:
    """Share of the precision's dense peak a sustained training GEMM reaches on `chip` with per-tensor
    (or no) scaling.

    Without a calibrated value, the default never exceeds the share calibrated for a
    wider format on the same chip: a narrower format doubles the peak but keeps the
    same memory traffic and adds scaling/quantization kernels, so its share of peak is
    measured lower, never higher (MAMF best shape, [mb] in dsl/std/nvidia.gcl: H100
    bf16 80.3 % vs fp8 70.9 %; B200 bf16 77.6 % vs fp8 76.3 %).
    """
    declared = chip.efficiency_of(precision)  # by family: nvfp4 takes fp4's
    fam = family(precision)
    if declared is None and fam == "fp16":
        declared = chip.efficiency_of("bf16")
    if declared:
        return declared
    key = "bf16" if fam == "fp16" else fam
    fallback = VENDOR_DEFAULTS.get((vendor_of(chip.vendor), key), DEFAULT_GEMM_EFFICIENCY)
    wider = (chip.efficiency_of(w) for w in _WIDER.get(fam, ()))
    return min([fallback, *(w for w in wider if w)])


def attention_efficiency(chip: Accelerator) -> float:
    """Share of the bf16 peak fused attention (forward and backward) sustains on this chip: a
    declared (measured) value, else its generation's kernels times the in-training share, else
    the vendor's fitted median."""
    declared = chip.efficiency_of("attention")
    if declared:
        return declared
    kernels = kernel_efficiency(chip)
    if kernels is not None:
        return kernels * training_share(chip_generation(chip))
    return VENDOR_DEFAULTS.get((vendor_of(chip.vendor), "attention"), DEFAULT_ATTENTION_EFFICIENCY)


def training_share(generation: str | None) -> float:
    """The share of its kernels' rate a generation's attention reaches inside a training step."""
    return ATTENTION_TRAINING_SHARES.get(generation, ATTENTION_TRAINING_SHARE)


def kernel_efficiency(chip: Accelerator) -> float | None:
    """The combined forward-and-backward share of peak of the chip's generation's fused attention
    kernels (`ATTENTION_KERNELS`), None without kernel data. (The in-training share they are
    scaled by is fitted on the runs of every part of the generation, so it carries the clock each
    part holds; a kernel measured on one part and used as it is, MLA decode, is moved to another
    part by `part_share`.)"""
    generation = chip_generation(chip)   # compiler/formats.py: one answer for every generation-keyed table
    return generation_efficiency(generation) if generation in ATTENTION_KERNELS else None


def part_share(chip: Accelerator, generation: str) -> float:
    """How the share of peak the generation's kernels reach on `chip` compares with the part they
    were measured on: the ratio of the two parts' measured bf16 GEMM shares (`KERNEL_PART_SHARE`),
    1 where the chip's bf16 share was not measured."""
    if chip.efficiency_of("bf16") is None:
        return 1.0
    return chip.efficiency_of("bf16") / KERNEL_PART_SHARE[generation]


def generation_efficiency(generation: str) -> float:
    """The combined forward-and-backward share of peak of a generation's fused attention kernels."""
    forward, backward, reference = ATTENTION_KERNELS[generation]
    return 3.5 / (1 / forward + 2.5 / backward) / reference


def warp_group_tensor_cores(chip: Accelerator) -> bool:
    """Whether the chip's tensor cores are the asynchronous warp-group kind that portable
    attention kernels leave idle: NVIDIA's Hopper and Blackwell (compiler/formats.py generation;
    Ampere's and Ada's are synchronous)."""
    return chip_generation(chip) in ("hopper", "blackwell")


def attention_length_factor(kv_length: int, window: bool = False) -> float:
    """Share of the asymptotic attention rate a kernel over `kv_length` keys reaches
    (1.0 when the length is unknown); `window`: the keys are a sliding window's, not a causal
    call's whole length (ATTENTION_HALF_WINDOW)."""
    half = ATTENTION_HALF_WINDOW if window else ATTENTION_HALF_SEQ
    return kv_length / (kv_length + half) if kv_length > 0 else 1.0


def attention_head_factor(head_dim: int, chip: Accelerator | None = None) -> float:
    """Share of the head-dim-128 rate a training step's attention (its forward and a backward of
    ATTENTION_BACKWARD_FLOPS times its FLOPs) reaches with heads this wide on `chip` (None: Hopper,
    where the kernels were measured): each direction at its own d0 (`HEAD_DIM_64_KERNELS`), scaled
    by the chip's balance of tensor cores and exponentials (`EXP_BOUND_SCALE`)."""
    if head_dim <= 0 or head_dim >= 128:
        return 1.0
    generation = exp_generation(chip) if chip is not None else None
    scale = EXP_BOUND_SCALE.get(generation, 1.0)
    forward, backward, _ = ATTENTION_KERNELS.get(chip_generation(chip) if chip is not None else None,
                                                 ATTENTION_KERNELS["hopper"])
    hopper_forward, hopper_backward, _ = ATTENTION_KERNELS["hopper"]
    f = _head_share(head_dim, _half_head_dim(HEAD_DIM_64_KERNELS[0] / hopper_forward) * scale)
    b = _head_share(head_dim, _half_head_dim(HEAD_DIM_64_KERNELS[1] / hopper_backward) * scale)
    k = ATTENTION_BACKWARD_FLOPS
    return (1 / forward + k / backward) / (1 / (forward * f) + k / (backward * b))


def _head_share(d: float, half: float) -> float:
    """d / (d + d0) relative to head dim 128's."""
    return (d / (d + half)) / (128 / (128 + half))


def _half_head_dim(ratio: float) -> float:
    """The d0 at which head dim 64 runs at `ratio` of head dim 128's rate."""
    return 8192 * (1 - ratio) / (128 * ratio - 64)


def exp_generation(chip: Accelerator) -> str | None:
    """The generation whose balance of tensor cores and exponential units the chip has
    (`EXP_BOUND_SCALE`): compiler/formats.py `generation`'s, Blackwell parts whose dense fp4 peak is more
    than twice their fp8 peak read as Blackwell Ultra (its NVFP4 tensor cores run 1.5x
    Blackwell's: B300 14, GB300 15 PFLOPS against B200's 9, GB200's 10, dsl/std/nvidia.gcl).
    ASSUMPTION: the faster NVFP4 and the doubled SFUs came together in Blackwell Ultra, so a part
    with the one has the other."""
    generation = chip_generation(chip)
    if generation == "blackwell" and chip.peak_of("fp4") > ULTRA_FP4_OVER_FP8 * (chip.peak_of("fp8") or float("inf")):
        return "blackwell_ultra"
    return generation


# Blackwell's dense fp4 peak is 2.0x its fp8 (B200 9 / 4.5, GB200 10 / 5 PFLOPS), Blackwell Ultra's ~3x
# (B300 14 / 4.5, 2.9 at the conflicting 13.1; GB300 15 / 5; dsl/std/nvidia.gcl): the test sits midway, so a
# data sheet's rounding (a B200 at 2.05x) stays Blackwell instead of flipping on a bound its own parts touch.
ULTRA_FP4_OVER_FP8 = 2.5


# The rates below depend on the chip alone (an immutable IR value) and are read for every
# operation the model times: memoized per chip and precision.
@functools.lru_cache(maxsize=1024)
def hbm_rate(chip: Accelerator) -> float:
    return chip.hbm_bandwidth * (chip.efficiency_of("hbm") or DEFAULT_HBM_EFFICIENCY)


def _saturation(x: int) -> float:
    return x / (x + HALF_SATURATION)


_BEST_SHAPE_FACTOR = _saturation(BEST_SHAPE[0]) * _saturation(BEST_SHAPE[1]) * _saturation(BEST_SHAPE[2])


def shape_factor(m: int, n: int, k: int) -> float:
    """How close a GEMM of this shape gets to the best shape's rate (1.0 at best)."""
    return min(1.0, _saturation(m) * _saturation(n) * _saturation(k) / _BEST_SHAPE_FACTOR)


@functools.lru_cache(maxsize=1024)
def _sustained_gemm(chip: Accelerator, precision: str) -> tuple[float, float]:
    """(peak x GEMM efficiency, clock ratio) of `chip` at `precision`."""
    return peak(chip, precision) * gemm_efficiency(chip, precision), clock(chip, precision)


def gemm_rate(chip: Accelerator, precision: str, m: int, n: int, k: int) -> float:
    top, ratio = _sustained_gemm(chip, precision)
    return top * shape_factor(m, n, k) * ratio


@functools.lru_cache(maxsize=1024)
def attention_rate(chip: Accelerator) -> float:
    return attention_peak(chip) * attention_efficiency(chip) * clock(chip, "attention")


@functools.lru_cache(maxsize=1024)
def mla_decode_rate(chip: Accelerator) -> float:
    """FLOP/s of absorbed-MLA decode attention on `chip`: its generation's decode kernel's share of
    the bf16 peak (`MLA_DECODE_KERNELS`) on this part (`part_share`), else the fused-attention rate (no decode kernel data)."""
    generation = chip_generation(chip)
    if generation not in MLA_DECODE_KERNELS:
        return attention_rate(chip)
    rate, reference = MLA_DECODE_KERNELS[generation]
    return attention_peak(chip) * rate / reference * part_share(chip, generation) * clock(chip, "attention")


def op_time(op: Op, chip: Accelerator, precision: str) -> float:
    """Seconds for `op`: the slowest of its compute, its HBM traffic and its L2 traffic (a
    two-level roofline, model/cache.py), plus overhead."""
    memory = op.bytes / hbm_rate(chip)
    if op.kind == "gemm":
        # a grouped GEMM's tiles of all its experts fill the GPU together
        rows = op.m * op.count if op.grouped else op.m
        compute = op.flops / gemm_rate(chip, precision, rows, op.n, op.k)
        memory = cache.gemm_bytes(op.m, op.n, op.k, op.count, ACT_BYTES, chip) / hbm_rate(chip)
    elif op.kind == "attention":
        if op.m:  # unfused: two batched GEMMs (QK^T: s x s x d, then AV) at the GEMM rate of
            # their shape, and the scores go through HBM between kernels, not overlapped with math
            compute = op.flops / gemm_rate(chip, "bf16" if chip.peak_of("bf16") else "fp16", op.m, op.n, op.k)
            return compute + memory + 4 * kernel_overhead(chip)
        rate = attention_rate(chip) * attention_length_factor(op.n, op.window) * attention_head_factor(op.k, chip)
        if op.portable and warp_group_tensor_cores(chip):
            rate *= PORTABLE_ATTENTION_SHARE
        compute = op.flops / rate
    else:
        compute = 0.0
        memory = cache.elementwise_hbm_bytes(op.bytes, op.tensor, chip) / hbm_rate(chip)
    return max(compute, memory, cache.l2_time(op.bytes, chip)) + op.count * kernel_overhead(chip)


def kernel_overhead(chip: Accelerator) -> float:
    """A kernel's launch and tail, one exposed HBM round trip in it: HBM stacked on the logic die
    returns it sooner by the 2.5D crossing it no longer makes (compiler/hbm.py `latency_saved`); board
    memory (GDDR) makes no such crossing to save."""
    if chip.hbm_packaging == "interposer" or hbm_packaging.on_board(chip.hbm_type):
        return KERNEL_OVERHEAD_S
    return KERNEL_OVERHEAD_S - hbm_packaging.latency_saved(chip.hbm_packaging)


def clear_caches() -> None:
    """Forget the per-chip rates (they read module constants a calibration changes)."""
    attention_rate.cache_clear()
    mla_decode_rate.cache_clear()
    _sustained_gemm.cache_clear()
    hbm_rate.cache_clear()
