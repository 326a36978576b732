"""TP and DP overlap as a job states them (`tp_overlap`, `dp_overlap` in `parallelism`): a run
and its optimized variant (a MegaScale-style stack that overlaps what its base stack does not, or
the reverse) get different predictions; unstated, the software stack's behaviour holds; stating
an overlap never slows a step (model/config.py, model/train/layer_cost.py, model/train/dp_sync.py)."""

import attrs
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()

# A 13B-class dense model on 4 DGX H100 nodes, TP 8 within a node, DP 4 across them.
DESIGN = """import "std/nvidia"
cluster Pod {
  units    = 4 x DGX_H100
  scaleout = NDR_FatTree
}
model M {
  arch = dense  layers = 40  hidden = 5120  heads = 40  ffn = 13824  vocab = 32000  seq = 4096
}
train job {
  model     = M
  on        = Pod
  batch     = 64
  precision = bf16
  software  = STACK
  parallelism { tp = 8 pp = 1 dp = 4 microbatch = 1 zero = 1 PINS}
}
"""


def _job(stack: str = "megatron_core", pins: str = ""):
    result = check_text(DESIGN.replace("STACK", stack).replace("PINS", pins), "overlap.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def _estimate(stack: str = "megatron_core", pins: str = ""):
    job = _job(stack, pins)
    return estimate(job.shape, pinned_config(job), job.partition)


def test_unstated_the_stack_decides():
    cfg = pinned_config(_job())
    assert cfg.tp_overlap is None and cfg.dp_overlap is None
    assert cfg.overlaps_tp and cfg.overlaps_dp                      # Megatron-Core overlaps both
    old = pinned_config(_job("megatron"))
    assert not old.overlaps_tp and not old.overlaps_dp              # Megatron-LM of 2021 neither


def test_a_stated_tp_overlap_changes_the_exposed_tp_time_both_ways():
    base, off = _estimate(), _estimate(pins="tp_overlap = false ")
    assert off.breakdown.tp > base.breakdown.tp > 0
    old, optimized = _estimate("megatron"), _estimate("megatron", "tp_overlap = true ")
    assert optimized.breakdown.tp < old.breakdown.tp
    assert optimized.step_time < old.step_time


def test_a_stated_dp_overlap_changes_the_exposed_gradient_sync_both_ways():
    base, off = _estimate(), _estimate(pins="dp_overlap = false ")
    assert off.breakdown.dp > base.breakdown.dp
    assert off.step_time > base.step_time
    old, optimized = _estimate("megatron"), _estimate("megatron", "dp_overlap = true ")
    assert optimized.breakdown.dp < old.breakdown.dp


def test_a_non_flag_is_a_located_error():
    text = DESIGN.replace("STACK", "megatron_core").replace("PINS", "tp_overlap = 3 ")
    result = check_text(text, "overlap.gcl")
    assert not result.ok
    where = next(d for d in result.diagnostics if "tp_overlap" in str(d))
    assert where.subject.line == text.splitlines().index(next(l for l in text.splitlines() if "tp_overlap" in l)) + 1


JOB = _job()
BASE = pinned_config(JOB)


@given(st.sampled_from(["megatron", "megatron_core", "fsdp", "deepspeed"]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([1, 2, 4]), st.sampled_from(["tp_overlap", "dp_overlap"]))
def test_stating_an_overlap_never_slows_a_step(stack, tp, microbatch, field):
    cfg = attrs.evolve(BASE, stack=stack, tp=tp, dp=32 // tp, microbatch=microbatch, sp=tp > 1)
    on = estimate(JOB.shape, attrs.evolve(cfg, **{field: True}), JOB.partition)
    off = estimate(JOB.shape, attrs.evolve(cfg, **{field: False}), JOB.partition)
    assert on.step_time <= off.step_time * (1 + 1e-12)
