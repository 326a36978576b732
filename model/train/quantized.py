"""What a tensor in the GEMMs' low-precision format costs: bytes per value, the copies of a weight
a recipe keeps, and the bytes its parameter all-gather moves. One answer for every place that
prices a tensor in fp8 (memory.py, dp_sync.py, layer_cost.py).

Sources (Transformer Engine at d0067d0, 2026-08; Megatron-LM at d98e8a6, 2026-08):
[usages] TE docs, features/low_precision_training/performance_considerations, "Handling
  transposes": a Linear's forward reads its weight rowwise, its input gradient (dgrad) reads it
  columnwise, so "each tensor (input, weight, output gradient) needs both rowwise and columnwise
  usages during training"; on Hopper per-tensor fp8 "columnwise tensors need to be physically
  transposed in memory"; MXFP8's rowwise (1x32) and columnwise (32x1) blocks are "numerically
  different ... both must be quantized independently" (mxfp8.rst); NVFP4 stores its columnwise
  data transposed (nvfp4.rst).
[cache] TE pytorch/module/linear.py: in training the weight quantizer is set to
  `rowwise=True, columnwise=is_grad_enabled and inp.requires_grad`, and the quantized weight is
  cached in `_fp8_workspaces` across micro-batches whenever `is_first_microbatch` is passed;
  Megatron-Core passes it unless `disable_parameter_transpose_cache` (default False,
  transformer_config.py). fp8 parameters hold both usages themselves (Float8TensorStorage
  `update_usage` creates and keeps `_transpose` on a chip without non-TN fp8 GEMMs).
[gather] Megatron-Core distributed/param_and_grad_buffer.py: per-tensor fp8 parameters are
  gathered as their uint8 data (the transpose made locally); MXFP8 parameters under the
  distributed optimizer are gathered in bf16 into the gradient buffer (`shared_buffer` viewed
  as bfloat16) and quantized after; Megatron-FSDP (ZeRO-3) keeps an MXFP8 weight's columnwise
  usage in a "transpose" buffer of its own ("Currently, only mxfp8 needs it") and gathers the
  rowwise buffer for the forward, the transpose buffer for the backward
  (fsdp/src/megatron_fsdp/param_and_grad_buffer.py `get_fsdp_buffer(bwd=True)`).
[tokens] fp8 tokens on the wire carry their scales: DeepEP's fp8 dispatch takes the hidden states
  as float8_e4m3fn with `[num_tokens, hidden // 128]` fp32 scales (deep_ep/buffers/legacy.py
  `dispatch`, dd758ca; its tests count `1 + 4 / 128` bytes per value), Megatron-Core's
  `moe_dispatch_fwd_dtype = "mxfp8"` sends MXFP8 (transformer_config.py): 1 + 1/32 B either way.
"""

from __future__ import annotations

from ...compiler.formats import dispatch_bytes, family, is_narrow, value_bytes
from ..config import TrainConfig

BF16_BYTES = 2.0
# Stacks that cast the weights at each use and keep no quantized copy across micro-batches:
# torchao's float8 and MX training under PyTorch FSDP ("dynamic" scaling casts the weight in
# every forward: torchao/float8 `Float8Linear`) and XLA (MaxText).
CAST_AT_USE = ("fsdp", "fsdp_compiled", "maxtext")


def gemm_format(cfg: TrainConfig) -> str:
    """The format the GEMMs run in: the generic `fp8` on a chip that runs it with MX block scaling
    (`mx_fp8`: compiler/formats.py `block_scaled`, Blackwell) is MXFP8. Not every Blackwell run is: Megatron-
    Bridge's published FP8-CS rows (benchmarks/runs/mb2511_2, per-tensor current scaling, MXFP8 the
    alternative in parentheses) ran per-tensor fp8, which their designs state as `precision =
    fp8_e4m3` (not block-scaled: formats.py; benchmarks/make_runs.py `per_tensor_fp8`)."""
    return "mxfp8" if cfg.mx_fp8 else cfg.precision


def gemm_bytes(cfg: TrainConfig) -> float:
    """Bytes per value of a tensor in the GEMMs' format, its block scales included: per-tensor fp8
    1; MXFP8 1 + 1/32 (one E8M0 scale per 32 values: OCP Microscaling Formats (MX) Specification
    v1.0, 2023, sec. 5; TE's MXFP8 recipe); NVFP4 4.5 bits; 2 for a 16-bit recipe."""
    return value_bytes(gemm_format(cfg)) if is_narrow(cfg.precision) else BF16_BYTES


def weight_copies(cfg: TrainConfig) -> int:
    """Quantized copies of a weight a Transformer Engine recipe holds in training: the rowwise one
    (forward) and the columnwise one (dgrad) [usages, cache] -- but one for per-tensor fp8 on a chip
    whose fp8 GEMMs take any layout (`non_tn_fp8`: Blackwell). TE at d0067d0: Float8Quantizer and
    Float8CurrentScalingQuantizer (delayed and current scaling) allocate the transpose only where
    `columnwise_usage && !is_non_tn_fp8_gemm_supported` (pytorch/csrc/quantizer.cpp `create_tensor`;
    pytorch/utils.py: compute capability 10.x, 11.x, 13 on), the dgrad GEMM reading the rowwise data
    in another layout; MXFP8Quantizer and NVFP4Quantizer allocate rowwise and columnwise data apart on
    every chip (their scales differ), as gclc's `fp8` on Blackwell is MX (compiler/formats.py
    `block_scaled`). Elsewhere per-tensor fp8 keeps the transpose (ASSUMPTION beyond NVIDIA's chips:
    as Hopper). A stack that casts at each use holds none between uses: priced as one."""
    per_tensor_fp8 = cfg.non_tn_fp8 and family(cfg.precision) == "fp8" and gemm_format(cfg) != "mxfp8"
    return 1 if cfg.stack in CAST_AT_USE or per_tensor_fp8 else 2


def held_weight_bytes(cfg: TrainConfig) -> float:
    """Bytes per parameter of a weight's quantized copies held across micro-batches (the fp8
    parameters themselves with `fp8_params`, else the workspace beside the bf16 weights)."""
    return weight_copies(cfg) * gemm_bytes(cfg)


def gather_bytes(cfg: TrainConfig, zero: int | None = None) -> float:
    """Bytes per parameter one data-parallel parameter all-gather moves [gather]: bf16 without fp8
    parameters; per-tensor fp8 (and NVFP4) parameters their rowwise data; MX parameters under
    ZeRO-3 one usage a gather (the forward's rowwise buffer, the backward's columnwise one), under
    the distributed optimizer (ZeRO 1, 2) or a stack that casts at use bf16, quantized after."""
    if not cfg.fp8_params:
        return BF16_BYTES
    if gemm_format(cfg) != "mxfp8":
        return gemm_bytes(cfg)
    zero = cfg.zero if zero is None else zero
    return gemm_bytes(cfg) if zero >= 3 and cfg.stack not in CAST_AT_USE else BF16_BYTES


def gathered_width(cfg: TrainConfig) -> float:
    """Bytes per parameter of a ZeRO-3 layer while gathered: bf16 without fp8 parameters; with them
    what one gather brought, and where the columnwise copy is made from it locally (per-tensor fp8
    on Hopper: TE's `_create_transpose`; not MX, whose backward gathers its own) that copy too."""
    if not cfg.fp8_params:
        return BF16_BYTES
    local = held_weight_bytes(cfg) if gemm_format(cfg) != "mxfp8" else gemm_bytes(cfg)
    return max(gather_bytes(cfg, zero=3), local)


def fp8_token_bytes(cfg: TrainConfig) -> float:
    """Bytes per value of an MoE token dispatched in fp8 with its scales [tokens]: 1 + 4/128 (the same
    bytes as MXFP8's 1 + 1/32), never narrower (compiler/formats.py dispatch_bytes, serving's answer too)."""
    return dispatch_bytes(gemm_format(cfg), narrowest="fp8")
