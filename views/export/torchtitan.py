"""The plan as torchtitan configuration: a TOML job file and the same settings as CLI overrides.

Targets torchtitan v0.2.2 (PyPI; tag of 2026-02-20), the last release read from TOML files
(`--job.config_file`, torchtitan/config/job_config.py); later versions moved to Python
configurations but keep the `--section.option` overrides. Sections written: [model] (the
registered flavor with this shape, when there is one), [training] (batch, sequence,
mixed precision), [parallelism], [activation_checkpoint], and [quantize] for FP8.

Data parallelism maps onto FSDP2: ZeRO-3 shards and re-shards after forward; ZeRO-1 and
ZeRO-2 shard but keep the gathered weights until backward (`fsdp_reshard_after_forward =
"never"`), which moves the same bytes as ZeRO-1/2 and holds less; ZeRO-0 is replication.
Hybrid sharding (`shard`) is HSDP: `data_parallel_shard_degree` ranks (x cp) shard, and
`data_parallel_replicate_degree` groups replicate. Full recompute of every k-th layer is
torchtitan's layer-level selective checkpointing (`selective_ac_option = "k"`).
"""

from __future__ import annotations

from ...compiler.formats import block_scaled
from ...compiler.ir import Accelerator
from ...compiler.vendors import vendor_of
from ...dsl.numbers import percent
from ...model.train.optimizer import grad_bytes, narrowed, precision_aware
from ...model.shape import ModelShape
from .target import ExportError, JobPlan, header

# torchtitan v0.2.2's registered flavors (torchtitan/models/*/__init__.py) by shape:
# (layers, hidden, heads, kv_heads, vocab) -> (model name, flavor)
FLAVORS = {
    (32, 4096, 32, 8, 128256): ("llama3", "8B"),
    (80, 8192, 64, 8, 128256): ("llama3", "70B"),
    (126, 16384, 128, 8, 128256): ("llama3", "405B"),
    (61, 7168, 128, 128, 129280): ("deepseek_v3", "671B"),
}


def flavor(shape: ModelShape) -> tuple[str, str] | None:
    if shape.window or shape.parallel_block:   # no registered flavor has local attention or parallel blocks
        return None
    return FLAVORS.get((shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.vocab))


def settings(job: JobPlan, chip: Accelerator) -> dict[str, dict[str, object]]:
    """Section -> option -> value, in torchtitan's JobConfig names, for the plan on `chip`."""
    _check(job, chip.vendor)
    c, shape = job.config, job.shape
    sections: dict[str, dict[str, object]] = {"job": {"description": f"{job.name} (planned by gclc)"}}
    named = flavor(shape)
    sections["model"] = {"name": named[0], "flavor": named[1]} if named else {}
    sections["training"] = {"local_batch_size": c.batch // c.dp, "global_batch_size": c.batch, "seq_len": c.seq,
                            "mixed_precision_param": "bfloat16", "mixed_precision_reduce": "float32"}
    # FSDP2 shards over dp_shard x cp; hybrid sharding (HSDP) replicates across dp_replicate
    shard = c.shards // c.cp if c.zero else 1
    parallelism: dict[str, object] = {
        "data_parallel_replicate_degree": c.dp // shard,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": "default" if c.zero == 3 else "never",
        "tensor_parallel_degree": c.tp, "context_parallel_degree": c.cp,
        "pipeline_parallel_degree": c.pp, "expert_parallel_degree": c.ep, "expert_tensor_parallel_degree": 1}
    if c.pp > 1:
        parallelism["pipeline_parallel_schedule"] = schedule(c)
        parallelism["pipeline_parallel_microbatch_size"] = c.microbatch
        if c.vp > 1:
            parallelism["pipeline_parallel_layers_per_stage"] = shape.layers // (c.pp * c.vp)
    compiled = ["model"] if job.stack == "fsdp_compiled" else []   # torch.compile of each block (model/stacks.py)
    if c.tp_overlap and c.tp > 1:      # stated: async TP, micro-pipelined collective matmuls (compiled only)
        parallelism["enable_async_tensor_parallel"] = True
    sections["parallelism"] = parallelism
    if c.loss == "compiled":           # and the loss, as torchtitan has compiled it since 2025-04
        compiled.append("loss")
    if compiled:                       # [compile] components defaults to both: name the planned ones
        sections["compile"] = {"enable": True, "components": compiled}
    if c.recompute == "full" and c.recompute_every > 1:   # torchtitan's layer SAC: every k-th block in full
        sections["activation_checkpoint"] = {"mode": "selective", "selective_ac_option": str(c.recompute_every)}
    else:
        sections["activation_checkpoint"] = ({"mode": "selective", "selective_ac_option": "op"}
                                             if c.recompute == "selective" else {"mode": c.recompute})
    if c.precision in ("fp8", "mxfp8"):
        mx = block_scaled(c.precision, chip)   # MX (block-scaled) FP8 tensor cores: compiler/formats.py
        kind = "mx" if mx else "float8"
        converters = [f"quantize.linear.{kind}"] + ([f"quantize.grouped_mm.{kind}"] if shape.is_moe else [])
        sections["model"]["converters"] = converters
        sections["quantize.linear.mx" if mx else "quantize.linear.float8"] = (
            {"recipe_name": "mxfp8_cublas"} if mx else {"recipe_name": "tensorwise", "filter_fqns": ["output"]})
    return sections


def schedule(c) -> str:
    """torch's pipeline schedule for the plan. torch's Schedule1F1B refuses fewer micro-batches
    than stages (torch/distributed/pipelining/schedules.py); with so few, 1F1B's warm-up already
    runs every forward before the first backward, which is GPipe: the same bubble and the same
    activations held (model/train/memory.py `in_flight`: min(pp, m) = m), so the plan runs as
    ScheduleGPipe."""
    if c.vp > 1:
        return "Interleaved1F1B"
    return "GPipe" if c.gpipe or c.microbatches < c.pp else "1F1B"


def _check(job: JobPlan, vendor: str) -> None:
    """Refuse a plan torchtitan cannot run as planned; the first refusal wins, in this order."""
    _check_platform(job, vendor)
    for check in (_check_numerics, _check_runtime, _check_sharding, _check_memory_savers, _check_split):
        check(job)


def _check_platform(job: JobPlan, vendor: str) -> None:
    """One mesh of identical CUDA or ROCm GPUs, in bf16 (optionally FP8 linears)."""
    c = job.config
    if len(job.shares) > 1:
        raise ExportError(f"torchtitan runs one device mesh over identical GPUs; it has no heterogeneous split, "
                          f"and the plan of `{job.name}` spreads it over {len(job.shares)} partitions")
    if vendor_of(vendor) not in ("NVIDIA", "AMD"):
        raise ExportError(f"torchtitan runs on CUDA and ROCm GPUs; `{job.name}` runs on {vendor} chips")
    if c.precision not in ("bf16", "fp8", "mxfp8"):
        raise ExportError(f"torchtitan trains in bf16 mixed precision, optionally with FP8 linears; "
                          f"`{job.name}` is planned in {c.precision}")


def _check_numerics(job: JobPlan) -> None:
    """The optimizer's and the loss's numerics torchtitan fixes."""
    c = job.config
    if precision_aware(c):
        raise ExportError(f"torchtitan's AdamW keeps its moments and weights in the fp32 of FSDP's sharded parameters "
                          f"([optimizer] has no state dtype) and its gradients reduce in fp32 ([training] "
                          f"mixed_precision_reduce allows float32 only); `{job.name}` states {narrowed(c)} (remove "
                          f"them to export)")
    if c.fp8_params:
        raise ExportError(f"torchtitan keeps FSDP's sharded fp32 parameters and casts them at each use (its float8 "
                          f"all-gather included); `{job.name}` states fp8_params = true (remove it to export)")
    if c.loss == "fused":
        raise ExportError(f"torchtitan's loss is PyTorch's cross entropy, eager or compiled; `{job.name}` states "
                          f"loss = fused (Megatron's vocabulary-parallel loss): state `eager` or `compiled`")


def _check_runtime(job: JobPlan) -> None:
    """What its runtime always or never does: async TP only compiled, no dropout, FSDP2 overlapped."""
    c = job.config
    if c.tp_overlap and c.tp > 1 and job.stack != "fsdp_compiled":
        raise ExportError(f"torchtitan overlaps tensor-parallel collectives with the matmuls only under torch.compile "
                          f"(parallelism.enable_async_tensor_parallel: 'Async TP requires torch.compile'); "
                          f"`{job.name}` states tp_overlap = true on {job.stack}: state software = fsdp_compiled, "
                          f"or remove tp_overlap")
    if c.dropout:
        raise ExportError(f"torchtitan's models run no dropout (torchtitan/models/llama3/model: no dropout layer); "
                          f"`{job.name}` states dropout = true (remove it to export)")
    if c.dp_overlap is False and c.dp > 1:
        raise ExportError(f"torchtitan's FSDP2 always prefetches its gathers and overlaps its reductions with "
                          f"compute; `{job.name}` states dp_overlap = false (remove it to export)")


def _check_sharding(job: JobPlan) -> None:
    """Sequence-parallel TP, and FSDP's shard group over dp_shard x cp."""
    c = job.config
    if c.tp > 1 and not c.sp:
        raise ExportError("torchtitan's tensor parallelism always shards activations along the sequence; "
                          f"the plan of `{job.name}` has tp {c.tp} without sequence parallelism")
    if c.zero and c.shards % c.cp:
        raise ExportError(f"torchtitan's FSDP shards over dp_shard x cp; a shard group of {c.shards} ranks is not "
                          f"a multiple of cp {c.cp}")


def _check_memory_savers(job: JobPlan) -> None:
    """The recomputation it offers, and no activation offload."""
    c = job.config
    if c.recompute == "selective" and (c.recompute_every > 1 or tuple(c.recompute_modules) not in
                                       ((), ("core_attention",), ("op_level",))):
        raise ExportError("torchtitan's selective checkpointing is per operator ('op') or every k-th layer in full; "
                          f"the plan of `{job.name}` recomputes {', '.join(c.recompute_modules) or 'the attention core'}"
                          + (f" every {c.recompute_every} layers" if c.recompute_every > 1 else "")
                          + " (use `recompute = full` with `recompute_every`)")
    if c.offload:
        raise ExportError("torchtitan v0.2.2 has no activation offload to host memory; the plan of "
                          f"`{job.name}` offloads {percent(c.offload)} of each stage's layers")


def _check_split(job: JobPlan) -> None:
    """The batch, the layers and the experts split as its one-number settings allow."""
    c = job.config
    if c.batch % c.dp:
        raise ExportError(f"torchtitan gives each data-parallel rank the same local batch; {c.batch} sequences "
                          f"do not split over dp {c.dp}")
    if c.vp > 1 and job.shape.layers % (c.pp * c.vp):
        raise ExportError(f"torchtitan's pipeline_parallel_layers_per_stage is one number; {job.shape.layers} "
                          f"layers do not split into pp {c.pp} x vp {c.vp} stages")
    if c.ep > 1 and (c.zero == 0 or (c.dp * c.cp * c.tp) % c.ep):
        raise ExportError(f"torchtitan's expert parallelism borrows ranks from FSDP x CP x TP "
                          f"({c.dp} x {c.cp} x {c.tp}); ep {c.ep} does not divide them"
                          + (" (the plan replicates data, ZeRO 0, so there is no FSDP dimension)" if c.zero == 0 else ""))


def reduction_note(job: JobPlan) -> str:
    """A comment where the run reduces gradients wider than the plan timed. torchtitan v0.2.2
    reduces them in fp32 only: FSDP2's reduce_dtype is [training] mixed_precision_reduce, typed
    Literal["float32"] (torchtitan/config/job_config.py), and its DDP path autocasts fp32
    parameters, whose gradients are fp32. The `fsdp` stacks model a bf16 reduction
    (model/config.py STACKS `grad_bytes` 2: FSDP2's own default, reduce_dtype None reducing in the
    compute dtype: MixedPrecisionPolicy, torch/distributed/fsdp/_fully_shard/_fsdp_api.py),
    which torchtitan cannot be told; the export says so in its files rather than refuse the
    framework the stack describes."""
    planned = grad_bytes(job.config)
    if planned >= 4:
        return ""
    return (f"\n# NOTE: the plan timed a {planned}-byte (bf16) data-parallel gradient reduction (stack {job.stack}); "
            f"torchtitan v0.2.2 reduces in fp32 only,\n# so its gradients take {4 // planned}x the bytes the plan "
            f"assumed, in the data-parallel traffic and in memory")


def toml(sections: dict[str, dict[str, object]]) -> str:
    lines = []
    for name, options in sections.items():
        lines.append(f"\n[{name}]")
        if not options and name == "model":
            lines.append("# no torchtitan v0.2.2 flavor has this shape: register one and name it here")
        lines += [f"{key} = {_value(value)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def overrides(sections: dict[str, dict[str, object]]) -> list[str]:
    """The same settings as `--section.option value` arguments (tyro's syntax)."""
    out = []
    for name, options in sections.items():
        for key, value in options.items():
            out.append(f"--{name}.{key}")
            if isinstance(value, list):
                out.append(",".join(str(v) for v in value))  # torchtitan's list rule: comma-separated
            else:
                out.append(_value(value).strip('"') if isinstance(value, str) else _value(value).lower())
    return out


def export(job: JobPlan, chip: Accelerator, source: str) -> dict[str, str]:
    import shlex

    sections = settings(job, chip)
    c = job.config
    summary = f"tp {c.tp} pp {c.pp} vp {c.vp} cp {c.cp} ep {c.ep} dp {c.dp} on {c.gpus} GPUs"
    args = overrides(sections)
    pairs = [" ".join(shlex.quote(a) for a in args[i:i + 2]) for i in range(0, len(args), 2)]
    note = reduction_note(job)
    return {
        "torchtitan.toml": header(source, f"torchtitan v0.2.2 job config for {job.name}: {summary}") + note + "\n"
                           + "# run: NGPU=... ./run_train.sh --job.config_file torchtitan.toml" + toml(sections),
        "torchtitan.args": header(source, f"torchtitan v0.2.2 CLI overrides for {job.name}: {summary}") + note + "\n"
                           + "TORCHTITAN_ARGS=(\n" + "".join(f"  {p}\n" for p in pairs) + ")\n",
    }
