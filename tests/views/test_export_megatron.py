"""`gclc export --to megatron`, parsed with Megatron-LM's own argument definitions.

Megatron-Core cannot be imported without torch (its config dataclasses and
megatron/training/arguments.py import it), and torch's Linux wheels on PyPI bring the CUDA
stack with them (the nvidia-* wheels, gigabytes), which this project does not install. So
Megatron-LM's published definitions are vendored as test data: tests/data/exports/megatron_arguments.json,
extracted by megatron_extract.py beside it from NVIDIA/Megatron-LM at the commit the file
names (every `add_argument` of arguments.py and every field its ArgumentGroupFactory turns
into a flag). The test builds an argparse parser from them, lets bash expand the exported
array, parses it, and applies the consistency checks of Megatron's `validate_args` that
the plan's numbers must pass, re-implemented here with their source lines.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gclc.model.train.optimizer import grad_bytes, precision_aware
from gclc.views.export import ExportError, megatron

DEFINITIONS = Path(__file__).resolve().parents[1] / "data" / "exports" / "megatron_arguments.json"
TYPES = {"int": int, "float": float, "str": str, "any": str, None: None}
WIDTHS = {"fp32": 4, "bf16": 2, "fp16": 2}


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    definitions = json.loads(DEFINITIONS.read_text())
    parser = argparse.ArgumentParser(allow_abbrev=False, conflict_handler="resolve", exit_on_error=False)
    for argument in definitions["arguments"]:
        kwargs: dict = {"default": argument["default"]} if argument["action"] not in ("store_true", "store_false") else {}
        if argument["dest"]:
            kwargs["dest"] = argument["dest"]
        action = argument["action"]
        if action in ("store_true", "store_false"):
            kwargs["action"] = action
        elif action == "boolean_optional":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif action == "store":
            if TYPES[argument["type"]] is not None:
                kwargs["type"] = TYPES[argument["type"]]
            if argument["nargs"] is not None:
                kwargs["nargs"] = argument["nargs"]
            if argument["choices"] is not None:
                kwargs["choices"] = argument["choices"]
        else:
            kwargs["nargs"] = "?"  # actions the definitions do not name (append, custom): accept a value
        parser.add_argument(*argument["flags"], **kwargs)
    return parser


def shell_words(text: str) -> list[str]:
    """The MEGATRON_ARGS array as bash expands it."""
    script = text + '\nprintf "%s\\0" "${MEGATRON_ARGS[@]}"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, check=True, timeout=30)
    return done.stdout.decode().split("\0")[:-1]


def validate_args(args: argparse.Namespace, world: int) -> list[str]:
    """The checks of Megatron-LM's validate_args (megatron/training/arguments.py) that the
    exported numbers meet, each with the condition Megatron asserts."""
    problems = []
    model_parallel = args.tensor_model_parallel_size * args.pipeline_model_parallel_size * args.context_parallel_size
    if world % model_parallel:
        problems.append("world size is not divisible by tensor x pipeline x context parallel sizes")
    dp = world // model_parallel
    if args.global_batch_size % (args.micro_batch_size * dp):
        problems.append("global batch size is not divisible by micro batch size times data parallel size")
    first, last = args.decoder_first_pipeline_num_layers, args.decoder_last_pipeline_num_layers
    pp = args.pipeline_model_parallel_size
    if first is None and last is None and args.num_layers % pp:
        problems.append("number of layers should be divisible by the pipeline parallel size")
    if first is not None and last is not None and pp > 2 and (args.num_layers - first - last) % (pp - 2):
        problems.append("the middle stages must hold equal numbers of layers")
    if args.num_layers_per_virtual_pipeline_stage is not None:
        if pp <= 1:
            problems.append("interleaved schedules need pipeline parallelism")
        elif (args.num_layers // pp) % args.num_layers_per_virtual_pipeline_stage:
            problems.append("number of layers per pipeline stage must divide by layers per virtual stage")
    if args.num_attention_heads % args.tensor_model_parallel_size:
        problems.append("attention heads must divide by the tensor parallel size")
    groups = args.num_query_groups if args.group_query_attention else args.num_attention_heads
    if groups % args.tensor_model_parallel_size and args.tensor_model_parallel_size % groups:
        problems.append("query groups and tensor parallel size must divide one another")
    if args.context_parallel_size > 1 and args.seq_length % (2 * args.context_parallel_size):
        problems.append("seq-length should be a multiple of 2 * context-parallel-size")
    if args.num_experts:
        if args.num_experts % args.expert_model_parallel_size:
            problems.append("number of experts must divide by expert parallel size")
        if (world // pp) % (args.expert_model_parallel_size * args.expert_tensor_parallel_size):
            problems.append("expert model parallel x expert tensor parallel must divide the ranks of a stage")
    if args.overlap_param_gather and not (args.use_distributed_optimizer or args.use_megatron_fsdp):
        problems.append("--overlap-param-gather only supported with distributed optimizer")
    if args.tp_comm_overlap and not args.sequence_parallel:
        problems.append("Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled")
    if args.bf16 and args.fp16:
        problems.append("cannot be both fp16 and bf16")
    # megatron/core/optimizer/optimizer_config.py OptimizerConfig.__post_init__ (Megatron-FSDP v1
    # turns the distributed optimizer on itself: arguments.py validate_args)
    dtypes = (args.main_grads_dtype, args.main_params_dtype, args.exp_avg_dtype, args.exp_avg_sq_dtype)
    if args.use_precision_aware_optimizer and not (args.use_distributed_optimizer or args.use_megatron_fsdp):
        problems.append("--use-precision-aware-optimizer only supported with distributed optimizer")
    if not args.use_precision_aware_optimizer and any(d != "fp32" for d in dtypes):
        problems.append("main_grads/main_params/exp_avg/exp_avg_sq dtypes can only be fp32 when not using "
                        "precision-aware optimizer")
    # megatron/training/arguments.py validate_args, its bf16 branch (l. 1204-1217 at d98e8a64): the
    # assertion, then the settings it changes, as Megatron changes them on its parsed args
    if args.bf16:
        if args.accumulate_allreduce_grads_in_fp32 and args.main_grads_dtype != "fp32":
            problems.append("--main-grads-dtype can only be fp32 when --accumulate-allreduce-grads-in-fp32 is set")
        if args.grad_reduce_in_bf16:
            args.accumulate_allreduce_grads_in_fp32 = False
        elif not args.accumulate_allreduce_grads_in_fp32 and args.main_grads_dtype == "fp32":
            args.accumulate_allreduce_grads_in_fp32 = True
    return problems


def reduction_dtype(args: argparse.Namespace) -> str:
    """The dtype the validated run keeps and reduces data-parallel gradients in (Megatron-LM at
    d98e8a64). DDP and the distributed optimizer: fp32 when grad_reduce_in_fp32, which
    training.py get_megatron_ddp_config sets from accumulate_allreduce_grads_in_fp32, else the
    parameters' dtype (megatron/core/distributed/param_and_grad_buffer.py
    group_params_for_buffers). Megatron-FSDP, which never reads grad_reduce_in_fp32: the
    gradient communication dtype, `auto` meaning the main gradients' (MixedPrecisionPolicy,
    fsdp/src/megatron_fsdp/mixed_precision.py), `auto` there meaning the parameters' dtype, bf16
    for fp8 ones (param_and_grad_buffer.py _resolve_group_grad_dtype)."""
    params = "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"   # validate_args' params_dtype
    if not args.use_megatron_fsdp:
        return "fp32" if args.accumulate_allreduce_grads_in_fp32 else params
    for chosen in (args.megatron_fsdp_grad_comm_dtype, args.megatron_fsdp_main_grads_dtype):
        if chosen != "auto":
            return chosen
    return params


def test_megatrons_checks_can_fail(parser):
    args = parser.parse_args(["--num-layers", "61", "--pipeline-model-parallel-size", "16", "--tensor-model-parallel-size",
                              "3", "--num-attention-heads", "128", "--micro-batch-size", "1", "--global-batch-size",
                              "100", "--seq-length", "4096", "--tp-comm-overlap"])
    assert len(validate_args(args, 48)) == 4
    state = parser.parse_args(["--num-layers", "8", "--num-attention-heads", "8", "--micro-batch-size", "1",
                               "--global-batch-size", "8", "--seq-length", "4096", "--exp-avg-dtype", "bf16"])
    assert len(validate_args(state, 8)) == 1        # a narrow moment without the precision-aware optimizer
    state.use_precision_aware_optimizer = True
    assert len(validate_args(state, 8)) == 1        # ... which needs the distributed optimizer
    with pytest.raises(argparse.ArgumentError):     # Megatron's master weights are fp32 or fp16 only
        parser.parse_args(["--main-params-dtype", "bf16"])
    grads = parser.parse_args(["--num-layers", "8", "--num-attention-heads", "8", "--micro-batch-size", "1",
                               "--global-batch-size", "8", "--seq-length", "4096", "--bf16", "--main-grads-dtype",
                               "bf16", "--use-precision-aware-optimizer", "--use-distributed-optimizer",
                               "--accumulate-allreduce-grads-in-fp32"])
    assert len(validate_args(grads, 8)) == 1        # bf16 main grads cannot accumulate and reduce in fp32
    with pytest.raises(argparse.ArgumentError):     # Megatron's main grads are fp32 or bf16 only
        parser.parse_args(["--main-grads-dtype", "fp16"])
    shape = ["--num-layers", "8", "--num-attention-heads", "8", "--micro-batch-size", "1", "--global-batch-size",
             "8", "--seq-length", "4096"]
    plain = parser.parse_args(shape + ["--bf16"])   # bf16 with fp32 main grads and no reduction flag ...
    assert validate_args(plain, 8) == [] and reduction_dtype(plain) == "fp32"   # ... reduces in fp32
    narrow = parser.parse_args(shape + ["--bf16", "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16"])
    assert validate_args(narrow, 8) == [] and reduction_dtype(narrow) == "bf16"  # the bf16 flag wins
    half = parser.parse_args(shape + ["--fp16"])    # the fp16 branch turns nothing on
    assert validate_args(half, 8) == [] and reduction_dtype(half) == "fp16"
    fsdp = parser.parse_args(shape + ["--bf16", "--use-megatron-fsdp", "--accumulate-allreduce-grads-in-fp32"])
    assert validate_args(fsdp, 8) == [] and reduction_dtype(fsdp) == "bf16"    # Megatron-FSDP ignores the flag
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--recompute-granularity", "everything"])
    with pytest.raises(SystemExit):  # an unknown flag
        parser.parse_args(["--tensor-parallel-size", "8"])


def test_every_training_example_exports_arguments_megatron_parses(example, parser):
    if example.job is None or example.job.serve:
        pytest.skip(f"{example.name} has no train job")
    accelerator = example.layout.groups[0].partition.node.accelerator
    try:
        files = megatron.export(example.job, accelerator.name, accelerator.vendor, example.name)
    except ExportError as error:
        assert len(example.job.shares) > 1 and "heterogeneous" in str(error)
        return
    words = shell_words(files["megatron.args"])
    args = parser.parse_args(words)
    c = example.job.config
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size) == \
        (c.tp, c.pp, c.cp)
    assert (args.micro_batch_size, args.global_batch_size, args.seq_length) == (c.microbatch, c.batch, c.seq)
    assert args.num_layers == example.job.shape.layers and args.hidden_size == example.job.shape.hidden
    assert args.sequence_parallel == (c.sp and c.tp > 1)
    assert args.recompute_granularity == (None if c.recompute == "none" else c.recompute)
    assert args.use_distributed_optimizer == (c.zero in (1, 2))
    assert args.use_precision_aware_optimizer == precision_aware(c)
    assert (args.exp_avg_dtype, args.exp_avg_sq_dtype) == (c.optimizer_state, c.optimizer_state)
    if c.vp > 1:
        assert args.num_layers_per_virtual_pipeline_stage * c.pp * c.vp == args.num_layers
    if example.job.shape.is_moe:
        assert (args.num_experts, args.expert_model_parallel_size) == (example.job.shape.routed, c.ep)
    if c.precision == "fp8":
        assert args.fp8 == "hybrid" and args.fp8_recipe in ("delayed", "mxfp8")
    assert validate_args(args, c.gpus) == []
    assert WIDTHS[reduction_dtype(args)] == grad_bytes(c)   # the reduction the plan modelled
    settings = yaml.safe_load(files["megatron.yaml"])
    assert settings == {key: getattr(args, key) for key in settings}  # the YAML holds the parsed values


def test_a_heterogeneous_plan_is_refused_with_what_megatron_lacks(named):
    example = named("hetero_h100_a100")
    with pytest.raises(ExportError, match="no heterogeneous split"):
        megatron.export(example.job, "H100_SXM", "NVIDIA", example.name)


def test_uneven_pipelines_give_equal_middle_stages():
    for layers in range(2, 130):
        for pp in range(2, min(layers, 33)):
            first, last = megatron.uneven_stages(layers, pp)
            assert first >= last >= 1 and first + last <= layers
            assert pp == 2 and first + last == layers or (layers - first - last) % (pp - 2) == 0


def test_hybrid_sharding_recompute_offload_and_windows_parse_as_megatron_arguments(parser, variant_plan):
    job = variant_plan("parallelism { tp = 1 pp = 2 vp = 1 dp = 16 zero = 1 shard = 8 recompute = full "
                        "recompute_every = 2 offload = 50% }", "window = 4096  global_every = 4")
    args = parser.parse_args(shell_words(megatron.export(job, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert args.use_distributed_optimizer and args.num_distributed_optimizer_instances == 2    # 16 / 8
    assert (args.recompute_granularity, args.recompute_method, args.recompute_num_layers) == ("full", "block", 8)
    assert args.cpu_offloading and args.cpu_offloading_num_layers == 8                         # half of 16
    assert getattr(args, "window_size") == "(4096,0)" and getattr(args, "window_attn_skip_freq") == "4"
    assert validate_args(args, job.config.gpus) == []
    fsdp = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 shard = 8 recompute = selective "
                         "recompute_modules = [core_attention, mlp] }")
    args = parser.parse_args(shell_words(megatron.export(fsdp, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert args.use_megatron_fsdp and args.num_distributed_optimizer_instances == 4
    assert args.outer_dp_sharding_strategy == "no_shard"
    assert args.recompute_modules == ["core_attn", "mlp"]


def test_what_megatron_cannot_express_of_the_variants_is_an_error(variant_plan):
    parallel = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 }", "block = parallel")
    with pytest.raises(ExportError, match="parallel"):
        megatron.export(parallel, "H100_SXM", "NVIDIA", "variants")
    every = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 recompute = selective recompute_every = 2 }")
    with pytest.raises(ExportError, match="every layer"):
        megatron.export(every, "H100_SXM", "NVIDIA", "variants")


def test_optimizer_state_precisions_export_as_the_precision_aware_optimizer(parser, variant_plan):
    job = variant_plan("optimizer_state = bf16  master_weights = fp16\n"
                       "  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    args = parser.parse_args(shell_words(megatron.export(job, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert args.use_precision_aware_optimizer and args.use_distributed_optimizer
    assert (args.exp_avg_dtype, args.exp_avg_sq_dtype, args.main_params_dtype) == ("bf16", "bf16", "fp16")
    assert validate_args(args, job.config.gpus) == []
    fsdp = variant_plan("optimizer_state = fp8  master_weights = bf16\n"
                        "  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    args = parser.parse_args(shell_words(megatron.export(fsdp, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert args.use_megatron_fsdp and args.use_precision_aware_optimizer
    assert (args.exp_avg_dtype, args.megatron_fsdp_main_params_dtype) == ("fp8", "bf16")
    assert validate_args(args, fsdp.config.gpus) == []


def test_optimizer_state_megatron_cannot_hold_is_an_error(variant_plan):
    none = variant_plan("optimizer_state = bf16  master_weights = none\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    with pytest.raises(ExportError, match="master_weights = none"):
        megatron.export(none, "H100_SXM", "NVIDIA", "variants")
    ddp = variant_plan("optimizer_state = bf16\n  parallelism { tp = 8 pp = 1 dp = 4 zero = 0 }")
    with pytest.raises(ExportError, match="distributed optimizer"):
        megatron.export(ddp, "H100_SXM", "NVIDIA", "variants")


def on_stack(stack: str, pins: str, precision: str = "bf16"):
    """The dense-variants design (tests/data/dense_variants.gcl) on `stack` in `precision` with
    other pins, planned."""
    from gclc.compiler.driver import check_text
    from gclc.views.export.jobs import job_entity, job_plan

    path = Path(__file__).resolve().parents[1] / "data" / "dense_variants.gcl"
    text = path.read_text().replace("software  = fsdp", f"software  = {stack}").replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        pins).replace("precision = bf16", f"precision = {precision}")
    return job_plan(job_entity(check_text(text, str(path)).design, None))


@pytest.mark.parametrize("stack", ["megatron", "megatron_core"])
def test_bf16_main_grads_export_as_the_precision_aware_optimizers_main_grads_dtype(parser, variant_plan, stack):
    job = on_stack(stack, "main_grads = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    args = parser.parse_args(shell_words(megatron.export(job, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert args.use_precision_aware_optimizer and args.use_distributed_optimizer
    assert (args.main_grads_dtype, args.main_params_dtype, args.exp_avg_dtype) == ("bf16", "fp32", "fp32")
    # Megatron-LM before Core accumulates in fp32 (model/config.py), which bf16 main grads turn off
    assert not args.accumulate_allreduce_grads_in_fp32
    assert validate_args(args, job.config.gpus) == []
    fsdp = variant_plan("main_grads = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    args = parser.parse_args(shell_words(megatron.export(fsdp, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert args.use_megatron_fsdp and args.use_precision_aware_optimizer
    assert (args.megatron_fsdp_main_grads_dtype, args.main_grads_dtype) == ("bf16", "fp32")
    assert validate_args(args, fsdp.config.gpus) == []


def test_fp32_main_grads_keep_the_megatron_default(parser):
    job = on_stack("megatron", "parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    text = megatron.export(job, "H100_SXM", "NVIDIA", "variants")["megatron.args"]
    args = parser.parse_args(shell_words(text))
    assert "--main-grads-dtype" not in text and not args.use_precision_aware_optimizer
    assert args.main_grads_dtype == "fp32" and args.accumulate_allreduce_grads_in_fp32


def test_bf16_main_grads_without_the_distributed_optimizer_is_an_error(variant_plan):
    ddp = variant_plan("main_grads = bf16\n  parallelism { tp = 8 pp = 1 dp = 4 zero = 0 }")
    with pytest.raises(ExportError, match="distributed optimizer.*ZeRO 0 with main_grads = bf16"):
        megatron.export(ddp, "H100_SXM", "NVIDIA", "variants")


@pytest.mark.parametrize("stack", megatron.STACKS)
@pytest.mark.parametrize("zero", [0, 1, 3])
@pytest.mark.parametrize("main_grads", ["fp32", "bf16"])
@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp16"])
def test_the_exported_run_reduces_gradients_in_the_width_the_plan_models(parser, stack, zero, main_grads, precision):
    if main_grads == "bf16" and zero == 0:
        pytest.skip("bf16 main grads need the distributed optimizer (an export error, tested above)")
    job = on_stack(stack, f"main_grads = {main_grads}\n  parallelism {{ tp = 8 pp = 1 dp = 4 zero = {zero} }}",
                   precision)
    c = job.config
    args = parser.parse_args(shell_words(megatron.export(job, "H100_SXM", "NVIDIA", "variants")["megatron.args"]))
    assert validate_args(args, c.gpus) == []
    wide = {"megatron": 4, "megatron_core": 2, "nemo": 2}[stack] == 4 and main_grads == "fp32"
    assert grad_bytes(c) == (4 if wide else 2)      # model/config.py STACKS, narrowed by bf16 main grads
    assert WIDTHS[reduction_dtype(args)] == grad_bytes(c)
    if precision != "fp16":     # (fp16 runs keep fp16 gradients, or the bf16 main grads they state)
        assert reduction_dtype(args) == ("fp32" if wide else "bf16")
