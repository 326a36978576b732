"""An MXFP8 GEMM on Blackwell runs at a published share of the chip's per-tensor fp8 GEMM rate
(model/compute.py MXFP8_GEMM_SHARE: Transformer Engine v2.17's gemm_profiling on a B300, pre-quantized
operands), and every layer cost times its GEMMs in the format they run in (model/train/quantized.py
`gemm_format`: the generic `fp8` on Blackwell is MXFP8)."""

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model import compute
from gclc.model.job import pinned_config, train_job
from gclc.model.train import step
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()

DESIGN = """import "std/nvidia"
cluster C {{ units = 1 x {node} }}
model M {{ arch = dense  layers = 4  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 128256  seq = 8192
          mlp = swiglu }}
train t {{ model = M  on = C  batch = 64  precision = {precision}
          parallelism {{ tp = {tp} pp = 1 dp = {dp} microbatch = {microbatch} zero = 1 recompute = none }} }}
"""


def _job(precision: str, node: str = "DGX_B200", tp: int = 1, microbatch: int = 1):
    result = check_text(DESIGN.format(node=node, precision=precision, tp=tp, dp=8 // tp, microbatch=microbatch),
                        "mxfp8.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def _step(job, cfg=None) -> float:
    return estimate(job.shape, cfg or pinned_config(job), job.partition).step_time


def test_an_mxfp8_gemm_runs_at_the_published_share_of_the_per_tensor_fp8_rate():
    assert compute.MXFP8_GEMM_SHARE == pytest.approx(6.812 / 7.161)   # TE v2.17 gemm_profiling, B300
    chip = _job("fp8").partition.node.accelerator
    assert compute.gemm_efficiency(chip, "mxfp8") == pytest.approx(
        compute.gemm_efficiency(chip, "fp8_e4m3") * compute.MXFP8_GEMM_SHARE)
    assert compute.gemm_efficiency(chip, "fp8") == compute.gemm_efficiency(chip, "fp8_e4m3")   # the family's share
    hopper = _job("fp8", node="DGX_H100").partition.node.accelerator   # no MX kernels measured there
    assert compute.gemm_efficiency(hopper, "mxfp8") == compute.gemm_efficiency(hopper, "fp8")


def test_the_generic_fp8_on_blackwell_times_its_gemms_as_mxfp8():
    generic, mx, per_tensor = _job("fp8"), _job("mxfp8"), _job("fp8_e4m3")
    assert pinned_config(generic).mx_fp8
    gemms = lambda job: estimate(job.shape, pinned_config(job), job.partition).breakdown.compute  # noqa: E731
    assert gemms(generic) == pytest.approx(gemms(mx))
    assert gemms(per_tensor) < gemms(generic)


def test_a_warm_layer_cache_answers_an_mx_job_like_a_cold_one():
    job = _job("fp8_e4m3")
    per_tensor = pinned_config(job)
    mx = attrs.evolve(per_tensor, precision="fp8", mx_fp8=True, non_tn_fp8=False)
    _step(job, per_tensor)                 # fills the layer caches with the per-tensor layers
    warm = _step(job, mx)
    step.clear_caches()
    assert _step(job, mx) == warm and warm > _step(job, per_tensor)


@given(share=st.floats(0.5, 1.0), slower=st.floats(0.5, 1.0), tp=st.sampled_from([1, 2, 8]),
       microbatch=st.sampled_from([1, 2, 4]))
def test_a_slower_mxfp8_gemm_never_makes_a_step_faster(share, slower, tp, microbatch):
    job = _job("fp8", tp=tp, microbatch=microbatch)
    kept = compute.MXFP8_GEMM_SHARE
    try:
        times = []
        for value in (share, share * slower):
            compute.MXFP8_GEMM_SHARE = value
            step.clear_caches()
            times.append(_step(job))
    finally:
        compute.MXFP8_GEMM_SHARE = kept
        step.clear_caches()
    assert times[1] >= times[0]
