"""`gclc export --to torchtitan`, read and checked by torchtitan 0.2.2 itself (PyPI) on torch
2.13.0 (the CPU wheel): its ConfigManager, ParallelDims with every mesh built over a fake
process group, and torch's pipeline schedule constructors through torchtitan's
build_pipeline_schedule (tests/views/torchtitan_real.py says how).
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from pathlib import Path

import attrs
import pytest

from gclc.model.train.optimizer import grad_bytes
from gclc.views.export import ExportError, torchtitan

pytest.importorskip("torchtitan", reason="torchtitan 0.2.2 from PyPI (.ci/setup installs it with the dev extras)")

from . import torchtitan_real as real  # noqa: E402
from gclc.compiler.std_chips import std_chip  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def read_toml(files: dict[str, str], tmp_path: Path):
    (tmp_path / "job.toml").write_text(files["torchtitan.toml"])
    return real.parse(["--job.config_file", str(tmp_path / "job.toml")])


def _files(example):
    accelerator = example.layout.groups[0].partition.node.accelerator
    return torchtitan.export(example.job, accelerator, example.name)


def test_torchtitans_checks_reject_a_broken_config(tmp_path):
    """Negative controls: torchtitan's ParallelDims and torch's Schedule1F1B refuse these."""
    broken = real.parse(["--parallelism.data_parallel_shard_degree", "6", "--parallelism.tensor_parallel_degree", "4"])
    with pytest.raises(AssertionError, match="Invalid parallel dims"):
        real.parallel_dims(broken, 32, meshes=False)
    etp = real.parse(["--parallelism.data_parallel_shard_degree", "8", "--parallelism.tensor_parallel_degree", "4",
                      "--parallelism.expert_parallel_degree", "16", "--parallelism.expert_tensor_parallel_degree", "2"])
    with pytest.raises(AssertionError, match="ETP=TP or ETP=1"):
        real.parallel_dims(etp, 32, meshes=False)
    few = real.parse(["--parallelism.pipeline_parallel_degree", "16", "--parallelism.data_parallel_shard_degree", "4",
                      "--training.local_batch_size", "12", "--parallelism.pipeline_parallel_schedule", "1F1B"])
    dims = real.parallel_dims(few, 64)
    with pytest.raises(ValueError, match="must be greater than or equal to the number of stages"):
        real.pipeline_schedule(few, dims, 64)


def test_torchtitan_reads_the_toml_and_the_overrides_alike(example, tmp_path):
    if example.job is None or example.job.serve:
        pytest.skip(f"{example.name} has no train job")
    try:
        files = _files(example)
    except ExportError as error:
        # a split across partitions, or the SC21 plan (TP without sequence parallelism)
        assert ("heterogeneous" in str(error) and len(example.job.shares) > 1) or "sequence parallelism" in str(error)
        return
    from_toml = read_toml(files, tmp_path)
    script = files["torchtitan.args"] + '\nprintf "%s\\0" "${TORCHTITAN_ARGS[@]}"'
    words = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout.decode().split("\0")[:-1]
    from_cli = real.parse(words)
    as_dict = dataclasses.asdict
    assert {k: v for k, v in as_dict(from_cli).items() if k != "job"} == \
        {k: v for k, v in as_dict(from_toml).items() if k != "job"}
    c, p = example.job.config, from_toml.parallelism
    assert (p.tensor_parallel_degree, p.pipeline_parallel_degree, p.context_parallel_degree,
            p.expert_parallel_degree) == (c.tp, c.pp, c.cp, c.ep)
    assert p.data_parallel_shard_degree * p.data_parallel_replicate_degree == c.dp
    assert from_toml.training.global_batch_size == c.batch and from_toml.training.seq_len == c.seq
    assert from_toml.training.local_batch_size * c.dp == c.batch
    assert from_toml.activation_checkpoint.mode == c.recompute
    if c.pp > 1:
        assert p.pipeline_parallel_microbatch_size == c.microbatch
    dims = real.parallel_dims(from_toml, c.gpus)          # torchtitan's meshes of the plan's sizes
    assert (dims.dp_shard, dims.dp_replicate) == (p.data_parallel_shard_degree, p.data_parallel_replicate_degree)
    schedule = real.pipeline_schedule(from_toml, dims, example.job.shape.layers)
    if c.pp > 1:   # torch's schedule accepts the plan's micro-batches for its stages
        assert schedule._n_microbatches == c.microbatches
    assert from_toml.training.mixed_precision_reduce == "float32"    # the only reduction torchtitan has
    for text in files.values():   # a plan that timed a narrower one says so in both files
        assert ("NOTE: the plan timed a 2-byte" in text) == (grad_bytes(c) == 2)


def test_a_misspelled_option_is_refused_by_torchtitan(tmp_path):
    """The parse above can fail: torchtitan rejects keys its JobConfig does not have."""
    (tmp_path / "bad.toml").write_text('[parallelism]\ntensor_parallel_size = 8\n')
    with pytest.raises(ValueError, match="Invalid field names"):
        real.parse(["--job.config_file", str(tmp_path / "bad.toml")])


def test_what_torchtitan_cannot_run_is_an_error(named):
    hetero = named("hetero_h100_a100")
    with pytest.raises(ExportError, match="no heterogeneous split"):
        torchtitan.export(hetero.job, std_chip("H100_SXM"), hetero.name)
    mi300x = named("mi300x_roce")
    with pytest.raises(ExportError, match="CUDA and ROCm"):
        torchtitan.export(mi300x.job, attrs.evolve(std_chip("MI300X"), name="Orca", vendor="Example Silicon"), mi300x.name)


def test_overrides_quote_for_the_shell():
    words = torchtitan.overrides({"job": {"description": "a b"}, "model": {"converters": ["x", "y"]}})
    assert shlex.split(shlex.join(words)) == ["--job.description", "a b", "--model.converters", "x,y"]


def test_hybrid_sharding_and_layer_checkpointing_read_back_from_torchtitan(tmp_path, variant_plan):
    job = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 shard = 8 recompute = full recompute_every = 2 }")
    parsed = read_toml(torchtitan.export(job, std_chip("H100_SXM"), "variants"), tmp_path)
    p = parsed.parallelism
    assert (p.data_parallel_shard_degree, p.data_parallel_replicate_degree) == (8, 4)
    assert (parsed.activation_checkpoint.mode, parsed.activation_checkpoint.selective_ac_option) == ("selective", "2")
    real.parallel_dims(parsed, 32)
    offloaded = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 recompute = none offload = 50% }")
    with pytest.raises(ExportError, match="offload"):
        torchtitan.export(offloaded, std_chip("H100_SXM"), "variants")
    narrow = variant_plan("optimizer_state = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    with pytest.raises(ExportError, match="optimizer_state = bf16"):
        torchtitan.export(narrow, std_chip("H100_SXM"), "variants")
    grads = variant_plan("main_grads = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    with pytest.raises(ExportError, match=r"reduce in fp32 .*`job` states main_grads = bf16 \(remove"):
        torchtitan.export(grads, std_chip("H100_SXM"), "variants")


def test_the_compiled_stack_turns_torch_compile_on(tmp_path):
    from gclc.compiler.driver import check_text
    from gclc.views.export.jobs import job_entity, job_plan

    path = Path(__file__).resolve().parents[2] / "tests" / "data" / "dense_variants.gcl"
    text = path.read_text().replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        "parallelism { tp = 1 pp = 1 dp = 32 zero = 3 recompute = selective recompute_modules = [op_level] }")
    plans = {}
    for stack in ("fsdp", "fsdp_compiled"):
        result = check_text(text.replace("software  = fsdp", f"software  = {stack}"), str(path))
        assert result.design is not None, result.diagnostics
        files = torchtitan.export(job_plan(job_entity(result.design, None)), std_chip("H100_SXM"), "variants")
        (tmp_path / f"{stack}.toml").write_text(files["torchtitan.toml"])
        plans[stack] = real.parse(["--job.config_file", str(tmp_path / f"{stack}.toml")])
    assert plans["fsdp_compiled"].compile.enable and not plans["fsdp"].compile.enable
    assert plans["fsdp_compiled"].activation_checkpoint.selective_ac_option == "op"


@pytest.mark.parametrize("stack", ["fsdp", "fsdp_compiled", "megatron_core", "megatron"])
def test_a_reduction_narrower_than_torchtitans_fp32_is_noted(tmp_path, stack):
    from gclc.compiler.driver import check_text
    from gclc.views.export.jobs import job_entity, job_plan

    path = Path(__file__).resolve().parents[2] / "tests" / "data" / "dense_variants.gcl"
    text = path.read_text().replace("software  = fsdp", f"software  = {stack}").replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        "parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    result = check_text(text, str(path))
    assert result.design is not None, result.diagnostics
    job = job_plan(job_entity(result.design, None))
    files = torchtitan.export(job, std_chip("H100_SXM"), "variants")
    parsed = read_toml(files, tmp_path)
    assert parsed.training.mixed_precision_reduce == "float32"
    narrow = stack != "megatron"       # model/config.py STACKS: Megatron-LM before Core reduces in fp32
    assert grad_bytes(job.config) == (2 if narrow else 4)
    for text in files.values():
        assert (f"2-byte (bf16) data-parallel gradient reduction (stack {stack})" in text) == narrow
        assert ("2x the bytes the plan assumed" in text) == narrow


def test_the_full_gb200_plan_runs_on_torchs_pipeline_schedules(tmp_path):
    """DeepSeek-V3 on the whole GB200 campus (the GB200 example's job before issue 27, kept as
    tests/data/gb200_moe.gcl; 81,920 GPUs at 1,389 racks): the plan keeps 12 micro-batches per rank
    for 16 stages, which torch's Schedule1F1B refuses; 1F1B with so few is GPipe (the same bubble
    and activations), and the export asks torch for ScheduleGPipe, which torchtitan builds."""
    from gclc.compiler.driver import check_file
    from gclc.views.export.jobs import job_entity, job_plan

    design = check_file(str(ROOT / "tests" / "data" / "gb200_moe.gcl"), ["racks=1389"]).design
    job = job_plan(job_entity(design, None))
    c = job.config
    assert c.pp == 16 and c.vp == 1 and c.microbatches < c.pp
    parsed = read_toml(torchtitan.export(job, std_chip("GB200"), "gb200_nvl72_100k.gcl"), tmp_path)
    assert parsed.parallelism.pipeline_parallel_schedule == "GPipe"
    dims = real.parallel_dims(parsed, c.gpus, meshes=False)    # ParallelDims at 81,920 ranks
    small = real.parse(["--job.config_file", str(tmp_path / "job.toml"),   # the meshes at 1/80 of the dp size
                        "--parallelism.data_parallel_shard_degree", str(dims.dp_shard // 80)])
    schedule = real.pipeline_schedule(small, real.parallel_dims(small, c.gpus // 80), job.shape.layers)
    assert type(schedule).__name__ == "ScheduleGPipe" and schedule._n_microbatches == c.microbatches


def test_the_loss_a_plan_states_reads_back_from_torchtitan(tmp_path, variant_plan):
    # the variants design runs the fsdp stack (blocks not compiled): a compiled loss alone
    job = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 loss = compiled }")
    parsed = read_toml(torchtitan.export(job, std_chip("H100_SXM"), "variants"), tmp_path)
    assert parsed.compile.enable and list(parsed.compile.components) == ["loss"]
    eager = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 loss = eager }")
    assert not read_toml(torchtitan.export(eager, std_chip("H100_SXM"), "variants"), tmp_path).compile.enable
    fused = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 loss = fused }")
    with pytest.raises(ExportError, match="loss = fused"):
        torchtitan.export(fused, std_chip("H100_SXM"), "variants")


def _tp_plan(stack: str, pins: str):
    from gclc.compiler.driver import check_text
    from gclc.views.export.jobs import job_entity, job_plan

    path = ROOT / "tests" / "data" / "dense_variants.gcl"
    text = path.read_text().replace("software  = fsdp", f"software  = {stack}").replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        f"parallelism {{ tp = 4 pp = 1 dp = 8 zero = 3 {pins} }}")
    result = check_text(text, str(path))
    assert result.design is not None, result.diagnostics
    return job_plan(job_entity(result.design, None))


def test_a_stated_tp_overlap_is_torchtitans_async_tp_which_its_own_check_accepts_compiled_only(tmp_path):
    import torch._inductor.config as inductor
    from torchtitan.distributed.tensor_parallel import maybe_enable_async_tp

    # negative control: torchtitan refuses async TP without a compiled model
    bare = real.parse(["--parallelism.enable_async_tensor_parallel"])
    with pytest.raises(RuntimeError, match="Async TP requires"):
        maybe_enable_async_tp(bare, None)
    parsed = read_toml(torchtitan.export(_tp_plan("fsdp_compiled", "tp_overlap = true"), std_chip("H100_SXM"),
                                         "variants"), tmp_path)
    assert parsed.parallelism.enable_async_tensor_parallel
    before = inductor._micro_pipeline_tp
    try:
        maybe_enable_async_tp(parsed, None)      # accepted: only the compiled plan asks for it
        assert inductor._micro_pipeline_tp
    finally:
        inductor._micro_pipeline_tp = before
    unstated = read_toml(torchtitan.export(_tp_plan("fsdp_compiled", ""), std_chip("H100_SXM"), "variants"), tmp_path)
    assert not unstated.parallelism.enable_async_tensor_parallel
    with pytest.raises(ExportError, match="tp_overlap = true on fsdp"):
        torchtitan.export(_tp_plan("fsdp", "tp_overlap = true"), std_chip("H100_SXM"), "variants")
    with pytest.raises(ExportError, match="dp_overlap = false"):
        torchtitan.export(_tp_plan("fsdp", "dp_overlap = false"), std_chip("H100_SXM"), "variants")


def _shape_of(args, built) -> tuple[int, ...]:
    block = built.layers["0"]
    return (args.n_layers, args.dim, args.n_heads, args.n_kv_heads or args.n_heads, args.vocab_size,
            block.feed_forward.w1.out_features)


def test_every_train_job_of_the_shared_cluster_is_accepted_by_torchtitan(shared_cluster_train, tmp_path):
    """examples/shared_cluster.gcl's five train jobs (the example the export loop does not plan):
    each TOML through torchtitan's ConfigManager, ParallelDims with its meshes at the plan's world
    size, and the model its `[model]` flavor builds, which has the plan's shape and parameters."""
    from gclc.views.export import _accelerator

    assert len(shared_cluster_train) == 5
    built_once = {}      # three jobs train the same flavor
    for name, plan in shared_cluster_train:
        chip = _accelerator(plan)
        parsed = read_toml(torchtitan.export(plan, chip, "shared_cluster.gcl"), tmp_path)
        c, shape = plan.config, plan.shape
        real.parallel_dims(parsed, c.gpus)
        assert parsed.parallelism.tensor_parallel_degree == c.tp and parsed.training.global_batch_size == c.batch
        flavor = (parsed.model.name, parsed.model.flavor, parsed.training.seq_len)
        if flavor not in built_once:
            built_once[flavor] = real.model(parsed)
        args, built = built_once[flavor]
        assert args.max_seq_len == c.seq, name
        assert _shape_of(args, built) == (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.vocab,
                                          shape.ffn), name
        counted = sum(p.numel() for p in built.parameters())
        assert abs(counted - shape.params) <= 1e-3 * shape.params, (name, counted, shape.params)


def test_a_flavor_of_another_shape_is_caught(shared_cluster_train):
    """Negative control for the check above: Llama 3 8B's flavor is not the 70B plan's shape."""
    plan = dict(shared_cluster_train)["pretrain_70b"]
    shape = plan.shape
    args, built = real.model(real.parse(["--model.flavor", "8B"]))
    assert _shape_of(args, built) != (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.vocab, shape.ffn)


def test_dropout_torchtitan_does_not_run_is_refused_and_its_fp32_reduction_needs_no_note():
    with pytest.raises(ExportError, match="dropout = true"):
        torchtitan.export(_tp_plan("fsdp", "dropout = true"), std_chip("H100_SXM"), "variants")
    assert torchtitan.reduction_note(_tp_plan("fsdp", "")) and not torchtitan.reduction_note(_tp_plan("fsdp", "grad_reduce = fp32"))
