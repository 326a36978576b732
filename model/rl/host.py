"""What the training pool copies between its GPUs and host memory each step, as NeMo-RL's Megatron
policy worker and vLLM's sleep mode do it (nemo_rl/models/policy/workers/megatron_policy_worker.py
and nemo_rl/algorithms/grpo.py `refit_policy_generation`, v0.5.0-v0.7.0; vLLM's CuMemAllocator):

- colocated, the optimizer state leaves the GPUs before the refit (`offload_before_refit`:
  `move_optimizer("cpu")`, each state tensor `v.to("cpu")` into freshly allocated pageable memory)
  and comes back before training (`prepare_for_training`: `v.to("cuda")` from that pageable memory);
  with the default precision-aware optimizer (grpo_math_1B.yaml `use_precision_aware_optimizer:
  true`) Transformer Engine's FusedAdam holds the master weights in its state beside Adam's
  moments, the master as the 16 bits the bf16 weight lacks (Megatron-Core's `store_param_remainders`,
  default True: model/rl/stacks.py [pao]): 10 bytes a parameter move, not the 12 of a whole fp32
  master. The training pool states that optimizer as a train job does (`precision_aware_optimizer`,
  defaulted to the RL stack's: model/rl/job.py), so the state that moves is the training model's own;
- apart from its engines, a training pool of NeMo-RL v0.4 (before pull 1404: `stack = nemo_rl_0_4`)
  moves Adam's state out and back too, the same pageable round trip, before scoring;
- colocated, the training weights go to host memory after the refit and back before scoring
  (`offload_after_refit` / `prepare_for_lp_inference`: Megatron Core's param buffer
  `offload_to_cpu` copies them into a pinned buffer kept across steps, `reload_from_cpu` copies
  them back); the gradients are freed and reallocated, not copied (`grad_data.storage().resize_(0)`);
- colocated, the engine sleeps at level 1 after generating (nemo_rl/models/generation/vllm/
  vllm_worker.py `self.llm.sleep(level=1)`): its weights go to pinned host memory
  (CuMemAllocator.sleep, `torch.empty(..., pin_memory=True)` then cudaMemcpy) and come back at
  `wake_up`; its KV cache is dropped and remapped, no copy (level 2 would drop the weights too, no
  copy either way, the refit refilling them; NeMo-RL calls level 1);
- in either placement, the reference model's log-probabilities swap weights (`use_reference_model`):
  the policy's weights out (`.to("cpu", non_blocking=True)`, which PyTorch gives a pinned
  destination: aten TensorConversions.cpp `_to_copy` pin_out), the reference's in from its pinned
  copy, the policy's back in: three weight copies at the reference's layout (the policy's).

Not priced, because nothing is copied: the gradients (freed and reallocated), the engine's KV cache
(unmapped at sleep, remapped at wake) and its CUDA graphs (captured outside vLLM's sleep pools, which hold
only the "weights" and "kv_cache" allocations: vllm/v1/worker/gpu_worker.py, so they are kept, not
recaptured); nor the host's gc.collect() / torch.cuda.empty_cache() between phases (CPU time with no
hardware rate to size it from). The pinned sleep buffer is a fresh `torch.empty(pin_memory=True)` each
sleep, which PyTorch's caching host allocator serves from its cache after the first step.

Pinned copies run at the node's host link (less its protocol overhead). Pageable ones do not: the driver stages them through a
bounce buffer, one synchronous copy per tensor, and a fresh pageable destination is faulted in page
by page as the copy lands.
"""

from __future__ import annotations

from ...compiler.ir import Partition
from ..comms import HOST_LINK_EFFICIENCY
from ..train.step import Estimate
from .stacks import RLStack, stack as rl_stack

# MEASURED: NeMo-RL's own `offload_before_refit` on one H100 (github.com/NVIDIA-NeMo/RL/issues/3976,
# Nsight triage, 2026-09-17): 510 Device->Pageable copies, 4.94 GB in 2.75 s of copy time, "~1.8 GB/s
# effective D2H throughput"; on the same host a plain 1 GiB pageable D2H copy ran at ~16.1 GB/s and a
# pinned one at ~55 GB/s. (sglang PR #32032 measures the same pattern, `module.to("cpu")`, at ~2.8 GB/s
# on an H200's PCIe Gen5 x16, and vLLM vime issue 442 a colocated Megatron offload's ~18.7 GB in 9.7 s,
# ~1.9 GB/s, on an L20.)
PAGEABLE_OUT = 1.8e9
# ASSUMPTION: a copy back from pageable memory already resident (no allocation, no page faults)
# runs at that host's plain pageable rate, 16.1 GB/s (issue #3976 published it for D2H only).
PAGEABLE_IN = 16.1e9
# ASSUMPTION (no Grace/NVLink-C2C measurement of this pattern found): both pageable rates are the host
# software's (allocation, page faults, one synchronous staged copy per tensor), the same on any host
# whose link is faster; a slower link caps them. Chosen after seeing the benchmark's rows.
# A check, not used to set them: NeMo-RL pull 1404 (merged 2025-11-06) removed the same round trip from
# the split path's scoring and training prep, "10 s --> 1 s" for Qwen3-235B and "13 s --> ~1 s" for
# Qwen3-30B; these rates give 11.5 s for Qwen3-235B's 128-GPU H100 recipe and 5.9-11.8 s for
# Qwen3-30B's 16- and 32-GPU ones at 10 bytes a parameter (benchmarks/data/rl_runs.csv layouts; the
# pull names no layout; NeMo-RL v0.4's split rows, `stack = nemo_rl_0_4`, now pay this round trip).
HOST_LINK = 32e9          # bytes/s per GPU to host memory where a node states none: PCIe Gen4 x16 per direction
                          # (the A100 data sheet's 64 GB/s both ways); nodes state theirs (`host_link`)


def host_link(partition: Partition) -> float:
    """Bytes/s of a large pinned copy between one GPU and host memory, each way (issue #3976's
    pinned 55 GB/s on a 64 GB/s PCIe Gen5 x16 host link bears out HOST_LINK_EFFICIENCY)."""
    return (partition.node.host_link or HOST_LINK) * HOST_LINK_EFFICIENCY


def optimizer_round_trip(e: Estimate, link: float) -> float:
    """Adam's state per GPU, as the training model holds it, out to fresh pageable memory and back."""
    nbytes = e.memory.optimizer
    return nbytes / min(link, PAGEABLE_OUT) + nbytes / min(link, PAGEABLE_IN)


def weights_round_trip(nbytes: float, link: float) -> float:
    """Weights per GPU out to a pinned host buffer and back."""
    return 2 * nbytes / link


def reference_swap(e: Estimate, share: float, link: float) -> float:
    """The policy's weights out, the reference's in, the policy's back in: `share` is the
    reference's size over the policy's (1: NeMo-RL swaps only a reference of the policy's shape)."""
    return (2 + share) * e.memory.weights / link


def host_moves(e: Estimate, engine_weights: float, reference_share: float, colocated: bool, shared: bool,
               partition: Partition, stack: RLStack | None = None) -> float:
    """Seconds a step the training pool's GPUs spend copying to and from host memory: the reference
    swap in either placement (`reference_share` 0: no reference); the optimizer state's pageable
    round trip colocated (and apart where the `stack` release moves it anyway); colocated, both sides'
    weights unless the engine reads the trained ones in place (`shared`: nothing of the weights then
    moves, nor does the engine sleep)."""
    stack = stack or rl_stack(None)
    link = host_link(partition)
    seconds = reference_swap(e, reference_share, link) if reference_share > 0 else 0.0
    if colocated or stack.optimizer_out_apart:
        seconds += optimizer_round_trip(e, link)
    if colocated and not shared:
        seconds += weights_round_trip(e.memory.weights + engine_weights, link)
    return seconds
