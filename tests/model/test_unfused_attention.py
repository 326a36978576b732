"""Unfused attention (Megatron-LM's DotProductAttention: baddbmm, fused scale-mask-softmax,
dropout, bmm) timed kernel by kernel (model/compute.py `unfused_attention_time`): each batched
GEMM takes the slower of its math and the score tensor it streams; the softmax and dropout
kernels between them pay their traffic in full."""

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from gclc.compiler.driver import check_text
from gclc.model import compute
from gclc.model.config import TrainConfig
from gclc.model.ops import ACT_BYTES
from gclc.model.shape import ModelShape
from gclc.model.train.workload import layer_forward
from gclc.testing.profiles import scaled_examples

_DESIGN = check_text('import "std/nvidia"\n', "chips.gcl").design


def _accelerator(name: str):
    from gclc.compiler.lower import accelerator

    return accelerator(_DESIGN[name])


A100 = _accelerator("A100_SXM_80GB")


def _unfused(seq: int, heads: int, head_dim: int, tp: int = 1, microbatch: int = 1):
    shape = ModelShape(layers=24, hidden=heads * head_dim, heads=heads, kv_heads=heads, head_dim=head_dim,
                       ffn=4 * heads * head_dim, vocab=51200, seq=seq, mlp_matrices=2, tied_embeddings=True)
    cfg = TrainConfig(batch=64, seq=seq, tp=tp, dp=1, microbatch=microbatch, stack="megatron")
    return next(o for o in layer_forward(shape, cfg, False) if o.kind == "attention")


def test_the_kernels_add_up_by_hand():
    # GPT-1.7B of SC21 Table 1 on one A100: 24 heads of 96, 2048 tokens, one sequence
    op = _unfused(2048, 24, 96)
    scores = 2048 * 2048 * 24
    assert op.tensor == ACT_BYTES * scores
    assert op.bytes == scores * (6 * ACT_BYTES + 1)      # S; P read, written; P' read, written, mask; P' read
    hbm = compute.hbm_rate(A100)
    half = 2 * 2048 * 2048 * 96 * 24 / compute.gemm_rate(A100, "bf16", 2048, 2048, 96)
    gemm = max(half, ACT_BYTES * scores / hbm)
    chain = scores * (4 * ACT_BYTES + 1) / hbm           # softmax: read S, write P; dropout: read P, write P' and mask
    launch = compute.kernel_overhead(A100)
    forward, backward = compute.unfused_attention_time(op, A100)
    assert forward == pytest.approx(2 * gemm + chain + 4 * launch)
    # four GEMMs of the forward's size; dropout's backward reads dP' and the mask, writes dP;
    # the softmax's reads P and dP, writes dS
    assert backward == pytest.approx(4 * gemm + scores * (5 * ACT_BYTES + 1) / hbm + 8 * launch)
    assert compute.op_time(op, A100, "bf16") == pytest.approx(forward)


def test_the_gemms_hide_their_own_score_traffic_but_not_the_chains():
    op = _unfused(2048, 24, 96)
    hbm = compute.hbm_rate(A100)
    math = op.flops / compute.gemm_rate(A100, "bf16", op.m, op.n, op.k)
    forward, _ = compute.unfused_attention_time(op, A100)
    # cheaper than math and every byte one after the other, dearer than the chain alone
    assert forward < math + op.bytes / hbm + 4 * compute.kernel_overhead(A100)
    assert forward > math + (op.bytes - 2 * op.tensor) / hbm


@settings(max_examples=scaled_examples(60), deadline=None)
@given(seq=st.sampled_from([256, 512, 1024, 2048, 4096]), heads=st.integers(1, 64),
       head_dim=st.sampled_from([64, 80, 96, 128]), faster=st.floats(1.0, 4.0))
def test_laws_of_the_kernel_chain(seq, heads, head_dim, faster):
    op = _unfused(seq, heads, head_dim)
    forward, backward = compute.unfused_attention_time(op, A100)
    # the backward moves more and computes twice as much, and at most twice the forward
    assert forward < backward <= 2 * forward
    # no kernel beats its traffic or its math
    assert forward >= op.bytes / compute.hbm_rate(A100)
    assert forward >= op.flops / compute.gemm_rate(A100, "bf16", op.m, op.n, op.k)
    # faster memory never slows it, and it cannot speed up more than the memory did
    quick = attrs.evolve(A100, hbm_bandwidth=A100.hbm_bandwidth * faster)
    sped = compute.unfused_attention_time(op, quick)[0]
    assert sped <= forward * (1 + 1e-12)
    assert sped >= forward / faster * (1 - 1e-12)
