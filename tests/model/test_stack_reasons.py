"""The compiled FSDP stack (torch.compile's fused elementwise kernels) and the band reasons a
plan can state about its stack and its power cap."""

import re
from pathlib import Path

import attrs
import pytest

from gclc.model import calibration
from gclc.model.config import STACKS, TrainConfig
from gclc.model.shape import ModelShape
from gclc.model.stacks import stack_for
from gclc.model.train.workload import elementwise_parts

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "runs"
LLAMA8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256,
                     seq=8192, mlp_matrices=3)


def test_the_compiled_stack_differs_from_fsdp_only_in_fused_elementwise_kernels():
    plain, compiled = STACKS["fsdp"], STACKS["fsdp_compiled"]
    assert {k for k in plain if plain[k] != compiled[k]} == {"fused"}
    assert compiled["fused"] and not plain["fused"]


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_fused_kernels_halve_the_elementwise_traffic(precision):
    # unfused chains read and write each intermediate: twice the bytes of the fused kernel for
    # Llama's RMSNorm, SwiGLU and rotary; its residual add (no dropout) and the fp8 casts are one
    # kernel either way
    c = TrainConfig(batch=16, seq=8192, dp=8, microbatch=2, precision=precision, stack="fsdp")
    plain = elementwise_parts(LLAMA8B, c, False)
    fused = elementwise_parts(LLAMA8B, attrs.evolve(c, stack="fsdp_compiled"), False)
    for part, nbytes in fused.items():
        assert plain[part] == pytest.approx(nbytes if part in ("cast", "residual") else 2 * nbytes)


@pytest.mark.parametrize("dropout", [False, True])
def test_eager_pytorch_runs_layernorm_gelu_and_a_plain_residual_add_as_single_kernels(dropout):
    # MPT: LayerNorm (one ATen kernel), GeLU whose bias rides in the GEMM epilogue, a learned
    # position table: eager moves what a fused stack moves, unless dropout precedes the add
    mpt = attrs.evolve(LLAMA8B, kv_heads=32, ffn=16384, mlp_matrices=2, normalization="layernorm",
                       position_embedding="learned")
    c = TrainConfig(batch=16, seq=2048, dp=8, microbatch=2, stack="fsdp", dropout=dropout)
    plain = elementwise_parts(mpt, c, False)
    fused = elementwise_parts(mpt, attrs.evolve(c, stack="fsdp_compiled"), False)
    for part, nbytes in fused.items():
        assert plain[part] == pytest.approx(2 * nbytes if dropout and part == "residual" else nbytes)
    # an RMSNorm model's norms stay a chain in eager PyTorch
    rms = elementwise_parts(attrs.evolve(mpt, normalization="rmsnorm"), c, False)
    assert rms["norm"] == pytest.approx(2 * plain["norm"])


def test_the_compiled_stack_is_its_own_family_of_releases():
    assert stack_for("fsdp_compiled", "2024-12").stack == "fsdp_compiled"
    assert stack_for("fsdp", "2024-12").stack == "fsdp"


def keys(**kw):
    return [r.key for r in calibration.reasons("H100_SXM", "bf16", False, 1, 64, True, **kw)]


def test_a_stack_with_few_calibrated_runs_is_a_reason():
    assert keys(stack="fsdp") == []
    assert keys(stack="fsdp_compiled") == ["stack_runs"]
    assert keys(stack="fsdp", stack_runs={"fsdp": calibration.MIN_STACK_RUNS - 1}) == ["stack_runs"]
    text = calibration.reasons("H100_SXM", "bf16", False, 1, 64, True, stack="fsdp_compiled")[0].text
    assert "fsdp_compiled" in text and "0 calibrated runs" in text


def test_a_power_cap_below_tdp_is_a_reason():
    assert keys(power_capped=True) == ["power_cap"]

    @attrs.frozen
    class Chip:   # the fields power_capped reads through model/dvfs.py (compiler/ir.py Accelerator has them)
        power_cap: float | None
        tdp: float
        full_clock: float | None = None
        idle: float = 70.0
        min_clock: float | None = None
        clock: float | None = None
        dvfs_exponent: float | None = None

    assert calibration.power_capped(Chip(500.0, 700.0))
    assert not calibration.power_capped(Chip(None, 700.0))
    assert not calibration.power_capped(Chip(700.0, 700.0))
    assert calibration.power_capped(Chip(None, 600.0, full_clock=700.0))   # a TDP under its curve's top
    assert not calibration.power_capped(Chip(None, 700.0, full_clock=600.0))


def test_stack_runs_counts_the_calibration_designs():
    counts: dict[str, int] = {}
    for path in RUNS.glob("*.gcl"):
        found = re.search(r"^\s*software\s*=\s*(\w+)", path.read_text(), re.M)
        if found:
            counts[found.group(1)] = counts.get(found.group(1), 0) + 1
    assert counts == calibration.STACK_RUNS
