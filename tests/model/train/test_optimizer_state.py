"""Adam's state at the job's precisions (model/train/optimizer.py): bytes against hand counts, and the
laws that narrower state never needs more memory nor a slower step."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file, check_text
from gclc.model.train import host, optimizer
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train.memory import dense_params_per_gpu, memory, model_state
from gclc.model.train.step import estimate

DATA = Path(__file__).parent.parent.parent / "data"
JOB = train_job(check_file(str(DATA / "dense_variants.gcl")).design)
# the same design on DGX B200s: MX block-scaled fp8 (mx_fp8) runs on Blackwell only (compiler/formats.py)
BLACKWELL = train_job(check_text((DATA / "dense_variants.gcl").read_text().replace("DGX_H100", "DGX_B200"),
                                 str(DATA / "dense_variants_b200.gcl")).design).partition


def partition_of(c: TrainConfig):
    """The partition a configuration runs on: a Blackwell one for MX fp8."""
    return BLACKWELL if c.mx_fp8 else JOB.partition


def cfg(**kw) -> TrainConfig:
    base = dict(batch=64, seq=8192, dp=32, zero=1, stack="megatron_core", recompute="full")
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("fields, state, step", [
    # mixed-precision Adam (ZeRO, section 3.1): fp32 master + two fp32 moments; the step reads the
    # fp32 gradient, reads and writes master and moments, writes the bf16 weights: 4 + 8 + 16 + 2
    ({}, 12, 30),
    # Megatron-Core's precision-aware optimizer: bf16 moments, fp32 master as 16-bit remainders that
    # the step reads and writes beside the bf16 weights: 4 + 2 x 2 x 2 + 2 x 2 + 2 x 2
    ({"optimizer_state": "bf16"}, 2 * 2 + 2, 20),
    ({"optimizer_state": "bf16", "master_weights": "fp16"}, 2 * 2 + 2, 4 + 8 + 4 + 2),
    # NeMo 1.0's Apex Adam at the model's bf16: no master, Adam reads and writes the weights
    ({"optimizer_state": "bf16", "master_weights": "none"}, 4, 4 + 8 + 0 + 4),
    ({"optimizer_state": "fp8"}, 2 * 1 + 2, 4 + 4 + 4 + 4),
    # the remainders are Megatron-Core's distributed optimizer's, with bf16 weights only
    ({"optimizer_state": "bf16", "stack": "fsdp"}, 2 * 2 + 4, 4 + 8 + 8 + 2),
    ({"optimizer_state": "bf16", "zero": 3}, 2 * 2 + 4, 4 + 8 + 8 + 2),
    ({"optimizer_state": "bf16", "precision": "fp16"}, 2 * 2 + 4, 4 + 8 + 8 + 2),
    # the precision-aware optimizer stated with fp32 dtypes (NeMo-RL's default): the master as remainders
    ({"precision_aware_optimizer": True}, 2 * 4 + 2, 4 + 16 + 4 + 4),
    ({"precision_aware_optimizer": True, "zero": 0}, 12, 30),
    # an mxfp8 recipe makes Megatron-Core keep the fp32 master itself (use_precision_aware_optimizer_no_fp8_or_ds_fp8)
    ({"precision_aware_optimizer": True, "precision": "mxfp8"}, 12, 30),
    ({"optimizer_state": "bf16", "precision": "mxfp8"}, 2 * 2 + 4, 4 + 8 + 8 + 2),
    ({"optimizer_state": "bf16", "precision": "fp8"}, 2 * 2 + 2, 20),
    # fp8 on a chip that runs it with MX block scaling (Blackwell: the exports write --fp8-recipe mxfp8)
    ({"precision_aware_optimizer": True, "precision": "fp8", "mx_fp8": True}, 12, 30),
    ({"optimizer_state": "bf16", "precision": "fp8", "mx_fp8": True}, 2 * 2 + 4, 4 + 8 + 8 + 2),
    # the moments apart (Megatron's --exp-avg-dtype bf16 --exp-avg-sq-dtype fp32): 2 + 4, the master as remainders
    ({"optimizer_state": "bf16", "second_moment": "fp32"}, 2 + 4 + 2, 4 + 2 * 6 + 4 + 4),
    ({"second_moment": "bf16"}, 4 + 2 + 2, 4 + 2 * 6 + 4 + 4),
    ({"optimizer_state": "fp8", "second_moment": "bf16", "stack": "fsdp"}, 1 + 2 + 4, 4 + 2 * 3 + 8 + 2),
])
def test_state_and_step_bytes_per_parameter(fields, state, step):
    c = cfg(**fields)
    assert optimizer.state_bytes(c) == state
    assert optimizer.step_bytes(c) == step
    assert optimizer.checkpoint_bytes(c) == 2 + state


def test_the_default_checkpoint_is_the_documented_fourteen_bytes():
    assert optimizer.checkpoint_bytes(None) == optimizer.checkpoint_bytes(cfg()) == host.CHECKPOINT_BYTES_PER_PARAM
    narrow = cfg(optimizer_state="bf16", master_weights="none")
    assert host.checkpoint_bytes(JOB.shape, cfg=narrow) == pytest.approx(6 * JOB.shape.params)


def test_the_optimizer_memory_is_its_bytes_over_the_shards():
    c = cfg(optimizer_state="bf16", master_weights="none")
    _, _, state = model_state(JOB.shape, c)
    assert state == pytest.approx(4 * dense_params_per_gpu(JOB.shape, c) / 32)   # dp 32 shards it (ZeRO 1)
    assert memory(JOB.shape, cfg()).optimizer == pytest.approx(3 * state)


MOMENTS = ("fp8", "bf16", "fp32")       # narrowest first (fp16 stores what bf16 does)
MASTERS = ("none", "fp16", "fp32")
# mx_fp8: fp8 as a Blackwell chip runs it (MX block scaling), where Megatron-Core keeps the fp32 master whole
configs = st.builds(lambda dp, zero, stack, precision, rc, mx: cfg(dp=dp, zero=zero, stack=stack, precision=precision,
                                                                    recompute=rc, mx_fp8=mx and precision == "fp8"),
                    st.sampled_from([8, 16, 32]), st.sampled_from([0, 1, 2, 3]),
                    st.sampled_from(["megatron_core", "nemo", "fsdp", "megatron"]),
                    st.sampled_from(["bf16", "fp16", "fp8"]), st.sampled_from(["selective", "full"]), st.booleans())
settings_ = st.tuples(st.sampled_from(range(len(MOMENTS))), st.sampled_from(range(len(MASTERS))))


def _at(c: TrainConfig, moments: int, master: int) -> TrainConfig:
    return attrs.evolve(c, optimizer_state=MOMENTS[moments], master_weights=MASTERS[master])


@given(configs, settings_, settings_)
def test_more_optimizer_state_bytes_never_need_less_memory_nor_a_faster_step(c, a, b):
    narrow, wide = _at(c, min(a[0], b[0]), min(a[1], b[1])), _at(c, max(a[0], b[0]), max(a[1], b[1]))
    assert optimizer.state_bytes(narrow) <= optimizer.state_bytes(wide)
    assert optimizer.checkpoint_bytes(narrow) <= optimizer.checkpoint_bytes(wide)
    assert memory(JOB.shape, narrow).total <= memory(JOB.shape, wide).total * (1 + 1e-12)
    narrow_step, wide_step = (estimate(JOB.shape, x, partition_of(x)) for x in (narrow, wide))
    assert narrow_step.breakdown.optimizer <= wide_step.breakdown.optimizer * (1 + 1e-12)
    assert narrow_step.step_time <= wide_step.step_time * (1 + 1e-12)


@given(configs, st.sampled_from(MASTERS))
def test_bf16_moments_never_slow_the_step(c, master):
    bf16, fp32 = (attrs.evolve(c, optimizer_state=s, master_weights=master) for s in ("bf16", "fp32"))
    assert estimate(JOB.shape, bf16, partition_of(bf16)).step_time <= \
        estimate(JOB.shape, fp32, partition_of(fp32)).step_time * (1 + 1e-12)
    assert memory(JOB.shape, bf16).optimizer < memory(JOB.shape, fp32).optimizer


@given(configs, settings_)
def test_the_precision_aware_optimizer_never_needs_more_memory_nor_a_slower_step(c, at):
    """Stating Megatron's precision-aware optimizer only ever narrows what is stored (the master to remainders)."""
    off = _at(c, *at)
    on = attrs.evolve(off, precision_aware_optimizer=True)
    assert optimizer.state_bytes(on) <= optimizer.state_bytes(off)
    assert memory(JOB.shape, on).total <= memory(JOB.shape, off).total * (1 + 1e-12)
    assert estimate(JOB.shape, on, partition_of(on)).step_time <= estimate(JOB.shape, off, partition_of(off)).step_time * (1 + 1e-12)


@given(configs, st.sampled_from([0, 1, 2, 3]), st.booleans())
def test_a_stage_asked_of_another_configuration_holds_that_stages_state(c, zero, aware):
    """model_states answers each ZeRO stage of a search from one configuration: the remainders of the
    master (ZeRO 1-2 only) follow the stage asked, not the configuration's own."""
    from gclc.model.train.memory import clear_caches, model_states

    c = attrs.evolve(c, precision_aware_optimizer=aware)
    clear_caches()
    asked = model_states(JOB.shape, c, (0, 1, 2, 3))[zero]
    clear_caches()
    assert asked == model_state(JOB.shape, attrs.evolve(c, zero=zero))


@given(configs, st.sampled_from(MOMENTS), st.sampled_from(MOMENTS), st.sampled_from(MOMENTS))
def test_a_narrower_second_moment_never_needs_more_memory_nor_a_slower_step(c, first, a, b):
    """The second moment stated apart (Megatron's --exp-avg-sq-dtype): the narrower of two never needs more."""
    narrow, wide = (attrs.evolve(c, optimizer_state=first, second_moment=x)
                    for x in sorted((a, b), key=MOMENTS.index))
    assert optimizer.state_bytes(narrow) <= optimizer.state_bytes(wide)
    assert memory(JOB.shape, narrow).total <= memory(JOB.shape, wide).total * (1 + 1e-12)
    assert estimate(JOB.shape, narrow, partition_of(narrow)).step_time <= \
        estimate(JOB.shape, wide, partition_of(wide)).step_time * (1 + 1e-12)
    same = attrs.evolve(c, optimizer_state=first, second_moment=first)
    assert optimizer.state_bytes(same) == optimizer.state_bytes(attrs.evolve(c, optimizer_state=first))
