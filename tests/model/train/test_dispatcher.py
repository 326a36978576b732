"""The MoE token dispatcher (`parallelism { dispatcher = ... }`): what each one sends and when it
stops the host (model/train/moe.py, against hand calculations and as laws), and the located
errors for the combinations Megatron-Core refuses (compiler/rules/train.py)."""

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.job import pinned_config, train_job
from gclc.model.train import moe
from gclc.model.train.step import estimate
from gclc.testing.profiles import scaled_examples

MOE = Path(__file__).parent.parent.parent / "data" / "moe.gcl"
SOURCE = MOE.read_text(encoding="utf-8")
PINS = "    microbatch = 1\n"
JOB = train_job(check_file(str(MOE), {"nodes": "4"}).design)
CFG = pinned_config(JOB)          # tp1 pp1 cp2 ep16 dp16 mb1, bf16; 256 routed experts, top-8
SHAPE = JOB.shape


def result_text(pins: str, experts: str = "") -> str:
    return SOURCE.replace(PINS, PINS + pins).replace("dense_layers = 1 }", f"dense_layers = 1 {experts}}}")


def checked(pins: str = "", experts: str = ""):
    return check_file(str(MOE), {"nodes": "4"}, text=result_text(pins, experts))


def test_the_pin_reaches_the_configuration_and_alltoall_is_the_default():
    assert CFG.dispatcher is None and CFG.moe_dispatcher == "alltoall"
    assert pinned_config(train_job(checked("    dispatcher = hybridep\n").design)).moe_dispatcher == "hybridep"


def test_flex_dispatchers_send_a_token_once_per_gpu_holding_its_experts():
    # 16 local experts of 256 on each of 16 GPUs: a GPU holds none of a token's 8 experts with
    # probability C(240, 8) / C(256, 8); a token reaches 16 x (1 - that) GPUs instead of 8 copies
    missed = math.comb(240, 8) / math.comb(256, 8)
    share = 16 * (1 - missed) / 8
    assert share < 1
    for name in ("deepep", "hybridep"):
        assert moe.sent_share(SHAPE, attrs.evolve(CFG, dispatcher=name)) == pytest.approx(share)
    assert moe.sent_share(SHAPE, CFG) == 1.0
    flex = attrs.evolve(CFG, dispatcher="hybridep")
    assert moe.dispatch_bytes(SHAPE, flex, 2) == pytest.approx(moe.dispatch_bytes(SHAPE, CFG, 2) * share)


def test_the_dispatcher_moves_only_the_exchange_not_the_layers_host_ops():
    dropping = attrs.evolve(SHAPE, capacity_factor=1.25)
    for name in ("alltoall", "hybridep", "deepep", "allgather"):
        cfg = attrs.evolve(CFG, dispatcher=name)
        for shape in (SHAPE, dropping):
            assert moe.host_exposed(shape, cfg) == moe.host_exposed(shape, CFG) > 0
            assert moe.layer_ops(shape, cfg) == moe.layer_ops(shape, CFG)


def test_allgather_moves_the_whole_groups_tokens():
    # 4096 tokens / cp 2 per GPU, gathered from 16 GPUs, bf16
    gather = attrs.evolve(CFG, dispatcher="allgather")
    assert moe.gathered_bytes(SHAPE, gather, 2) == pytest.approx(4096 / 2 * 16 * SHAPE.hidden * 2)
    per_micro_batch = lambda cfg: estimate(SHAPE, cfg, JOB.partition).breakdown.ep / cfg.microbatches  # noqa: E731
    assert per_micro_batch(gather) != per_micro_batch(CFG)          # the field is costed, not ignored
    assert per_micro_batch(attrs.evolve(gather, microbatch=2)) > per_micro_batch(gather)   # twice the tokens


configs = st.builds(lambda ep, mb, overlap, name: attrs.evolve(CFG, ep=ep, microbatch=mb, ep_overlap=overlap, dispatcher=name),
                    st.sampled_from([1, 2, 8, 16, 32]), st.sampled_from([1, 2]), st.booleans(),
                    st.sampled_from(["deepep", "hybridep"]))


@given(configs, st.sampled_from([1, 2, 4, 8]))
def test_deduplicating_never_sends_more_nor_slows_the_step(cfg, top_k):
    shape = attrs.evolve(SHAPE, top_k=top_k)
    plain = attrs.evolve(cfg, dispatcher="alltoall")
    assert 0 < moe.sent_share(shape, cfg) <= 1.0
    assert moe.dispatch_bytes(shape, cfg, 2) <= moe.dispatch_bytes(shape, plain, 2) * (1 + 1e-12)
    if cfg.ep == 1 or top_k == 1:   # nothing to deduplicate
        assert moe.sent_share(shape, cfg) == 1.0
    if cfg.moe_dispatcher == "hybridep":   # same host sync as alltoall: only the bytes differ
        flex, base = estimate(shape, cfg, JOB.partition), estimate(shape, plain, JOB.partition)
        assert flex.breakdown.ep <= base.breakdown.ep * (1 + 1e-12)


def test_flex_dispatchers_cross_nodes_once_per_node_by_hand():
    """DeepEP's internode normal kernels (internode.cu) and HybridEP send a token over the scale-out network
    once per node holding any of its experts and forward it over NVLink to its ranks there, as serving's
    DeepEP is priced (one law: model/expert_load.py `node_share`, model/comms.py `forwarded_all_to_all`).
    EP 16 on 2 nodes of 8 (256 experts, top-8, no groups): a token reaches 2 (1 - C(128, 8) / C(256, 8))
    nodes, where per rank it reached 16 (1 - C(240, 8) / C(256, 8)) GPUs. What crosses into a node spreads over
    its GPUs, so the busier of the 2 nodes sets it: its copies of the 16 ranks' tokens are hypergeometric (8 of
    256, 128 there: variance 8 x 1/4 x 248/255 a token), and the larger of 2 normals lies 1/sqrt(pi) deviations
    above the mean."""
    from gclc.model import collectives, comms
    from gclc.model.ranks import rank_partition
    from gclc.model.train import layer_cost

    partition = rank_partition(JOB.partition, CFG.gpus)
    stages = comms.place(CFG.ep, CFG.stride("ep"), partition.tiers)
    inner = tuple(s for s in comms.tiles(stages) if s.tier.scope == "node")
    assert [s.peers for s in inner] == [8] and len(comms.tiles(stages)) == 2
    nodes = 2 * (1 - math.comb(128, 8) / math.comb(256, 8))
    latency = collectives.all_to_all(0.0, stages)      # NCCL's start-up alone, as the per-rank price pays it
    for name in moe.FLEX:
        cfg = attrs.evolve(CFG, dispatcher=name)
        rank = moe.dispatch_bytes(SHAPE, cfg, 2)
        tokens = CFG.ep * moe.moe_tokens(cfg)
        busier = 1 + math.sqrt(tokens * 8 / 4 * 248 / 255) / math.sqrt(math.pi) / (tokens * 8 / 2)
        across = moe.moe_tokens(cfg) * busier * nodes * SHAPE.hidden * 2
        assert moe.node_bytes(SHAPE, cfg, 8, 2) == pytest.approx(across, rel=1e-12) and across < rank
        by_hand = 4 * (max(comms.all_to_all(across, stages, False), comms.all_to_all(rank, inner, False)) + latency)
        per_rank = 4 * collectives.all_to_all(rank, stages)
        assert layer_cost.ep_exchange(SHAPE, cfg, partition) == pytest.approx(by_hand, rel=1e-12) and by_hand < per_rank
    # the alltoall dispatcher forwards nothing: every copy it sends, a plain all-to-all across the nodes
    plain = attrs.evolve(CFG, dispatcher="alltoall")
    assert layer_cost.ep_exchange(SHAPE, plain, partition) == pytest.approx(
        4 * collectives.all_to_all(moe.dispatch_bytes(SHAPE, plain, 2), stages), rel=1e-12)
    # inside one node nothing is forwarded: the per-rank all-to-all as before
    one = attrs.evolve(CFG, dispatcher="deepep", ep=8)
    assert layer_cost.ep_exchange(SHAPE, one, partition) == pytest.approx(
        4 * collectives.all_to_all(moe.dispatch_bytes(SHAPE, one, 2), comms.place(8, one.stride("ep"), partition.tiers)), rel=1e-12)


def test_deepep_across_nodes_against_its_published_rdma_rate():
    """DeepEP V1's normal kernels on H800 with a ConnectX-7 400 Gb/s NIC a GPU (~50 GB/s), EP 64 as 8 nodes of
    8, DeepSeek-V3's pretraining routing (4096 tokens a rank, hidden 7168, top-4 of 8 groups, top-8 of 256
    experts, FP8 dispatch with a scale per 128 values, BF16 combine): 51 GB/s of RDMA a GPU dispatching, 50
    combining (deepseek-ai/DeepEP README, "Normal kernels with NVLink and RDMA forwarding", the legacy V1
    table; its rate counts every node a token reaches, its own included: tests/test_internode.py). Counted
    the same way, on the 25.09 H100 run's fabric (the same NIC a GPU, efficiency 0.8), priced once per node the
    model's rate stays below the measured one (45.3 and 45.5 GB/s), where the per-rank price moved the same crossings at
    under half of it (22.4 and 22.5 GB/s)."""
    from gclc.model import collectives, comms
    from gclc.model.expert_load import distinct_share, node_share
    from gclc.model.ranks import rank_partition

    runs = Path(__file__).parents[3] / "benchmarks" / "runs"
    job = train_job(check_file(str(runs / "mb2509_15.gcl")).design)
    assert (job.shape.routed, job.shape.top_k, job.shape.expert_groups, job.shape.group_top_k) == (256, 8, 8, 4)
    stages = comms.place(64, 1, rank_partition(job.partition, 64).tiers)
    assert [s.peers for s in comms.tiles(stages)] == [8, 8]
    for width, measured in ((1 + 4 / 128, 51e9), (2, 50e9)):
        copies = 4096 * 8 * job.shape.hidden * width
        rank, node = copies * distinct_share(job.shape, 64), copies * node_share(job.shape, 64, 8)
        # DeepEP's RDMA bytes count every node a token reaches, its own included (tests/test_internode.py:
        # num_rdma_token_sent = rdma_idx.ne(-1).sum()), so the rate is over all of `node`
        rdma = node
        per_node = rdma / collectives.forwarded_all_to_all(rank, node, stages)
        per_rank = rdma / collectives.all_to_all(rank, stages)   # the same tokens' crossings, sent per rank
        assert 0.6 * measured < per_node < measured and per_rank < 0.5 * measured


def test_hybridep_forwards_in_its_nvlink_domain_a_rack_included():
    """HybridEP's nodes are NVLink domains ("num_of_nodes: Number of NVLink domains", deepseek-ai/DeepEP
    hybrid-ep docs/Hybrid-EP_Implementation.md): an EP group of 128 over two NVL72 racks (64 a rack) sends a
    token once per rack it reaches and forwards it over the rack's NVLink."""
    from gclc.model import collectives, comms
    from gclc.model.network.placement import SCALE_UP_SCOPES
    from gclc.model.ranks import rank_partition
    from gclc.model.train import layer_cost

    job = train_job(check_file(str(MOE.parent / "gb200_moe.gcl"), {"racks": "16"}).design)
    cfg = attrs.evolve(pinned_config(job), ep=128, dispatcher="hybridep", precision="bf16")   # bf16 on the wire
    partition = rank_partition(job.partition, cfg.gpus)
    stages = comms.place(cfg.ep, cfg.stride("ep"), partition.tiers)
    assert comms.node_members(stages, SCALE_UP_SCOPES) == 64 and comms.node_members(stages) == 1
    rank, across = moe.dispatch_bytes(job.shape, cfg, 2), moe.node_bytes(job.shape, cfg, 64, 2)
    assert across < rank
    rack = comms.node_stages(stages, SCALE_UP_SCOPES)
    by_hand = 4 * (max(comms.all_to_all(across, stages, False), comms.all_to_all(rank, rack, False))
                   + collectives.all_to_all(0.0, stages))
    assert layer_cost.ep_exchange(job.shape, cfg, partition) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand < 4 * collectives.all_to_all(rank, stages)


def test_deepep_forwards_among_8_consecutive_ranks_whatever_the_os_node():
    """DeepEP V1's internode kernels take 8 consecutive ranks as a node (rdma_rank = rank / NUM_MAX_NVL_PEERS,
    NUM_MAX_NVL_PEERS = 8: deepseek-ai/DeepEP csrc/kernels/configs.cuh, csrc/deep_ep.cpp), so on NVL72 racks
    (no node tier: EP 128 as 64 a rack) a token crosses once per 8-GPU slice holding any of its experts and is
    forwarded over the rack's NVLink among those 8; it reaches more slices than HybridEP reaches racks, so it
    is slower than HybridEP and faster than sending per rank."""
    from gclc.model import collectives, comms
    from gclc.model.network.placement import SCALE_UP_SCOPES
    from gclc.model.ranks import rank_partition
    from gclc.model.train import layer_cost

    job = train_job(check_file(str(MOE.parent / "gb200_moe.gcl"), {"racks": "16"}).design)
    cfg = attrs.evolve(pinned_config(job), ep=128, dispatcher="deepep", precision="bf16")
    partition = rank_partition(job.partition, cfg.gpus)
    stages = comms.place(cfg.ep, cfg.stride("ep"), partition.tiers)
    rack = comms.tiles(stages)[0]
    assert (rack.tier.scope, rack.peers) == ("supernode", 64) and comms.node_members(stages) == 1
    assert comms.node_members(stages, SCALE_UP_SCOPES, 8) == 8
    slice_ = (attrs.evolve(rack, peers=8),)
    rank, across = moe.dispatch_bytes(job.shape, cfg, 2), moe.node_bytes(job.shape, cfg, 8, 2)
    by_hand = 4 * (max(comms.all_to_all(across, stages, False), comms.all_to_all(rank, slice_, False))
                   + collectives.all_to_all(0.0, stages))
    deepep = layer_cost.ep_exchange(job.shape, cfg, partition)
    assert deepep == pytest.approx(by_hand, rel=1e-12)
    hybridep = layer_cost.ep_exchange(job.shape, attrs.evolve(cfg, dispatcher="hybridep"), partition)
    assert hybridep < deepep < 4 * collectives.all_to_all(rank, stages)


def test_deepep_on_a_node_of_more_than_8_gpus_forwards_among_8():
    """A 16-GPU NVLink node: DeepEP still forwards among 8 ranks (its RDMA ranks are 8-rank slices), so an EP
    group of the whole node runs its internode kernels inside it; HybridEP forwards in the whole node, where
    an EP group of one node is a plain all-to-all."""
    from gclc.compiler.ir import Tier
    from gclc.dsl.source import no_span
    from gclc.model import comms
    from gclc.model.network.placement import SCALE_UP_SCOPES

    node = Tier(0, "node", "nv", "nvlink", "node", 16, 450e9, 1e-6, 1.0, False, 1.0, span=no_span())
    out = Tier(1, "leaf", "ib", "ib", "scaleout", 1024, 50e9, 2e-6, 1.0, False, 1.0, span=no_span())
    rank, across = 3e8, 1e8
    for ep in (16, 32):
        stages = comms.place(ep, 1, (node, out))
        assert comms.node_members(stages, SCALE_UP_SCOPES) == 16 and comms.node_members(stages, SCALE_UP_SCOPES, 8) == 8
        eight = (attrs.evolve(comms.tiles(stages)[0], peers=8),)
        by_hand = max(comms.all_to_all(across, stages, False), comms.all_to_all(rank, eight, False))
        assert comms.forwarded_all_to_all(rank, across, stages, False, SCALE_UP_SCOPES, 8) == pytest.approx(by_hand, rel=1e-12)
    whole = comms.place(16, 1, (node, out))
    assert comms.forwarded_all_to_all(rank, across, whole, False, SCALE_UP_SCOPES) == comms.all_to_all(rank, whole, False)


groups = st.sampled_from([(1, 1), (8, 4), (8, 2), (4, 1), (16, 8)])


@settings(max_examples=scaled_examples(60), deadline=None)
@given(configs, st.sampled_from([1, 2, 4, 8]), groups, st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_per_node_dedupe_never_sends_more_across_nodes_than_per_rank(cfg, top_k, grouping, per_node):
    """Law: a token sent once per node holding any of its experts crosses the scale-out network no more
    often than sent once per rank (a reached node holds a reached rank), exactly as often at one rank a
    node, and at least once (its own node counted) per top_k copies; the alltoall dispatcher sends every copy."""
    shape = attrs.evolve(SHAPE, top_k=top_k, expert_groups=grouping[0], group_top_k=grouping[1])
    if cfg.ep % per_node or per_node > cfg.ep or grouping[1] * shape.routed // grouping[0] < top_k:
        return
    across, rank = moe.node_bytes(shape, cfg, per_node, 2), moe.dispatch_bytes(shape, cfg, 2)
    assert across <= rank * (1 + 1e-12)
    assert across >= moe.moe_tokens(cfg) * moe.node_load(shape, cfg, per_node) * shape.hidden * 2 * (1 - 1e-12)
    assert 1 <= moe.node_load(shape, cfg, per_node) <= moe.load_factor(shape, cfg) * (1 + 1e-12)
    if per_node == 1:
        assert across == pytest.approx(rank, rel=1e-12)
    plain = attrs.evolve(cfg, dispatcher="alltoall")
    assert moe.node_bytes(shape, plain, per_node, 2) == moe.dispatch_bytes(shape, plain, 2)


@pytest.mark.parametrize("pins, model, words", [
    ("    dispatcher = allgather\n    ep_overlap = true\n", "", "overlaps them only with the alltoall"),
    ("    dispatcher = deepep\n", " capacity_factor = 1.25 ", "deepep dispatcher does not pad"),
])
def test_what_megatron_core_refuses_is_a_located_error(pins, model, words):
    result = checked(pins, model)
    errors = [d for d in result.diagnostics if d.is_error]
    assert len(errors) == 1 and errors[0].code == "pin-meaningless" and words in errors[0].summary
    line = next(i for i, text in enumerate(result_text(pins, model).splitlines(), 1) if "dispatcher =" in text)
    assert errors[0].subject.line == line


def test_a_dispatcher_on_a_dense_model_is_a_located_error():
    text = SOURCE.replace("arch     = moe", "arch     = dense").replace(
        "  experts { routed = 256  shared = 1  top_k = 8  ffn = 2048  dense_layers = 1 }\n", "").replace(
        "  mla { kv_rank = 512  rope_dim = 64  q_rank = 1536 }\n  mtp      = 1\n", "").replace(
        "    ep = 16\n", "").replace(PINS, PINS + "    dispatcher = hybridep\n")
    result = check_file(str(MOE), {"nodes": "4"}, text=text)
    errors = [d for d in result.diagnostics if d.is_error]
    assert [e.code for e in errors] == ["pin-meaningless"] and "no routed experts" in errors[0].summary
    assert errors[0].subject.line == next(i for i, t in enumerate(text.splitlines(), 1) if "dispatcher =" in t)


def test_an_unknown_dispatcher_is_refused_with_the_choices():
    result = checked("    dispatcher = nccl\n")
    assert not result.ok and any("alltoall" in d.render() if hasattr(d, "render") else "alltoall" in str(d)
                                 for d in result.diagnostics)



@pytest.mark.parametrize("pins, words, other", [
    # core_r0.15.0 transformer_config.py: "virtual_pipeline_model_parallel_size must be specified
    # when pipeline_model_parallel_size > 1" with the overlap
    ("    ep_overlap = true\n    vp = 1\n", "needs virtual stages", "vp = 1"),
    # ...and "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
    ("    ep_overlap = true\n    recompute = full\n", "full recompute", "recompute = full"),
])
def test_an_overlap_megatron_core_refuses_is_a_located_error(pins, words, other):
    text = result_text(pins).replace("    pp = 1\n", "    pp = 2\n")
    result = check_file(str(MOE), {"nodes": "4"}, text=text)
    errors = [d for d in result.diagnostics if d.is_error]
    assert len(errors) == 1 and errors[0].code == "parallelism" and words in errors[0].summary
    assert errors[0].subject.line == next(i for i, t in enumerate(text.splitlines(), 1) if "ep_overlap =" in t)
    assert any(label.message == other for label in errors[0].labels)
    assert any("help:" in note for note in errors[0].notes)


@pytest.mark.parametrize("pins", ["    ep_overlap = true\n    vp = 2\n", "    ep_overlap = true\n    recompute = selective\n"])
def test_the_overlap_megatron_core_runs_passes(pins):
    text = result_text(pins).replace("    pp = 1\n", "    pp = 2\n")
    assert not [d for d in check_file(str(MOE), {"nodes": "4"}, text=text).diagnostics if d.is_error]


def test_other_stacks_are_not_held_to_megatron_cores_overlap_rules():
    text = result_text("    ep_overlap = true\n    vp = 1\n    recompute = full\n").replace("    pp = 1\n", "    pp = 2\n")
    stacked = text.replace("  parallelism {", "  software = fsdp\n  parallelism {", 1)
    result = check_file(str(MOE), {"nodes": "4"}, text=stacked)
    assert result.ok, [d.summary for d in result.diagnostics if d.is_error]
    assert pinned_config(train_job(result.design)).stack == "fsdp"


def test_the_search_opens_only_what_megatron_core_runs_beside_the_overlap():
    """With `ep_overlap = true` and pp, vp and the recompute left to the planner, a Megatron stack's
    search holds no pipeline without virtual stages and no full recompute (what `gclc check` refuses
    when pinned); another stack's search keeps both."""
    from gclc.solver.train import enumerate as space_def

    text = result_text("    ep_overlap = true\n").replace("    pp = 1\n", "")
    job = train_job(check_file(str(MOE), {"nodes": "4"}, text=text).design)
    assert job.stack in ("megatron_core", "nemo", "megatron") and space_def.megatron_overlap(job)
    assert space_def.vp_candidates(job, 1) == (1,)
    assert space_def.vp_candidates(job, 2) and 1 not in space_def.vp_candidates(job, 2)
    assert "full" not in space_def.space(job).recomputes and "selective" in space_def.space(job).recomputes
    plain = train_job(check_file(str(MOE), {"nodes": "4"}, text=text.replace("  parallelism {", "  software = fsdp\n  parallelism {", 1)).design)
    assert not space_def.megatron_overlap(plain)
    assert 1 in space_def.vp_candidates(plain, 2) and "full" in space_def.space(plain).recomputes


def test_the_least_memory_report_names_the_overlap_for_the_full_recompute_it_left_out():
    """Under Megatron's all-to-all overlap the search holds no full recompute, so the least-memory
    configuration of a job nothing fits keeps more activations than it could: the report says so and why,
    at the `ep_overlap` pin, in compiler/schema.py `overlap_refusal`'s words (what `gclc check` says of a
    pinned full recompute). Without the overlap, or on a stack not held to Megatron-Core's rule, the least
    memory recomputes fully and nothing is left out."""
    from gclc.compiler.schema import overlap_refusal
    from gclc.solver.train.plan import plan
    from gclc.views.report.page import _infeasible

    def planned(pins: str, software: str = ""):
        text = result_text(pins).replace("  precision = bf16\n", "  precision = bf16\n" + software
                                         + "  subject to { memory <= 20 GB }\n")
        return plan(train_job(check_file(str(MOE), {"nodes": "4"}, text=text).design)), text

    overlapped, text = planned("    ep_overlap = true\n")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "ep_overlap =" in t)
    why = overlap_refusal(overlapped.job.stack, None, None, "full")[1]
    assert overlapped.status == "infeasible" and overlapped.smallest.config.recompute != "full"
    message = overlapped.infeasibility.message
    assert f"under `ep_overlap = true` ({MOE}:{line}:" in message and f"full recompute left out: {why}" in message
    assert "vp = 1" not in message        # pp = 1 pinned: no pipeline to interleave
    assert why in _infeasible(overlapped).replace("&#x27;", "'").replace("&quot;", '"')
    # and `gclc check` says the same words of a pinned full recompute beside the overlap
    pinned = checked("    ep_overlap = true\n    recompute = full\n")
    assert any(why in d.summary for d in pinned.diagnostics if d.is_error)
    for pins, software in (("", ""), ("    ep_overlap = true\n", "  software = fsdp\n")):
        other, _ = planned(pins, software)
        assert other.status == "infeasible" and other.smallest.config.recompute == "full"
        assert "left out" not in other.infeasibility.message and not other.infeasibility.left_out


def test_the_overlap_on_a_pipeline_also_leaves_out_vp_1_and_the_report_says_so():
    """On a pipeline Megatron-Core overlaps the all-to-all only in its interleaved schedule, so the search under
    the overlap holds no vp = 1, the count that keeps the fewest micro-batches in flight (model/train/memory.py):
    what was left out is read off the search space with and without the overlap, each in `overlap_refusal`'s
    words; another stack (fsdp) leaves nothing out."""
    from gclc.compiler.schema import overlap_refusal
    from gclc.solver.train import enumerate as space_def
    from gclc.solver.train.explain import left_out

    text = result_text("    ep_overlap = true\n").replace("    pp = 1\n", "")
    job = train_job(check_file(str(MOE), {"nodes": "4"}, text=text).design)
    pipelines = [pp for pp in space_def.space(job).pps if pp > 1]
    assert pipelines and all(1 not in space_def.vp_candidates(job, pp) for pp in pipelines)
    clause = left_out(job)
    vp_why, full_why = overlap_refusal(job.stack, 2, 1, None)[1], overlap_refusal(job.stack, None, None, "full")[1]
    assert f"vp = 1 at pp = {', '.join(map(str, pipelines))} left out: {vp_why}" in clause
    assert f"full recompute left out: {full_why}" in clause
    fsdp = train_job(check_file(str(MOE), {"nodes": "4"},
                                text=text.replace("  parallelism {", "  software = fsdp\n  parallelism {", 1)).design)
    assert left_out(fsdp) == ""


@pytest.mark.parametrize("pins, pp, words, other", [
    # 8 layers over 8 stages: no virtual-stage count from 2 splits them, so the search would find nothing
    ("    ep_overlap = true\n", 8, "no count from 2 to", "pp = 8"),
    ("    ep_overlap = true\n    schedule = one_f_one_b\n", 2, "interleaved schedule", "schedule = one_f_one_b"),
])
def test_an_overlap_the_search_could_not_place_on_megatron_core_is_a_located_error(pins, pp, words, other):
    text = result_text(pins).replace("    pp = 1\n", f"    pp = {pp}\n")
    result = check_file(str(MOE), {"nodes": "4"}, text=text)
    errors = [d for d in result.diagnostics if d.is_error]
    assert len(errors) == 1 and errors[0].code == "parallelism" and words in errors[0].summary, \
        [d.summary for d in errors]
    assert errors[0].subject.line == next(i for i, t in enumerate(text.splitlines(), 1) if "ep_overlap =" in t)
    assert any(label.message == other for label in errors[0].labels)
    # the same pipeline with a virtual-stage count Megatron-Core runs passes (pinned: taken as written)
    fixed = text.replace("    schedule = one_f_one_b\n", "").replace("    ep_overlap = true\n", "    ep_overlap = true\n    vp = 2\n")
    assert not [d for d in check_file(str(MOE), {"nodes": "4"}, text=fixed).diagnostics if d.is_error]
