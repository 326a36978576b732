"""A training configuration: the parallel layout and the software stack's behaviour."""

from __future__ import annotations


from ..compiler.schema import DEFAULT_STACK, SOFTWARE_STACKS
from .stacks import ERAS
from ..dsl.records import frozen

# What a software stack does, as far as step time is concerned. Each entry names real,
# documented behaviour, not a fitted number, of the releases model/stacks.py lists with sources:
#   attention: "flash" (fused, causal blocks skipped; on Hopper and Blackwell the
#     vendor's warp-group kernels: Transformer Engine's cuDNN fused attention, XLA's),
#     "flash2" (the same algorithm in FlashAttention-2's portable kernels, as PyTorch's
#     SDPA flash backend and llm-foundry run it) or "unfused" (s x s scores in HBM)
#   tp_overlap: TP collectives overlapped with GEMMs (Transformer Engine userbuffers)
#   dp_overlap: gradient reduction overlapped with backward (bucketed, as DDP/Megatron)
#   fused: elementwise ops fused (bias-GeLU, bias-dropout-add, fused LayerNorm/RMSNorm; under
#     torch.compile TorchInductor fuses the norms, rotary, activation and residual adds into
#     generated kernels: model/stacks.py [compile]); unfused chains read and write each
#     intermediate (model/train/workload.py `elementwise_parts`: twice the HBM traffic)
#   ep_overlap: MoE all-to-all overlapped with another micro-batch's compute (1F1B A2A
#     overlap) unless the job says: off by default in Megatron-Core
#     (`overlap_moe_expert_parallel_comm = False`), so in NeMo and Megatron-Bridge recipes
#     unless one sets `moe_a2a_overlap`; MaxText's MoE all-to-all is not overlapped either
#   hierarchical: collectives use topology-aware rings (NCCL); DeepSpeed's ZeRO-3 of 2021
#     issued per-partition collectives whose traffic crossed the network in full
#   dropout: attention and residual dropout in training (GPT-3 era recipes; modern LLM
#     pre-training runs without it, so no masks are kept)
#   grad_bytes: bytes per gradient element in the data-parallel reduction (fp32 main
#     gradients in Megatron-LM with bf16; the parameter dtype in Megatron-Core's DDP
#     (grad_reduce_in_fp32 = False), NeMo recipes, FSDP mixed precision and MaxText)
#   loss: the cross entropy's implementation, which sets the logits' peak memory
#     (model/train/peak.py `LOSS_BYTES`): Megatron's vocab-parallel loss is "fused" (fp32 softmax
#     in place); PyTorch FSDP recipes call eager `cross_entropy` on fp32 logits, torchtitan's
#     compiled ones too until it compiled the loss in 2025-04 (a job states `loss = compiled`);
#     XLA fuses MaxText's (ESTIMATE: as Megatron's, its logits cast to fp32)
#   pipe_p2p: how the pipeline engine moves activations and gradients between stages
#     (model/train/pipeline.py): Megatron's batched, scattered exchange; DeepSpeed's
#     PipelineEngine's blocking, partitioned transfers, before v0.5.4 with whole gradients
_COLUMNS = ("attention", "fused", "dropout", "tp_overlap", "dp_overlap", "ep_overlap", "hierarchical", "grad_bytes",
            "loss", "pipe_p2p")
STACKS: dict[str, dict[str, object]] = {name: dict(zip(_COLUMNS, row)) for name, row in {
    #                 attention   fused  dropout tp_ovl dp_ovl ep_ovl hier   grad_bytes loss  pipe_p2p
    "megatron":        ("unfused",  True,  True,   False, False, False, True,  4,  "fused", "batched"),
    "megatron_core":   ("flash",    True,  False,  True,  True,  False, True,  2,  "fused", "batched"),
    "nemo":            ("flash",    True,  False,  True,  True,  False, True,  2,  "fused", "batched"),
    "deepspeed":       ("unfused",  True,  True,   False, True,  False, False, 2,  "fused", "whole_grads"),
    "deepspeed_2022":  ("unfused",  True,  True,   False, True,  False, False, 2,  "fused", "partitioned"),
    "fsdp":            ("flash2",   False, False,  False, True,  False, True,  2,  "eager", "batched"),
    "fsdp_compiled":   ("flash2",   True,  False,  False, True,  False, True,  2,  "eager", "batched"),
    "maxtext":         ("flash",    True,  False,  True,  True,  False, True,  2,  "fused", "batched"),
}.items()}
assert tuple(STACKS) == SOFTWARE_STACKS, "the language and the model name the same stacks"
assert {e.stack for e in ERAS} == set(STACKS), "every stack names its releases (model/stacks.py)"
DEFAULT_ORDER = ("tp", "cp", "dp", "pp")  # Megatron-LM's rank order


@frozen(slots=False)  # a dict class: its __init__ stores each field without a call (searches build thousands)
class TrainConfig:
    """Everything a step-time estimate needs besides the hardware and the model shape."""

    batch: int                 # global batch, sequences per step
    seq: int
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    vp: int = 1                # virtual pipeline stages per GPU (interleaved 1F1B)
    # GPipe (Huang et al. 2019): every micro-batch's forward before any backward, so a
    # stage holds all micro-batches' activations at once; 1F1B holds at most pp of them.
    gpipe: bool = False
    microbatch: int = 1        # sequences per micro-batch
    recompute: str = "none"    # none | selective | full
    # Activation checkpointing variants (model/train/recompute.py): the modules a selective
    # recompute redoes (empty: the attention core, Korthikanti's selective), and every
    # how many layers the recompute applies (1: every layer; torchtitan's every-k-th).
    recompute_modules: tuple[str, ...] = ()
    recompute_every: int = 1
    offload: float = 0.0       # share of each stage's layers whose saved activations live in host memory
    sp: bool = False           # sequence parallelism (needs tp > 1 to matter)
    zero: int = 1              # 0 DDP, 1 optimizer sharded (distributed optimizer), 2 + grads, 3 + weights (FSDP)
    # Hybrid sharding (HSDP, MaxText ici_fsdp x dcn_data): the ZeRO state is sharded over
    # groups of `shard` consecutive data-parallel (x context) ranks and replicated across
    # the dp x cp / shard groups; 0: one group of all dp x cp ranks (plain ZeRO / FSDP).
    shard: int = 0
    precision: str = "bf16"    # GEMM precision: bf16, fp16, fp8, fp4
    # Adam's moments and master weights as stored (model/train/optimizer.py): fp32 and fp32 is
    # mixed-precision Adam's 12 bytes per parameter; `none` masters: Adam updates the weights.
    optimizer_state: str = "fp32"
    second_moment: str | None = None   # Adam's second moment where it differs (Megatron --exp-avg-sq-dtype)
    master_weights: str = "fp32"
    # The main gradients Adam reads (model/train/optimizer.py `grad_bytes`): fp32, or bf16 buffers
    # that the data-parallel reduction and Adam read as they are.
    main_grads: str = "fp32"
    # Megatron-Core's precision-aware optimizer stated even with fp32 dtypes (model/train/optimizer.py
    # `precision_aware`: narrower dtypes imply it), whose fp32 master may be kept as 16-bit remainders
    # (None: not stated; False: stated off, as NeMo 1.0's Apex DistributedFusedAdam narrows without it)
    precision_aware_optimizer: bool | None = None
    # `precision = fp8` run with MX block scaling, as the job's chip runs it (compiler/formats.py
    # `block_scaled`: Blackwell); with it Megatron-Core keeps a whole fp32 master (model/train/optimizer.py)
    mx_fp8: bool = False
    # a per-tensor fp8 precision (fp8_e4m3, fp8_e5m2: not MX) on a chip whose fp8 GEMMs take any operand
    # layout (Blackwell), where Transformer Engine keeps one copy of a weight, no transpose (model/train/quantized.py)
    non_tn_fp8: bool = False
    # The weights kept in the GEMMs' fp8 format only, no bf16 copy (Megatron-LM --fp8-param-gather,
    # NeMo fp8_params; model/train/memory.py `weight_bytes`)
    fp8_params: bool = False
    stack: str = DEFAULT_STACK
    # Placement: the dimensions from innermost (consecutive ranks, the fastest tier) to
    # outermost. Expert layers fold their own groups over the same ranks (see `stride`).
    order: tuple[str, ...] = DEFAULT_ORDER
    # What the job asks of its hosts (model/train/host.py): bytes read per sequence, the interval
    # between synchronous checkpoints in seconds (0: none modelled), and the checkpoint's size
    # and write bandwidth as the `checkpoint { ... }` block states them (model/train/host.py).
    sample_bytes: float = 0.0
    checkpoint_every: float = 0.0
    checkpoint_size: float = 0.0
    checkpoint_bandwidth: float = 0.0  # bytes/s of the whole job's writes, as stated (0: the nodes' paths)
    # bytes of training data the job reads over its run (`tokens` / seq x `sample_bytes`), staged on the
    # nodes' local NVMe when they read their input from it (model/train/host.py `nvme_need`)
    dataset_bytes: float = 0.0
    # checkpoints retained where they are written (local NVMe: model/train/host.py `nvme_need`);
    # 0: not stated (one when the job checkpoints)
    checkpoint_keep: int = 0
    # Context parallelism gives each rank two chunks, one from each end of the sequence, so
    # that every rank does the same causal work (Megatron/TE, MaxText, torchtitan default);
    # False: one contiguous chunk per rank (model/train/context.py).
    cp_balanced: bool = True
    # MoE all-to-all of one micro-batch overlapped with another's compute (Megatron-Core
    # `overlap_moe_expert_parallel_comm`, Megatron-Bridge `moe_a2a_overlap`); None: the
    # stack's default (model/train/step.py `_ep_exposed`)
    ep_overlap: bool | None = None
    # How an MoE layer exchanges its routed tokens (model/train/moe.py): alltoall, allgather,
    # deepep or hybridep (Megatron-Core's token dispatchers); None: alltoall, the dispatcher
    # Megatron-Bridge's MoE model providers set (qwen_provider.py, gpt_oss_provider.py,
    # deepseek_provider.py at v0.2.0 and v0.3.0: moe_token_dispatcher_type = "alltoall")
    dispatcher: str | None = None
    # TP collectives under the GEMMs, DP reduction and gathers under the backward and forward,
    # as a job states them (a stack that runs them, as MegaScale's, on a stack that does not,
    # or the reverse); None: the stack's (model/train/layer_cost.py `_tp_exposed`, dp_sync.exposed)
    tp_overlap: bool | None = None
    dp_overlap: bool | None = None
    # The loss's implementation (model/train/peak.py `LOSS_BYTES`: eager, fused, compiled); None:
    # the stack's
    loss: str | None = None
    # The gradient buffer's and data-parallel reduction's format ("fp32" or "bf16") and whether the
    # layers run dropout, as a job states them (model/train/optimizer.py `grad_bytes`, memory.py
    # `activation_parts`); None: the stack's `grad_bytes` and `dropout` (`behaviour`)
    grad_reduce: str | None = None
    dropout: bool | None = None
    # The operating point: a power cap per GPU (W) the run sets below the chip's own limits
    # (`nvidia-smi -pl`), so that the chip computes at a lower clock on its DVFS curve
    # (model/dvfs.py `with_cap`); None: the chip as it is. The planner chooses it under a
    # power limit or for energy (solver/train/enumerate.py `operating_caps`).
    power_cap: float | None = None

    @property
    def overlaps_ep(self) -> bool:
        return bool(self.behaviour("ep_overlap") if self.ep_overlap is None else self.ep_overlap)

    @property
    def moe_dispatcher(self) -> str:
        return self.dispatcher or "alltoall"

    @property
    def overlaps_tp(self) -> bool:
        return bool(self.behaviour("tp_overlap") if self.tp_overlap is None else self.tp_overlap)

    @property
    def overlaps_dp(self) -> bool:
        return bool(self.behaviour("dp_overlap") if self.dp_overlap is None else self.dp_overlap)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def shards(self) -> int:
        """Ranks that share one copy of the ZeRO-sharded state (model/train/sharding.py)."""
        return self.shard or self.dp * self.cp

    @property
    def microbatches(self) -> int:
        """Micro-batches per pipeline per step."""
        count = self.batch // (self.dp * self.microbatch)
        return count if count > 1 else 1     # (read for every estimate: no call to max)

    @property
    def virtual_stages(self) -> int:
        """Model chunks per GPU that the schedule interleaves: vp on a pipeline, 1 without
        one (vp means nothing when pp = 1, whatever a configuration says)."""
        return self.vp if self.pp > 1 else 1

    def stride(self, dim: str) -> int:
        """Ranks between neighbours of `dim`'s groups: the product of the sizes inside it.
        Expert groups take consecutive ranks (MoE parallel folding with expert TP = 1)."""
        if dim == "ep":
            return 1
        size = 1
        for d in self.order:   # (read for every estimate and bound: no slice, no index)
            if d == dim:
                return size
            size *= getattr(self, d)
        raise ValueError(f"{dim!r} is not in the order {self.order}")

    def behaviour(self, key: str) -> object:
        """What the stack does (STACKS), or what the job states instead where it may (`grad_reduce`, `dropout`)."""
        if key == "grad_bytes" and self.grad_reduce is not None:
            return 4 if self.grad_reduce == "fp32" else 2
        if key == "dropout" and self.dropout is not None:
            return self.dropout
        return STACKS.get(self.stack, STACKS[DEFAULT_STACK])[key]
