"""What one MoE layer costs besides its attention: the router, the permutation of tokens
into expert order and back, the grouped expert GEMMs at the tokens each expert really
gets, capacity-factor token dropping, and the all-to-all exchange of the routed tokens.

Tokens per expert: each GPU routes `moe_tokens(cfg)` tokens to `top_k` experts each. The
step waits for the busiest expert-parallel rank:
- dropless (no `capacity_factor`): every routed copy is computed; with uniform routing the
  copies a rank receives sum the hypergeometric counts of the group's tokens (each picks top_k
  distinct experts, within its picked groups under group-limited routing: `copies_on_rank`),
  mean lam and variance v, and the largest of `ep` such counts is lam + E[max of ep standard
  normals] sqrt(v) (1.42 for 8 ranks; sqrt(2 ln ep), 2.04, overstated it, and Poisson's lam
  overstated v);
- token dropping (`capacity_factor = c`, GShard/Switch, Megatron's `drop_and_pad`): every
  expert takes exactly c x its mean share, padded when it got fewer and dropping the
  overflow, so the work, the all-to-all and the memory are c x the mean, fixed shapes.

Grouped GEMMs (Megatron's TE/cuBLAS grouped GEMM, DeepGEMM): one kernel computes all local
experts, each expert's rows padded to the M tile (128 rows on Hopper and Blackwell:
DeepGEMM's `get_mk_alignment_for_contiguous_layout()` = 128; NVIDIA "Matrix Multiplication
Background User's Guide", tile quantization). Random counts waste half a tile per expert
on average; the expert's weights are read once per expert whatever its rows, so as tokens
per expert shrink the GEMM slides down the roofline (arithmetic intensity ~ its rows).
"""

from __future__ import annotations

import math

from ...compiler.schema import MEGATRON_STACKS
from ..compute import EAGER_OP_S
from ..expert_load import busiest_load, distinct_share, node_share
from ..comms import DEEPEP_NVL_PEERS
from ..config import TrainConfig
from ..shape import ModelShape
from ..ops import ACT_BYTES, Op, elementwise, gemm

M_TILE = 128            # rows of one grouped-GEMM tile (see above)
# Dropless routing synchronizes the host with the device in every MoE layer (the token
# counts size the all-to-all and the grouped GEMMs: Megatron-Core's token dispatchers'
# `cuda_sync_point`), so the GPU's queue drains and the rest of the layer's kernels start
# only as the host issues them one by one, each through eager PyTorch's Python and
# dispatcher path: latency the device work does not hide. The host time is the count of
# those framework ops times the cost of one:
# - model/compute.py EAGER_OP_S: the CPU time of one eager op. (Fitted as a global on the
#   34 MoE runs it comes out at 19 us, but leave-one-group-out the fit moves with the group
#   held out and the MoE median error rises from 11.6 % to 13.4 %: kept at the midpoint.)
# - ESTIMATE: framework ops of one MoE layer's forward besides the expert GEMMs: the router
#   (linear, score function, top-k, routing map, load-balancing loss), the dispatcher's
#   preprocessing (tokens per expert, the counts' all-gather and device-to-host copies),
#   permute, chunk sort by expert, the two all-to-alls, unpermute (Megatron-Core
#   router.py, token_dispatcher.py, moe_utils.py read as of core_r0.12: about 50).
ROUTING_OPS = 50
# - the expert GEMMs: Transformer Engine's GroupedLinear issues one cuBLAS GEMM per local
#   expert (`general_grouped_gemm` loops over the GEMMs on a few streams), for the first
#   and the second projection, and the backward their data and weight gradients;
# - the backward replays each forward op's gradient: two ops for each (ASSUMPTION, as the
#   launch count of model/train/dpu.py `_kernels`).
BACKWARD_OPS = 2
# The 1F1B all-to-all overlap (`ep_overlap`: Megatron-Core `overlap_moe_expert_parallel_comm`)
# runs each MoE layer as five schedule nodes (attention, router and dispatch preprocessing,
# dispatch, experts, combine: core_r0.15.0 models/common/model_chunk_schedule_plan.py),
# issued one by one from Python on a compute and a communication stream (pipeline_parallel/
# utils.py `ScheduleNode`): a node's forward waits on and records the shared CUDA event,
# switches stream, detaches and re-wraps its inputs and outputs and frees them; its backward
# does the same and runs the autograd engine on that node alone (`run_backward`), where the
# plain schedule runs one engine pass over the whole micro-batch.
# The nodes' host work is measured by Megatron-Bridge's own A/B of the overlap: it turned the
# overlap off for Qwen3-235B-A22B on B200 "due to CPU overhead" (NVIDIA-NeMo/Megatron-Bridge
# PR #1760, commit a6e92de5: BF16 step 17.2 -> 16.0 s with VP 4 kept, the overlap alone; MXFP8
# 20.1 -> 16.9 s with the VP dropped as well). 1.2 s over the 128 micro-batches x 11.75 MoE layers of a stage is
# 0.8 ms per layer and micro-batch net of the all-to-all the overlap hides (about 1 ms of that
# layer's 1.3 ms over NVLink): about 1.8 ms of host work, 26 framework-op equivalents per node
# at EAGER_OP_S. An earlier ESTIMATE of 6 for a node's forward and 10 for its backward (the
# engine's hand-off to its device thread and back, the gradients' `record_stream`) gave 0.08 s
# of it. ESTIMATE (backed out of one A/B pair: PR #1760's BF16 pair; tests/model/train/
# test_moe.py pins it there, in-sample, not a validation). The same PR's MXFP8 pair, not used
# in the fit, checks it: the model saves 1.2 s of the measured 3.2 s (19.9 -> 18.7 s against
# 20.1 -> 16.9 s; the VP drop costs 0.2 s in the model), so it does not agree (test_moe.py).
OVERLAP_NODES = 5
OVERLAP_NODE_OPS = 26   # ESTIMATE (backed out of one A/B pair: PR #1760)
FLEX = ("deepep", "hybridep")   # Megatron-Core's flex dispatcher backends
# Where each flex backend forwards what it sent a node once over the scale-out network, always over NVLink (the
# scale-up tiers, SCALE_UP_SCOPES): the most consecutive ranks it forwards among. DeepEP's internode kernels: 8
# (NUM_MAX_NVL_PEERS, model/comms.py DEEPEP_NVL_PEERS), whatever the OS node, so an NVL72 rack is 9 of its nodes;
# HybridEP: its whole NVLink domain, an NVL72 rack included ("num_of_nodes: Number of NVLink domains (not OS
# nodes/containers)": deepseek-ai/DeepEP hybrid-ep branch, docs/Hybrid-EP_Implementation.md, commit 0b18ed2a,
# sections 3 and 4.2)
FORWARDING = {"deepep": DEEPEP_NVL_PEERS, "hybridep": None}
ROUTER_BYTES = 4        # the router's logits, softmax/sigmoid and top-k run in fp32 (Megatron moe_router_dtype)


def moe_tokens(cfg: TrainConfig) -> float:
    """Tokens one GPU routes per micro-batch. Experts are not tensor-parallel (Megatron's
    MoE parallel folding, expert TP = 1): the TP ranks' sequence shards route separately."""
    return cfg.microbatch * cfg.seq / cfg.cp / cfg.tp


def load_factor(shape: ModelShape, cfg: TrainConfig) -> float:
    """Routed copies the busiest EP rank computes, relative to the mean share. Uniform random
    routing is what benchmark runs route with: Megatron-Core's `moe_router_force_load_balancing`
    (the "force-balanced" of the Megatron-Bridge 26.02 tables) replaces the router's logits with
    random ones (router.py `apply_random_logits`), so it is this law, not a perfect balance."""
    if shape.capacity_factor:
        return shape.capacity_factor
    # the ep x T tokens of the group (T = `moe_tokens`) route independently: Megatron-Core's
    # force-balanced benchmark routing draws each rank's random logits from its own seed, 42 + rank
    # (core_r0.15.0 moe_utils.py `RandomSTE`)
    return busiest_load(shape, cfg.ep * moe_tokens(cfg), cfg.ep)


def routed_rows(shape: ModelShape, cfg: TrainConfig) -> float:
    """Routed token copies the busiest GPU computes per micro-batch (all its experts)."""
    return moe_tokens(cfg) * shape.top_k * load_factor(shape, cfg)


def padded_rows_per_expert(shape: ModelShape, cfg: TrainConfig) -> float:
    """Rows one local expert's GEMM computes, its M-tile padding included."""
    local = max(1, shape.routed // cfg.ep)
    rows = routed_rows(shape, cfg) / local
    if shape.capacity_factor:   # fixed capacity: the same padding on every expert
        return math.ceil(rows / M_TILE) * M_TILE if rows > 0 else 0.0
    return rows + (M_TILE - 1) / 2 if rows > 0 else 0.0   # random counts: half a tile on average


def layer_ops(shape: ModelShape, cfg: TrainConfig) -> list[Op]:
    """The routed MoE MLP's forward ops on one GPU for one micro-batch (each TP rank
    routes its own sequence shard)."""
    local = max(1, shape.routed // cfg.ep)
    tokens = moe_tokens(cfg)
    routed = tokens * shape.top_k                       # copies this GPU sends
    received = routed_rows(shape, cfg)                  # copies the busiest GPU computes
    rows = padded_rows_per_expert(shape, cfg)
    up = (shape.mlp_matrices - 1) * shape.expert_ffn
    h = shape.hidden
    ops = [gemm("router", tokens, shape.routed, h),
           # scores, top-k and the routing map in fp32: read and write the tokens x experts logits three times
           elementwise("top-k", tokens * shape.routed * ROUTER_BYTES * 3),
           # permute: gather each routed copy into expert order (read h, write h), before the
           # dispatch; un-permute after the combine: read each copy, weight it and sum into
           # its token (read h, write h)
           elementwise("permute", routed * h * ACT_BYTES * 2, routed * h * ACT_BYTES),
           elementwise("un-permute", routed * h * ACT_BYTES * 2, routed * h * ACT_BYTES),
           gemm("experts up", rows, up, h, local, grouped=True),
           gemm("experts down", rows, h, shape.expert_ffn, local, grouped=True)]
    if received > routed:  # the busiest rank also permutes more copies locally after the dispatch
        ops.append(elementwise("receive imbalance", (received - routed) * h * ACT_BYTES * 2))
    if runs_unfused(cfg):
        ops.extend(unfused_expert_ops(shape, received))
    return ops


def runs_unfused(cfg: TrainConfig) -> bool:
    """Whether the stack runs the clamp and the experts' bias eager, around its kernels
    (`unfused_expert_ops`): Megatron's stacks, and stacks that run elementwise chains eager."""
    return cfg.stack in MEGATRON_STACKS or not cfg.behaviour("fused")


def unfused_expert_ops(shape: ModelShape, rows: float) -> list[Op]:
    """The eager (unfused) work around the expert GEMMs that a clamped activation and biased
    experts add, per copy the GPU computes (Megatron-Core TEGroupedMLP, core_v0.15.0 and
    core_v0.16.1 megatron/core/transformer/moe/experts.py; bf16 throughout, the router's
    probabilities in the activations' dtype where `moe_router_dtype` is unset, as GPT-OSS's):
    - clamp (`activation_func_clamp_value`): fusions/fused_bias_geglu.py
      `weighted_bias_quick_geglu_impl` clamps the two halves of the first projection's output
      and concatenates them before the fused kernel, in eager PyTorch: two clamps (read and
      write ffn each) and the cat (read and write 2 ffn), 8 ffn values; the backward runs each
      clamp's masked gradient (read the gradient and the input, write: 3 ffn each) and the
      split's gradient, a cat (read and write 2 ffn), 10 ffn values.
    - bias on the second projection (`add_bias_linear`: linear_fc2 returns it unadded,
      skip_bias_add=True): `_apply_bias` adds each expert's bias times the copy's probability
      in a loop over the local experts, t + b * p, then concatenates: b * p (write h), the add
      (read 2 h, write h), the cat (read and write h), 6 h values; the backward forms the
      bias's and the probability's gradients, each a product with the output gradient (read
      and write h) and a sum (read h), 6 h values. The first projection's bias rides in the
      grouped GEMM (skip_bias_add=False: Transformer Engine's bias epilogue) and costs nothing.
    Memory: the clamp keeps more for backward (model/train/memory.py `activation_parts`, "expert
    clamp"); the bias keeps nothing of the copies' width (b * p saves the bias and the probabilities).
    Priced on Megatron's stacks (the code above) and on stacks that run elementwise chains eager
    (`fused` False: a clamp and a bias add in eager PyTorch are as many passes). ASSUMPTION: a stack
    that fuses elementwise work (TorchInductor, XLA: model/config.py `fused`) folds both into the
    kernels beside them, as vLLM does in serving (model/shape.py)."""
    ops = []
    if shape.expert_clamp:
        f = shape.expert_ffn
        ops.append(elementwise("activation clamp", rows * f * ACT_BYTES * 8, rows * f * ACT_BYTES, backward=10 / 8))
    if shape.expert_bias:
        h = shape.hidden
        ops.append(elementwise("expert bias", rows * h * ACT_BYTES * 6, rows * h * ACT_BYTES, backward=1.0))
    return ops


def sent_share(shape: ModelShape, cfg: TrainConfig) -> float:
    """Share of a token's routed copies that cross the EP group. The alltoall dispatcher sends
    every copy (Megatron-Core permutes top_k copies before its all-to-all); the flex
    dispatchers (DeepEP, HybridEP) send a token once to each GPU holding any of its experts
    and expand it into its copies there (DeepEP README, "normal kernels": dispatch by rank,
    then by expert). With uniform routing over `routed` experts, `local` per GPU, a GPU holds
    none of a token's top_k experts with probability C(routed - local, k) / C(routed, k); with
    group-limited routing, as `destinations` counts it (`distinct_share`) (model/expert_load.py) (DeepSeek-V3 on EP 8: a token reaches
    3.6 of the 8 GPUs, not 5.3). Across nodes they send fewer still over the scale-out network: `node_bytes`."""
    return distinct_share(shape, cfg.ep) if cfg.moe_dispatcher in FLEX and cfg.ep > 1 else 1.0


def dispatch_bytes(shape: ModelShape, cfg: TrainConfig, bytes_per_value: float) -> float:
    """Bytes the busiest GPU sends (and receives) in one dispatch or combine."""
    return routed_rows(shape, cfg) * sent_share(shape, cfg) * shape.hidden * bytes_per_value


def node_bytes(shape: ModelShape, cfg: TrainConfig, per_node: int, bytes_per_value: float) -> float:
    """Bytes the busiest GPU sends out of its node (and receives into it) in one dispatch or combine, the EP
    group's ranks `per_node` to a node (or forwarding domain, FORWARDING): the flex dispatchers cross nodes once
    per destination node and forward inside it (model/expert_load.py `node_share`: DeepEP's internode.cu, and
    HybridEP's RDMA buffer of a rank's tokens once per remote domain); the others send every copy they send.
    What crosses into a node is spread over its GPUs (each takes the sends of its same-index peers), so the
    busiest node's load sets it (`node_load`), not the busiest rank's."""
    if cfg.moe_dispatcher not in FLEX or cfg.ep <= 1:
        return dispatch_bytes(shape, cfg, bytes_per_value)
    return (moe_tokens(cfg) * shape.top_k * node_load(shape, cfg, per_node) * node_share(shape, cfg.ep, per_node)
            * shape.hidden * bytes_per_value)


def node_load(shape: ModelShape, cfg: TrainConfig, per_node: int) -> float:
    """Routed copies the busiest node receives over the mean node's (`load_factor` over ep / per_node nodes of
    per_node ranks each: a node's count sums its ranks', so it strays less from the mean than one rank's)."""
    if shape.capacity_factor:
        return shape.capacity_factor
    return busiest_load(shape, cfg.ep * moe_tokens(cfg), max(1, cfg.ep // max(1, per_node)))


def gathered_bytes(shape: ModelShape, cfg: TrainConfig, bytes_per_value: float) -> float:
    """The allgather dispatcher's buffer: every rank gathers the whole EP group's tokens (and
    their routing) and keeps the rows of its own experts; the combine reduce-scatters as much
    back (Megatron-Core MoEAllGatherTokenDispatcher)."""
    return moe_tokens(cfg) * cfg.ep * shape.hidden * bytes_per_value


def host_ops(shape: ModelShape, cfg: TrainConfig) -> float:
    """Framework ops the host issues for one MoE layer and micro-batch, forward and backward:
    the layer's own, and the overlap schedule's bookkeeping of its nodes when it runs one."""
    local = max(1, shape.routed // cfg.ep)
    return (ROUTING_OPS + 2 * local) * (1 + BACKWARD_OPS) + overlap_ops(cfg)


def unpaired_share(cfg: TrainConfig) -> float:
    """Share of a stage's MoE layer passes whose all-to-all the 1F1B overlap (`ep_overlap`)
    leaves bare: the overlap runs one micro-batch's forward beside another's backward, so
    the forward passes before the first backward and the backward passes after the last
    forward have no partner. Without a pipeline the first forward and the last backward run
    alone (Megatron-Core core_r0.15.0 pipeline_parallel/combined_1f1b.py
    `combined_1f1b_schedule_for_no_pipelining`): 1 of m micro-batches. On an interleaved
    pipeline (Megatron-Core requires virtual stages with the overlap) the last stage, whose
    pace the step takes, runs (vp - 1) x pp warm-up chunk forwards, plus the one extra the
    overlap schedules "to ensure the forward and backward computations are independent in all
    1f1b steps" (schedules.py `get_pp_rank_microbatches`, microbatch_group_size_per_vp_stage =
    pp), and as many backwards alone in the cool-down: of its m x vp chunk passes. The same
    count without virtual stages (vp = 1: one of m; ASSUMPTION for the stacks other than Megatron's,
    which refuse a pipeline without them under the overlap). 0 without the overlap."""
    if not cfg.overlaps_ep or cfg.ep <= 1:
        return 0.0
    vp = cfg.virtual_stages
    alone = (vp - 1) * cfg.pp + 1
    return min(1.0, alone / (cfg.microbatches * vp))


def overlap_ops(cfg: TrainConfig) -> float:
    """Framework ops the 1F1B all-to-all overlap adds to one MoE layer and micro-batch (its
    schedule nodes, OVERLAP_NODES above); none without it, or with no all-to-all to overlap."""
    return OVERLAP_NODES * OVERLAP_NODE_OPS if cfg.overlaps_ep and cfg.ep > 1 else 0.0


def host_exposed(shape: ModelShape, cfg: TrainConfig) -> float:
    """Seconds one MoE layer per micro-batch waits for the host (forward and backward):
    its ops after the routing sync, issued one by one. Charged whatever the dispatcher: in
    Megatron-Core 0.16.1 the alltoall and HybridEP dispatchers skip the sync where they pad to a
    fixed capacity (token_dispatcher.py cuda_sync_point "no_sync", fused_a2a.py `non_blocking`),
    yet the published token-drop runs (Megatron-Bridge 25.09) pay as much per layer as the
    dropless ones: the term stands for the layer's many small framework ops, not the sync
    alone (docs/moe_dispatcher.md)."""
    return host_ops(shape, cfg) * EAGER_OP_S
