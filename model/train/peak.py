"""The step's memory high-water mark beyond the model state (model/train/memory.py): which
pipeline stage binds, the loss's logits at their peak, the layer a recompute re-materializes,
the layers ZeRO-3 gathers, and what the device holds outside the framework's allocator.

- Stages. 1F1B's first stage holds min(pp, m) micro-batches' activations when its first
  backward starts; the last stage, which alone runs the output layer and the loss, holds one
  (it runs each micro-batch's backward right after its forward); interleaved, the last rank
  runs (vp - 1) x pp chunks of warm-up forwards first (Megatron-LM
  megatron/core/pipeline_parallel/schedules.py `get_pp_rank_microbatches`: warm-up
  (pp - rank - 1) x 2 + (vp - 1) x pp chunks); GPipe holds every micro-batch on every stage.
  Their peaks never add: the step's is the larger of the two stages'.
- The loss. Its logits are widest at the start of backward, with every activation of the last
  stage held (`LOSS_BYTES`, per logit, by implementation).
- Recompute. A layer that recomputes rebuilds, during its backward, what it did not keep: one
  layer's worth of the activations recompute saves, for one micro-batch (the last layer's, while
  all the others' inputs are still held). With the loss's peak this is the larger of the two on
  the last stage: the loss's buffers are freed before the first layer's backward runs.
- ZeRO-3 / FSDP gathers the layer it computes and prefetches the next (bf16), and holds one
  layer's unsharded gradients until their reduce-scatter; FSDP2 keeps its root module (the
  embedding and output layer) unsharded from forward to backward ("The root FSDP state has its
  value specially set to False": torch.distributed.fsdp.fully_shard, reshard_after_forward).
- Outside the allocator: the CUDA context and the NCCL communicators' buffers are device memory
  a framework's own peak (torch.cuda.max_memory_reserved) does not count, and the caching
  allocator reserves more than it hands out.
"""

from __future__ import annotations

from ...compiler.schema import LOSSES
from ...compiler.vendors import vendor_of
from ...dsl.units import GIB, MIB
from ..config import TrainConfig
from ..shape import ModelShape

# Bytes per logit (one token, one vocabulary entry of this GPU's vocabulary shard) at the loss's
# peak, by implementation:
# - eager: PyTorch's cross_entropy on the logits cast to fp32 (torchtitan 2024: `cross_entropy(
#   pred.flatten(0, 1).float(), labels)`, torchtitan/components/loss.py; llm-foundry under
#   autocast): log_softmax saves its fp32 output (4); in backward nll_loss's gradient (4) and
#   log_softmax's gradient (4, `_log_softmax_backward_data` allocates it while both live) = 12;
# - fused: Megatron-Core's vocab-parallel cross entropy (megatron/core/tensor_parallel/
#   cross_entropy.py `VocabParallelCrossEntropy`): the logits cast to fp32 (4), the softmax
#   computed in place and saved, the gradient written into the same buffer in backward; the
#   bf16 logits (2) live beside it while it is cast, the bf16 gradient while it is cast back = 6;
# - compiled: an Inductor-compiled loss (torchtitan compiles it with the model since 2025-04,
#   pytorch/torchtitan PR #1033) keeps the bf16 logits (2) and writes a bf16 gradient (2) = 4:
#   "Inductor fuses that expression and eliminates the [logits-shaped FP32] allocation"
#   (torchtitan docs/chunked_loss.md).
LOSS_BYTES = {"eager": 12.0, "fused": 6.0, "compiled": 4.0}
# Bytes per logit the caching allocator keeps reserved but cannot hand out at the loss's peak: the
# eager loss frees the bf16 logits (2) before its backward asks for blocks twice their size, which a
# freed block cannot serve (the allocator splits cached blocks, it never merges two: PyTorch docs,
# "CUDA semantics", memory management; expandable segments only grow the segment that is last), so
# they stay reserved. Megatron's loss writes its gradient in place and Inductor's into bf16 blocks
# the size of the freed ones.
LOSS_STRANDED = {"eager": 2.0, "fused": 0.0, "compiled": 0.0}
assert tuple(LOSS_BYTES) == LOSSES, "the language and the model name the same loss implementations"
# The CUDA context, cuBLAS and cuDNN handles and workspaces outside PyTorch's allocator: an OOM
# report on an 80 GB part reads "this process has 78.09 GiB memory in use. Of the allocated memory
# 75.31 GiB is allocated by PyTorch, and 1.83 GiB is reserved by PyTorch but unallocated"
# (vllm-project/compressed-tensors PR #587, 2026-02): 0.95 GiB outside the allocator, one process
# without NCCL.
CUDA_CONTEXT_BYTES = 0.95 * GIB
# The caching allocator's reserved-but-unallocated share at the peak: 1.83 of 75.31 GiB in the
# same report (2.4 %); ESTIMATE 3 %. torchtitan and NeMo run with expandable segments, which
# map pages on demand and strand less (pytorch/pytorch PR #96995).
FRAGMENTATION = 0.03
# NCCL buffers per channel and connection: Simple 4 MiB (NCCL_BUFFSIZE), LL128 about 4.7 MiB and
# LL 0.5 MiB, "~9.19 MiB ... each" as measured (NCCL issue threads: NVIDIA/nccl #1450, each
# channel has its own buffer; tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-Spark #8, 9.19 MiB per
# connection). A ring channel connects to two peers; ESTIMATE 32 channels over NVLink (NCCL's
# channel count grows with the bandwidth it must reach: NVIDIA/nccl #986 "memory usage is
# linearly tied to the number of channels"). One communicator per parallel dimension used.
NCCL_CONNECTION_BYTES = 9.19 * MIB
NCCL_CHANNELS = 32
NCCL_PEERS = 2
COMMUNICATING = ("tp", "cp", "dp", "pp", "ep")


def loss_bytes(cfg: TrainConfig) -> float:
    """Bytes per logit at the loss's peak: the job's `loss`, else its stack's."""
    return LOSS_BYTES[cfg.loss or str(cfg.behaviour("loss"))]


def logits(shape: ModelShape, cfg: TrainConfig, tokens: float) -> float:
    """The loss's peak on the last stage for one micro-batch of `tokens` per GPU (vocabulary-parallel over TP)."""
    return tokens * shape.vocab / cfg.tp * loss_bytes(cfg)


def stranded_share(cfg: TrainConfig) -> float:
    """What the loss's implementation leaves reserved and unused at its peak, as a share of that peak."""
    loss = cfg.loss or str(cfg.behaviour("loss"))
    return LOSS_STRANDED[loss] / LOSS_BYTES[loss]


def last_flight(cfg: TrainConfig, first: float, vp: int | None = None) -> float:
    """Micro-batches of activations the last stage holds at its peak, given the first stage's
    `first` (model/train/memory.py `in_flight`, capped by the micro-batches there are)."""
    if cfg.pp == 1 or cfg.gpipe:
        return first
    vp = cfg.virtual_stages if vp is None else vp
    return min(first, ((vp - 1) * cfg.pp + 1) / vp)


def stage_peaks(held_first: float, held_last: float, logits_peak: float, rebuilt: float,
                pipelined: bool) -> tuple[float, float, float]:
    """(held activations, logits, rebuilt layer) of the stage that binds: the first stage's held
    activations and the layer a recompute rebuilds, or the last stage's with the larger of its
    loss's peak and that layer (the other one is freed by then: 0)."""
    logits, layer = (logits_peak, 0.0) if logits_peak >= rebuilt else (0.0, rebuilt)
    if pipelined and held_first + rebuilt > held_last + logits + layer:
        return held_first, 0.0, rebuilt
    return held_last, logits, layer


def gathered(weights_saved: float, layer_params: float, root_params: float, weight_width: float,
             grad_width: float) -> float:
    """ZeRO-3's working set: two layers' weights as gathered (`weight_width` bytes each: bf16, or
    fp8 parameters), the one computing and the one prefetched, one layer's unsharded gradients,
    and the FSDP root kept whole (`root_params`), never more than ZeRO-3 saves over ZeRO-2
    (`weights_saved`). DeepSpeed's ZeRO-3 gathers module by module, its live parameters bounded by
    stage3_max_live_parameters (deepspeed/runtime/zero/partitioned_param_coordinator.py
    `fetch_sub_module`): its `layer_params` is the largest matrix. ASSUMPTION: a layout that shards
    too few ranks to save the gathered layers gains nothing from ZeRO-3 and keeps them; the
    planner's search relies on a higher stage never needing more."""
    need = weight_width * (2 * layer_params + root_params) + grad_width * layer_params
    return need if need < weights_saved else weights_saved


def outside_allocator(cfg: TrainConfig, vendor: str | None) -> float:
    """Device memory the framework's allocator does not count on a chip of `vendor`: the CUDA
    (or HIP) context and the collective library's buffers; none on TPUs (ESTIMATE: no CUDA,
    and XLA's collectives run in the compiled program's own buffers)."""
    if vendor_of(vendor) == "Google":
        return 0.0
    communicators = sum(1 for d in COMMUNICATING if getattr(cfg, d) > 1)
    return CUDA_CONTEXT_BYTES + communicators * NCCL_CHANNELS * NCCL_PEERS * NCCL_CONNECTION_BYTES
