"""The main gradients Adam reads (`main_grads`, model/train/optimizer.py): the gradient buffer, the
data-parallel reduction and the optimizer step against hand counts, and the law that narrower
main gradients never need more memory nor a slower step."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.train import optimizer
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train.memory import dense_params_per_gpu, memory
from gclc.model.train.step import estimate

JOB = train_job(check_file(str(Path(__file__).parent.parent.parent / "data" / "dense_variants.gcl")).design)


def cfg(**kw) -> TrainConfig:
    base = dict(batch=64, seq=8192, dp=32, zero=1, stack="megatron_core", recompute="full")
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("fields, grads, state, step", [
    # Megatron-Core reduces the bf16 buffer already (model/config.py); fp32 main grads are the
    # distributed optimizer's cast of its shard, which Adam reads: 4 + 2 x 2 x 4 + 2 x 4 + 2
    ({"stack": "megatron_core"}, 2, 12, 30),
    # bf16 main grads turn the precision-aware optimizer on: Adam reads the bf16 shard and the
    # fp32 master is kept as 16-bit remainders read and written beside the bf16 weights:
    # 2 + 16 + 2 x 2 + 2 x 2
    ({"stack": "megatron_core", "main_grads": "bf16"}, 2, 4 * 2 + 2, 26),
    # Megatron-LM before Core accumulates and reduces in fp32; bf16 main grads halve the buffer
    # (no remainders on that stack): 2 + 16 + 8 + 2
    ({"stack": "megatron"}, 4, 12, 30),
    ({"stack": "megatron", "main_grads": "bf16"}, 2, 12, 28),
    ({"stack": "fsdp", "zero": 3, "main_grads": "bf16"}, 2, 12, 28),
    ({"stack": "megatron_core", "main_grads": "bf16", "optimizer_state": "bf16", "master_weights": "fp16"},
     2, 2 * 2 + 2, 2 + 8 + 4 + 2),
])
def test_gradient_state_and_step_bytes_per_parameter(fields, grads, state, step):
    c = cfg(**fields)
    assert optimizer.grad_bytes(c) == grads
    assert optimizer.state_bytes(c) == state
    assert optimizer.step_bytes(c) == step


def test_bf16_main_grads_halve_an_fp32_gradient_buffer_and_its_reduction():
    wide, narrow = cfg(stack="megatron"), cfg(stack="megatron", main_grads="bf16")
    assert memory(JOB.shape, wide).gradients == pytest.approx(4 * dense_params_per_gpu(JOB.shape, wide))
    assert memory(JOB.shape, narrow).gradients == pytest.approx(memory(JOB.shape, wide).gradients / 2)
    # Megatron-LM before Core reduces after the backward pass (no overlap): all of it is exposed
    wide_step, narrow_step = (estimate(JOB.shape, c, JOB.partition) for c in (wide, narrow))
    assert narrow_step.breakdown.dp < wide_step.breakdown.dp
    assert narrow_step.breakdown.optimizer < wide_step.breakdown.optimizer


def test_a_stack_that_reduces_in_bf16_moves_the_same_gradients():
    wide, narrow = cfg(), cfg(main_grads="bf16")
    assert memory(JOB.shape, narrow).gradients == memory(JOB.shape, wide).gradients
    assert estimate(JOB.shape, narrow, JOB.partition).breakdown.dp == \
        estimate(JOB.shape, wide, JOB.partition).breakdown.dp
    assert memory(JOB.shape, narrow).optimizer < memory(JOB.shape, wide).optimizer   # the remainders


configs = st.builds(lambda dp, zero, stack, precision, moments, master: cfg(
                        dp=dp, zero=zero, stack=stack, precision=precision, optimizer_state=moments,
                        master_weights=master),
                    st.sampled_from([8, 16, 32]), st.sampled_from([0, 1, 2, 3]),
                    st.sampled_from(["megatron_core", "nemo", "fsdp", "megatron", "deepspeed"]),
                    st.sampled_from(["bf16", "fp16", "fp8"]), st.sampled_from(["fp32", "bf16", "fp8"]),
                    st.sampled_from(["fp32", "fp16", "none"]))


@given(configs)
def test_narrower_main_grads_never_need_more_memory_nor_a_slower_step(c):
    wide, narrow = (attrs.evolve(c, main_grads=g) for g in ("fp32", "bf16"))
    assert optimizer.grad_bytes(narrow) <= optimizer.grad_bytes(wide)
    assert optimizer.step_bytes(narrow) < optimizer.step_bytes(wide)
    assert memory(JOB.shape, narrow).total <= memory(JOB.shape, wide).total * (1 + 1e-12)
    narrow_step, wide_step = (estimate(JOB.shape, x, JOB.partition) for x in (narrow, wide))
    assert narrow_step.breakdown.dp <= wide_step.breakdown.dp * (1 + 1e-12)
    assert narrow_step.breakdown.optimizer < wide_step.breakdown.optimizer
    assert narrow_step.step_time <= wide_step.step_time * (1 + 1e-12)
