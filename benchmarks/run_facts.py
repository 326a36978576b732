"""What the published runs' software and systems did that the rows of public_runs.csv do not
restate: precision recipe names, sharding names, vocabulary padding, the scale-out fabric of each
system's reference architecture. `make_runs.py` reads these tables; each entry names its source
(the audit behind them: benchmarks/runs/AUDIT.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


class Unknown(Exception):
    """A word in a row that no table here recognises (an error, never a silent default)."""


# ----------------------------------------------------------------- precision


# (pattern on the row's word outside parentheses, gclc precision, what the word means). First match
# wins, so recipe names come before the plain format names they contain.
PRECISION_WORDS: tuple[tuple[str, str, str], ...] = (
    # NVFP4 / MXFP4: 4-bit block-scaled GEMMs (Megatron-Bridge precision 'nvfp4', utils/precision.py
    # bf16_with_nvfp4_mixed; Transformer Engine NVFP4BlockScaling)
    (r"nvfp4|mxfp4|\bfp4\b", "fp4", "4-bit block-scaled recipe"),
    # FP8-MX / MXFP8: 32-element block scaling (Megatron-Bridge 'fp8_mx' = bf16_with_mxfp8_mixed)
    (r"mxfp8|fp8[-_ ]?mx", "fp8", "MXFP8 block scaling (Megatron-Bridge fp8_mx)"),
    # FP8-CS: per-tensor current scaling (Megatron-Bridge 'fp8_cs'; 25.09 table footnote: "primary =
    # per-tensor/current scaling")
    (r"fp8[-_ ]?cs|current[-_ ]scaling", "fp8", "FP8 per-tensor current scaling (Megatron-Bridge fp8_cs)"),
    # FP8-DS: delayed scaling with an amax history (Transformer Engine DelayedScaling; Megatron-Bridge
    # 'fp8_ds'; NeMo 1.0 launcher fp8_amax_history_len)
    (r"fp8[-_ ]?ds|delayed[-_ ]scaling", "fp8", "FP8 delayed scaling (Transformer Engine DelayedScaling)"),
    # FP8-SC / FP8-SS: sub-channel (128x128 / 1x128 blockwise) scaling (Megatron-Bridge 'fp8_sc' =
    # bf16_with_fp8_subchannel_scaling_mixed)
    (r"fp8[-_ ]?s[cs]|sub[-_ ]?channel|blockwise", "fp8", "FP8 sub-channel (blockwise) scaling"),
    # torchao float8 training, the name torchtitan uses (`--model.converters float8`)
    (r"float8", "fp8", "torchao float8 training"),
    # Transformer Engine formats: E4M3 everywhere, or HYBRID = E4M3 forward / E5M2 gradients
    # (NeMo 1.0 launcher keys fp8_e4m3 / fp8_hybrid)
    (r"e4m3|e5m2|\bhybrid\b", "fp8", "Transformer Engine FP8 format"),
    # llm-foundry precision 'amp_fp8' (Composer), plain 'fp8'
    (r"fp8", "fp8", "FP8 GEMMs"),
    (r"bf16|bfloat16", "bf16", "bf16"),
    (r"fp16|float16|\bhalf\b", "fp16", "fp16 with loss scaling"),
    (r"tf32", "tf32", "tf32"),
    (r"fp32|float32", "fp32", "fp32"),
)
# Words that state mixed precision without the format; read as bf16 (ASSUMPTION: the same peak and
# the same calibrated efficiency as fp16 on every chip the rows use).
UNSTATED_PRECISION = r"^\s*$|not stated|^mixed precision\b|^mixed$"


def precision_of(text: str) -> tuple[str, str]:
    """(gclc precision, a note for the design) for a row's precision cell. Text in parentheses is
    the source's alternative (e.g. 'FP8-CS (FP8-MX)': the primary figure is FP8-CS)."""
    primary = re.sub(r"\([^)]*\)", " ", text).strip().lower()
    both = "bf16" in primary and re.search(r"(?<!b)fp16", primary)
    if both:
        return "bf16", f"row: {text.strip()} (bf16 and fp16 have the same peak and calibration on this chip)"
    for pattern, precision, meaning in PRECISION_WORDS:
        if re.search(pattern, primary):
            return precision, f"row: {text.strip()} = {meaning}"
    if re.search(UNSTATED_PRECISION, primary):
        return "bf16", f"row: {text.strip() or 'not stated'}; bf16 ASSUMED"
    raise Unknown(f"precision '{text}' is not a recipe name this generator knows (run_facts.PRECISION_WORDS)")


# ----------------------------------------------------------------- sharding


# (pattern on the row's sharding cell, ZeRO stage, meaning). First match wins.
SHARDING_WORDS: tuple[tuple[str, int, str], ...] = (
    # PyTorch FSDP ShardingStrategy (torch.distributed.fsdp docs): NO_SHARD = DDP; SHARD_GRAD_OP
    # keeps parameters unsharded between forward and backward (ZeRO-2); FULL_SHARD = ZeRO-3;
    # _HYBRID_SHARD_ZERO2 / HYBRID_SHARD shard inside a group and replicate across groups.
    (r"no_shard", 0, "FSDP NO_SHARD (plain data parallel)"),
    (r"hybrid_shard_zero2", 2, "FSDP _HYBRID_SHARD_ZERO2 (ZeRO-2 inside a group; gclc shards over all dp)"),
    (r"shard_grad_op", 2, "FSDP SHARD_GRAD_OP (ZeRO-2)"),
    (r"hybrid_shard", 3, "FSDP HYBRID_SHARD (ZeRO-3 inside a group; gclc shards over all dp)"),
    (r"full_shard|fsdp2|fully_shard", 3, "FSDP FULL_SHARD / FSDP2 fully_shard (ZeRO-3)"),
    # Megatron-FSDP data_parallel_sharding_strategy (Megatron-Core distributed/fsdp docs)
    (r"optim_grads_params", 3, "Megatron-FSDP optim_grads_params (ZeRO-3)"),
    (r"optim_grads", 2, "Megatron-FSDP optim_grads (ZeRO-2)"),
    # Megatron-Bridge performance tables: 'FSDP = 1: use FSDP' means use_megatron_fsdp, which
    # set_megatron_fsdp_overrides runs with data_parallel_sharding_strategy = "optim_grads_params"
    # (NVIDIA-NeMo/Megatron-Bridge v0.2.0 scripts/performance/utils/helpers.py)
    (r"fsdp\s*\(\d+\)|fsdp\s*=\s*1", 3, "Megatron-FSDP optim_grads_params (ZeRO-3)"),
    # DeepSpeed ZeRO stages by number
    (r"zero[- ]?(stage[- ]?)?3", 3, "DeepSpeed ZeRO-3"),
    (r"zero[- ]?(stage[- ]?)?2", 2, "DeepSpeed ZeRO-2"),
    (r"zero[- ]?(stage[- ]?)?1", 1, "DeepSpeed ZeRO-1"),
    # NeMo 2.0 / Megatron-Bridge optimizer factory distributed_fused_adam_with_cosine_annealing (NeMo
    # llm/recipes/optim/adam.py, Megatron-Bridge recipes/utils/optimizer_utils.py) builds Megatron-Core
    # OptimizerConfig(use_distributed_optimizer=True): ZeRO-1 despite the Apex-like name
    (r"distributed_fused_adam_with", 1, "NeMo 2.0 distributed_fused_adam_with_cosine_annealing = Megatron-Core "
                                       "distributed optimizer (ZeRO-1)"),
    # Apex DistributedFusedAdam ('distributed_fused_adam' in NeMo 1.0): its docstring "implements the
    # ZeRO-2 algorithm, which distributes the optimizer state and gradients" (NVIDIA/apex
    # apex/contrib/optimizers/distributed_fused_adam.py)
    (r"distributed_fused_adam", 2, "Apex DistributedFusedAdam (ZeRO-2)"),
    # Megatron-Core distributed optimizer: shards the optimizer state and fp32 main parameters, keeps a
    # full gradient buffer (Megatron-LM docs/source/api-guide/dist_optimizer.md): ZeRO-1
    (r"distributed optimizer|distrib_optim|use-distributed-optimizer", 1, "Megatron distributed optimizer (ZeRO-1)"),
    (r"^\s*(none|ddp)\s*$", 0, "plain data-parallel all-reduce"),
)


def sharding_of(text: str) -> tuple[int, str] | None:
    """(ZeRO stage, note) for a row's sharding cell; None when the cell states no stage."""
    t = text.strip().lower()
    if "fsdp=0" in t.replace(" ", "") and "distributed optimizer" not in t:
        return 0, f"row: {text.strip()} = plain DDP"
    for pattern, stage, meaning in SHARDING_WORDS:
        if re.search(pattern, t):
            return stage, f"row: {text.strip()} = {meaning}"
    return None


# ----------------------------------------------------------------- vocabulary padding


def megatron_padded_vocab(vocab: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron pads the embedding to a multiple of make_vocab_size_divisible_by x TP: Megatron-LM
    _vocab_size_with_padding, NeMo 2.0 gpt/model/base.py get_vocab_size ("multiple =
    make_vocab_size_divisible_by * config.tensor_model_parallel_size"), Megatron-Bridge
    utils/vocab_utils.py calculate_padded_vocab_size (v0.2.0, same formula)."""
    multiple = divisible_by * tp
    return math.ceil(vocab / multiple) * multiple


# ----------------------------------------------------------------- scale-out fabric


@dataclass(frozen=True)
class SystemFabric:
    std_fabric: str       # std/network fabric the design extends
    rails: int | None     # NIC ports per node on the compute fabric (None: the std fabric's)
    gbps: int             # per GPU, per direction
    cite: str


# The compute fabric of each system's reference architecture, used where a row does not restate it.
SCALEOUT = {
    # DGX SuperPOD GB200 RA (docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-
    # gb200, abstract): "NVIDIA NDR (400 Gbps) InfiniBand" for the compute fabric, one ConnectX-7 per GPU
    # (MLPerf GB200-NVL72 system descriptions: 4 x ConnectX-7 per 4-GPU tray). Not the 800 Gb/s
    # ConnectX-8 of GB300.
    "gb200": SystemFabric("NDR_FatTree", 4, 400, "DGX SuperPOD GB200 reference architecture: NDR 400 Gb/s "
                          "InfiniBand, one ConnectX-7 per GPU (4 per compute tray)"),
    # GB300 NVL72: 4 ConnectX-8 (800 Gb/s) per compute tray (docs.nvidia.com enterprise RA nvl72-ai-factory
    # components), XDR Quantum-X800 fabric
    "gb300": SystemFabric("XDR_FatTree", 4, 800, "GB300 NVL72 reference architecture: one 800 Gb/s ConnectX-8 "
                          "per GPU (4 per compute tray), XDR InfiniBand"),
    # DGX SuperPOD B300 RA (abstract): "NVIDIA XDR (800 Gbps) InfiniBand"; DGX B300: 8 x ConnectX-8
    "b300": SystemFabric("XDR_FatTree", 8, 800, "DGX SuperPOD B300 reference architecture: XDR 800 Gb/s "
                         "InfiniBand, 8 x ConnectX-8 per DGX B300"),
    # DGX SuperPOD B200 RA / DGX BasePOD: "4x OSFP ports serving 8x single-port ConnectX-7 ... up to 400Gb/s"
    "b200": SystemFabric("NDR_FatTree", 8, 400, "DGX SuperPOD B200 reference architecture: NDR 400 Gb/s "
                         "InfiniBand, 8 x ConnectX-7 per DGX B200"),
    # DGX SuperPOD H100 RA (RA-11333-001): 8 x ConnectX-7 NDR 400 Gb/s per DGX H100, rail-optimized
    "h100": SystemFabric("NDR_FatTree", 8, 400, "DGX SuperPOD H100 reference architecture: NDR 400 Gb/s "
                         "InfiniBand, 8 x ConnectX-7 per DGX H100, rail-optimized"),
    # Selene (Narayanan et al. SC21 Sec 5): "8 NVIDIA Mellanox 200Gbps HDR Infiniband HCAs" per DGX A100
    "a100": SystemFabric("HDR_FatTree", 8, 200, "Selene / DGX A100 SuperPOD: 8 x 200 Gb/s HDR InfiniBand per "
                         "DGX A100 (Narayanan et al. SC21 Sec 5)"),
}


def system_of(accelerator: str) -> str | None:
    """The SCALEOUT key of a row's accelerator cell (GB parts before B parts: 'GB200' contains 'B200')."""
    a = accelerator.lower()
    return next((k for k in ("gb300", "gb200", "b300", "b200", "h100", "a100") if k in a), None)
