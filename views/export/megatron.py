"""The plan as Megatron-LM / Megatron-Core training arguments (`pretrain_gpt.py`).

Two files with the same settings: `megatron.args`, a bash array to splice into the
launch line (`pretrain_gpt.py "${MEGATRON_ARGS[@]}" ...`), and `megatron.yaml`, the same
settings keyed by the argument's destination (the names Megatron's parsed `args` carry).
Flags as defined by Megatron-LM's megatron/training/arguments.py at the tag core_v0.16.1
(the release of megatron-core 0.16.1), whose parse_args and validate_args accept every export
(tests/views/test_export_megatron.py):
model shape, TP / PP / virtual stages as layers per virtual stage / CP / EP with expert
TP 1 (the model's MoE folding), sequence parallel, recomputation, the distributed
optimizer or Megatron-FSDP for ZeRO-3, micro / global batch, precision and FP8 recipe, the
optimizer state's precisions (the precision-aware optimizer), and the overlaps the job's
software stack models; the environment Megatron asserts (environment.py) is exported before
the array. The model's position embedding and normalization are written where the design
states them. Data, tokenizer, learning-rate and checkpoint arguments are the site's and are
left out (Megatron-FSDP's checkpoint format excepted: validate_args requires fsdp_dtensor).
"""

from __future__ import annotations

import shlex

import yaml

from ...compiler.formats import block_scaled
from ...compiler.ir import Accelerator
from ...compiler.vendors import vendor_of
from ...dsl.numbers import number, percent
from ...model.config import TrainConfig
from ...model.train import moe
from ...model.train.optimizer import grad_bytes, narrowed, narrower, precision_aware, second_moment
from ...model.train.recompute import modules as recompute_modules
from .environment import shell_lines
from .target import ExportError, JobPlan, header

STACKS = ("megatron", "megatron_core", "nemo")


def arguments(job: JobPlan, chip: Accelerator) -> list[tuple[str, object]]:
    """(flag, value) pairs for the plan on `chip` (its vendor, its fp8 recipe); value True is a switch without a value."""
    _check(job, chip.vendor)
    c, s = job.config, job.shape
    args: list[tuple[str, object]] = [
        ("--num-layers", s.layers), ("--hidden-size", s.hidden), ("--ffn-hidden-size", s.ffn),
        ("--num-attention-heads", s.heads)]
    if s.is_mla:  # Megatron-Core's MLA: qk_head_dim excludes the rotary part, v_head_dim
        args += [("--multi-latent-attention", True), ("--kv-lora-rank", s.kv_rank), ("--qk-head-dim", s.head_dim),
                 ("--qk-pos-emb-head-dim", s.rope_dim), ("--v-head-dim", s.head_dim)]
        if s.q_rank:
            args.append(("--q-lora-rank", s.q_rank))
    elif s.kv_heads != s.heads:
        args += [("--group-query-attention", True), ("--num-query-groups", s.kv_heads)]
    if s.head_dim * s.heads != s.hidden and not s.is_mla:
        args.append(("--kv-channels", s.head_dim))
    args += _positions_and_norms(job)
    if s.mtp:
        args.append(("--mtp-num-layers", s.mtp))
    args += [("--seq-length", c.seq), ("--max-position-embeddings", c.seq), ("--vocab-size", s.vocab)]
    if s.mlp_matrices == 3:
        args.append(("--swiglu", True))
    if not s.tied_embeddings:
        args.append(("--untie-embeddings-and-output-weights", True))
    if s.is_moe:
        args += _moe(job)
    if s.window:  # local attention through Transformer Engine (Megatron-Core 0.5+): (left, right) keys
        args.append(("--window-size", f"({s.window},0)"))
        if s.global_every:   # every k-th layer attends globally
            args.append(("--window-attn-skip-freq", s.global_every))
    args += _parallel(job, c) + _recompute(job, c) + _offload(job, c) + _precision(job, c, chip)
    args += _optimizer(job, c) + _stack(c)
    args += [("--micro-batch-size", c.microbatch), ("--global-batch-size", c.batch)]
    return args


def _check(job: JobPlan, vendor: str) -> None:
    if len(job.shares) > 1:
        layouts = "; ".join(f"{s.partition}: tp {s.config.tp} pp {s.config.pp} dp {s.config.dp}" for s in job.shares)
        raise ExportError(f"Megatron-LM runs one parallel layout on identical GPUs; it has no heterogeneous "
                          f"split, and the plan of `{job.name}` gives its partitions different ones ({layouts})")
    if job.stack not in STACKS:
        raise ExportError(f"`{job.name}` is planned for the `{job.stack}` software stack; Megatron-LM arguments "
                          f"describe {', '.join(STACKS)} (set `software` in the job to plan for one of them)")
    if vendor_of(vendor) not in ("NVIDIA", "AMD"):
        raise ExportError(f"Megatron-LM runs on NVIDIA GPUs (and AMD's ROCm fork); `{job.name}` runs on {vendor} chips")
    if job.shape.mlp_matrices == 2 and job.entity.get("model").get("mlp") is not None \
            and job.entity.get("model").get("mlp").name == "relu":
        raise ExportError("Megatron-LM's arguments choose GeLU (default) or --swiglu; a plain ReLU MLP has no flag")
    if job.shape.parallel_block:
        raise ExportError("Megatron-LM's GPT layers run attention and MLP in sequence; it has no parallel "
                          f"(GPT-J / PaLM) block, and `{job.name}`'s model sets `block = parallel`")
    c = job.config
    if c.vp > 1 and job.shape.layers % (c.pp * c.vp):
        raise ExportError(f"Megatron-LM gives every virtual stage the same layers (--num-layers-per-virtual-"
                          f"pipeline-stage); {job.shape.layers} layers do not split into pp {c.pp} x vp {c.vp}")


# the model block's words -> Megatron-LM's (--position-embedding-type, --normalization)
POSITIONS = {"rope": "rope", "learned": "learned_absolute", "none": "none"}
NORMS = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}


def _positions_and_norms(job: JobPlan) -> list[tuple[str, object]]:
    """The position embedding and normalization the design states. Megatron's defaults are a
    learned absolute table and LayerNorm; where the design states neither, they are left to
    those defaults unless the plan needs another: multi-token prediction runs only with rope or
    none (validate_args asserts it), so an MTP model must state its position embedding."""
    s, model = job.shape, job.entity.get("model")
    if s.mtp and s.position_embedding not in ("rope", "none"):
        span = model.span_of("position_embedding") if s.position_embedding else model.span_of("mtp")
        stated = f"states `position_embedding = {s.position_embedding}`" if s.position_embedding else \
            "does not state its position embedding (Megatron's default is a learned table)"
        raise ExportError(f"{span}: model `{model.name}` has mtp = {s.mtp} but {stated}; Megatron-LM runs "
                          f"multi-token prediction only with rotary or no position embeddings: add "
                          f"`position_embedding = rope` to the model")
    args: list[tuple[str, object]] = []
    if s.position_embedding:
        args.append(("--position-embedding-type", POSITIONS[s.position_embedding]))
    if s.normalization:
        args.append(("--normalization", NORMS[s.normalization]))
    return args


def _moe(job: JobPlan) -> list[tuple[str, object]]:
    s = job.shape
    args: list[tuple[str, object]] = [("--num-experts", s.routed), ("--moe-router-topk", s.top_k),
                                      ("--moe-ffn-hidden-size", s.expert_ffn)]
    if s.shared:
        args.append(("--moe-shared-expert-intermediate-size", s.shared * s.expert_ffn))
    if s.dense_layers:  # Megatron's pattern syntax: a Python list expression, 0 = dense, 1 = MoE
        args.append(("--moe-layer-freq", f"([0]*{s.dense_layers}+[1]*{s.moe_layers})"))
    if s.expert_groups > 1:  # group-limited routing (megatron/training/arguments.py)
        args += [("--moe-router-num-groups", s.expert_groups), ("--moe-router-group-topk", s.group_top_k)]
    if s.capacity_factor:  # drop and pad: model/train/moe.py computes every expert at its capacity
        args += [("--moe-expert-capacity-factor", s.capacity_factor), ("--moe-pad-expert-input-to-capacity", True)]
    return args + _dispatcher(job.config)


def _dispatcher(c: TrainConfig) -> list[tuple[str, object]]:
    """The token dispatcher the plan costs (model/train/moe.py), always stated: Megatron-Core's
    own default is allgather, Megatron-Bridge's MoE providers' alltoall. DeepEP and HybridEP are
    backends of the flex dispatcher (`--moe-enable-deepep` is its deprecated spelling)."""
    if c.moe_dispatcher in moe.FLEX:
        return [("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", c.moe_dispatcher)]
    return [("--moe-token-dispatcher-type", c.moe_dispatcher)]


def _parallel(job: JobPlan, c: TrainConfig) -> list[tuple[str, object]]:
    args: list[tuple[str, object]] = [("--tensor-model-parallel-size", c.tp),
                                      ("--pipeline-model-parallel-size", c.pp),
                                      ("--context-parallel-size", c.cp)]
    if c.vp > 1:
        args.append(("--num-layers-per-virtual-pipeline-stage", job.shape.layers // (c.pp * c.vp)))
        if c.pp > 2:   # the plan times pipeline sends exposed (model/train/step.py): run them so
            args.append(("--no-overlap-p2p-communication", True))
    elif job.shape.layers % c.pp:
        first, last = uneven_stages(job.shape.layers, c.pp)
        args += [("--decoder-first-pipeline-num-layers", first), ("--decoder-last-pipeline-num-layers", last)]
    if job.shape.is_moe:
        args += [("--expert-model-parallel-size", c.ep), ("--expert-tensor-parallel-size", 1)]
    if c.sp and c.tp > 1:
        args.append(("--sequence-parallel", True))
    if c.zero == 3:   # validate_args: Megatron-FSDP saves only fsdp_dtensor checkpoints
        args += [("--use-megatron-fsdp", True), ("--data-parallel-sharding-strategy", "optim_grads_params"),
                 ("--ckpt-format", "fsdp_dtensor")]
    elif c.zero >= 1:
        args.append(("--use-distributed-optimizer", True))
    if c.zero >= 1 and c.shards < c.dp * c.cp:
        # hybrid sharding: one optimizer (or FSDP) instance per group of `shard` data-parallel ranks,
        # replicated across the groups (Megatron-Core 0.13 CHANGELOG: "Hybrid Shard Data-Parallel")
        args.append(("--num-distributed-optimizer-instances", c.dp * c.cp // c.shards))
        if c.zero == 3:
            args.append(("--outer-dp-sharding-strategy", "no_shard"))
    return args


def uneven_stages(layers: int, pp: int) -> tuple[int, int]:
    """Layers of the first and last stage when `pp` does not divide `layers`: the middle
    stages take ceil(layers / pp) each (Megatron needs them equal), the ends share the rest,
    the last (which also computes the output layer and loss) taking the smaller part."""
    for middle in range(-(-layers // pp), 0, -1):
        rest = layers - middle * (pp - 2)
        if rest >= 2:
            return -(-rest // 2), rest // 2
    raise ExportError(f"{layers} layers cannot be staged over pp {pp} with equal middle stages")


def _recompute(job: JobPlan, c: TrainConfig) -> list[tuple[str, object]]:
    if c.recompute == "none":
        return []
    chunk = job.shape.layers // (c.pp * c.vp)     # layers of one (virtual) pipeline stage
    if c.recompute == "full":
        if c.recompute_every == 1:  # every layer, as the model's `full` recomputation assumes
            return [("--recompute-granularity", "full"), ("--recompute-method", "uniform"),
                    ("--recompute-num-layers", 1)]
        if chunk % c.recompute_every:
            raise ExportError(f"Megatron-LM recomputes a number of layers per stage (--recompute-method block); "
                              f"every {c.recompute_every}th of {chunk} layers per stage is not a whole number")
        # the same share of layers: the first chunk / k of each stage (Megatron's block method)
        return [("--recompute-granularity", "full"), ("--recompute-method", "block"),
                ("--recompute-num-layers", chunk // c.recompute_every)]
    if c.recompute_every > 1:
        raise ExportError("Megatron-LM's selective recompute applies to every layer; recompute_every = "
                          f"{c.recompute_every} has no flag (use `recompute = full` for every k-th layer)")
    if "op_level" in recompute_modules(c):
        raise ExportError("Megatron-LM has no op-level selective recompute (torchtitan's policy); pick "
                          "`recompute_modules` among core_attention, norm, mlp")
    names = {"core_attention": ["core_attn"], "norm": ["layernorm"],
             "mlp": ["mlp"] + (["moe"] if job.shape.is_moe else [])}
    modules = [n for m in recompute_modules(c) for n in names[m]]
    return [("--recompute-granularity", "selective"), ("--recompute-modules", modules)]


def _offload(job: JobPlan, c: TrainConfig) -> list[tuple[str, object]]:
    """Activation offload: the layers of each stage whose activations go to host memory."""
    if not c.offload:
        return []
    stage = job.shape.layers // c.pp
    count = c.offload * stage
    if abs(count - round(count)) > 1e-9 or round(count) >= stage:
        raise ExportError(f"Megatron-LM offloads whole layers and keeps at least one per stage on the GPU "
                          f"(--cpu-offloading-num-layers < layers); offload = {percent(c.offload)} of {stage} layers "
                          f"per stage is {number(count)}")
    return [("--cpu-offloading-num-layers", round(count))]   # validate_args turns cpu_offloading on


def _precision(job: JobPlan, c: TrainConfig, chip: Accelerator) -> list[tuple[str, object]]:
    if c.precision == "fp16":
        return [("--fp16", True)]
    args: list[tuple[str, object]] = [("--bf16", True)]
    if c.precision in ("fp8", "mxfp8"):  # E4M3 forward, E5M2 gradients (Transformer Engine's hybrid format)
        # MX block scaling where the chip runs fp8 so (compiler/formats.py, which the memory model reads too);
        # elsewhere per-tensor delayed scaling, Megatron-LM's --fp8-recipe default (arguments.py)
        mx = block_scaled(c.precision, chip)
        args += [("--fp8-format", "hybrid"), ("--fp8-recipe", "mxfp8" if mx else "delayed")]
    elif c.precision == "fp8_e4m3":  # E4M3 both ways
        args += [("--fp8-format", "e4m3"), ("--fp8-recipe", "delayed")]
    elif c.precision in ("fp4", "nvfp4"):
        args += [("--fp4-format", "e2m1"), ("--fp4-recipe", "nvfp4")]
    elif c.precision != "bf16":
        raise ExportError(f"Megatron-LM trains in bf16, fp16, fp8 (hybrid, e4m3, mxfp8) or fp4 (nvfp4); "
                          f"`{job.name}` is planned in {c.precision}")
    if c.fp8_params:   # the weights kept in fp8 only (model/train/memory.py `weight_bytes`)
        if c.zero == 0:
            raise ExportError(f"Megatron-LM keeps fp8 parameters only with the distributed optimizer or FSDP "
                              f"(--fp8-param-gather asserts it); the plan of `{job.name}` uses ZeRO 0 (pin `zero = 1`)")
        args.append(("--fp8-param-gather", True))
    if c.loss in ("eager", "compiled"):
        raise ExportError(f"Megatron-LM computes the loss with its vocabulary-parallel cross entropy (fused); "
                          f"`{job.name}` states loss = {c.loss} (remove it or state `fused`)")
    return args


def _optimizer(job: JobPlan, c: TrainConfig) -> list[tuple[str, object]]:
    """Adam's state precisions as Megatron-Core's precision-aware optimizer (Transformer Engine's
    FusedAdam), which megatron/core/optimizer/optimizer_config.py allows only with the
    distributed optimizer or Megatron-FSDP. At core_v0.16.1 both keep master weights in fp32 or
    fp16 (--main-params-dtype; Megatron-FSDP's preserve_fp32_weights holds fp32 ones beside
    them) and main gradients in fp32 or bf16 (--main-grads-dtype, written only when bf16: fp32
    is its default). Stated with fp32 dtypes (`precision_aware_optimizer = true`, as an RL stack runs it:
    model/rl/stacks.py) it keeps the fp32 master as the 16 bits the bf16 weights lack
    (store_param_remainders, its default), as model/train/optimizer.py counts it."""
    if not precision_aware(c):
        if narrower(c):   # stated off on nemo: NeMo 1.0's Apex optimizer, which no Megatron-LM argument states
            raise ExportError(f"Megatron-LM narrows optimizer state only with --use-precision-aware-optimizer; "
                              f"`{job.name}` states precision_aware_optimizer = false with {narrowed(c)} "
                              f"(NeMo 1.0's Apex DistributedFusedAdam): remove `precision_aware_optimizer = false` "
                              f"to export it for Megatron-Core")
        return []
    if c.zero == 0:   # the language and the search keep this out (compiler/rules/optimizer.py, model/rl/job.py)
        raise ExportError(f"Megatron-LM runs its precision-aware optimizer only with the distributed optimizer "
                          f"(OptimizerConfig asserts it); the plan of `{job.name}` uses ZeRO 0 with "
                          f"{narrowed(c) or 'precision_aware_optimizer = true'} (pin `zero = 1`)")
    if c.master_weights not in ("fp32", "fp16"):
        raise ExportError(f"Megatron-LM (core_v0.16.1) keeps master weights in fp32 or fp16 (--main-params-dtype); "
                          f"`{job.name}` states master_weights = {c.master_weights}")
    args: list[tuple[str, object]] = [("--use-precision-aware-optimizer", True),
                                      ("--exp-avg-dtype", c.optimizer_state), ("--exp-avg-sq-dtype", second_moment(c)),
                                      ("--main-params-dtype", c.master_weights)]
    if c.main_grads != "fp32":
        args.append(("--main-grads-dtype", c.main_grads))
    return args


def _stack(c: TrainConfig) -> list[tuple[str, object]]:
    """The behaviour the planned stack assumes (model/config.py STACKS), as flags."""
    flash = c.behaviour("attention") != "unfused"
    args: list[tuple[str, object]] = [("--attention-backend", "flash" if flash else "unfused")]
    dropout = 0.1 if c.behaviour("dropout") else 0.0
    args += [("--attention-dropout", dropout), ("--hidden-dropout", dropout)]
    if c.overlaps_tp and c.tp > 1 and c.sp:  # Megatron overlaps TP only with sequence parallel
        args.append(("--tp-comm-overlap", True))
    if c.overlaps_dp and c.dp > 1:
        args.append(("--overlap-grad-reduce", True))
        if c.zero >= 1:
            args.append(("--overlap-param-gather", True))
    if c.overlaps_ep and c.ep > 1:
        args.append(("--overlap-moe-expert-parallel-comm", True))
    return args + _grad_reduction(c)


def _grad_reduction(c: TrainConfig) -> list[tuple[str, object]]:
    """The data-parallel gradient buffer and reduction in the width the plan models
    (model/train/optimizer.py `grad_bytes`), stated rather than left to Megatron's defaults, which
    differ from the plan's. Megatron-LM at core_v0.16.1: DDP, the distributed optimizer and
    Megatron-FSDP keep and reduce gradients in fp32 when `accumulate_allreduce_grads_in_fp32`
    (training.py get_model: grad_reduce_in_fp32), else in the parameters' dtype
    (param_and_grad_buffer.py). validate_args' bf16 branch asserts fp32 --main-grads-dtype with
    --accumulate-allreduce-grads-in-fp32, turns it off under --grad-reduce-in-bf16, and otherwise
    turns it ON whenever main grads are fp32 (the default): a bf16 reduction of fp32-main-grads
    plans needs --grad-reduce-in-bf16. Its fp16 branch leaves the flag as given, so an fp16 run
    reduces in fp16 without one."""
    if grad_bytes(c) == 4:
        return [("--accumulate-allreduce-grads-in-fp32", True)]
    return [] if c.precision == "fp16" else [("--grad-reduce-in-bf16", True)]


def export(job: JobPlan, chip: Accelerator, source: str) -> dict[str, str]:
    pairs = arguments(job, chip)
    c = job.config
    summary = (f"tp {c.tp} pp {c.pp} vp {c.vp} cp {c.cp} ep {c.ep} dp {c.dp}, micro-batch {c.microbatch}, "
               f"{c.recompute} recompute, ZeRO {c.zero}, {c.precision}, stack {job.stack}")
    lines = [header(source, f"Megatron-LM arguments for job {job.name}: {summary}"),
             f"# launch on {c.gpus} GPUs: torchrun ... pretrain_gpt.py \"${{MEGATRON_ARGS[@]}}\" <data, tokenizer, optimizer>",
             *_unstated(job), *shell_lines(job), "MEGATRON_ARGS=("]
    for flag, value in pairs:
        if isinstance(value, list):   # nargs="+": one word per value
            lines.append(f"  {flag} " + " ".join(shlex.quote(_text(v)) for v in value))
        else:
            lines.append(f"  {flag}" if value is True else f"  {flag} {shlex.quote(_text(value))}")
    lines.append(")")
    settings = {_dest(flag): _parsed(flag, value, job) for flag, value in pairs}
    text = header(source, f"Megatron-LM settings for job {job.name} (argument destinations): {summary}")
    return {"megatron.args": "\n".join(lines) + "\n",
            "megatron.yaml": text + "\n" + yaml.safe_dump(settings, sort_keys=False)}


def _parsed(flag: str, value: object, job: JobPlan) -> object:
    """The value as Megatron's parser stores it: store_false switches as False, the MoE layer
    pattern expanded, the window as its pair."""
    if flag in _NEGATED:
        return not value
    if flag == "--moe-layer-freq":
        return [0] * job.shape.dense_layers + [1] * job.shape.moe_layers
    if flag == "--window-size":
        return [job.shape.window, 0]
    return value


def _unstated(job: JobPlan) -> list[str]:
    missing = [word for word, value in (("position_embedding", job.shape.position_embedding),
                                        ("normalization", job.shape.normalization)) if not value]
    if not missing:
        return []
    return [f"# the model does not state {' or '.join(missing)}: Megatron's defaults (learned_absolute, LayerNorm)",
            f"# apply; state {' and '.join(f'`{m}`' for m in missing)} in the model block to write them"]


def _text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


# Flags whose destination is not the flag's own name (arguments.py `dest=`).
_DESTS = {"--fp8-format": "fp8", "--fp4-format": "fp4", "--num-experts": "num_experts",
          "--no-overlap-p2p-communication": "overlap_p2p_comm"}
_NEGATED = ("--no-overlap-p2p-communication",)   # store_false switches: the destination is False


def _dest(flag: str) -> str:
    return _DESTS.get(flag, flag.removeprefix("--").replace("-", "_"))
