"""MLA attention and the kernels' p-norm roofline in the serving model (model/serve/inference.py):
absorbed decode reads the compressed latent, prefill attends in the decompressed form; both
by hand, and laws with the project's profiles."""

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.serve import inference
from gclc.model.compute import MLA_DECODE_KERNELS, attention_peak, attention_rate, mla_decode_rate
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.testing import load_profile

load_profile()

ROOT = Path(__file__).resolve().parents[3]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
_, PARTITION = placement(ENTITY)
MLA = ModelShape.from_entity(ENTITY.get("model"))   # 61 layers, 128 heads of 128 (+ 64 rotary), latent 512
GQA = attrs.evolve(MLA, kv_rank=0, rope_dim=0, q_rank=0, kv_heads=8)


def _attention_work(shape, kv_tokens=0.0, pairs=0.0, cfg=ServeConfig(1, 1, "fp8", ep=8)):
    """Seconds of computing one stage spends in attention alone (no new tokens: no GEMMs)."""
    return replica(shape, cfg, PARTITION).stage_time(0, kv_tokens, pairs)[1]


def test_mla_prefill_attends_in_the_decompressed_form_by_hand():
    """A prefill pair costs scores over qk_dim (128 + 64 rotary) and values over 128, per head:
    2 x 128 x (192 + 128) = 81,920 FLOPs per layer; 61 layers; the 8 attention groups share them."""
    assert (MLA.head_dim, MLA.rope_dim, MLA.qk_dim, MLA.heads) == (128, 64, 192, 128)
    chip = PARTITION.node.accelerator
    expected = 61 * 1e6 * 2 * 128 * (192 + 128) / 8 / attention_rate(chip)
    assert _attention_work(MLA, pairs=1e6) == pytest.approx(expected, rel=1e-12)


def test_gqa_prefill_pairs_keep_four_head_dims_per_head():
    """Without MLA qk_dim is head_dim: 4 x heads x head_dim per pair and layer, as before."""
    chip = PARTITION.node.accelerator
    expected = 61 * 1e6 * 4 * 128 * 128 / 8 / attention_rate(chip)
    assert _attention_work(GQA, pairs=1e6) == pytest.approx(expected, rel=1e-12)


def test_absorbed_mla_decode_works_on_the_latent_by_hand():
    """Decode with absorbed weights: per cached token, head and layer, scores against the
    576-wide latent and rotary key, values as a 512-wide weighted sum: 2 x (576 + 512) FLOPs."""
    chip = PARTITION.node.accelerator
    expected = 61 * 1e5 * 128 * 2 * (576 + 512) / 8 / mla_decode_rate(chip)
    assert _attention_work(MLA, kv_tokens=1e5) == pytest.approx(expected, rel=1e-12)


def test_gqa_decode_keeps_the_fused_attention_rate():
    """Only absorbed MLA decodes with the MLA decode kernel's rate; GQA's decode is timed as before."""
    chip = PARTITION.node.accelerator
    expected = 61 * 1e5 * 4 * 128 * 128 / 8 / attention_rate(chip)
    assert _attention_work(GQA, kv_tokens=1e5) == pytest.approx(expected, rel=1e-12)


def test_mla_decode_rate_is_the_published_kernel_share_of_each_generation_peak():
    """FlashMLA's figures: 660 of H800's 989 TFLOP/s (Hopper, the example's H100 shares its tensor
    cores), 350 on B200 (Blackwell); a chip without kernel data keeps the fused-attention rate."""
    h100 = PARTITION.node.accelerator
    assert mla_decode_rate(h100) / attention_peak(h100) == pytest.approx(660 / 989, rel=1e-3)
    design = check_file(str(ROOT / "benchmarks" / "designs" / "serving_models.gcl")).design
    from gclc.compiler.lower import lower_cluster
    b200 = lower_cluster(design["B200_Box"]).partitions[0].node.accelerator
    assert mla_decode_rate(b200) == pytest.approx(350e12, rel=1e-3)
    a100 = lower_cluster(design["A100_Box"]).partitions[0].node.accelerator
    assert mla_decode_rate(a100) == attention_rate(a100)
    assert set(MLA_DECODE_KERNELS) == {"hopper", "blackwell"}


def test_the_p_norm_roofline_by_hand(monkeypatch):
    monkeypatch.setattr(inference, "ROOFLINE_P", 2.0)
    assert inference._roofline(3.0, 4.0) == pytest.approx(5.0)
    monkeypatch.setattr(inference, "ROOFLINE_P", math.inf)
    assert inference._roofline(3.0, 4.0) == 4.0
    monkeypatch.setattr(inference, "ROOFLINE_P", 1.0)
    assert inference._roofline(3.0, 4.0) == pytest.approx(7.0)


@given(st.floats(0.0, 10.0), st.floats(0.0, 10.0), st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0, math.inf]),
       st.sampled_from([1.5, 2.0, 3.0, 4.0, math.inf]))
def test_the_roofline_lies_between_the_slower_pipe_and_the_sum_and_falls_with_p(compute, memory, p, q):
    """Law: max(c, m) <= kernel time <= c + m, and a larger p never gives a longer time."""
    low, high = sorted((p, q))
    times = {}
    for value in (low, high):
        shipped = inference.ROOFLINE_P
        inference.ROOFLINE_P = value
        try:
            times[value] = inference._roofline(compute, memory)
        finally:
            inference.ROOFLINE_P = shipped
    slack = 1e-12 * (compute + memory)
    for t in times.values():
        assert max(compute, memory) - slack <= t <= compute + memory + slack
    assert times[high] <= times[low] + slack


@given(st.floats(1.0, 4.0), st.integers(0, 10), st.integers(0, 2))
def test_more_hbm_bandwidth_never_slows_an_mla_moe_decode_step(factor, power, kv_power):
    """Law: DeepSeek (MLA, 256 experts, 8 attention groups) decodes no slower with faster HBM."""
    chip = PARTITION.node.accelerator
    faster = attrs.evolve(PARTITION, node=attrs.evolve(PARTITION.node, accelerator=attrs.evolve(
        chip, hbm_bandwidth=chip.hbm_bandwidth * factor)))
    batch, cached = 2 ** power, 2 ** power * 1024 * 4 ** kv_power
    cfg = ServeConfig(1, batch, "fp8", ep=8)
    slow = replica(MLA, cfg, PARTITION).iteration(batch, cached)
    fast = replica(MLA, cfg, faster).iteration(batch, cached)
    assert fast <= slow * (1 + 1e-12)


@given(st.integers(0, 10), st.floats(1.0, 8.0))
def test_a_longer_cache_never_makes_an_mla_decode_step_faster(power, longer):
    batch = 2 ** power
    r = replica(MLA, ServeConfig(1, batch, "fp8", ep=8), PARTITION)
    assert r.iteration(batch, batch * 2048 * longer) >= r.iteration(batch, batch * 2048) * (1 - 1e-12)


def test_a_tiny_kernel_time_does_not_underflow_to_zero(monkeypatch):
    """Counterexample the roofline law found: (1.2e-124)^3 underflows, and the p-norm was 0."""
    monkeypatch.setattr(inference, "ROOFLINE_P", 3.0)
    assert inference._roofline(0.0, 1.213902754055143e-124) == 1.213902754055143e-124
