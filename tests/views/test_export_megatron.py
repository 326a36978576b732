"""`gclc export --to megatron`, checked by Megatron-LM's own `parse_args` and `validate_args`.

tests/views/megatron_lm.py runs Megatron-LM's code at the tag core_v0.16.1: megatron/core from
PyPI's megatron-core 0.16.1, megatron/training/arguments.py and the config modules it reads
vendored under tests/data/exports/megatron_lm_core_v0_16_1/; the stubs (the GPU's compute
capability, Transformer Engine's version, the training package's `__init__`) are named there.
The args file is expanded by bash (its MEGATRON_ARGS array and the variables it exports) and
handed to Megatron as its command line and environment.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from gclc.model.train.optimizer import grad_bytes, precision_aware, second_moment
from gclc.views.export import ExportError, megatron

pytest.importorskip("torch", reason="Megatron-LM's arguments.py imports torch (.ci/setup installs the CPU wheel)")
pytest.importorskip("megatron.core", reason="megatron-core from PyPI (.ci/setup installs it)")

from . import megatron_lm  # noqa: E402
from gclc.compiler.std_chips import std_chip  # noqa: E402

WIDTHS = {"fp32": 4, "bf16": 2, "fp16": 2}


def run(files: dict[str, str], world: int, accelerator: str = "H100_SXM"):
    """The args file through Megatron's parse_args + validate_args: the validated args."""
    words, env = megatron_lm.shell_environment(files["megatron.args"])
    return megatron_lm.parse_and_validate(words, world, env, accelerator)


def exported(job, accelerator: str = "H100_SXM") -> dict[str, str]:
    return megatron.export(job, std_chip(accelerator), "variants")


def dtype_name(dtype) -> str:
    import torch

    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.uint8: "fp8"}.get(dtype, dtype)


def plain(value):
    """A parsed value as the YAML writes it: an enum by its name, a tuple as a list."""
    import enum

    if isinstance(value, enum.Enum):
        return value.name
    return list(value) if isinstance(value, tuple) else value


def reduction_dtype(args) -> str:
    """The dtype the validated run keeps and reduces data-parallel gradients in (Megatron-LM at
    core_v0.16.1): fp32 when grad_reduce_in_fp32, which training.py get_model sets from
    accumulate_allreduce_grads_in_fp32 for DDP and Megatron-FSDP alike, else the parameters'
    dtype (megatron/core/distributed/param_and_grad_buffer.py group_params_for_buffers;
    megatron_fsdp/param_and_grad_buffer.py: `torch.float32 if grad_reduce_in_fp32 else grad_dtype`)."""
    return "fp32" if args.accumulate_allreduce_grads_in_fp32 else dtype_name(args.params_dtype)


def test_megatrons_own_checks_reject_a_broken_args_file(named):
    """Negative controls: the real validate_args rejects what the exporter must not write."""
    example = named("dgx_h100_superpod")
    files = megatron.export(example.job, std_chip("H100_SXM"), example.name)
    gpus = example.job.config.gpus
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in files["megatron.args"]
    broken = {"megatron.args": files["megatron.args"].replace("export CUDA_DEVICE_MAX_CONNECTIONS=1", "")}
    with pytest.raises(AssertionError, match="CUDA_DEVICE_MAX_CONNECTIONS to 1"):
        run(broken, gpus)
    run(broken, gpus, "B200")   # Blackwell no longer needs it (get_device_arch_version() >= 10)
    with pytest.raises(AssertionError, match="world size"):
        run(files, gpus - 8)
    mtp = {"megatron.args": files["megatron.args"].replace("--position-embedding-type rope",
                                                          "--position-embedding-type learned_absolute --mtp-num-layers 1")}
    with pytest.raises(AssertionError, match="Multi-Token Prediction"):
        run(mtp, gpus)
    unknown = {"megatron.args": files["megatron.args"].replace("MEGATRON_ARGS=(", "MEGATRON_ARGS=(\n  --tensor-parallel-size 8")}
    with pytest.raises(SystemExit):
        run(unknown, gpus)


def test_every_training_example_exports_arguments_megatron_validates(example):
    if example.job is None or example.job.serve:
        pytest.skip(f"{example.name} has no train job")
    accelerator = example.layout.groups[0].partition.node.accelerator
    try:
        files = megatron.export(example.job, accelerator, example.name)
    except ExportError as error:
        assert len(example.job.shares) > 1 and "heterogeneous" in str(error)
        return
    c = example.job.config
    words, env = megatron_lm.shell_environment(files["megatron.args"])
    parsed = megatron_lm.parse_only(words)
    settings = yaml.safe_load(files["megatron.yaml"])
    assert settings == {key: plain(getattr(parsed, key)) for key in settings}  # the YAML holds the parsed values
    args = megatron_lm.parse_and_validate(words, c.gpus, env, accelerator.name)
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size) == \
        (c.tp, c.pp, c.cp)
    assert args.data_parallel_size == c.dp
    assert (args.micro_batch_size, args.global_batch_size, args.seq_length) == (c.microbatch, c.batch, c.seq)
    assert args.num_layers == example.job.shape.layers and args.hidden_size == example.job.shape.hidden
    assert args.sequence_parallel == (c.sp and c.tp > 1)
    assert args.recompute_granularity == (None if c.recompute == "none" else c.recompute)
    assert args.use_distributed_optimizer == (c.zero in (1, 2))
    assert args.use_precision_aware_optimizer == precision_aware(c)
    assert (dtype_name(args.exp_avg_dtype), dtype_name(args.exp_avg_sq_dtype)) == (c.optimizer_state, second_moment(c))
    assert (args.virtual_pipeline_model_parallel_size or 1) == c.vp
    if example.job.shape.is_moe:
        assert (args.num_experts, args.expert_model_parallel_size) == (example.job.shape.routed, c.ep)
    if c.precision == "fp8":
        assert args.fp8 == "hybrid" and args.fp8_recipe in ("delayed", "mxfp8")
    assert WIDTHS[reduction_dtype(args)] == grad_bytes(c)   # the reduction the plan modelled
    assert args.position_embedding_type == megatron.POSITIONS[example.job.shape.position_embedding]
    assert args.normalization == megatron.NORMS[example.job.shape.normalization]


def test_plan_and_run_agree_on_overlapped_pipeline_sends(named):
    """validate_args turns overlap_p2p_comm and align_param_gather off without an interleaved
    schedule; the plan times every micro-batch's pipeline sends exposed (model/train/step.py),
    so an interleaved plan is exported with the overlap off as well."""
    from gclc.model.train.step import estimate
    from gclc.solver.split.plan import partition_jobs

    for name, interleaved in (("dgx_h100_superpod", False), ("a100_cluster", True)):
        example = named(name)
        c = example.job.config
        assert c.pp > 2 and (c.vp > 1) == interleaved
        accelerator = example.layout.groups[0].partition.node.accelerator.name
        args = run(megatron.export(example.job, std_chip(accelerator), name), c.gpus, accelerator)
        assert not args.overlap_p2p_comm
        if not interleaved:
            assert not args.align_param_gather
        job = partition_jobs(example.job.entity)[0]
        breakdown = estimate(example.job.shape, c, job.partition).breakdown
        assert breakdown.pp > 0     # exposed: m micro-batches' sends on the step's critical path


def test_an_mtp_model_without_rotary_positions_is_a_located_error():
    import attrs
    from pathlib import Path

    from gclc.compiler.driver import check_file
    from gclc.views.export.jobs import job_entity, job_plan

    moe = Path(__file__).resolve().parents[2] / "tests" / "data" / "gb200_moe.gcl"   # DeepSeek-V3, with its MTP module
    planned = job_plan(job_entity(check_file(str(moe)).design, None))
    job = attrs.evolve(planned, shape=attrs.evolve(planned.shape, position_embedding=""))
    with pytest.raises(ExportError, match=r"gb200_moe\.gcl:\d+:\d+: .*mtp = 1.*position_embedding = rope"):
        megatron.export(job, std_chip("GB200"), "gb200_moe")


def test_the_environment_follows_what_megatron_asserts(named, variant_plan):
    example = named("dgx_h100_superpod")     # tp 8 on Hopper: one connection
    text = megatron.export(example.job, std_chip("H100_SXM"), example.name)["megatron.args"]
    assert re.search(r"^export CUDA_DEVICE_MAX_CONNECTIONS=1\b", text, re.M)
    assert re.search(r"^export NCCL_NVLS_ENABLE=1\b", text, re.M)       # its NVLink tier reduces in the switch
    from gclc.views.export import kubernetes, slurm

    script = slurm.sbatch(example.layout, example.job, example.name)     # every launcher sets the same
    assert script.index("export CUDA_DEVICE_MAX_CONNECTIONS=1") < script.index("srun ")
    container = kubernetes.jobset(example.layout, example.job, "image")["spec"]["replicatedJobs"][0]["template"][
        "spec"]["template"]["spec"]["containers"][0]
    assert {"name": "CUDA_DEVICE_MAX_CONNECTIONS", "value": "1"} in container["env"]
    fsdp = variant_plan("parallelism { tp = 2 pp = 1 dp = 16 zero = 3 }")
    text = exported(fsdp)["megatron.args"]
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in text      # Megatron-FSDP asserts it is not 1
    args = run({"megatron.args": text}, fsdp.config.gpus)
    assert args.use_megatron_fsdp and args.ckpt_format == "fsdp_dtensor"


def test_a_heterogeneous_plan_is_refused_with_what_megatron_lacks(named):
    example = named("hetero_h100_a100")
    with pytest.raises(ExportError, match="no heterogeneous split"):
        megatron.export(example.job, std_chip("H100_SXM"), example.name)


def test_uneven_pipelines_give_equal_middle_stages():
    for layers in range(2, 130):
        for pp in range(2, min(layers, 33)):
            first, last = megatron.uneven_stages(layers, pp)
            assert first >= last >= 1 and first + last <= layers
            assert pp == 2 and first + last == layers or (layers - first - last) % (pp - 2) == 0


def test_hybrid_sharding_recompute_and_windows_pass_megatrons_checks(variant_plan):
    job = variant_plan("parallelism { tp = 1 pp = 2 vp = 1 dp = 16 zero = 1 shard = 8 recompute = full "
                        "recompute_every = 2 }", "window = 4096  global_every = 4")
    args = run(exported(job), job.config.gpus)
    assert args.use_distributed_optimizer and args.num_distributed_optimizer_instances == 2    # 16 / 8
    assert (args.recompute_granularity, args.recompute_method, args.recompute_num_layers) == ("full", "block", 8)
    assert args.window_size == (4096, 0) and args.window_attn_skip_freq == 4
    assert megatron_lm.transformer_config(args).recompute_granularity == "full"               # the model's config too
    fsdp = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 shard = 8 recompute = selective "
                         "recompute_modules = [core_attention, mlp] }")
    args = run(exported(fsdp), fsdp.config.gpus)
    assert args.use_megatron_fsdp and args.num_distributed_optimizer_instances == 4
    assert args.outer_dp_sharding_strategy == "no_shard"
    assert args.recompute_modules == ["core_attn", "mlp"]


def test_an_offload_export_passes_megatron_cores_transformer_config(variant_plan):
    """validate_args lets CPU offloading beside a pipeline or a recompute through; the TransformerConfig
    pretrain_gpt.py builds refuses both (`gclc check` does too, tests/compiler/test_train_rules.py)."""
    job = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 1 recompute = none offload = 50% }")
    files = exported(job)
    args = run(files, job.config.gpus)
    config = megatron_lm.transformer_config(args)
    assert config.cpu_offloading and config.cpu_offloading_num_layers == 16                   # half of 32
    assert config.pipeline_model_parallel_size == 1 and config.recompute_granularity is None
    # negative controls: the same export beside a pipeline or a recompute is refused by Megatron's own code
    words, env = megatron_lm.shell_environment(files["megatron.args"])
    for extra, refused in ((["--pipeline-model-parallel-size", "2"], "Pipeline parallelism with CPU offloading"),
                           (["--recompute-granularity", "full", "--recompute-method", "uniform",
                             "--recompute-num-layers", "1"], "activation recomputation is enabled")):
        other = megatron_lm.parse_and_validate(words + extra, job.config.gpus, env, "H100_SXM")
        with pytest.raises(ValueError, match=refused):
            megatron_lm.transformer_config(other)


def test_what_megatron_cannot_express_of_the_variants_is_an_error(variant_plan):
    parallel = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 }", "block = parallel")
    with pytest.raises(ExportError, match="parallel"):
        exported(parallel)
    every = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 recompute = selective recompute_every = 2 }")
    with pytest.raises(ExportError, match="every layer"):
        exported(every)


def test_optimizer_state_precisions_export_as_the_precision_aware_optimizer(variant_plan):
    job = variant_plan("optimizer_state = bf16  master_weights = fp16\n"
                       "  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    args = run(exported(job), job.config.gpus)
    assert args.use_precision_aware_optimizer and args.use_distributed_optimizer
    assert tuple(map(dtype_name, (args.exp_avg_dtype, args.exp_avg_sq_dtype, args.main_params_dtype))) == \
        ("bf16", "bf16", "fp16")
    fsdp = variant_plan("optimizer_state = fp8\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    args = run(exported(fsdp), fsdp.config.gpus)
    assert args.use_megatron_fsdp and args.use_precision_aware_optimizer
    assert (dtype_name(args.exp_avg_dtype), dtype_name(args.main_params_dtype)) == ("fp8", "fp32")


def test_optimizer_state_megatron_cannot_hold_is_an_error():
    """On Megatron-Core the language refuses these where they are written (tests/compiler/test_optimizer_rules.py);
    NeMo 1.0's Apex Adam holds them, so a `nemo` job plans them and the Megatron export (which writes Megatron-Core's
    flags for nemo) refuses them."""
    bf16 = on_stack("nemo", "optimizer_state = fp8  master_weights = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    with pytest.raises(ExportError, match="fp32 or fp16.*master_weights = bf16"):
        exported(bf16)
    none = on_stack("nemo", "optimizer_state = bf16  master_weights = none\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    with pytest.raises(ExportError, match="master_weights = none"):
        exported(none)
    # NeMo narrows state only in a distributed optimizer: a pinned ZeRO 0 is refused where it is written
    assert "pins ZeRO 0" in refused("nemo", "optimizer_state = bf16\n  parallelism { tp = 8 pp = 1 dp = 4 zero = 0 }")


def refused(stack: str, pins: str) -> str:
    """The check's errors for the dense-variants design on `stack` with `pins` (as `on_stack` writes it)."""
    from gclc.compiler.driver import check_text

    result = check_text(_variant_text(stack, pins, "bf16", "DGX_H100"), "dense_variants.gcl")
    assert result.design is None, "the design was expected to be refused"
    return "\n".join(str(d) for d in result.diagnostics)


def _variant_text(stack: str, pins: str, precision: str, node: str) -> str:
    path = Path(__file__).resolve().parents[1] / "data" / "dense_variants.gcl"
    return path.read_text().replace("x DGX_H100", f"x {node}").replace("software  = fsdp", f"software  = {stack}").replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        pins).replace("precision = bf16", f"precision = {precision}")


def on_stack(stack: str, pins: str, precision: str = "bf16", node: str = "DGX_H100"):
    """The dense-variants design (tests/data/dense_variants.gcl) on `stack` in `precision` with
    other pins, on std `node`s, planned."""
    from gclc.compiler.driver import check_text
    from gclc.views.export.jobs import job_entity, job_plan

    path = Path(__file__).resolve().parents[1] / "data" / "dense_variants.gcl"
    return job_plan(job_entity(check_text(_variant_text(stack, pins, precision, node), str(path)).design, None))


@pytest.mark.parametrize("stack", ["megatron", "megatron_core"])
def test_bf16_main_grads_export_as_the_precision_aware_optimizers_main_grads_dtype(variant_plan, stack):
    job = on_stack(stack, "main_grads = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    args = run(exported(job), job.config.gpus)
    assert args.use_precision_aware_optimizer and args.use_distributed_optimizer
    assert tuple(map(dtype_name, (args.main_grads_dtype, args.main_params_dtype, args.exp_avg_dtype))) == \
        ("bf16", "fp32", "fp32")
    # Megatron-LM before Core accumulates in fp32 (model/config.py), which bf16 main grads turn off
    assert not args.accumulate_allreduce_grads_in_fp32
    fsdp = variant_plan("main_grads = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    args = run(exported(fsdp), fsdp.config.gpus)
    assert args.use_megatron_fsdp and args.use_precision_aware_optimizer
    assert dtype_name(args.main_grads_dtype) == "bf16" and reduction_dtype(args) == "bf16"


def test_fp32_main_grads_keep_the_megatron_default():
    job = on_stack("megatron", "parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    text = exported(job)["megatron.args"]
    args = run({"megatron.args": text}, job.config.gpus)
    assert "--main-grads-dtype" not in text and not args.use_precision_aware_optimizer
    assert dtype_name(args.main_grads_dtype) == "fp32" and args.accumulate_allreduce_grads_in_fp32


def test_bf16_main_grads_without_the_distributed_optimizer_is_an_error():
    """Megatron-Core keeps bf16 main grads only in its distributed optimizer; on nemo the language
    refuses a pinned ZeRO 0 beside them (compiler/rules/optimizer.py), before any export."""
    assert "pins ZeRO 0" in refused("nemo", "main_grads = bf16\n  parallelism { tp = 8 pp = 1 dp = 4 zero = 0 }")


@pytest.mark.parametrize("stack", ["megatron", "megatron_core"])   # nemo writes megatron_core's flags
@pytest.mark.parametrize("zero", [0, 1, 3])
@pytest.mark.parametrize("main_grads", ["fp32", "bf16"])
@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp16"])
def test_the_exported_run_reduces_gradients_in_the_width_the_plan_models(stack, zero, main_grads, precision):
    if main_grads == "bf16" and zero == 0:
        pytest.skip("bf16 main grads need the distributed optimizer (an export error, tested above)")
    job = on_stack(stack, f"main_grads = {main_grads}\n  parallelism {{ tp = 8 pp = 1 dp = 4 zero = {zero} }}",
                   precision)
    c = job.config
    args = run(exported(job), c.gpus)
    wide = {"megatron": 4, "megatron_core": 2, "nemo": 2}[stack] == 4 and main_grads == "fp32"
    assert grad_bytes(c) == (4 if wide else 2)      # model/config.py STACKS, narrowed by bf16 main grads
    assert WIDTHS[reduction_dtype(args)] == grad_bytes(c)
    if precision != "fp16":     # (fp16 runs keep fp16 gradients, or the bf16 main grads they state)
        assert reduction_dtype(args) == ("fp32" if wide else "bf16")


def test_fp8_parameters_export_as_fp8_param_gather_megatron_accepts():
    job = on_stack("megatron_core", "fp8_params = true\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }",
                   precision="fp8")
    args = run(exported(job), job.config.gpus)
    assert args.fp8_param_gather and args.use_distributed_optimizer and args.fp8 == "hybrid"


def test_a_loss_megatron_does_not_compute_is_an_error():
    job = on_stack("megatron_core", "parallelism { tp = 1 pp = 1 dp = 32 zero = 1 loss = eager }")
    with pytest.raises(ExportError, match="vocabulary-parallel cross entropy.*loss = eager"):
        exported(job)


@pytest.mark.parametrize("stack, pins, tp_overlap, dp_overlap", [
    ("megatron_core", "", True, True),                                   # the stack's own
    ("megatron_core", "tp_overlap = false dp_overlap = false", False, False),
    ("megatron", "", False, False),
    ("megatron", "tp_overlap = true dp_overlap = true", True, True),     # a tuned stack on the old base
])
def test_the_overlaps_a_plan_models_are_the_ones_megatron_runs(stack, pins, tp_overlap, dp_overlap):
    job = on_stack(stack, f"parallelism {{ tp = 8 pp = 1 dp = 4 zero = 1 sp = true {pins} }}")
    assert (job.config.overlaps_tp, job.config.overlaps_dp) == (tp_overlap, dp_overlap)
    args = run(exported(job), job.config.gpus)
    assert bool(args.tp_comm_overlap) == tp_overlap
    assert bool(args.overlap_grad_reduce) == dp_overlap and bool(args.overlap_param_gather) == dp_overlap


def test_every_train_job_of_the_shared_cluster_is_accepted_by_megatron(shared_cluster_train):
    """examples/shared_cluster.gcl's five train jobs (two on a cluster of two partitions, placed
    where their plans chose) through Megatron's parse_args + validate_args at each plan's world
    size and chip: the example the export-everything loop does not plan."""
    from gclc.views.export import _accelerator

    assert len(shared_cluster_train) == 5
    for name, plan in shared_cluster_train:   # what export("megatron", ...) plans and writes
        chip = _accelerator(plan)
        args = run(megatron.export(plan, chip, "shared_cluster.gcl"), plan.config.gpus, chip.name)
        assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) == (plan.config.tp, plan.config.pp), name


@pytest.mark.parametrize("pins, fp32_grads, dropout", [
    ("", False, 0.0),                                          # Megatron-Core's: bf16 buffer, no dropout
    ("grad_reduce = fp32 dropout = true", True, 0.1),          # Megatron-LM's defaults with --bf16
])
def test_the_gradient_buffer_and_dropout_a_plan_models_are_the_ones_megatron_runs(pins, fp32_grads, dropout):
    job = on_stack("megatron_core", f"parallelism {{ tp = 8 pp = 1 dp = 4 zero = 1 sp = true {pins} }}")
    args = run(exported(job), job.config.gpus)
    assert bool(args.accumulate_allreduce_grads_in_fp32) == fp32_grads
    assert args.hidden_dropout == dropout and args.attention_dropout == dropout


@functools.lru_cache(maxsize=None)
def _moe_with(pins: str):
    """The small MoE design with `pins`, planned once per pins (the checks below reuse plans)."""
    from gclc.compiler.driver import check_file
    from gclc.views.export.jobs import job_entity, job_plan

    moe = Path(__file__).resolve().parents[1] / "data" / "moe.gcl"   # DeepSeek-V3 cut to 8 layers, ep 16
    text = moe.read_text().replace("    microbatch = 1\n", f"    microbatch = 1\n{pins}").replace(
        "  mtp      = 1\n", "  mtp      = 1\n  position_embedding = rope\n")
    return job_plan(job_entity(check_file(str(moe), {"nodes": "4"}, text=text).design, None))


@pytest.mark.parametrize("dispatcher, kind, backend", [("alltoall", "alltoall", None), ("hybridep", "flex", "hybridep"),
                                                        ("deepep", "flex", "deepep"), ("allgather", "allgather", None)])
def test_the_token_dispatcher_the_plan_costs_is_the_one_megatron_builds(dispatcher, kind, backend):
    """validate_args, then Megatron-Core's TransformerConfig (its __post_init__ checks the MoE
    settings) built by Megatron's own core_transformer_config_from_args."""
    job = _moe_with(f"    dispatcher = {dispatcher}\n")
    files = megatron.export(job, std_chip("H100_SXM"), "moe")
    words, env = megatron_lm.shell_environment(files["megatron.args"])
    args = megatron_lm.parse_and_validate(words, job.config.gpus, env, "H100_SXM")
    config = megatron_lm.load().core_transformer_config_from_args(args)
    assert config.moe_token_dispatcher_type == kind == yaml.safe_load(files["megatron.yaml"])["moe_token_dispatcher_type"]
    if backend:
        assert config.moe_flex_dispatcher_backend == backend


def test_group_limited_routing_exports_as_megatrons_router_groups():
    """`experts { groups = 8  group_top_k = 4 }` (DeepSeek-V3's routing) reaches Megatron-Core's
    TransformerConfig as the group-limited router the plan costs (model/train/moe.py `copies_on_rank`)."""
    from gclc.compiler.driver import check_file
    from gclc.views.export.jobs import job_entity, job_plan

    moe = Path(__file__).resolve().parents[1] / "data" / "moe.gcl"
    text = moe.read_text().replace("  mtp      = 1\n", "  mtp      = 1\n  position_embedding = rope\n").replace(
        "dense_layers = 1 }", "dense_layers = 1  groups = 8  group_top_k = 4 }")
    job = job_plan(job_entity(check_file(str(moe), {"nodes": "4"}, text=text).design, None))
    files = megatron.export(job, std_chip("H100_SXM"), "moe")
    words, env = megatron_lm.shell_environment(files["megatron.args"])
    args = megatron_lm.parse_and_validate(words, job.config.gpus, env, "H100_SXM")
    config = megatron_lm.load().core_transformer_config_from_args(args)
    assert (config.moe_router_num_groups, config.moe_router_group_topk) == (8, 4)
    assert "--moe-router-num-groups" not in megatron.export(_moe_with(""), std_chip("H100_SXM"), "moe")["megatron.args"]


def test_megatron_core_refuses_what_the_dispatcher_checks_refuse():
    """Negative controls: the combinations compiler/rules/train.py `_dispatcher` rejects are the
    ones Megatron-Core's own TransformerConfig rejects."""
    job = _moe_with("    dispatcher = deepep\n")
    words, env = megatron_lm.shell_environment(megatron.export(job, std_chip("H100_SXM"), "moe")["megatron.args"])
    padded = words + ["--moe-expert-capacity-factor", "1.25", "--moe-pad-expert-input-to-capacity"]
    args = megatron_lm.parse_and_validate(padded, job.config.gpus, env, "H100_SXM")
    with pytest.raises(ValueError, match="does not support moe_pad_expert_input_to_capacity"):
        megatron_lm.load().core_transformer_config_from_args(args)
    job = _moe_with("    dispatcher = allgather\n")
    words, env = megatron_lm.shell_environment(megatron.export(job, std_chip("H100_SXM"), "moe")["megatron.args"])
    args = megatron_lm.parse_and_validate(words + ["--overlap-moe-expert-parallel-comm"], job.config.gpus, env, "H100_SXM")
    with pytest.raises(AssertionError, match="alltoall/flex"):
        megatron_lm.load().core_transformer_config_from_args(args)


def optimizer_config(args, monkeypatch):
    """Megatron-Core's OptimizerConfig from the validated args, as megatron/training/training.py builds it
    (each dataclass field the args carry): its __post_init__ holds the precision-aware optimizer's checks.
    STUB: its Transformer Engine version check answers megatron_lm.TE_VERSION, as validate_args' does."""
    from dataclasses import fields
    from packaging.version import Version
    from megatron.core.optimizer import optimizer_config as module

    monkeypatch.setattr(module, "is_te_min_version", lambda v, check_equality=True: (
        Version(megatron_lm.TE_VERSION) >= Version(v) if check_equality else Version(megatron_lm.TE_VERSION) > Version(v)))
    config = module.OptimizerConfig
    return config(**{f.name: getattr(args, f.name) for f in fields(config) if hasattr(args, f.name)})


def test_the_precision_aware_optimizer_stated_with_fp32_dtypes_exports_as_megatron_runs_it(monkeypatch):
    """`precision_aware_optimizer = true` with fp32 dtypes: the flag alone, which Megatron-Core's OptimizerConfig
    takes past its fp32 and distributed-optimizer checks to Transformer Engine's FusedAdam (absent on this CPU
    machine: its RuntimeError is the verdict that every check before it passed); the negative controls, the same
    file with bf16 moments and the flag dropped, or without the distributed optimizer, fail Megatron's own asserts."""
    job = on_stack("megatron_core", "precision_aware_optimizer = true\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    c = job.config
    from gclc.model.train.optimizer import state_bytes
    assert c.precision_aware_optimizer and state_bytes(c) == 10     # the master as remainders
    text = exported(job)["megatron.args"]
    args = run({"megatron.args": text}, c.gpus)
    assert args.use_precision_aware_optimizer and args.use_distributed_optimizer
    assert {dtype_name(getattr(args, k)) for k in ("exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype",
                                                    "main_grads_dtype")} == {"fp32"}
    with pytest.raises(RuntimeError, match="requires FusedAdam from TransformerEngine"):
        optimizer_config(args, monkeypatch)
    dropped = text.replace("  --use-precision-aware-optimizer\n", "").replace("--exp-avg-dtype fp32", "--exp-avg-dtype bf16")
    assert dropped != text
    with pytest.raises(AssertionError, match="exp_avg_dtype can only be fp32 when not using precision-aware"):
        optimizer_config(run({"megatron.args": dropped}, c.gpus), monkeypatch)
    plain = text.replace("--use-distributed-optimizer", "")
    assert plain != text
    with pytest.raises(AssertionError, match="only supported with distributed optimizer"):
        optimizer_config(run({"megatron.args": plain}, c.gpus), monkeypatch)


def test_a_job_that_states_the_optimizer_off_exports_no_flag():
    job = on_stack("megatron_core", "precision_aware_optimizer = false\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    text = exported(job)["megatron.args"]
    assert "--use-precision-aware-optimizer" not in text
    assert not run({"megatron.args": text}, job.config.gpus).use_precision_aware_optimizer


def test_moments_of_two_formats_export_as_megatrons_two_dtypes():
    job = on_stack("megatron_core", "optimizer_state = bf16  second_moment = fp32\n"
                   "  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    args = run(exported(job), job.config.gpus)
    assert args.use_precision_aware_optimizer
    assert (dtype_name(args.exp_avg_dtype), dtype_name(args.exp_avg_sq_dtype)) == ("bf16", "fp32")


def fused_adam_stub(monkeypatch) -> None:
    """STUB: Transformer Engine's FusedAdam (absent on this CPU machine) with the arguments Megatron-Core's
    OptimizerConfig.__post_init__ looks for, so that the config it builds can be read."""
    import sys
    import types

    class FusedAdam:
        def __init__(self, params, master_weight_dtype=None, exp_avg_dtype=None, exp_avg_sq_dtype=None,
                     use_decoupled_grad=False):
            pass

    names = ("transformer_engine", "transformer_engine.pytorch", "transformer_engine.pytorch.optimizers")
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules[names[-1]].FusedAdam = FusedAdam


@pytest.mark.parametrize("node, chip, recipe, remainders", [
    ("DGX_B200", "B200", "mxfp8", False),    # Blackwell: MX block scaling, the fp32 master kept whole
    ("DGX_H100", "H100_SXM", "delayed", True),
])
def test_fp8_exports_the_recipe_whose_master_the_plan_counts(monkeypatch, node, chip, recipe, remainders):
    """`precision = fp8` with the precision-aware optimizer at fp32 dtypes: the export writes the chip's recipe
    (compiler/formats.py `block_scaled`, which the plan's memory reads too), validate_args accepts it, and
    Megatron-Core's own OptimizerConfig decides who holds the master as the plan counts it: with mxfp8,
    use_precision_aware_optimizer_no_fp8_or_ds_fp8 is false and Megatron keeps a whole fp32 master (12 B);
    with delayed scaling FusedAdam keeps it as 16-bit remainders (10 B)."""
    from gclc.model.train.optimizer import state_bytes, stores_remainders

    job = on_stack("megatron_core", "precision_aware_optimizer = true\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }",
                   "fp8", node)
    c = job.config
    assert c.mx_fp8 == (recipe == "mxfp8") and stores_remainders(c) == remainders
    assert state_bytes(c) == (10 if remainders else 12)
    args = run(exported(job, chip), c.gpus, chip)
    assert args.fp8_recipe == recipe and args.use_precision_aware_optimizer and args.use_distributed_optimizer
    fused_adam_stub(monkeypatch)
    config = optimizer_config(args, monkeypatch)
    assert config.use_precision_aware_optimizer_no_fp8_or_ds_fp8 == remainders
    assert config.store_param_remainders   # Transformer Engine >= 2.1: used only where FusedAdam holds the master
