"""Number formats by name: which peak each runs at and how many bytes a value takes.

A chip's `peak { ... }` (and `ops_per_clock`) is keyed by *family*: fp64, fp32, tf32, bf16,
fp16, fp8, fp6, fp4, int8 — the tensor-core rate does not depend on the encoding within a
family. A chip's `formats = [...]` and a job's `precision` name a format: a family name
(the generic recipe: `fp8` is Transformer Engine's E4M3 forward / E5M2 backward) or one of
the named encodings below. Block-scaled formats carry their scales in their width.

Sources:
  [ofp8]  OCP 8-bit Floating Point Specification (OFP8) rev 1.0, 2023: E4M3 and E5M2;
          Micikevicius et al. 2022, "FP8 Formats for Deep Learning" (arXiv:2209.05433).
  [fnuz]  ROCm HIP docs, "FP8 Numbers" (docs-6.2.0): gfx940/941/942 (MI300) run the FNUZ
          encodings, not OCP FP8; StableHLO RFC 20230321-fp8_fnuz.
  [mx]    OCP Microscaling Formats (MX) Specification v1.0, 2023: blocks of 32 elements
          share one 8-bit E8M0 scale: + 8/32 = 0.25 bit per element.
  [sm100] CUTLASS docs, blackwell_functionality: Blackwell's tcgen05.mma scales FP8 per block
          (kind::mxf8f6f4, MX block scales in hardware); Hopper's wgmma has no block scales.
  [ada]   Ada Lovelace (compute capability 8.9: developer.nvidia.com/cuda-gpus, L40S, L4, RTX 6000 Ada) has
          fp8 tensor cores (NVIDIA L40S data sheet: 733 dense FP8 TFLOPS, 362 BF16; "Ada Lovelace GPU
          Architecture" whitepaper v1.1, fourth-generation tensor cores with the FP8 Transformer Engine)
          but Ampere's synchronous mma instructions, not Hopper's wgmma (CUDA PTX ISA, "wgmma": sm_90a),
          and GDDR6 memory where every Hopper part has HBM (H100, H200, H800, H20, GH200).
  [nvfp4] NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference"
          (2025): E2M1 values, one FP8 E4M3 scale per 16 (+ 0.5 bit), and one FP32 scale
          per tensor (negligible).
  [dispatch] MoE tokens on the wire carry their scales. fp8: DeepEP's dispatch casts to float8_e4m3fn
          with one fp32 scale per 128 values (deep_ep buffer.py `low_latency_dispatch(use_fp8=True)`,
          `dispatch`'s `[num_tokens, hidden // 128]` scales; vLLM fused_moe/deepep_ll_prepare_finalize.py
          "DeepEP kernels quantize dispatch inputs in 128 element chunks"; SGLang's DeepEP dispatcher
          `sglang_per_token_group_quant_fp8`, group 128): 1 + 4/128 B. nvfp4: TensorRT-LLM's fused MoE
          (_torch/modules/fused_moe.py: `Fp4QuantizedTensor` gathered or sent all-to-all with its scale
          factors) and vLLM's FlashInfer all-to-all (fused_moe/flashinfer_cutlass_prepare_finalize.py,
          `nvfp4_block_scale_interleave`) quantize before the exchange: E2M1 + one E4M3 scale per 16 =
          0.5 + 1/16 B. Megatron-Core's MXFP8 dispatch (`moe_dispatch_fwd_dtype = "mxfp8"`): 1 + 1/32 B.
"""

from __future__ import annotations

from typing import Protocol

from ..dsl.records import frozen
from . import hbm
from .vendors import is_nvidia


class Chip(Protocol):
    """What `generation` reads of a chip: compiler/ir.py's Accelerator (which imports this module)."""

    vendor: str
    hbm_type: str | None

    def peak_of(self, precision: str) -> float | None: ...

FAMILIES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")


@frozen
class Format:
    name: str
    family: str     # the peak it runs at
    bits: float     # storage per value, block scales included


_NAMED = (
    Format("fp8_e4m3", "fp8", 8),        # [ofp8]
    Format("fp8_e5m2", "fp8", 8),        # [ofp8]
    Format("fp8_e4m3fnuz", "fp8", 8),    # [fnuz]
    Format("fp8_e5m2fnuz", "fp8", 8),    # [fnuz]
    Format("mxfp8", "fp8", 8 + 8 / 32),  # [mx] E4M3 or E5M2 elements
    Format("mxfp6", "fp6", 6 + 8 / 32),  # [mx] E2M3 or E3M2 elements
    Format("mxfp4", "fp4", 4 + 8 / 32),  # [mx] E2M1 elements
    Format("nvfp4", "fp4", 4 + 8 / 16),  # [nvfp4]
)
# Family names as formats: their storage width. Generic fp4 and fp6 are block-scaled in
# every shipping recipe; ASSUMPTION: NVFP4's 4.5 bits and a plain 6 bits.
_GENERIC = {"fp64": 64, "fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "fp6": 6, "fp4": 4.5, "int8": 8}

FORMATS: dict[str, Format] = {**{name: Format(name, name, bits) for name, bits in _GENERIC.items()},
                              **{f.name: f for f in _NAMED}}
NAMES = tuple(FORMATS)
NARROW = ("fp8", "fp6", "fp4", "int8")  # families below 16 bits: low-precision recipes
# Whose fp8 is block-scaled is a question of the chip's generation (`generation` below), not of its name.


def family(name: str) -> str:
    """The peak a format runs at (`nvfp4` -> `fp4`); unknown names are their own family."""
    known = FORMATS.get(name)
    return known.family if known is not None else name


def value_bytes(name: str) -> float:
    """Bytes one value of the format takes in memory, its block scales included."""
    known = FORMATS.get(name)
    return known.bits / 8 if known is not None else 2.0


def is_narrow(name: str) -> bool:
    """Whether the format is a sub-16-bit (fp8, fp6, fp4, int8) recipe."""
    return family(name) in NARROW


def block_scaled(precision: str, chip: Chip) -> bool:
    """Whether a job in `precision` runs its fp8 GEMMs with MX block scaling on `chip`: `mxfp8` wherever it
    runs; the generic `fp8` on a Blackwell-class chip ([sm100], [mx]). The exports write it so (Megatron-LM
    --fp8-recipe mxfp8, torchtitan quantize.linear.mx) and the memory model reads it (model/train/optimizer.py:
    Megatron-Core keeps a whole fp32 master under an MX recipe); Hopper and Ada run fp8 with per-tensor
    scaling, Megatron-LM's default `delayed` recipe."""
    return precision == "mxfp8" or (precision == "fp8" and generation(chip) == "blackwell")


# NVIDIA's tensor-core generations, oldest first, as `generation` tells them apart.
GENERATIONS = ("ampere", "ada", "hopper", "blackwell")


def generation(chip: Chip) -> str | None:
    """The NVIDIA tensor-core generation of `chip`, read off what its data sheet states (its vendor, the
    formats it has a peak for and its memory's type), never its name: a `chip MyB200 extends B200`, a
    calibrated copy or a part written anew from its data sheet is the generation its tensor cores are.
    Each reader keys its own table by it: the MX fp8 recipe (`block_scaled`, the exports), the compute
    capability (views/export/environment.py), the attention kernels (model/compute.py), the L2
    (model/cache.py), and NCCL's rows, which go by compute capability (model/collectives.py `generation`:
    Ada takes Ampere's).

    - an fp4 peak: Blackwell. Its fifth-generation tensor cores (tcgen05) added FP4 and FP6 with block
      scales in hardware ([sm100], [nvfp4]); no earlier NVIDIA part runs fp4. ASSUMPTION: a later part
      (Rubin) keeps Blackwell's block-scaled recipe and NCCL's Blackwell constants until its own are known.
    - an fp8 peak, no fp4, and GDDR memory (`hbm { type = "GDDR6" }`): Ada (L40S, L4, RTX 6000 Ada: sm_89,
      fp8 on Ampere-style synchronous tensor cores, [ada]).
    - an fp8 peak and no fp4 otherwise: Hopper (fourth generation, FP8 added: H100, H200, H800, H20).
      ASSUMPTION: an Ada part that does not state its memory's type reads as Hopper.
    - a bf16 peak and no fp8: Ampere (A100, A30).
    - another vendor, or none of these peaks: None (no NVIDIA generation; the callers' defaults apply).
    Every std chip reads as it did when the generation went by name (tests/compiler/test_generation.py)."""
    if not is_nvidia(chip.vendor):    # "Nvidia", "NVIDIA Corporation" as well (compiler/vendors.py)
        return None
    if chip.peak_of("fp4"):
        return "blackwell"
    if chip.peak_of("fp8"):
        return "ada" if hbm.on_board(chip.hbm_type) else "hopper"
    return "ampere" if chip.peak_of("bf16") else None


DISPATCH_FP8_BYTES = 1 + 4 / 128   # [dispatch] e4m3 and an fp32 scale per 128 values
DISPATCH_FP4_BYTES = 0.5 + 1 / 16  # [dispatch] nvfp4: e2m1 and an e4m3 scale per 16 values


def dispatch_bytes(precision: str, narrowest: str = "fp4") -> float:
    """Bytes per value of an MoE token dispatched by a job in `precision`, its scales included [dispatch]:
    16-bit and wider jobs send bf16 (2); 8- and 6-bit ones fp8 (1 + 4/128, the same bytes as MXFP8's
    1 + 1/32); 4-bit ones nvfp4 (0.5 + 1/16) where the stack dispatches fp4 (`narrowest = "fp4"`: the
    serving engines), else fp8 (training's DeepEP and Megatron-Core never send narrower than fp8).
    ASSUMPTION: int8 and fp6 jobs dispatch as fp8 does. One answer for serving and training."""
    if not is_narrow(precision):
        return 2.0
    if family(precision) == "fp4" and narrowest == "fp4":
        return DISPATCH_FP4_BYTES
    return DISPATCH_FP8_BYTES


def runs(formats: tuple[str, ...], name: str) -> bool:
    """Whether a chip listing `formats` runs `name`: listed, or a family name one of the
    listed formats belongs to (`fp8` on a chip that lists `fp8_e4m3`)."""
    return name in formats or (name in FAMILIES and any(family(f) == name for f in formats))
