"""Software stacks by era: each `software` value names a documented behaviour (the columns
of model/config.py's STACKS) and the releases that behave so. A run described by its
framework and date (benchmarks/make_runs.py) gets the stack whose releases cover the date.

Sources, abbreviated below:
  [sc21]  Narayanan et al., SC21 (arXiv:2104.04473), Sec 4.2: fused kernels (bias + GeLU,
          bias + dropout + add, scale + mask + softmax over the materialized scores), dropout
          as in GPT-3, gradients all-reduced after the backward pass
  [kort]  Korthikanti et al. 2022 (arXiv:2205.05198): sequence parallelism and selective
          recompute on the same Megatron-LM (scores still materialized: Sec 5)
  [mcore] NVIDIA/Megatron-LM CHANGELOG.md: core 0.4.0 "Model parallel efficient Distributed
          Data Parallel (DDP)" (gradient reduce / parameter gather overlapped with compute),
          core 0.5.0 "Sliding window attention (via Transformer Engine)", "Activation
          offloading to CPU", core 0.13.0 hybrid sharding and fine-grained recompute;
          attention through Transformer Engine's fused (flash) kernels
  [nemo]  NVIDIA NeMo performance summaries (NeMo 24.03 onwards) and Megatron-Bridge's: the
          containers run Megatron-Core with TP/DP overlap and bf16 gradient reduction
  [zero]  SC21 Table 2 (DeepSpeed ZeRO-3 of 2021) and Rajbhandari et al. 2020
  [fsdp]  PyTorch FSDP (torch 1.11, 2022-03) and FSDP2 (torchtitan, 2024); llm-foundry's
          benchmarks (Composer FSDP, flash attention); attention through FlashAttention-2's
          kernels (flash-attn 2, or PyTorch SDPA's flash backend, which is FlashAttention-2)
  [compile] Ansel et al., "PyTorch 2", ASPLOS 2024, Sec 4-5: TorchInductor fuses pointwise and
          reduction ops (norms, activations, residual adds) into generated Triton kernels, so the
          intermediates stay in registers; torchtitan `--training.compile` compiles each
          transformer block (docs/performance.md rows "FSDP + torch.compile", 2024-12); the
          matmuls and SDPA attention stay the same library kernels
  [ds-pipe] deepspeedai/DeepSpeed deepspeed/runtime/pipe/{engine,p2p}.py at 1ff25748b (2021-08)
          and 1fc74cb9c (2021-10, after PR #1407 "Big science related changes", 2021-09-29:
          "pipeline parallelism support for NCCL send/recv"; `is_grad_partitioned` follows the
          model-parallel flag from then on, False before): model/train/pipeline.py
  [maxtext] AI-Hypercomputer/maxtext README (2023-04 onwards): XLA fuses attention and
          overlaps collectives
"""

from __future__ import annotations

from ..dsl.records import frozen


@frozen
class Era:
    stack: str          # the `software` value
    framework: str      # the family of releases: megatron, nemo, deepspeed, fsdp, fsdp_compiled, maxtext
    first: str          # YYYY-MM of the first release that behaves so
    last: str | None    # YYYY-MM of the last one (None: current)
    releases: str       # the releases, in the framework's own names
    source: str


ERAS = (
    Era("megatron", "megatron", "2019-09", "2023-11", "Megatron-LM v1-v3 (2019-2023) before Megatron-Core 0.4",
        "[sc21] [kort]: unfused scores, dropout, fp32 gradient all-reduce after backward, no TP overlap"),
    Era("megatron_core", "megatron", "2023-12", None, "Megatron-Core 0.4 (ESTIMATE: tag of 2023-12) and later",
        "[mcore]: flash attention through Transformer Engine, overlapped DP and TP communication"),
    Era("nemo", "nemo", "2024-03", None, "NeMo 24.03 containers onwards, Megatron-Bridge",
        "[nemo]: Megatron-Core underneath, the recipes' overlaps on"),
    Era("deepspeed", "deepspeed", "2020-02", "2021-09", "DeepSpeed before v0.5.4: ZeRO-3 as compared in SC21, "
        "the PipelineEngine of MT-NLG", "[zero]: per-partition collectives crossing the network in full; [ds-pipe]: "
        "blocking two-rank broadcasts between stages, gradients sent whole"),
    Era("deepspeed_2022", "deepspeed", "2021-10", "2022-12", "DeepSpeed v0.5.4 (PR #1407, 2021-09-29) to 2022: "
        "the PipelineEngine of BLOOM", "[zero]; [ds-pipe]: NCCL send/recv between stages, gradients partitioned "
        "over the TP ranks like the activations"),
    Era("fsdp", "fsdp", "2022-03", None, "PyTorch FSDP (1.11) and FSDP2, torchtitan, llm-foundry",
        "[fsdp]"),
    Era("fsdp_compiled", "fsdp_compiled", "2023-03", None, "PyTorch 2.0 (torch.compile) onwards over FSDP/FSDP2 "
        "blocks: torchtitan --training.compile", "[fsdp] [compile]: fused elementwise kernels"),
    Era("maxtext", "maxtext", "2023-04", None, "MaxText", "[maxtext]"),
)


class NoStack(ValueError):
    """No stack of the framework covers the date."""


def stack_for(framework: str, date: str) -> Era:
    """The era of `framework` (a family of ERAS) that covers `date` (YYYY-MM)."""
    family = [e for e in ERAS if e.framework == framework]
    if not family:
        raise NoStack(f"no software stack of framework `{framework}`; known: "
                      + ", ".join(sorted({e.framework for e in ERAS})))
    for era in family:
        if era.first <= date and (era.last is None or date <= era.last):
            return era
    spans = "; ".join(f"{e.stack}: {e.first} to {e.last or 'now'}" for e in family)
    raise NoStack(f"no {framework} stack covers {date} ({spans})")
