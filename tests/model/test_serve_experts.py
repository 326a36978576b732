"""Routed experts in the serving model: each expert's GEMM has only the rows routed to it
(tokens x top_k / experts), so the same active work spread over more experts runs at a
lower GEMM rate (the grouped-GEMM shape effect), and never faster."""

from pathlib import Path

import attrs
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.compute import gemm_rate
from gclc.model.inference import ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve import serve_entity
from gclc.testing import load_profile

load_profile()

ROOT = Path(__file__).resolve().parents[2]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
_, PARTITION = placement(ENTITY)
MOE = ModelShape.from_entity(ENTITY.get("model"))   # 256 routed experts, 8 active, width 2048


def test_expert_gemms_run_at_the_rate_of_their_rows():
    """By hand: the stage's compute is the dense GEMMs at the rate of `tokens / ep` rows plus
    the expert GEMMs at the rate of `tokens x 8 / 256` rows, plus attention (none: no cache)."""
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION)
    chip, tokens = PARTITION.node.accelerator, 4096
    expert = r.expert_flops_per_token
    assert expert == 2 * 8 * MOE.expert_params * MOE.moe_layers / 8
    dense_time = (r.gemm_flops_per_token - expert) * tokens / gemm_rate(chip, "fp8", tokens // 8, 7168, 7168)
    expert_time = expert * tokens / gemm_rate(chip, "fp8", tokens * 8 // 256, 2048, 7168)
    _, work = r.stage_time(tokens, 0, 0)
    assert abs(work - (dense_time + expert_time)) <= 1e-12 * work


@settings(max_examples=8, deadline=None)
@given(st.integers(64, 16384), st.sampled_from([2, 4]))
def test_more_experts_at_the_same_active_work_never_compute_faster(tokens, factor):
    few = attrs.evolve(MOE, routed=MOE.routed // factor)
    many = MOE
    cfg = ServeConfig(1, 1, "fp8", ep=8)
    work_few = replica(few, cfg, PARTITION).stage_time(tokens, 0, 0)[1]
    work_many = replica(many, cfg, PARTITION).stage_time(tokens, 0, 0)[1]
    assert work_many >= work_few
