"""MoE, MLA and MTP physics against hand calculations, what GCL lets a user state about
them, and the laws they obey (model/train/moe.py, model/train/mla.py, model/shape.py, model/train/step.py)."""

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file, check_text
from gclc.model import compute
from gclc.model.train import moe
from gclc.model.expert_load import copies_on_rank, expected_max_normal
from gclc.model.config import TrainConfig
from gclc.model.job import pinned_config, train_job
from gclc.model.train.memory import activation_bytes_per_layer, activation_parts, expert_params_per_gpu, model_state
from gclc.model.ops import gemm
from gclc.model.train.sharding import expert_dp
from gclc.model.train.step import estimate
from gclc.model.train.workload import backward_factor

DATA = Path(__file__).parent.parent.parent / "data"
MOE = DATA / "moe.gcl"
SOURCE = MOE.read_text(encoding="utf-8")
JOB = train_job(check_file(str(MOE), {"nodes": "4"}).design)
CFG = pinned_config(JOB)          # tp1 pp1 cp2 ep16 dp16 mb1, bf16
SHAPE = JOB.shape


def checked(text: str):
    return check_file(str(MOE), {"nodes": "4"}, text=text)


def with_scaleout_bandwidth(partition, factor):
    outer = partition.tiers[-1].level
    tiers = tuple(attrs.evolve(t, bandwidth=t.bandwidth * factor)
                  if t.level == outer else t for t in partition.tiers)
    return attrs.evolve(partition, tiers=tiers)


# ------------------------------------------------------------------ routing by hand


def test_tokens_per_expert_dropless_is_the_expected_maximum_of_the_ranks_loads():
    # each GPU routes 4096 / cp 2 = 2048 tokens to 8 experts: 16384 copies; a rank holds 16 of the
    # 256 experts, so each of the group's 16 x 2048 tokens lands a hypergeometric count on it
    # (variance 8 x 1/16 x 15/16 x 248/255); the busiest of 16 ranks sits E[max of 16 normals]
    # = 1.766 standard deviations above the mean (Harter 1961 tables: 1.76599)
    lam = 2048 * 8
    variance = 16 * 2048 * 8 * (1 / 16) * (15 / 16) * 248 / 255
    assert expected_max_normal(16) == pytest.approx(1.76599, abs=1e-4)
    assert moe.routed_rows(SHAPE, CFG) == pytest.approx(lam + 1.76599 * math.sqrt(variance), rel=1e-6)
    # 256 / 16 = 16 local experts, half a 128-row tile of padding each on average
    assert moe.padded_rows_per_expert(SHAPE, CFG) == pytest.approx(moe.routed_rows(SHAPE, CFG) / 16 + 63.5)


@pytest.mark.parametrize("n, expected", [(2, 1 / math.sqrt(math.pi)), (8, 1.42360), (64, 2.34373)])
def test_the_expected_maximum_of_normals_matches_the_tables(n, expected):
    # E[max of 2] = 1/sqrt(pi) exactly; 8 and 64 from Harter (1961) / Teichroew (1956) tables
    assert expected_max_normal(n) == pytest.approx(expected, abs=2e-4)
    assert expected_max_normal(1) == 0.0


def test_group_limited_routing_reaches_fewer_gpus_by_hand():
    # DeepSeek-V3's routing (8 groups, 4 picked) on EP 8: each GPU holds one group of 32 experts,
    # picked with probability 4/8; then the token's 8 experts come from the 128 of its 4 groups,
    # none on this GPU with probability C(96, 8) / C(128, 8): 3.63 GPUs reached, not 5.29
    grouped = attrs.evolve(SHAPE, expert_groups=8, group_top_k=4)
    flex = attrs.evolve(CFG, ep=8, dispatcher="hybridep")
    reach = 0.5 * (1 - math.comb(96, 8) / math.comb(128, 8))
    assert copies_on_rank(grouped, flex.ep)[0] == pytest.approx(reach)
    assert moe.sent_share(grouped, flex) == pytest.approx(8 * reach / 8)
    unlimited = 1 - math.comb(224, 8) / math.comb(256, 8)
    assert moe.sent_share(SHAPE, flex) == pytest.approx(8 * unlimited / 8)
    # the copies on a picked GPU are hypergeometric (8 of 128, 32 there): E[X^2] = 1/2 (var + 4)
    var = 8 * 0.25 * 0.75 * 120 / 127
    assert copies_on_rank(grouped, flex.ep)[1] == pytest.approx(0.5 * (var + 4) - 1)


def test_the_groups_reach_the_shape_and_the_megatron_export():
    text = SOURCE.replace("dense_layers = 1 }", "dense_layers = 1  groups = 8  group_top_k = 4 }")
    shape = train_job(checked(text).design).shape
    assert (shape.expert_groups, shape.group_top_k) == (8, 4)
    assert (SHAPE.expert_groups, SHAPE.group_top_k) == (1, 1)


@pytest.mark.parametrize("fields, message", [("groups = 7", "7 groups do not divide 256"),
                                             ("groups = 8  group_top_k = 9", "exceeds groups"),
                                             ("groups = 16  group_top_k = 12", "exceeds top_k = 8"),
                                             ("groups = 64  group_top_k = 1", "cannot hold top_k = 8"),
                                             ("group_top_k = 2", "without `groups`")])
def test_impossible_groups_are_errors_where_they_are_stated(fields, message):
    text = SOURCE.replace("dense_layers = 1 }", f"dense_layers = 1  {fields} }}")
    errors = [d for d in checked(text).diagnostics if d.is_error]
    assert errors and message in errors[0].summary
    assert errors[0].subject.line == next(i for i, line in enumerate(text.splitlines(), 1) if "group" in line)


@pytest.mark.parametrize("factor, rows", [(1.0, 1024), (1.25, 1280), (1.3, 1408)])
def test_capacity_factor_pads_every_expert_to_its_capacity_in_whole_tiles(factor, rows):
    shape = attrs.evolve(SHAPE, capacity_factor=factor)
    assert moe.routed_rows(shape, CFG) == pytest.approx(16384 * factor)
    # 16384 x factor / 16 experts, rounded up to 128 rows: 1024, 1280, 1331.2 -> 1408
    assert moe.padded_rows_per_expert(shape, CFG) == rows


def test_router_and_permutation_traffic():
    ops = {op.name: op for op in moe.layer_ops(SHAPE, CFG)}
    router = ops["router"]
    assert (router.m, router.n, router.k) == (2048, 256, 7168)
    # permute and un-permute each read and write every routed copy of the hidden state once
    assert ops["permute"].bytes == ops["un-permute"].bytes == 16384 * 7168 * 2 * 2
    # fp32 logits over 256 experts, read and written three times (scores, top-k, map)
    assert ops["top-k"].bytes == 2048 * 256 * 4 * 3
    up = ops["experts up"]
    assert up.grouped and up.count == 16 and (up.n, up.k) == (2 * 2048, 7168)


def test_a_clamped_activation_and_biased_experts_add_their_eager_passes():
    text = SOURCE.replace("dense_layers = 1 }", "dense_layers = 1  bias = true  clamp = 7 }")
    shape = train_job(checked(text).design).shape
    assert shape.expert_bias and shape.expert_clamp == 7.0
    ops = {op.name: op for op in moe.layer_ops(shape, CFG)}
    rows = moe.routed_rows(shape, CFG)
    # clamp: two clamps and a cat over the 2 x 2048 gate/up values: 8 x ffn bf16 values; 10 backward
    assert ops["activation clamp"].bytes == pytest.approx(rows * 2048 * 2 * 8)
    assert backward_factor(ops["activation clamp"]) == pytest.approx(10 / 8)
    # the second projection's bias: b * p, the add, the cat: 6 x hidden values, as many backward
    assert ops["expert bias"].bytes == pytest.approx(rows * 7168 * 2 * 6)
    assert backward_factor(ops["expert bias"]) == 1.0
    assert not {"activation clamp", "expert bias"} & {op.name for op in moe.layer_ops(SHAPE, CFG)}
    slower = estimate(shape, CFG, JOB.partition)
    base = estimate(SHAPE, CFG, JOB.partition)
    assert slower.step_time > base.step_time and slower.breakdown.compute > base.breakdown.compute


@pytest.mark.parametrize("stack, priced", [("megatron_core", True), ("nemo", True), ("fsdp", True),
                                            ("fsdp_compiled", False), ("maxtext", False)])
def test_the_eager_expert_passes_are_priced_where_the_stack_runs_them_eager(stack, priced):
    # Megatron-Core's TEGroupedMLP and an eager stack run the clamp and the bias add as passes of
    # their own; a stack that fuses elementwise work folds them into the kernels beside them
    clamped = attrs.evolve(SHAPE, expert_clamp=7.0, expert_bias=True)
    names = {op.name for op in moe.layer_ops(clamped, attrs.evolve(CFG, stack=stack))}
    eager = {"activation clamp", "expert bias"}
    assert (eager <= names if priced else not eager & names)


def test_recomputing_the_expert_activation_reruns_its_clamp():
    clamped = attrs.evolve(SHAPE, expert_clamp=7.0)
    cfg = attrs.evolve(CFG, recompute="selective", recompute_modules=("moe_act",))
    extra = lambda shape: estimate(shape, cfg, JOB.partition).breakdown.recompute  # noqa: E731
    assert extra(clamped) > extra(SHAPE)


@pytest.mark.parametrize("stack, kept", [("megatron_core", True), ("fsdp", True), ("fsdp_compiled", False)])
def test_the_eager_clamp_keeps_a_second_copy_of_the_up_outputs_for_backward(stack, kept):
    # Megatron-Core's weighted_bias_quick_geglu_impl: the clamps save their inputs (views keeping the
    # first projection's output) and the fused activation saves the clamped cat: 2 x ffn bf16 values more
    # a routed copy than unclamped; a fusing stack keeps none of it; the bias keeps nothing of its width
    cfg = attrs.evolve(CFG, stack=stack)
    plain = activation_parts(SHAPE, cfg, moe=True)
    parts = activation_parts(attrs.evolve(SHAPE, expert_clamp=7.0, expert_bias=True), cfg, moe=True)
    extra = 2 * 2 * SHAPE.expert_ffn * SHAPE.top_k / cfg.tp
    assert parts == ({**plain, "expert clamp": extra} if kept else plain)
    assert activation_parts(attrs.evolve(SHAPE, expert_clamp=7.0), cfg) == activation_parts(SHAPE, cfg)   # dense layers


@pytest.mark.parametrize("modules, dropped", [(("moe_act",), True), (("mlp",), True), (("core_attention",), False)])
def test_recomputing_the_expert_activation_drops_what_its_clamp_keeps(modules, dropped):
    # experts.py checkpoints bias_act_func (CheckpointWithoutOutput), the clamps inside it
    clamped = attrs.evolve(SHAPE, expert_clamp=7.0)
    cfg = attrs.evolve(CFG, recompute="selective", recompute_modules=modules)
    more = activation_bytes_per_layer(clamped, cfg, moe=True) - activation_bytes_per_layer(SHAPE, cfg, moe=True)
    clamp = activation_parts(clamped, cfg, moe=True)["expert clamp"] * cfg.microbatch * cfg.seq / cfg.cp
    assert more == pytest.approx(0.0 if dropped else clamp, abs=1e-6)
    full = attrs.evolve(cfg, recompute="full")
    assert activation_bytes_per_layer(clamped, full, moe=True) == activation_bytes_per_layer(SHAPE, full, moe=True)


@pytest.mark.parametrize("clamp", ["0", "-7"])
def test_a_non_positive_clamp_is_rejected_where_it_is_stated(clamp):
    text = SOURCE.replace("dense_layers = 1 }", f"dense_layers = 1  clamp = {clamp} }}")
    result = checked(text)
    errors = [d for d in result.diagnostics if d.is_error]
    assert errors and errors[0].subject.line == next(i for i, line in enumerate(text.splitlines(), 1) if "clamp" in line)


def test_host_time_is_the_layers_framework_ops_times_one_eager_op():
    # 256 routed experts over ep 16: 16 local, two cuBLAS GEMMs each (TE GroupedLinear), 50
    # routing ops, and the backward two ops per forward op: (50 + 32) x 3 = 246 ops
    assert moe.host_ops(SHAPE, CFG) == (50 + 2 * 16) * 3
    assert moe.host_exposed(SHAPE, CFG) == pytest.approx(246 * moe.EAGER_OP_S)
    # fewer local experts (wider EP) issue fewer GEMMs from the host: never more time
    times = [moe.host_exposed(SHAPE, attrs.evolve(CFG, ep=ep)) for ep in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    assert times == sorted(times, reverse=True) and times[0] > times[-1]
    # and it is part of the step's EP term, paid whatever the links
    e = estimate(SHAPE, CFG, JOB.partition)
    assert e.breakdown.ep >= CFG.microbatches * (SHAPE.moe_layers + SHAPE.mtp) * moe.host_exposed(SHAPE, CFG) * (1 - 1e-12)


def test_the_overlap_schedule_adds_its_nodes_host_work():
    # the 1F1B all-to-all overlap issues five schedule nodes per MoE layer, 26 framework-op
    # equivalents each (forward and backward), on top of the layer's own 246
    on = attrs.evolve(CFG, ep_overlap=True)
    assert moe.host_ops(SHAPE, on) - moe.host_ops(SHAPE, CFG) == 5 * 26
    assert moe.host_exposed(SHAPE, on) - moe.host_exposed(SHAPE, CFG) == pytest.approx(130 * moe.EAGER_OP_S)
    # whatever the tokens: it is per node, not per token
    assert moe.overlap_ops(attrs.evolve(on, microbatch=4)) == moe.overlap_ops(on)
    # one expert rank has no all-to-all to overlap, and no schedule nodes either
    single = attrs.evolve(CFG, ep=1)
    assert moe.host_ops(SHAPE, attrs.evolve(single, ep_overlap=True)) == moe.host_ops(SHAPE, single)
    # and the step pays it with every micro-batch's MoE layers
    assert estimate(SHAPE, on, JOB.partition).breakdown.ep >= (
        CFG.microbatches * (SHAPE.moe_layers + SHAPE.mtp) * moe.host_exposed(SHAPE, on) * (1 - 1e-12))


# Qwen3-235B-A22B on 8 DGX B200 as Megatron-Bridge 25.11's recipe ran it (v0.2.0
# workload_base_configs.py QWEN3_235B_A22B_B200_*_BASE_CONFIG: pp 8, ep 8, global batch 1024,
# moe_a2a_overlap), its all-to-all inside each node's NVLink. Megatron-Bridge then turned the
# overlap off "due to CPU overhead" (PR #1760): step 17.2 -> 16.0 s in BF16, 20.1 -> 16.9 s in
# MXFP8 (VP 2 -> 1 as well).
QWEN3_235B_B200 = """import "std/nvidia"
model Qwen3_235B {
  arch = moe  layers = 94  hidden = 4096  heads = 64  kv_heads = 4  head_dim = 128  ffn = 1536
  vocab = 151936  seq = 4096  mlp = swiglu
  experts { routed = 128  shared = 0  top_k = 8  ffn = 1536 }
}
cluster Pod {
  units    = 8 x DGX_B200
  scaleout = NDR_FatTree
}
train job {
  model = Qwen3_235B  on = Pod  batch = 1024  precision = PRECISION  software = nemo
  parallelism { tp = 1 pp = 8 dp = 8 ep = 8 vp = VP microbatch = 1 zero = 1 recompute = none
                dispatcher = alltoall ep_overlap = OVERLAP }
}
"""


@pytest.mark.parametrize("precision, vp", [("bf16", 4), ("fp8", 2)])
def test_the_overlap_does_not_pay_where_megatron_bridge_turned_it_off(precision, vp):
    def step(overlap: str) -> float:
        text = QWEN3_235B_B200.replace("PRECISION", precision).replace("VP", str(vp)).replace("OVERLAP", overlap)
        result = check_text(text, "qwen3_235b_b200.gcl")
        assert result.ok, [str(d) for d in result.diagnostics]
        job = train_job(result.design)
        return estimate(job.shape, pinned_config(job), job.partition).step_time

    # measured, the step without the overlap is 7 % (BF16) and 16 % (MXFP8) shorter; the model
    # credits it no gain (it hides little all-to-all over NVLink and costs its nodes' host work)
    assert step("false") <= step("true")


def _qwen3_step(precision: str, vp: int, overlap: str) -> float:
    text = QWEN3_235B_B200.replace("PRECISION", precision).replace("VP", str(vp)).replace("OVERLAP", overlap)
    result = check_text(text, "qwen3_235b_b200.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    job = train_job(result.design)
    return estimate(job.shape, pinned_config(job), job.partition).step_time


def test_overlap_node_ops_pins_its_estimate_on_the_bf16_pair_it_was_backed_out_of():
    # A PIN, not a validation: model/train/moe.py OVERLAP_NODE_OPS (ESTIMATE) was backed out of
    # this pair (PR #1760, commit a6e92de5: BF16 keeps VP 4, the overlap alone, 17.2 - 16.0 =
    # 1.2 s a step); this fails when a change moves the estimate's own figure
    assert _qwen3_step("bf16", 4, "true") - _qwen3_step("bf16", 4, "false") == pytest.approx(1.2, abs=0.25)


def test_the_mxfp8_pair_left_out_of_the_estimate_is_signed_right():
    # The validation, held out of OVERLAP_NODE_OPS's fit: PR #1760's MXFP8 pair, overlap on at
    # VP 2 against off at VP 1, 20.1 -> 16.9 s. The model has the sign (off and VP 1 faster)
    on, off = _qwen3_step("mxfp8", 2, "true"), _qwen3_step("mxfp8", 1, "false")
    assert off < on


@pytest.mark.xfail(strict=True, reason="the model saves 1.2 s of the MXFP8 pair's measured 3.2 s (model/train/moe.py)")
def test_the_mxfp8_pair_left_out_of_the_estimate_is_reproduced():
    # Known disagreement: 19.9 -> 18.7 s modelled against 20.1 -> 16.9 s measured; strict, so the
    # marker must go when a change closes the gap
    saved = _qwen3_step("mxfp8", 2, "true") - _qwen3_step("mxfp8", 1, "false")
    assert saved == pytest.approx(20.1 - 16.9, abs=0.5)


def test_a_grouped_gemm_fills_the_gpu_as_one_gemm_of_all_its_rows():
    chip = JOB.partition.node.accelerator
    grouped = gemm("g", 512, 4096, 7168, 16, grouped=True)
    separate = gemm("g", 512, 4096, 7168, 16)
    rate = compute.gemm_rate(chip, "bf16", 512 * 16, 4096, 7168)
    assert compute.op_time(grouped, chip, "bf16") >= grouped.flops / rate
    assert compute.op_time(grouped, chip, "bf16") < compute.op_time(separate, chip, "bf16")


def test_few_tokens_per_expert_leave_the_grouped_gemm_reading_weights():
    chip = JOB.partition.node.accelerator
    weights = 16 * 4096 * 7168 * 2 / compute.hbm_rate(chip)   # each expert's weights read once

    def per_row(rows: int) -> float:
        return compute.op_time(gemm("g", rows, 4096, 7168, 16, grouped=True), chip, "bf16") / rows

    assert compute.op_time(gemm("g", 16, 4096, 7168, 16, grouped=True), chip, "bf16") >= weights
    assert per_row(16) > 4 * per_row(2048)   # the curve: cost per token rises as tokens per expert shrink
    assert per_row(16) >= per_row(64) >= per_row(256) >= per_row(2048)


def test_experts_are_replicated_over_the_ranks_of_a_slice_per_ep_width():
    # tp1 x cp2 x dp16 = 32 ranks over ep 16: every expert lives on 2 GPUs
    assert expert_dp(CFG) == 2
    layers = 7 + 1   # 7 MoE layers (one dense) and the MTP module's layer
    assert expert_params_per_gpu(SHAPE, CFG) == layers * 256 * 3 * 7168 * 2048 / 16
    # ZeRO-1 shards an expert's optimizer state over its 2 replicas, the rest over dp x cp
    _, _, optimizer = model_state(SHAPE, CFG)
    dense = model_state(SHAPE, attrs.evolve(CFG, zero=0))[2] - expert_params_per_gpu(SHAPE, CFG) * 12
    assert optimizer == pytest.approx(dense / 32 + expert_params_per_gpu(SHAPE, CFG) * 12 / 2)


# ------------------------------------------------------------------ MLA and MTP by hand


def test_mla_parameters_of_deepseek_v3():
    shape = attrs.evolve(SHAPE, layers=61, dense_layers=3, mtp=0)
    # q 1536 x (7168 + 128 x 192), kv down 7168 x 576, kv up 512 x 128 x 256, out 128 x 128 x 7168
    assert shape.attention_params == 48_758_784 + 4_128_768 + 16_777_216 + 117_440_512
    # the report's 671 B total and 37 B activated (Sec 1)
    assert shape.params == pytest.approx(671e9, rel=0.005)
    assert shape.active_params == pytest.approx(37e9, rel=0.03)


def test_mla_attention_core_uses_192_wide_queries_and_keys_and_128_wide_values():
    dense = SHAPE.layer_flops_per_token(False, 4096)
    assert dense == 2 * (SHAPE.attention_params + SHAPE.dense_mlp_params) + 2 * 4096 * 128 * (192 + 128)


def test_mtp_adds_a_projection_a_layer_and_the_output_head():
    without = attrs.evolve(SHAPE, mtp=0)
    extra = SHAPE.forward_flops_per_token(4096) - without.forward_flops_per_token(4096)
    assert extra == 2 * 2 * 7168 * 7168 + SHAPE.layer_flops_per_token(True, 4096) + 2 * 7168 * 129280
    assert estimate(SHAPE, CFG, JOB.partition).step_time > estimate(without, CFG, JOB.partition).step_time


# ------------------------------------------------------------------ what GCL accepts


def test_capacity_factor_and_mla_query_rank_reach_the_model():
    text = SOURCE.replace("dense_layers = 1 }", "dense_layers = 1  capacity_factor = 1.25 }")
    job = train_job(checked(text).design)
    assert job.shape.capacity_factor == 1.25 and job.shape.q_rank == 1536 and job.shape.mtp == 1


def test_kv_heads_beside_mla_is_an_error_with_its_location():
    text = SOURCE.replace("  head_dim = 128\n", "  head_dim = 128\n  kv_heads = 8\n")
    result = checked(text)
    errors = [d for d in result.diagnostics if d.is_error]
    assert errors and "kv_heads" in errors[0].summary and "mla" in errors[0].summary
    assert errors[0].subject.line == text.splitlines().index("  kv_heads = 8") + 1


def test_a_non_positive_capacity_factor_is_rejected():
    text = SOURCE.replace("dense_layers = 1 }", "dense_layers = 1  capacity_factor = 0 }")
    assert not checked(text).ok


def test_ep_overlap_pin_overrides_the_stack():
    text = SOURCE.replace("    microbatch = 1\n", "    microbatch = 1\n    ep_overlap = true\n")
    cfg = pinned_config(train_job(checked(text).design))
    assert cfg.overlaps_ep and not CFG.overlaps_ep
    assert estimate(SHAPE, cfg, JOB.partition).breakdown.ep < estimate(SHAPE, CFG, JOB.partition).breakdown.ep


@pytest.mark.parametrize("pp, vp, batch, alone", [
    (1, 1, 64, 1 / 4),               # dp 16, mb 1: 4 micro-batches; the first forward and the last backward alone
    (1, 1, 16, 1.0),                 # one micro-batch: nothing to pair it with
    (8, 4, 8192, (3 * 8 + 1) / (512 * 4)),   # the last stage's (vp - 1) x pp warm-up forwards and the overlap's one more
    (8, 1, 8192, 1 / 512),
])
def test_the_overlap_leaves_the_warm_up_and_cool_down_passes_bare_by_hand(pp, vp, batch, alone):
    cfg = attrs.evolve(CFG, pp=pp, vp=vp, batch=batch, ep_overlap=True)
    assert moe.unpaired_share(cfg) == pytest.approx(alone)
    assert moe.unpaired_share(attrs.evolve(cfg, ep_overlap=False)) == 0.0
    assert moe.unpaired_share(attrs.evolve(cfg, ep=1)) == 0.0


def _paired_bubble(cfg) -> tuple[float, float, float]:
    """(the step's bubble, the bubble at the paired passes' time, one micro-batch's bare exchange over
    the stage's MoE layers and its MTP share): by hand from the breakdown and the MoE layer's `ep_alone`.
    Per micro-batch the last stage runs (compute + recompute + TP + CP + EP + PP) / m, of which the
    unpaired passes' bare exchange (`unpaired_share` of m x bare) is not a paired pass's."""
    from gclc.model.ranks import rank_partition
    from gclc.model.train.layer_cost import blend
    from gclc.model.train.step import output_layer_time

    e = estimate(SHAPE, cfg, JOB.partition)
    b, m = e.breakdown, cfg.microbatches
    bare = (SHAPE.moe_layers + SHAPE.mtp) / cfg.pp * blend(SHAPE, cfg, rank_partition(JOB.partition, cfg.gpus), True).ep_alone
    stage = (b.compute + b.recompute + b.tp + b.cp + b.ep + b.pp) / m - moe.unpaired_share(cfg) * bare
    return b.bubble, (cfg.pp - 1) / cfg.virtual_stages * (stage - output_layer_time(SHAPE, cfg, JOB.partition)), bare


@pytest.mark.parametrize("vp", [1, 2])
def test_the_bubble_under_the_overlap_runs_its_fill_and_drain_passes_bare_by_hand(vp):
    # The fill and drain through the other stages are warm-up forwards and cool-down backwards, which
    # Megatron-Core's combined 1F1B runs alone (core_r0.15.0 schedules.py: forward_backward_helper_wrapper
    # with only f_virtual_microbatch_id in the warm-up, only b_virtual_microbatch_id in the cool-down):
    # the bubble is (pp - 1) / vp of a stage whose MoE layers pay their exchange bare
    cfg = attrs.evolve(CFG, pp=2, vp=vp, dp=8, batch=64, ep_overlap=True)
    bubble, paired, bare = _paired_bubble(cfg)
    assert bare > 0 and bubble == pytest.approx(paired + (2 - 1) / vp * bare, rel=1e-12)
    plain = attrs.evolve(cfg, ep_overlap=False)     # no overlap: nothing left bare, the bubble as before
    assert _paired_bubble(plain)[2] == 0 and _paired_bubble(plain)[0] == pytest.approx(_paired_bubble(plain)[1], rel=1e-12)


def test_one_micro_batch_overlaps_nothing():
    # alone, the micro-batch's forward and backward have no other micro-batch to hide their
    # all-to-alls behind: the overlapped step pays the whole exchange, and the nodes' host work
    on = attrs.evolve(CFG, batch=16, ep_overlap=True)        # dp 16, mb 1: one micro-batch
    assert on.microbatches == 1
    bare = estimate(SHAPE, attrs.evolve(on, ep_overlap=False), JOB.partition).breakdown.ep
    layers = SHAPE.moe_layers + SHAPE.mtp
    host = layers * (moe.host_exposed(SHAPE, on) - moe.host_exposed(SHAPE, CFG))
    assert estimate(SHAPE, on, JOB.partition).breakdown.ep == pytest.approx(bare + host, rel=1e-9)


# ------------------------------------------------------------------ laws

factors = st.floats(1.0, 8.0)
configs = st.builds(lambda ep, mb, cp, overlap: attrs.evolve(CFG, ep=ep, microbatch=mb, cp=cp, dp=32 // cp,
                                                                      ep_overlap=overlap),
                    st.sampled_from([8, 16, 32]), st.sampled_from([1, 2]), st.sampled_from([1, 2]), st.booleans())


@given(configs, factors)
def test_more_all_to_all_bandwidth_never_slows_a_step(cfg, factor):
    base = estimate(SHAPE, cfg, JOB.partition)
    faster = estimate(SHAPE, cfg, with_scaleout_bandwidth(JOB.partition, factor))
    assert faster.step_time <= base.step_time * (1 + 1e-12)
    assert faster.breakdown.ep <= base.breakdown.ep * (1 + 1e-12)


@given(configs, st.floats(0.5, 4.0), st.floats(0.0, 2.0))
def test_a_higher_capacity_factor_never_computes_fewer_rows_nor_runs_faster(cfg, low, more):
    lower, higher = attrs.evolve(SHAPE, capacity_factor=low), attrs.evolve(SHAPE, capacity_factor=low + more)
    assert moe.padded_rows_per_expert(higher, cfg) >= moe.padded_rows_per_expert(lower, cfg)
    flops = lambda shape: sum(op.flops for op in moe.layer_ops(shape, cfg))  # noqa: E731
    assert flops(higher) >= flops(lower)
    assert estimate(higher, cfg, JOB.partition).step_time >= estimate(lower, cfg, JOB.partition).step_time * (1 - 1e-12)


group_limits = st.sampled_from([(g, t) for g in (1, 2, 4, 8, 16) for t in range(1, g + 1)])


@given(group_limits, st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256]), st.sampled_from([1, 2, 4, 8]))
def test_limiting_the_groups_never_spreads_a_token_wider_nor_evens_the_load(limit, ep, top_k):
    groups, picked = limit
    shape = attrs.evolve(SHAPE, top_k=top_k)
    grouped = attrs.evolve(shape, expert_groups=groups, group_top_k=picked)
    cfg = attrs.evolve(CFG, ep=ep, dispatcher="deepep")
    reach, variance = copies_on_rank(grouped, cfg.ep)
    free_reach, free_variance = copies_on_rank(shape, cfg.ep)
    assert reach <= free_reach + 1e-12 and variance >= free_variance - 1e-9
    assert moe.sent_share(grouped, cfg) <= moe.sent_share(shape, cfg) + 1e-12
    assert moe.load_factor(grouped, cfg) >= moe.load_factor(shape, cfg) - 1e-12
    # picking every group is no limit at all
    every = attrs.evolve(shape, expert_groups=groups, group_top_k=groups)
    assert copies_on_rank(every, cfg.ep) == pytest.approx(copies_on_rank(shape, cfg.ep))


@given(configs, group_limits)
def test_more_load_imbalance_never_speeds_a_step(cfg, limit):
    # with the alltoall dispatcher every routed copy crosses whatever the groups, so limiting them
    # only concentrates the copies on fewer ranks: a busier busiest rank, never a shorter step
    groups, picked = limit
    grouped = attrs.evolve(SHAPE, expert_groups=groups, group_top_k=picked)
    assert moe.load_factor(grouped, cfg) >= moe.load_factor(SHAPE, cfg) - 1e-12
    assert estimate(grouped, cfg, JOB.partition).step_time >= estimate(SHAPE, cfg, JOB.partition).step_time * (1 - 1e-12)


@given(configs, st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.integers(1, 64), st.integers(1, 8))
def test_a_longer_steady_state_never_hides_less_all_to_all(cfg, pp, vp, batches, more):
    # the overlap pairs one micro-batch's forward with another's backward; more micro-batches
    # per step leave the same warm-up and cool-down passes bare among more paired ones, so
    # the share left bare, and the exposed EP work per micro-batch, never grow
    few = attrs.evolve(cfg, pp=pp, vp=vp, dp=cfg.dp // pp if cfg.dp % pp == 0 else cfg.dp,
                       batch=cfg.dp * cfg.microbatch * batches)
    many = attrs.evolve(few, batch=few.batch * (1 + more))
    assert 0.0 <= moe.unpaired_share(many) <= moe.unpaired_share(few) <= 1.0
    per_micro_batch = lambda c: estimate(SHAPE, c, JOB.partition).breakdown.ep / c.microbatches  # noqa: E731
    assert per_micro_batch(many) <= per_micro_batch(few) * (1 + 1e-12)
    # and an overlapped pass never pays more than the bare exchange beside the nodes' host work
    if few.overlaps_ep:
        bare = attrs.evolve(few, ep_overlap=False)
        host = few.microbatches * (SHAPE.moe_layers + SHAPE.mtp) / few.pp * (
            moe.host_exposed(SHAPE, few) - moe.host_exposed(SHAPE, bare))
        assert estimate(SHAPE, few, JOB.partition).breakdown.ep <= (
            estimate(SHAPE, bare, JOB.partition).breakdown.ep + host) * (1 + 1e-12)


@given(configs, st.sampled_from([2, 4]), st.sampled_from([1, 2, 4]), st.integers(1, 16))
def test_the_bubble_under_the_overlap_is_never_shorter_than_at_the_paired_passes_time(cfg, pp, vp, batches):
    """Law: the fill and drain passes hide nothing, so the bubble under the overlap is never shorter than the
    same step's bubble with their exchange hidden as a paired pass hides it (the model's own estimate with the
    bare charge taken away), nor than the same bubble without the overlap (a bare pass is the whole exchange
    beside the overlap schedule's host work); equal to the first where there is nothing to overlap."""
    from unittest import mock

    if SHAPE.layers % (pp * vp) or cfg.dp % pp:
        return
    piped = attrs.evolve(cfg, pp=pp, vp=vp, dp=cfg.dp // pp, batch=cfg.dp // pp * cfg.microbatch * batches)
    bubble = estimate(SHAPE, piped, JOB.partition).breakdown.bubble
    with mock.patch("gclc.model.train.step._bare", return_value=0.0):
        hidden = estimate(SHAPE, piped, JOB.partition).breakdown.bubble
    assert bubble >= hidden * (1 - 1e-12)
    if not piped.overlaps_ep:
        assert bubble == pytest.approx(hidden, rel=1e-12)
    plain = estimate(SHAPE, attrs.evolve(piped, ep_overlap=False), JOB.partition).breakdown.bubble
    assert bubble >= plain * (1 - 1e-12)


def test_train_config_defaults_route_dropless_without_overlap():
    cfg = TrainConfig(batch=8, seq=4096)
    assert cfg.cp_balanced and cfg.ep_overlap is None and not cfg.overlaps_ep
