"""Routed experts in the serving model: each expert's GEMM has only the rows routed to it
(tokens x top_k / experts), so the same active work spread over more experts runs at a
lower GEMM rate (the grouped-GEMM shape effect), and never faster."""

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import example, given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.compiler.formats import dispatch_bytes
from gclc.model import collectives, comms
from gclc.model.serve import moe as inference_moe, ranks
from gclc.model.compute import gemm_rate
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.testing import load_profile
from gclc.model.expert_load import expected_max_normal, experts_touched, node_share
from gclc.testing.profiles import scaled_examples

load_profile()

ROOT = Path(__file__).resolve().parents[3]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
_, PARTITION = placement(ENTITY)
MOE = ModelShape.from_entity(ENTITY.get("model"))   # 256 routed experts in 8 groups, 8 active within 4, width 2048


def test_expert_gemms_run_at_the_rate_of_their_rows():
    """By hand: the stage's compute is the dense GEMMs at the rate of `tokens / ep` rows plus
    the expert GEMMs, plus attention (none: no cache). 4,096 tokens x 8 of 256 experts touch
    every expert (1 - (31/32)^4096 = 1 to 1e-56) with 128 rows each, padded to 128 + 64 / 2 = 160
    rows (a tile of 64, half a tile wasted on average), and the busiest of 8 GPUs routes E[max of 8
    normals] deviations of the ranks' hypergeometric loads more than the mean's 4,096 rows
    (model/expert_load.py), at the grouped-GEMM share of the dense rate at 160 rows."""
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION)
    chip, tokens = PARTITION.node.accelerator, 4096
    expert = r.expert_flops_per_token
    assert expert == 2 * 8 * MOE.expert_params * MOE.moe_layers / 8
    assert inference_moe.TILE_ROWS == 64
    dense_time = (r.gemm_flops_per_token - expert) * tokens / gemm_rate(chip, "fp8", tokens // 8, 7168, 7168)
    # V3 routes within 4 of its 8 groups: a GPU holds one group of 32 experts, picked half the time,
    # then a hypergeometric 8 of 128 with 32 there (mean 2): variance 1/2 (var + 4) - 1 a token
    picked = 8 * 0.25 * 0.75 * 120 / 127
    busiest = 1 + expected_max_normal(8) * math.sqrt(4096 * (0.5 * (picked + 4) - 1)) / 4096
    expert_time = expert * tokens * (160 / 128 + busiest - 1) / (
        gemm_rate(chip, "fp8", 160, 2048, 7168) * inference_moe.GROUPED_GEMM_EFFICIENCY)
    _, work = r.stage_time(tokens, 0, 0)
    assert abs(work - (dense_time + expert_time)) <= 1e-12 * work


@settings(max_examples=scaled_examples(8), deadline=None)
@given(st.integers(64, 16384), st.sampled_from([2, 4]))
def test_more_experts_at_the_same_active_work_never_compute_faster(tokens, factor):
    few = attrs.evolve(MOE, routed=MOE.routed // factor)
    many = MOE
    cfg = ServeConfig(1, 1, "fp8", ep=8)
    work_few = replica(few, cfg, PARTITION).stage_time(tokens, 0, 0)[1]
    work_many = replica(many, cfg, PARTITION).stage_time(tokens, 0, 0)[1]
    assert work_many >= work_few


def test_the_distinct_experts_touched_by_hand():
    """B tokens each pick 8 of 256: an expert is idle with probability (31/32)^B, so one token
    touches 8 experts (1/32 of them), two tokens 256 x (1 - (31/32)^2) = 15.75, and the weights
    read are the dense ones plus that share of the routed ones."""
    assert experts_touched(MOE, 1) == pytest.approx(8 / 256, rel=1e-12)
    assert experts_touched(MOE, 2) * 256 == pytest.approx(15.75, rel=1e-12)
    assert not hasattr(inference_moe, "touched")   # one law, training's (model/expert_load.py), not a copy beside it
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION)
    # one token: a memory-bound step reads the dense weights and 8 of the 256 experts' (per GPU: their share)
    assert r.dense_weights + r.expert_weights * 8 / 256 < r.weights


def test_routing_moves_every_routed_row_four_times():
    """Permute and un-permute: k x hidden bf16 values per token and MoE layer, written and read
    on each side: 1,000 tokens x 8 x 7,168 x 2 bytes x 4 over 58 MoE layers."""
    assert inference_moe.routing_bytes(MOE, 1000, 58) == 58 * 1000 * 8 * 7168 * 2 * 4


def test_padding_by_hand():
    """At least one 64-row tile per touched expert; half a tile wasted on average above that."""
    rows, factor = inference_moe.padded_rows(MOE, 4096)      # 128 rows per expert
    assert (rows, factor) == (pytest.approx(160), pytest.approx(160 / 128))
    rows, factor = inference_moe.padded_rows(MOE, 64)        # 512 rows over 256 (1 - (31/32)^64) touched experts
    per_touched = 64 * 8 / (256 * (1 - (31 / 32) ** 64))     # 2.30: each still costs a whole tile
    assert rows == 64 and factor == pytest.approx(64 / per_touched, rel=1e-12)


def test_the_busiest_gpu_by_hand():
    assert inference_moe.imbalance(MOE, 4096, 1) == 1.0
    # 1024 tokens' 8 distinct experts of 256 over 8 GPUs of 32 each: a token lands a hypergeometric
    # count on a GPU (variance 8 x 1/8 x 7/8 x 248/255); the busiest of 8 sits E[max of 8 normals] =
    # 1.4236 deviations above the mean of 1024 (Harter 1961), training's law (model/expert_load.py)
    variance = 1024 * 8 * (1 / 8) * (7 / 8) * 248 / 255
    free = attrs.evolve(MOE, expert_groups=1, group_top_k=1)
    assert inference_moe.imbalance(free, 1024, 8) == pytest.approx(1 + 1.42360 * math.sqrt(variance) / 1024, rel=1e-4)
    # V3's group-limited routing (4 of 8 groups) loads a GPU's group all or nothing: a wider spread
    assert inference_moe.imbalance(MOE, 1024, 8) > inference_moe.imbalance(free, 1024, 8)


@settings(max_examples=scaled_examples(8), deadline=None)
@given(st.integers(1, 4096), st.integers(1, 4096))
def test_more_tokens_never_make_a_moe_stage_faster(a, b):
    """Law: the stage time grows with its tokens (padding and imbalance shrink per token, never in total)."""
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION)
    low, high = min(a, b), max(a, b)
    assert r.stage_time(low, 0, 0)[0] <= r.stage_time(high, 0, 0)[0] * (1 + 1e-12)


def test_triton_fused_moe_tile_follows_vllms_rule():
    """vLLM's / SGLang's Triton fused_moe (model/serve/moe.py triton_tile): without a tuned file,
    16-row tiles while the call's tokens are at most its experts, 64 beyond, 64 for fp8 at every
    count; with the tuned file of (E=128, N=192, H100) the entry of the nearest token count."""
    tile = inference_moe.triton_tile
    assert tile(40, 64, 1408, "A100", fp8=False) == 16
    assert tile(65, 64, 1408, "A100", fp8=False) == 64
    assert tile(8, 64, 1408, "H100", fp8=True) == 64
    assert tile(20, 128, 192, "H100 SXM", fp8=False) == 16
    assert tile(200, 128, 192, "H100 SXM", fp8=False) == 32      # nearer 256 than 128
    assert tile(1000, 128, 192, "H100 SXM", fp8=False) == 64
    assert tile(9000, 128, 192, "H100 SXM", fp8=False) == 128
    assert tile(20, 128, 192, "H100 PCIe", fp8=False) == 16      # no tuned file: the default rule
    assert tile(200, 128, 192, "H100 PCIe", fp8=False) == 64


@settings(max_examples=scaled_examples(12), deadline=None)
@given(st.floats(1, 4096), st.sampled_from([16, 32, 64, 128]))
def test_a_smaller_tile_never_computes_slower(tokens, small):
    """The same expert GEMMs padded to a smaller row tile waste fewer rows: never slower."""
    rate = lambda rows, n: gemm_rate(PARTITION.node.accelerator, "bf16", rows, n, 7168)  # noqa: E731
    args = (1e9, tokens, rate, MOE, 8, "tp_sharded", 8)
    fine = inference_moe.expert_gemm_time(*args, tile=lambda experts, width: small)
    coarse = inference_moe.expert_gemm_time(*args, tile=lambda experts, width: 128)
    assert fine <= coarse * (1 + 1e-12)


def test_only_the_triton_fused_moe_engines_take_its_tile():
    """vLLM from its fused kernel on and SGLang run the Triton fused_moe; vLLM 0.2's loop over
    experts, TensorRT-LLM's CUTLASS MoE and the ideal engine keep TILE_ROWS."""
    from gclc.model.serve.engines import PROFILES
    triton = {name for name, p in PROFILES.items() if p.engine().moe_kernel == "triton"}
    assert triton == {"vllm_v0", "vllm_0_6", "vllm_v1", "sglang_0_3", "sglang"}


def test_the_tuned_files_differ_by_device():
    """The same (E=128, N=192) shape at 512 tokens: H100's file 64 rows, GB200's 32; a shape with
    no file on GB200 takes the default rule."""
    tile = inference_moe.triton_tile
    assert tile(512, 128, 192, "H100_SXM", fp8=False) == 64
    assert tile(512, 128, 192, "GB200", fp8=False) == 32
    assert tile(1000, 256, 128, "GB200", fp8=False) == 32
    assert tile(200, 256, 64, "GB200", fp8=False) == 16 and tile(300, 256, 64, "GB200", fp8=False) == 64


def test_deepep_sends_a_token_once_per_rank_by_hand():
    """DeepSeek-V3 (8 of 256 within 4 of 8 groups) on 8 EP ranks of 32 experts, one group each: a token
    picks 4 groups, so it reaches at most 4 ranks; given a picked group, its rank is missed only when
    all 8 picks fall in the other 3 groups, C(96, 8) / C(128, 8); so 4 (1 - C(96, 8) / C(128, 8)) of the
    8 ranks, and DeepEP's normal kernels send that share of the top_k copies the all-to-all sends."""
    reached = 4 * (1 - math.comb(96, 8) / math.comb(128, 8))
    assert inference_moe.sent_share(MOE, "deepep", 8) == pytest.approx(reached / 8, rel=1e-12)
    assert inference_moe.sent_share(MOE, "alltoall", 8) == 1.0
    assert inference_moe.sent_share(MOE, "deepep", 1) == 1.0       # one rank: every copy stays on it


@settings(max_examples=scaled_examples(10), deadline=None)
@given(st.integers(1, 8192), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2]))
def test_deepep_never_sends_more_than_every_copy(tokens, ep, tp):
    """Law: sending a token once per rank holding its experts moves no more than its top_k copies, and
    the same with the experts on one GPU (nothing to dedupe); so a stage never takes longer with it."""
    ideal = profile("ideal").engine()
    cfg = ServeConfig(tp, 1, "fp8", ep=ep)
    copies = replica(MOE, cfg, PARTITION, ideal).stage_time(tokens, 0, 0)[0]
    deduped = replica(MOE, cfg, PARTITION, attrs.evolve(ideal, dispatcher="deepep")).stage_time(tokens, 0, 0)[0]
    assert deduped <= copies * (1 + 1e-12)
    share = inference_moe.sent_share(MOE, "deepep", tp * ep)
    assert 1 / MOE.top_k - 1e-12 <= share <= 1.0
    if tp * ep == 1:
        assert deduped == copies and share == 1.0
    else:
        assert share < 1.0


def test_deepep_runs_every_step_eagerly_as_the_engines_do():
    """vLLM and SGLang turn CUDA graphs off with DeepEP's normal kernels (model/serve/engines.py [deepep])."""
    for name in ("vllm_v1", "sglang"):
        engine = profile(name).engine(dispatcher="deepep")
        assert not engine.graphed(8, 8) and profile(name).engine().graphed(8, 8)


def test_allgather_gathers_every_attention_groups_tokens_by_hand():
    """vLLM V1's default backend (model/serve/engines.py [vllmagrs]), which its export launches: every GPU
    all-gathers the other attention groups' tokens (fp8 with its scales) over its data-parallel group and
    reduce-scatters the bf16 expert outputs back, (n - 1) / n of the gathered tokens each way, whatever their
    routing; with one attention group it gathers nothing."""
    engine = profile("vllm_v1").engine()
    assert engine.dispatcher == "allgather"
    tokens = 512
    gathered = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION, engine)
    stages = comms.place(8, 1, PARTITION.tiers)
    by_hand = (collectives.all_gather(tokens * MOE.hidden * dispatch_bytes("fp8"), stages)
               + collectives.reduce_scatter(tokens * MOE.hidden * 2, stages))   # PyNccl: NCCL's calls
    assert gathered._expert_exchange(tokens) == pytest.approx(by_hand, rel=1e-12)
    assert replica(MOE, ServeConfig(8, 1, "fp8", ep=1), PARTITION, engine)._expert_exchange(tokens) == 0.0
    # vLLM's DP group is one TP index's attention groups: TP 2 x 4 groups gathers over 4 ranks 2 apart
    assert ranks.group_stages(ServeConfig(2, 1, "fp8", ep=4), engine.rank_order, PARTITION.tiers) == \
        comms.place(4, 2, PARTITION.tiers)


def test_sglang_gathers_over_its_whole_tp_group_in_bf16_by_hand():
    """SGLang's data-parallel attention (model/serve/engines.py [sgldpa], the sglang profile's default, which
    its export launches): every group's bf16 tokens all-gathered on every GPU of the stage's TP group (tp x ep)
    and the outputs reduce-scattered back over it; vLLM gathers over one TP index's groups, fp8 first."""
    engine = profile("sglang").engine()
    assert (engine.dispatcher, engine.gather_stage) == ("allgather", True)
    tokens, config = 512, ServeConfig(2, 1, "fp8", ep=4)
    r = replica(MOE, config, PARTITION, engine)
    # 512 tokens x 7168 wide x 2 bytes (bf16) = 7,340,032 bytes each way, over all 8 GPUs of the node (tp 2 x 4
    # groups), placed here rather than read off the replica
    assert MOE.hidden == 7168
    whole = comms.place(8, 1, PARTITION.tiers)
    by_hand = collectives.all_gather(7_340_032, whole) + collectives.reduce_scatter(7_340_032, whole)
    assert r._expert_exchange(tokens) == pytest.approx(by_hand, rel=1e-12)
    assert [s.peers for s in comms.tiles(r.ep_stages)] != [s.peers for s in comms.tiles(r.group_stages)]
    as_vllm = replica(MOE, config, PARTITION, attrs.evolve(engine, gather_stage=False))
    assert as_vllm._expert_exchange(tokens) != pytest.approx(by_hand, rel=1e-3)
    assert replica(MOE, ServeConfig(8, 1, "fp8", ep=1), PARTITION, engine)._expert_exchange(tokens) == 0.0


def _bytes_time(nbytes: float, stages) -> float:
    """An all-gather's (a reduce-scatter's) seconds on its bytes alone, the fastest placement option."""
    return min(comms._reduce_scatter(nbytes, tuple(option), latency=False)
               for option in getattr(stages, "options", (stages,)))


@settings(max_examples=scaled_examples(20), deadline=None)
@given(st.integers(1, 8192), st.sampled_from([1, 2, 4, 8]), st.sampled_from([2, 4, 8, 16]), st.sampled_from([1, 2]))
@example(tokens=1, small=4, large=8, tp=2)   # deep profile: 8 groups across two nodes took less time than 4
# in one, by latency alone, while the std NVLink4 step was 1 us beside NDR's 0.5 us hop; the law below is the
# bytes', the next one the whole time's
def test_allgather_moves_more_with_more_attention_groups(tokens, small, large, tp):
    """Law: the all-gather brings every other group's tokens to every GPU, so at the same tokens more groups
    move no fewer bytes nor spend less time moving them; it never dedupes, while DeepEP's sends per rank, and
    per node across nodes, are never more than the top_k copies nor fewer than one."""
    small, large = min(small, large), max(small, large)
    engine = profile("vllm_v1").engine()
    def moving(ep):
        stages = replica(MOE, ServeConfig(tp, 1, "fp8", ep=ep), PARTITION, engine).group_stages
        return _bytes_time(tokens * MOE.hidden * 3, stages) if ep > 1 else 0.0   # fp8 gathered, bf16 scattered
    assert moving(large) >= moving(small) * (1 - 1e-12)
    ranks_reached = inference_moe.sent_share(MOE, "deepep", tp * large) * MOE.top_k
    nodes_reached = node_share(MOE, tp * large, 8) * MOE.top_k
    assert 1 - 1e-12 <= nodes_reached <= ranks_reached + 1e-12 <= MOE.top_k + 2e-12


@settings(max_examples=scaled_examples(20), deadline=None)
@given(st.integers(1, 8192), st.sampled_from([1, 2, 4, 8]), st.sampled_from([2, 4, 8, 16]), st.sampled_from([1, 2]),
       st.sampled_from(["vllm_v1", "sglang"]))
# 3.1 us over two nodes against 4.0 us in one, while comms priced NCCL's calls by the tiers' steps alone (no
# per-call base, no network step: NDR's 0.5 us hop against the 1 us NVLink4 step); 32.1 against 16.9 us now
@example(tokens=1, small=4, large=8, tp=2, engine="vllm_v1")
def test_gathering_more_attention_groups_never_takes_less_time(tokens, small, large, tp, engine):
    """Law: the gather's whole time, latency included, never falls as more attention groups gather the same
    tokens, on vLLM's DP group and SGLang's TP group alike: leaving the node cannot make it quicker. The calls
    are NCCL's (model/collectives.py: its algorithm and protocol pick, its per-call base and steps), as the
    training step prices them."""
    small, large = min(small, large), max(small, large)
    e = profile(engine).engine()
    def seconds(ep):
        return replica(MOE, ServeConfig(tp, 1, "fp8", ep=ep), PARTITION, e)._expert_exchange(tokens)
    assert seconds(large) >= seconds(small) * (1 - 1e-12)


def test_deepep_crosses_nodes_once_per_node_by_hand():
    """DeepEP's internode normal kernels ([deepepnode]) send a token over RDMA once per node holding any of its
    experts: DeepSeek-V3 on 8 nodes of 8 ranks (a routing group a node) reaches at most 4 nodes, 4 (1 -
    C(96, 8) / C(128, 8)) of them, as 8 EP ranks of one group each; NVLink forwards it to its distinct ranks."""
    nodes = 4 * (1 - math.comb(96, 8) / math.comb(128, 8))
    assert node_share(MOE, 64, 8) * MOE.top_k == pytest.approx(nodes, rel=1e-12) and nodes <= 4
    assert node_share(MOE, 8, 8) == 1 / MOE.top_k    # one node: the token's own
    # two nodes of 8: the scale-out tier carries the node sends, fewer than the rank sends it carried before
    deepep = profile("vllm_v1").engine(dispatcher="deepep", moe_path="grouped")
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=16), PARTITION, deepep)
    tokens = 4096
    copies = tokens / 16 * MOE.top_k * MOE.hidden
    rank_bytes = copies * inference_moe.sent_share(MOE, "deepep", 16)
    node_bytes = copies * node_share(MOE, 16, 8)
    assert node_bytes < rank_bytes
    inner = tuple(s for s in comms.tiles(r.ep_stages) if s.tier.scope == "node")
    assert [s.peers for s in inner] == [8]
    by_hand = sum(max(comms.all_to_all(node_bytes * w, r.ep_stages), comms.all_to_all(rank_bytes * w, inner, False))
                  for w in (dispatch_bytes("fp8"), 2))
    per_rank = sum(comms.all_to_all(rank_bytes * w, r.ep_stages) for w in (dispatch_bytes("fp8"), 2))
    assert r._expert_exchange(tokens) == pytest.approx(by_hand, rel=1e-12) and by_hand < per_rank


def test_deepep_on_an_nvl72_rack_forwards_among_8_ranks():
    """DeepEP V1 takes 8 consecutive ranks as a node whatever the OS node (NUM_MAX_NVL_PEERS = 8: deepseek-ai/DeepEP
    csrc/kernels/configs.cuh, csrc/deep_ep.cpp), training's law: EP 16 in one GB200 NVL72 rack (no node tier)
    sends a token once per 8-rank slice holding its experts and forwards it among those 8 over the rack's NVLink,
    where it was priced per rank before."""
    from gclc.model.job import train_job
    from gclc.model.network.placement import SCALE_UP_SCOPES
    from gclc.model.ranks import rank_partition

    job = train_job(check_file(str(ROOT / "tests" / "data" / "gb200_moe.gcl"), {"racks": "16"}).design)
    partition = rank_partition(job.partition, 1024)     # 64 GPUs a rack, as training places them
    deepep = profile("vllm_v1").engine(dispatcher="deepep", moe_path="grouped")
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=16), partition, deepep)
    rack = comms.tiles(r.ep_stages)
    assert [(s.tier.scope, s.peers) for s in rack] == [("supernode", 16)] and comms.node_members(r.ep_stages) == 1
    assert comms.node_members(r.ep_stages, SCALE_UP_SCOPES, 8) == 8
    tokens = 4096
    copies = tokens / 16 * MOE.top_k * MOE.hidden
    rank_bytes = copies * inference_moe.sent_share(MOE, "deepep", 16)
    node_bytes = copies * node_share(MOE, 16, 8)
    eight = (attrs.evolve(rack[0], peers=8),)
    by_hand = sum(max(comms.all_to_all(node_bytes * w, r.ep_stages), comms.all_to_all(rank_bytes * w, eight, False))
                  for w in (dispatch_bytes("fp8"), 2))
    assert r._expert_exchange(tokens) == pytest.approx(by_hand, rel=1e-12)


def test_experts_tp_sharded_in_one_attention_group_exchange_nothing_whatever_the_dispatcher():
    """One attention group whose experts are TP-sharded (vLLM's and SGLang's path without expert
    parallelism): every GPU holds a slice of every expert and the TP all-reduce sums their outputs, so
    no dispatcher moves tokens; the placement view says so instead of naming an all-to-all."""
    from gclc.views.serve_placement import group_tiers

    for name in ("sglang", "vllm_v1"):
        base = profile(name).engine()
        for dispatcher in ("alltoall", "deepep", "allgather"):
            r = replica(MOE, ServeConfig(8, 1, "fp8", ep=1), PARTITION, attrs.evolve(base, dispatcher=dispatcher))
            assert inference_moe.expert_layout(r.engine.moe_path, 8, 1)[1] == 1
            assert r._expert_exchange(4096.0) == 0.0
            assert any("no exchange" in what for _, what, _ in group_tiers(r))
    spread = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION, attrs.evolve(profile("sglang").engine(), dispatcher="alltoall"))
    assert spread._expert_exchange(4096.0) > 0
    assert any("all-to-all" in what for _, what, _ in group_tiers(spread))


def test_sglang_dp_attention_charges_one_all_reduce_fewer_a_moe_layer_by_hand():
    """SGLang's DP attention ([sgldpa], dp_attention.py) at attention TP 2 x 4 groups on one 8-GPU node: DeepSeek-V3's
    61 layers, 58 of them MoE. A dense layer keeps its two TP all-reduces; on a MoE layer the attention's all-reduce
    becomes a reduce-scatter in the attention TP group plus an all-gather over all 8 GPUs, and the MoE's a
    reduce-scatter over all 8 plus an all-gather in the attention TP group: one TP all-reduce (the two pair-halves)
    and one 8-GPU gather and reduce-scatter of every group's bf16 tokens. So 2 x 3 + 58 = 64 all-reduces of a
    group's tokens, not 122, and 58 gathers; one all-reduce is read off TP 2 alone (no exchange) at a group's tokens."""
    assert (MOE.layers, MOE.moe_layers) == (61, 58)
    engine, tokens = profile("sglang").engine(), 512
    alone = replica(MOE, ServeConfig(2, 1, "fp8", ep=1), PARTITION, engine)
    all_reduce = alone._token_costs(tokens / 4)[5] / (2 * 61)
    assert all_reduce > 0
    whole = comms.place(8, 1, PARTITION.tiers)
    gather = (collectives.all_gather(tokens * MOE.hidden * 2, whole)
              + collectives.reduce_scatter(tokens * MOE.hidden * 2, whole))
    r = replica(MOE, ServeConfig(2, 1, "fp8", ep=4), PARTITION, engine)
    assert r._token_costs(tokens)[5] == pytest.approx(64 * all_reduce + 58 * gather, rel=1e-9)
    # vLLM's gather leaves both all-reduces in place (its attention groups' TP all-reduce then the gather)
    vllm = profile("vllm_v1").engine()
    assert replica(MOE, ServeConfig(2, 1, "fp8", ep=4), PARTITION, vllm)._reductions_gathered() == 0
