"""The phases of an RL step besides generation (which the serving simulator times,
solver/rl/generation.py), each from the model of its own kind of work:

- scoring: forward passes over every sample (the policy's old log-probabilities, the reference's
  for the KL term, the reward model's score, the critic's values) by the training stack on the
  training pool at its layout, as the RL stacks run them (NeMo-RL's GRPO loop calls
  `policy.get_logprobs` and `policy.get_reference_policy_logprobs` on its Megatron or DTensor
  policy workers: nemo_rl/algorithms/grpo.py; veRL's `compute_log_prob` / `compute_ref_log_prob`
  run on the actor and reference workers): the forward part of the training model's step. A job
  that holds the importance ratio at 1 (`old_logprobs = false`: NeMo-RL's `force_on_policy_ratio`,
  which skips `get_logprobs`: grpo.py v0.7.0 lines 2580-2636 and 3820-3855, opd.py
  `_skip_prev_logprobs`; set by every v0.7.0 performance recipe that trains one optimizer step a
  step) runs no forward pass for the old log-probabilities;
- training: the policy's (and PPO's critic's) optimizer steps, timed by the training model
  (model/train/step.py) at the layout solver/train chooses: epochs x mini-batches steps;
- the weights' move from the training layout to the generation layout: a broadcast over the
  link between the pools when they are apart, gathers over each model-parallel group of the
  training layout in turn when they share GPUs (`bridge_export_time`; as NeMo-RL moves them
  through v0.7, whole tensors: WHOLE_TENSORS);
- the training pool's copies to and from host memory (colocated phase switches, the reference
  model's swap): model/rl/host.py.

Moving the weights also costs a fixed time per tensor (the trainer names, converts and the
engine loads each one): REFIT_PER_TENSOR_S, NeMo-RL's measured refit of DeepSeek-V3 less its bytes.
"""

from __future__ import annotations

import math


from ...compiler.ir import Partition, Tier
from .. import collectives, comms
from ..serve.inference import weight_bytes
from ..shape import ModelShape
from ..train.step import Estimate
from ...dsl.records import frozen

# MEASURED: NeMo-RL's refit of DeepSeek-V3 (32 DGX H100 training nodes to 4 vLLM nodes over NCCL) took
# 14.21 s for 45,395 tensors (docs/guides/checkpoint-engine-refit.md, "DeepSeek-V3 Benchmark",
# github.com/NVIDIA-NeMo/RL). Its NCCL path broadcasts every tensor whole (below), so the 14.21 s hold the
# bytes too, which the sync prices on their own (`broadcast_link`): DeepSeek-V3's 671e9 bf16 weights on
# NCCL's ring across DGX H100 nodes, eight NDR NICs a node at 40 GB/s each (std NDR_FatTree: 50 GB/s at
# efficiency 0.8; under the node's NVLink ring rate), 4.2 s. The rest, 0.22 ms a tensor, is per tensor
# (the trainer's export and packing, the engine's load); without that split the bytes were counted twice.
REFIT_MEASURED_S, REFIT_MEASURED_TENSORS = 14.21, 45_395
REFIT_MEASURED_BYTES_S = 671e9 * 2 / (8 * 50e9 * 0.8)
REFIT_PER_TENSOR_S = (REFIT_MEASURED_S - REFIT_MEASURED_BYTES_S) / REFIT_MEASURED_TENSORS
# ASSUMPTION (NeMo-RL v0.4-v0.7, the releases of benchmarks/data/rl_runs.csv): the trainer hands the
# engines whole tensors and each engine rank keeps its own slice as it loads them. Every training rank
# gathers each tensor whole (Megatron-Bridge export_hf_weights: broadcast from the pipeline rank that owns
# it to all, then gathered over TP and EP); colocated it passes it whole to its engine by CUDA IPC
# (nemo_rl/models/policy/utils.py stream_weights_via_ipc_zmq_impl); apart training rank 0 broadcasts it whole
# (nemo_rl/utils/packed_tensor.py packed_broadcast_producer, src=0) with ncclBroadcast over one communicator
# of every training and every engine rank (nemo_rl/algorithms/grpo.py: "world includes all training workers
# and all inference workers"; v0.4.0-v0.7.0 alike), so NCCL's ring carries it (`broadcast_link`).
# Sliced transfers (`shard_expert_weights`, checkpoint-engine refit) came after v0.7.0. The tensors go out as
# the trainer holds them (16-bit; an fp8 engine casts each as it loads it: nemo_rl/models/generation/vllm/
# quantization/fp8.py `load_weights`, cast_tensor_to_fp8_blockwise), not at the engine's precision.
WHOLE_TENSORS = True


@frozen
class Link:
    """The path the weights take between the pools: per-GPU bandwidth each way, latency."""

    name: str
    bandwidth: float
    latency: float

    @classmethod
    def of(cls, tier: Tier) -> "Link":
        return cls(tier.name, tier.bandwidth * tier.efficiency, tier.latency)


def link_between(generate: Partition, train: Partition, gen_gpus: int, train_gpus: int) -> Link:
    """The tier that joins the pools. On one partition the pools hold consecutive ranks
    (training first): the tier spanning both (NVLink when both fit one scale-up domain). On
    two partitions, the scale-out fabric they share, at the slower side's per-GPU rate."""
    if generate == train:
        both = gen_gpus + train_gpus
        return Link.of(next((t for t in train.tiers if t.group_gpus >= both), train.tiers[-1]))
    a, b = (Link.of(p.tiers[-1]) for p in (generate, train))
    slower = min(a, b, key=lambda link: link.bandwidth)
    return Link(slower.name, slower.bandwidth, max(a.latency, b.latency))


def broadcast_link(generate: Partition, train: Partition, gen_gpus: int, train_gpus: int) -> Link:
    """The rate a ring broadcast over both pools' GPUs moves the weights at (NCCL's ring, as NeMo-RL's
    apart refit runs it: WHOLE_TENSORS). Inside one scale-up domain, the link that joins the pools. Across
    domains each channel's ring enters and leaves a domain once, through its own GPU's NIC, and the channels
    spread over the domain's NICs, so a domain's NICs together carry the buffer, at most at the scale-up's
    per-GPU rate (model/network/nccl.py `_bus`, as NCCL's tuning.cc prices a ring: nChannels x bwInter): each
    side's GPUs of the group in one domain times the link's per-GPU rate, the slower side's."""
    link = link_between(generate, train, gen_gpus, train_gpus)
    up = train.tiers[0]
    if generate == train and gen_gpus + train_gpus <= up.group_gpus:
        return link
    rate = min(min(Link.of(p.tiers[0]).bandwidth, link.bandwidth * min(gpus, p.tiers[0].group_gpus))
               for p, gpus in ((generate, gen_gpus), (train, train_gpus)))
    return Link(link.name, rate, link.latency)


def policy_bytes(shape: ModelShape, precision: str) -> float:
    """The policy's weights as the engine holds them (fp8: one byte a weight)."""
    return shape.params * weight_bytes(precision)


def sync_bytes(shape: ModelShape, engine_precision: str, trainer) -> float:
    """The policy's bytes a sync moves: as the trainer holds its weights (16-bit, or fp8 where it keeps
    them so: `trainer` is the training layout's config) when whole tensors go out (WHOLE_TENSORS), else
    at the engine's precision."""
    if WHOLE_TENSORS:
        return policy_bytes(shape, trainer.precision if trainer.fp8_params else "bf16")
    return policy_bytes(shape, engine_precision)


def broadcast_time(nbytes: float, senders: int, shard: int, link: Link, fixed: float = 0.0) -> float:
    """The trained weights to every generation replica: `senders` training GPUs each send a
    distinct 1/senders of them, and each generation GPU receives its replica's 1/shard of
    them and passes it on to the next replica (a pipelined broadcast: each link carries the
    weights once), so the slower of the two ends sets the pace."""
    return max(nbytes / senders, nbytes / shard) / link.bandwidth + link.latency + fixed


def reshard_time(nbytes: float, held: int, shard: int, partition: Partition, fixed: float = 0.0) -> float:
    """Colocated pools: each GPU holds 1/held of the weights in the training layout and needs
    1/shard in the generation layout. A coarser generation shard gathers held/shard pieces
    inside the model-parallel group (consecutive ranks); a finer one is a local slice, an HBM copy."""
    if shard >= held:
        return nbytes / shard / partition.node.accelerator.hbm_bandwidth + fixed
    group = math.ceil(held / shard)
    return collectives.all_gather(nbytes / shard, comms.place(group, 1, partition.tiers)) + fixed


def export_time(nbytes: float, group: int, partition: Partition, fixed: float = 0.0) -> float:
    """Colocated pools with whole tensors (WHOLE_TENSORS): every GPU of the training layout's `group`
    (the GPUs one copy of the trained weights spans: tp x pp x ep) gathers each tensor whole, an
    all-gather of the policy over the group's tiers, then copies it into the buffer its engine reads
    (one HBM read and one write of the policy)."""
    # ASSUMPTION: one NCCL call's base for the whole policy, where the export gathers tensor by tensor (many
    # calls, each its own base): the model does not know the tensor count, so the per-call bases are a floor
    gather = collectives.all_gather(nbytes, comms.place(group, 1, partition.tiers)) if group > 1 else 0.0
    return gather + 2 * nbytes / partition.node.accelerator.hbm_bandwidth + fixed


def routed_share(shape: ModelShape) -> float:
    """The routed experts' share of the policy's weights (the part expert parallelism shards)."""
    return shape.routed * shape.expert_params * shape.moe_layers / shape.params if shape.params else 0.0


def bridge_export_time(shape: ModelShape, nbytes: float, cfg, partition: Partition, fixed: float = 0.0) -> float:
    """Colocated pools with whole tensors (WHOLE_TENSORS) on a Megatron training layout `cfg` without ZeRO-3:
    each training GPU gathers every tensor as Megatron-Bridge's export does it, one collective per tensor over
    each of its own groups in turn (src/megatron/bridge/models/conversion/param_mapping.py @067f987df:
    `broadcast_from_pp_rank`, torch.distributed.broadcast over the pipeline group from the stage that owns the
    tensor, line 431; the tensor-parallel all-gather, line 632; `gather_from_ep_ranks`, all_gather over the
    expert group, line 806; NeMo-RL v0.7.0 pins Megatron-Bridge 151168f3, ASSUMPTION: the same three calls).
    Every GPU so receives the stages it lacks over its pipeline group (the dense weights in its TP slice, its
    own experts: expert TP 1, NeMo-RL's grpo_math_1B.yaml `expert_tensor_parallel_size: 1`), the TP slices it
    lacks over its TP group and the experts it lacks over its expert group. A pipeline group takes one GPU of
    each node it crosses, so its bytes ride that GPU's own NIC, not the node's NICs together as one
    hierarchical gather of the whole group would. Then the copy into the engine's buffer (`export_time`)."""
    experts = nbytes * routed_share(shape)
    dense = nbytes - experts
    tiers = partition.tiers
    gathers = ((dense / cfg.tp + experts / cfg.ep, cfg.pp, "pp"), (dense, cfg.tp, "tp"), (experts, cfg.ep, "ep"))
    # ASSUMPTION: one NCCL call a group, its base charged once, where Megatron-Bridge calls once per tensor
    seconds = sum(collectives.all_gather(size, comms.place(group, cfg.stride(dim), tiers))
                  for size, group, dim in gathers if group > 1 and size > 0)
    return seconds + 2 * nbytes / partition.node.accelerator.hbm_bandwidth + fixed


def tensors(shape: ModelShape) -> int:
    """Weight tensors of the policy as a checkpoint names them: per layer the attention's
    (query, key, value, output; MLA's down- and up-projections and their norms) and two norms,
    then the MLP's three, or each routed and shared expert's three and the router; the
    embedding, the output layer and the final norm."""
    attention = 7 if shape.is_mla else 4
    dense = shape.layers - shape.moe_layers
    moe = shape.moe_layers * (3 * (shape.routed + shape.shared) + 1)
    return shape.layers * (attention + 2) + 3 * dense + moe + 3


def refit_overhead(shape: ModelShape) -> float:
    """The per-tensor part of moving the weights into the engine."""
    return tensors(shape) * REFIT_PER_TENSOR_S


def forward_time(e: Estimate) -> float:
    """One forward pass over a training step's samples at its layout: a third of the step's
    compute and pipeline bubble (the backward pass costs twice the forward), half of its
    model-parallel communication (the backward mirrors the forward's); no recomputation, no
    gradient reduction, no optimizer."""
    b = e.breakdown
    return (b.compute + b.bubble) / 3 + (b.tp + b.cp + b.ep + b.pp) / 2


def score_time(e: Estimate, minibatches: int, shapes, policy: ModelShape, seq: float) -> float:
    """Every sample's forward pass through each model of `shapes` (once a step, whatever the
    epochs): the policy's forward over the step's mini-batches, a model of another shape in
    proportion to its FLOPs a token (ESTIMATE: at the policy's layout and efficiency)."""
    one = forward_time(e) * minibatches
    length = max(1, round(seq))
    mine = policy.forward_flops_per_token(length)
    return sum(one * s.forward_flops_per_token(length) / mine for s in shapes if s is not None)


def train_time(e: Estimate, epochs: int, minibatches: int) -> float:
    """Every epoch runs one optimizer step per mini-batch, each the training model's step."""
    return epochs * minibatches * e.step_time
