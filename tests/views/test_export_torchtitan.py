"""`gclc export --to torchtitan`, read by torchtitan v0.2.2's own ConfigManager.

tests/data/exports/torchtitan_v0_2_2/ holds torchtitan's config/job_config.py and
config/manager.py at tag v0.2.2 (pytorch/torchtitan 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce,
BSD-3-Clause, LICENSE beside them). They parse with tyro (installed) and tomllib; their
only other imports are `torch` and torchtitan's logger, used by `JobConfig.maybe_log` and
log messages, never while parsing: this test stands them in with empty modules (no torch
is installed here). The parallel layout is then checked with the rules of torchtitan's
ParallelDims._validate and _validate_meshes (torchtitan/distributed/parallel_dims.py).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest

from gclc.model.train.optimizer import grad_bytes
from gclc.views.export import ExportError, torchtitan

VENDORED = Path(__file__).resolve().parents[1] / "data" / "exports" / "torchtitan_v0_2_2"


@pytest.fixture(scope="module")
def config_manager():
    """torchtitan.config.manager.ConfigManager, loaded from the vendored sources."""
    stand_ins = {"torch": types.ModuleType("torch"), "torchtitan": types.ModuleType("torchtitan"),
                 "torchtitan.tools": types.ModuleType("torchtitan.tools"),
                 "torchtitan.tools.logging": types.ModuleType("torchtitan.tools.logging"),
                 "torchtitan.config": types.ModuleType("torchtitan.config")}
    stand_ins["torchtitan.tools.logging"].logger = logging.getLogger("torchtitan")
    stand_ins["torchtitan.config"].__path__ = [str(VENDORED)]
    saved = {name: sys.modules.get(name) for name in [*stand_ins, "torchtitan.config.job_config",
                                                      "torchtitan.config.manager"]}
    sys.modules.update(stand_ins)
    try:
        for name in ("job_config", "manager"):
            spec = importlib.util.spec_from_file_location(f"torchtitan.config.{name}", VENDORED / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        # torch only while importing (other libraries look for a real one in sys.modules); the
        # torchtitan modules stay while the tests run: tyro reads their source for help texts
        _restore(saved, ["torch"])
        yield sys.modules["torchtitan.config.manager"].ConfigManager
    finally:
        _restore(saved, list(saved))


def _restore(saved: dict, names: list[str]) -> None:
    for name in names:
        if saved[name] is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved[name]


def parallel_dims_problems(p, world: int) -> list[str]:
    """torchtitan v0.2.2 ParallelDims._validate / _validate_meshes, on the parsed config."""
    dp_replicate, dp_shard, cp, tp, pp = (p.data_parallel_replicate_degree, p.data_parallel_shard_degree,
                                          p.context_parallel_degree, p.tensor_parallel_degree, p.pipeline_parallel_degree)
    ep, etp = p.expert_parallel_degree, p.expert_tensor_parallel_degree
    problems = []
    if dp_shard < 0:
        dp_shard = world // (dp_replicate * cp * tp * pp)
    if dp_replicate * dp_shard * cp * tp * pp != world:
        problems.append("Invalid parallel dims: dp_replicate * dp_shard * cp * tp * pp != WORLD_SIZE")
    if ep > 1 and etp not in (tp, 1):
        problems.append("Currently we only support ETP=TP or ETP=1")
    if ep > 1 and (dp_shard * cp * tp) % (etp * ep):
        problems.append("efsdp = dp_shard * cp * tp // (etp * ep) is not a whole mesh")
    return problems


def _files(example):
    accelerator = example.layout.groups[0].partition.node.accelerator
    return torchtitan.export(example.job, accelerator.name, accelerator.vendor, example.name)


def test_parallel_dims_rules_can_fail():
    p = types.SimpleNamespace(data_parallel_replicate_degree=1, data_parallel_shard_degree=6, context_parallel_degree=1,
                              tensor_parallel_degree=4, pipeline_parallel_degree=1, expert_parallel_degree=16,
                              expert_tensor_parallel_degree=2)
    assert len(parallel_dims_problems(p, 32)) == 3


def test_torchtitan_reads_the_toml_and_the_overrides_alike(example, config_manager, tmp_path):
    if example.job is None or example.job.serve:
        pytest.skip(f"{example.name} has no train job")
    try:
        files = _files(example)
    except ExportError as error:
        # a split across partitions, or the SC21 plan (TP without sequence parallelism)
        assert ("heterogeneous" in str(error) and len(example.job.shares) > 1) or "sequence parallelism" in str(error)
        return
    (tmp_path / "job.toml").write_text(files["torchtitan.toml"])
    from_toml = config_manager().parse_args(["--job.config_file", str(tmp_path / "job.toml")])
    script = files["torchtitan.args"] + '\nprintf "%s\\0" "${TORCHTITAN_ARGS[@]}"'
    words = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout.decode().split("\0")[:-1]
    from_cli = config_manager().parse_args(words)
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
    assert parallel_dims_problems(p, c.gpus) == []
    assert from_toml.training.mixed_precision_reduce == "float32"    # the only reduction torchtitan has
    for text in files.values():   # a plan that timed a narrower one says so in both files
        assert ("NOTE: the plan timed a 2-byte" in text) == (grad_bytes(c) == 2)


def test_a_misspelled_option_is_refused_by_torchtitan(config_manager, tmp_path):
    """The parse above can fail: torchtitan rejects keys its JobConfig does not have."""
    (tmp_path / "bad.toml").write_text('[parallelism]\ntensor_parallel_size = 8\n')
    with pytest.raises(ValueError, match="Invalid field names"):
        config_manager().parse_args(["--job.config_file", str(tmp_path / "bad.toml")])


def test_what_torchtitan_cannot_run_is_an_error(named):
    hetero = named("hetero_h100_a100")
    with pytest.raises(ExportError, match="no heterogeneous split"):
        torchtitan.export(hetero.job, "H100_SXM", "NVIDIA", hetero.name)
    mi300x = named("mi300x_roce")
    with pytest.raises(ExportError, match="CUDA and ROCm"):
        torchtitan.export(mi300x.job, "Orca", "Example Silicon", mi300x.name)


def test_overrides_quote_for_the_shell():
    words = torchtitan.overrides({"job": {"description": "a b"}, "model": {"converters": ["x", "y"]}})
    assert shlex.split(shlex.join(words)) == ["--job.description", "a b", "--model.converters", "x,y"]


def test_hybrid_sharding_and_layer_checkpointing_read_back_from_torchtitan(config_manager, tmp_path, variant_plan):
    job = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 zero = 3 shard = 8 recompute = full recompute_every = 2 }")
    files = torchtitan.export(job, "H100_SXM", "NVIDIA", "variants")
    (tmp_path / "job.toml").write_text(files["torchtitan.toml"])
    parsed = config_manager().parse_args(["--job.config_file", str(tmp_path / "job.toml")])
    p = parsed.parallelism
    assert (p.data_parallel_shard_degree, p.data_parallel_replicate_degree) == (8, 4)
    assert (parsed.activation_checkpoint.mode, parsed.activation_checkpoint.selective_ac_option) == ("selective", "2")
    assert parallel_dims_problems(p, 32) == []
    offloaded = variant_plan("parallelism { tp = 1 pp = 1 dp = 32 recompute = full offload = 50% }")
    with pytest.raises(ExportError, match="offload"):
        torchtitan.export(offloaded, "H100_SXM", "NVIDIA", "variants")
    narrow = variant_plan("optimizer_state = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    with pytest.raises(ExportError, match="optimizer_state = bf16"):
        torchtitan.export(narrow, "H100_SXM", "NVIDIA", "variants")
    grads = variant_plan("main_grads = bf16\n  parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    with pytest.raises(ExportError, match=r"reduce in fp32 .*`job` states main_grads = bf16 \(remove"):
        torchtitan.export(grads, "H100_SXM", "NVIDIA", "variants")


def test_the_compiled_stack_turns_torch_compile_on(config_manager, tmp_path):
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
        files = torchtitan.export(job_plan(job_entity(result.design, None)), "H100_SXM", "NVIDIA", "variants")
        (tmp_path / f"{stack}.toml").write_text(files["torchtitan.toml"])
        plans[stack] = config_manager().parse_args(["--job.config_file", str(tmp_path / f"{stack}.toml")])
    assert plans["fsdp_compiled"].compile.enable and not plans["fsdp"].compile.enable
    assert plans["fsdp_compiled"].activation_checkpoint.selective_ac_option == "op"


@pytest.mark.parametrize("stack", ["fsdp", "fsdp_compiled", "megatron_core", "megatron"])
def test_a_reduction_narrower_than_torchtitans_fp32_is_noted(config_manager, tmp_path, stack):
    from gclc.compiler.driver import check_text
    from gclc.views.export.jobs import job_entity, job_plan

    path = Path(__file__).resolve().parents[2] / "tests" / "data" / "dense_variants.gcl"
    text = path.read_text().replace("software  = fsdp", f"software  = {stack}").replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        "parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }")
    result = check_text(text, str(path))
    assert result.design is not None, result.diagnostics
    job = job_plan(job_entity(result.design, None))
    files = torchtitan.export(job, "H100_SXM", "NVIDIA", "variants")
    (tmp_path / "job.toml").write_text(files["torchtitan.toml"])
    parsed = config_manager().parse_args(["--job.config_file", str(tmp_path / "job.toml")])
    assert parsed.training.mixed_precision_reduce == "float32"
    narrow = stack != "megatron"       # model/config.py STACKS: Megatron-LM before Core reduces in fp32
    assert grad_bytes(job.config) == (2 if narrow else 4)
    for text in files.values():
        assert (f"2-byte (bf16) data-parallel gradient reduction (stack {stack})" in text) == narrow
        assert ("2x the bytes the plan assumed" in text) == narrow
