"""`gclc export` on an rl job: the training pool as Megatron-LM's arguments, checked by
Megatron-LM's own `parse_args` and `validate_args` (tests/views/megatron_lm.py says how, and
names its stubs), at the layout the rl plan chose; what has no pool to describe is refused.
The generation pool's vLLM launch is checked by vLLM itself in tests/views/test_export_vllm.py."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from gclc.compiler.driver import check_text
from gclc.solver.rl.plan import plan_rl
from gclc.views.export import ExportError, export

pytest.importorskip("torch", reason="Megatron-LM's arguments.py imports torch (.ci/setup installs the CPU wheel)")
pytest.importorskip("megatron.core", reason="megatron-core from PyPI (.ci/setup installs it)")

from . import megatron_lm  # noqa: E402

RL = Path(__file__).resolve().parents[1] / "data" / "rl_small.gcl"


@functools.cache
def design(colocated: bool = False):
    text = RL.read_text()
    if colocated:
        text = text.replace("  staleness    = 1", "  placement = colocated")
    else:   # the pools apart, training pinned to the H100s Megatron-LM's check is run for (the planner
        # trains on the A100s since a one-step-off batch's latency is paid whole: model/rl/step.py)
        text = text.replace("  generate { engine", "  train { on = Lab.h100 }\n  generate { engine")
    result = check_text(text, str(RL))
    assert result.design is not None, result.diagnostics
    return result.design


@pytest.mark.parametrize("colocated", [False, True])
def test_the_training_pool_exports_arguments_megatron_validates(colocated):
    d = design(colocated)
    pool = plan_rl(d["grpo"], top=0).best.train
    c = pool.policy.config
    files = export("megatron", d, job="grpo", source="rl_small.gcl")
    words, env = megatron_lm.shell_environment(files["megatron.args"])
    args = megatron_lm.parse_and_validate(words, pool.gpus, env, "H100_SXM")
    assert pool.partition == "h100" and c.gpus == pool.gpus
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.data_parallel_size) == \
        (c.tp, c.pp, c.dp)
    # one optimizer step a mini-batch: the step's 128 samples over `minibatches = 2`
    assert (args.micro_batch_size, args.global_batch_size) == (c.microbatch, 64)
    assert args.seq_length == c.seq and args.num_layers == 32
    assert args.recompute_granularity == (None if c.recompute == "none" else c.recompute)
    assert "training pool of rl job `grpo`" in files["megatron.args"].splitlines()[0]
    # NeMo-RL's precision-aware optimizer with fp32 dtypes, as the plan's host copies move its state: Megatron-Core
    # then keeps the fp32 master as remainders (OptimizerConfig's default; its __post_init__ turns it off only
    # without Transformer Engine >= 2.1, which this CPU test machine lacks, so the default is what is read)
    assert args.use_precision_aware_optimizer and args.exp_avg_dtype == args.main_params_dtype == torch_fp32()
    from dataclasses import fields
    from megatron.core.optimizer.optimizer_config import OptimizerConfig
    assert next(f.default for f in fields(OptimizerConfig) if f.name == "store_param_remainders") is True
    # the control: Megatron checks the layout against the pool's size (a tensor-parallel group
    # twice the pool; a world one GPU short would pass a pool planned at tp = pp = 1)
    tp = words.index("--tensor-model-parallel-size") + 1
    with pytest.raises(AssertionError, match="world size"):
        megatron_lm.parse_and_validate(words[:tp] + [str(2 * pool.gpus)] + words[tp + 1:], pool.gpus, env, "H100_SXM")


def test_what_an_rl_job_has_no_pool_for_is_refused():
    d = design()
    for kind in ("torchtitan", "trace", "slurm"):
        with pytest.raises(ExportError, match="`grpo` is an rl job: its generation pool exports as `vllm`"):
            export(kind, d, job="grpo")


def test_an_rl_job_without_a_plan_says_why_instead_of_exporting():
    from gclc.views.export import Infeasible

    text = RL.read_text().replace("memory <= 90%", "memory <= 1%")
    with pytest.raises(Infeasible, match="`grpo` has no plan: the policy's training fits no layout"):
        export("vllm", check_text(text, str(RL)).design, job="grpo")


def torch_fp32():
    import torch

    return torch.float32
