"""Context parallelism (model/train/context.py) and the attention kernel's rate (model/compute.py)
against hand calculations, and their laws."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model import collectives, comms, compute
from gclc.model.train import context
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.model.train.workload import layer_forward

DATA = Path(__file__).parent.parent.parent / "data"
JOB = train_job(check_file(str(DATA / "train.gcl"), {"nodes": "4"}).design)   # Llama 2 7B, 32 heads of 128
BASE = attrs.evolve(pinned_config(JOB), seq=32768, batch=8, dp=4, cp=8, microbatch=1)


def attention(cfg):
    return next(op for op in layer_forward(JOB.shape, cfg, False) if op.kind == "attention")


def with_tier_bandwidth(partition, factor, level=None):
    tiers = tuple(attrs.evolve(t, bandwidth=t.bandwidth * factor) if level in (None, t.level) else t
                  for t in partition.tiers)
    return attrs.evolve(partition, tiers=tiers)


def test_contiguous_chunks_leave_the_last_rank_two_minus_one_over_cp_of_the_work():
    assert context.causal_imbalance(BASE) == 1.0
    unbalanced = attrs.evolve(BASE, cp_balanced=False)
    assert context.causal_imbalance(unbalanced) == pytest.approx(2 - 1 / 8)
    chip = JOB.partition.node.accelerator
    slower = estimate(JOB.shape, unbalanced, JOB.partition).breakdown.compute
    faster = estimate(JOB.shape, BASE, JOB.partition).breakdown.compute
    # forward and backward (2.5x) of every micro-batch and layer
    attention_time = compute.op_time(attention(BASE), chip, "bf16") * (1 + 2.5) * BASE.microbatches * 32
    assert slower - faster == pytest.approx(attention_time * (1 - 1 / 8))
    assert context.causal_imbalance(attrs.evolve(unbalanced, cp=1)) == 1.0


def test_a_kernel_call_sees_one_ring_step_of_keys():
    assert context.kernel_keys(attrs.evolve(BASE, cp=1)) == 32768
    assert context.kernel_keys(BASE) == context.kernel_keys(attrs.evolve(BASE, cp_balanced=False)) == 32768 // 8
    assert attention(BASE).n == 4096


def test_kv_chunk_is_the_ranks_keys_and_values():
    # 32768 / 8 tokens x 32 KV heads x (128 + 128) x 2 bytes, no TP split
    assert context.kv_chunk_bytes(JOB.shape, BASE) == 4096 * 32 * 256 * 2


def test_ring_exchange_is_exposed_only_where_slower_than_a_chunk_of_attention():
    tiers = JOB.partition.tiers
    # one send of the ring: its bytes at the slowest hop's rate and NCCL's p2p latency
    send = collectives.ring_send(context.kv_chunk_bytes(JOB.shape, BASE), 8, BASE.stride("cp"), tiers)
    assert send > comms.point_to_point(context.kv_chunk_bytes(JOB.shape, BASE), comms.outermost(8, BASE.stride("cp"), tiers))
    fast_attention = send * 8 / 10       # each of the 8 steps computes 0.1 of a send
    expected = 7 * (send - send / 10) + 7 * (2 * send - 2.5 * send / 10)
    assert context.ring_exposed(JOB.shape, BASE, tiers, fast_attention) == pytest.approx(expected)
    slow_attention = send * 8 * 2        # every step computes longer than its backward exchange
    assert context.ring_exposed(JOB.shape, BASE, tiers, slow_attention) == 0.0
    assert context.ring_exposed(JOB.shape, attrs.evolve(BASE, cp=1), tiers, fast_attention) == 0.0


def test_narrow_heads_run_attention_slower():
    # cuDNN on an H100 at 16k keys (FlashAttention-3 paper's figures): head dim 64 forward 413 and
    # backward 433 TFLOP/s against 595 and 516 at 128; a step runs a forward and a 2.5x backward
    by_hand = (1 / 595 + 2.5 / 516) / (1 / 413 + 2.5 / 433)
    assert compute.attention_head_factor(64) == pytest.approx(by_hand, rel=1e-9)
    assert compute.attention_head_factor(128) == compute.attention_head_factor(256) == 1.0
    assert compute.attention_head_factor(64) < compute.attention_head_factor(96) < 1.0


def test_flashattention2_kernels_leave_hopper_s_warp_group_rate():
    """The fsdp stack (llm-foundry, torchtitan) runs FlashAttention-2: on an H100 its attention
    takes 595 / 370 of the cuDNN kernels' time (Shah et al. 2024), on an A100 (no warp-group
    tensor cores) the same; the GEMMs are untouched."""
    h100 = attrs.evolve(JOB.partition.node.accelerator, vendor="NVIDIA")   # the test design's chip names none
    assert compute.warp_group_tensor_cores(h100)
    cfg = attrs.evolve(BASE, cp=1, seq=8192)
    fsdp = attrs.evolve(cfg, stack="fsdp")
    ops = {s: {op.name: op for op in layer_forward(JOB.shape, c, False)} for s, c in (("mc", cfg), ("fsdp", fsdp))}
    # each kernel's launch-and-tail overhead aside, the compute roof binds at this length
    t = {s: compute.op_time(o["attention"], h100, "bf16") - compute.KERNEL_OVERHEAD_S for s, o in ops.items()}
    assert ops["fsdp"]["attention"].portable and not ops["mc"]["attention"].portable
    assert t["fsdp"] / t["mc"] == pytest.approx(595 / 370)
    a100 = attrs.evolve(h100, peak=tuple((k, v) for k, v in h100.peak if k != "fp8"), listed_formats=())
    assert not compute.warp_group_tensor_cores(a100)
    assert compute.op_time(ops["fsdp"]["attention"], a100, "bf16") == compute.op_time(ops["mc"]["attention"], a100, "bf16")


def test_cp_balance_is_stated_in_the_design():
    source = (DATA / "train.gcl").read_text(encoding="utf-8").replace(
        "  precision = bf16\n", "  precision = bf16\n  parallelism { cp = 2  cp_balance = false }\n")
    job = train_job(check_file(str(DATA / "train.gcl"), {"nodes": "4"}, text=source).design)
    assert pinned_config(job).cp == 2 and not pinned_config(job).cp_balanced


cps = st.sampled_from([2, 4, 8, 16])


@given(cps, st.booleans(), st.floats(1.0, 16.0), st.sampled_from([None, 0, 1]))
def test_more_cp_link_bandwidth_never_slows_a_step(cp, balanced, factor, level):
    cfg = attrs.evolve(BASE, cp=cp, dp=32 // cp, cp_balanced=balanced)
    base = estimate(JOB.shape, cfg, JOB.partition)
    faster = estimate(JOB.shape, cfg, with_tier_bandwidth(JOB.partition, factor, level))
    assert faster.step_time <= base.step_time * (1 + 1e-12)
    assert faster.breakdown.cp <= base.breakdown.cp * (1 + 1e-12)


@given(cps)
def test_balanced_chunks_are_never_slower(cp):
    cfg = attrs.evolve(BASE, cp=cp, dp=32 // cp)
    balanced = estimate(JOB.shape, cfg, JOB.partition).step_time
    # equal when the ring is bound by its links (the exchange paces every step): float rounding only
    assert balanced <= estimate(JOB.shape, attrs.evolve(cfg, cp_balanced=False), JOB.partition).step_time * (1 + 1e-12)
