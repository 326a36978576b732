"""The flow-level simulation (model/network/flows.py): max-min fair sharing, and the analytic
ring rates of model/network/placement.py checked against it on the same links."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import sparse

from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model.network import flows, placement


def tier(level, group, bandwidth, oversubscription=1.0, fabric="ib", kind="infiniband", scope="scaleout"):
    return Tier(level, f"t{level}", fabric, kind, scope, group, bandwidth, 1e-6, oversubscription, False, 1.0,
                span=no_span())


NODE = tier(0, 8, 400e9, fabric="nv", kind="nvlink", scope="node")


def test_max_min_fills_the_tightest_link_first():
    # flow 0 crosses links 0 (10) and 1 (3); flow 1 only link 0: 3 and 7
    matrix = sparse.csr_matrix(np.array([[1.0, 1.0], [1.0, 0.0]]))
    assert flows.max_min(matrix, np.array([10.0, 3.0])) == pytest.approx([3.0, 7.0])


def test_a_ragged_ring_runs_at_the_analytic_rate():
    # 12 nodes on 3-node leaves under a 2:1 spine; 4-node groups: the middle leaves hold the
    # ends of two groups, whose 16 hops share 24 GPUs' worth of 25 GB/s: 37.5 GB/s a hop
    tiers = (NODE, tier(1, 24, 50e9), tier(2, 96, 25e9, 2.0))
    rows = flows.compare(tiers, 96, [("dp", 32, 1, True)])
    assert [name for name, *_ in rows] == ["dp.0", "dp.1"]
    name, analytic, alone, together = rows[-1]
    assert analytic == pytest.approx(37.5e9) and alone == pytest.approx(37.5e9)


def test_pipeline_sends_and_data_parallel_rings_share_the_nic():
    tiers = (NODE, tier(1, 64, 50e9))
    rows = dict((name, (alone, together)) for name, _, alone, together in
                flows.compare(tiers, 64, [("dp", 4, 8, True), ("pp", 2, 32, False)]))
    assert rows["dp.0"][0] == pytest.approx(50e9) and rows["dp.0"][1] == pytest.approx(25e9)
    assert rows["pp.0"][1] == pytest.approx(25e9)


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None)
@given(st.sampled_from([16, 24, 40, 48, 64]), st.sampled_from([1.0, 2.0, 3.0]), st.sampled_from([8, 12, 16, 24]),
       st.sampled_from([(2, 8), (4, 8), (8, 8), (16, 1), (32, 1), (3, 8), (6, 8)]))
def test_the_analytic_rate_of_every_stage_is_the_simulated_one(leaf, oversubscription, nodes, group):
    """Each stage of the planner's model (tiled or a ring in rank order), simulated alone on the
    same links: the same rate. Checks the model's counting of straddling groups and shared
    uplinks against a max-min fair simulation of every hop."""
    size, stride = group
    gpus = nodes * 8
    if gpus % (size * stride):
        return
    tiers = (NODE, tier(1, leaf, 50e9), tier(2, gpus, 50e9 / oversubscription, oversubscription))
    for name, analytic, alone, _ in flows.compare(tiers, gpus, [("g", size, stride, True)]):
        assert alone == pytest.approx(analytic, rel=1e-9), name


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None)
@given(st.sampled_from([16, 24, 40, 48, 64]), st.sampled_from([1.0, 2.0, 3.0]), st.sampled_from([8, 12, 16, 24]),
       st.sampled_from([(2, 8), (4, 8), (2, 16), (3, 32), (4, 2), (2, 48)]))
def test_the_analytic_rate_of_pipeline_sends_is_the_simulated_one(leaf, oversubscription, nodes, pipeline):
    """Every stage sends to the next at once: the slowest send's analytic rate (shared uplinks
    counted) is the simulated one."""
    size, stride = pipeline
    gpus = nodes * 8
    if gpus % (size * stride):
        return
    tiers = (NODE, tier(1, leaf, 50e9), tier(2, gpus, 50e9 / oversubscription, oversubscription))
    [(name, analytic, alone, _)] = flows.compare(tiers, gpus, [("pp", size, stride, False)])
    assert alone == pytest.approx(analytic, rel=1e-9)


def test_the_last_stage_sends_nothing_forward():
    """The deep run's counterexample to the law above: 2 stages of 48 ranks on 64-GPU leaves
    at 2:1. The first leaf holds all of stage 0 and 16 of stage 1; only stage 0's last 32
    send past the leaf (stage 1 has no next stage), so they share 64 GPUs' worth of 25 GB/s
    uplinks: 50 GB/s, the port's. Counting 48 senders gave 33 GB/s."""
    tiers = (NODE, tier(1, 64, 50e9), tier(2, 96, 25e9, 2.0))
    [(name, analytic, alone, _)] = flows.compare(tiers, 96, [("pp", 2, 48, False)])
    assert analytic == pytest.approx(50e9) and alone == pytest.approx(50e9)


def test_pipeline_sends_pay_the_spine_only_where_a_pair_leaves_the_leaf():
    # 8 stages of 2048 GPUs: every GPU's partner is under another 344-GPU leaf (2:1 spine: half
    # the port), but only the pairs near a spine domain's edge climb to the 4:1 core
    tiers = (NODE, tier(1, 344, 40e9), tier(2, 14792, 20e9, 2.0), tier(3, 16384, 10e9, 4.0))
    outer, speed = placement.send_rate(8, 2048, tiers)
    assert outer.level == 3 and speed == pytest.approx(20e9)


# ---------------------------------------------------------------- ECMP: flows hashed onto uplinks

@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None)
@given(st.sampled_from([16, 24, 48]), st.sampled_from([1.0, 2.0]), st.sampled_from([8, 12]),
       st.sampled_from([(4, 8, True), (8, 8, True), (2, 32, False), (16, 1, True)]), st.sampled_from([2, 4, 8]),
       st.integers(0, 2**31))
def test_hashing_flows_onto_uplinks_never_raises_the_slowest_flow(leaf, oversubscription, nodes, group, paths, seed):
    """Max-min fairness makes the slowest flow as fast as any allocation can; every allocation
    with flows pinned to one of U uplinks fits in the pool of the same U links, so the slowest
    flow under ECMP is never faster than with the uplinks pooled (adaptive routing)."""
    tiers = (NODE, tier(1, leaf, 50e9), tier(2, 8 * nodes, 50e9 / oversubscription, oversubscription))
    gpus = 8 * nodes
    size, stride, ring = group
    if size * stride > gpus:
        return
    c = [flows.Communicator("x", size, stride, ring)]
    slowest = {}
    for ways in (1, paths):
        f = flows.fabric(tiers, gpus, {2: ways}, seed)
        matrix, _, _ = flows.flows(f, c)
        slowest[ways] = flows.max_min(matrix, f.capacity).min()
    assert slowest[paths] <= slowest[1] * (1 + 1e-9)


def test_ecmp_collisions_match_the_expected_fullest_uplink():
    """16 GPUs of one leaf each send to a GPU of the other over 16 equal uplinks (1:1): hashed,
    a flow gets its port over its uplink's load, so the slowest runs at port / the fullest
    uplink's load. Over many hashes (seeds) its mean is E[max load] of 16 flows in 16 bins, the
    figure compiler/routing.py computes exactly and the planner's ECMP share is built on."""
    from gclc.compiler.routing import expected_max_load

    tiers = (tier(0, 16, 50e9), tier(1, 32, 50e9))
    pairs = [flows.Communicator("pp", 2, 16, ring=False)]
    loads = []
    for seed in range(200):
        f = flows.fabric(tiers, 32, {1: 16}, seed)
        matrix, _, _ = flows.flows(f, pairs)
        loads.append(50e9 / flows.max_min(matrix, f.capacity).min())
    assert np.mean(loads) == pytest.approx(expected_max_load(16, 16), rel=0.05)
    pooled = flows.fabric(tiers, 32)
    assert flows.max_min(flows.flows(pooled, pairs)[0], pooled.capacity).min() == pytest.approx(50e9)


# ---------------------------------------------------------------- incast, PFC and ECN

def test_incast_shares_the_receivers_port_and_pfc_pauses_the_senders_other_flows():
    """Four GPUs of other nodes send to GPU 0 (fan-in: 50/4 GB/s each, whatever the congestion
    control); each also sends to a GPU nobody else sends to. With ECN/DCQCN that flow takes what
    its port has left (37.5 GB/s); with PFC alone the paused sender port holds it to the incast's
    pace (the victim flow of DCQCN's Sec. 2.2)."""
    tiers = (NODE, tier(1, 64, 50e9))
    f = flows.fabric(tiers, 64)
    both = [flows.Communicator("in", 5, 8, pattern="fan_in"), flows.Communicator("other", 2, 32, ring=False)]
    ecn, pfc = (flows.ring_rates(f, both, c) for c in ("ecn", "pfc"))
    assert ecn["in"] == pytest.approx(12.5e9) and pfc["in"] == pytest.approx(12.5e9)
    assert ecn["other"] == pytest.approx(37.5e9) and pfc["other"] == pytest.approx(12.5e9)


def test_pfc_spreads_an_all_to_alls_hash_collisions_to_a_ring_beside_it():
    """All-to-alls of 4 GPUs, one per leaf, 48 flows a leaf hashed over its 16 spine paths, beside
    data-parallel rings inside each leaf on the same NICs: hashes collide on the spines' ports
    toward a leaf; with PFC alone the pause reaches the senders' ports and slows the rings beside,
    with ECN (or with adaptive routing, which leaves no collision to pause on) it does not. The
    all-to-all's own slowest flow is the same either way."""
    tiers = (NODE, tier(1, 16, 50e9), tier(2, 64, 50e9))
    both = [flows.Communicator("ep", 4, 16, pattern="all"), flows.Communicator("dp", 2, 8)]
    slowed = []
    for seed in range(8):
        f = flows.fabric(tiers, 64, {2: 16}, seed)
        ecn, pfc = (flows.ring_rates(f, both, c) for c in ("ecn", "pfc"))
        assert pfc["ep"] == pytest.approx(ecn["ep"], rel=1e-9)
        assert pfc["dp"] <= ecn["dp"] * (1 + 1e-9)
        slowed.append(pfc["dp"] / ecn["dp"])
    assert max(slowed) < 0.9
    pooled = flows.fabric(tiers, 64)    # adaptive routing: no collision to pause on
    assert flows.ring_rates(pooled, both, "pfc") == pytest.approx(flows.ring_rates(pooled, both, "ecn"))


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None)
@given(st.sampled_from([8, 16, 32]), st.sampled_from([1.0, 2.0]), st.sampled_from([1, 4, 8]),
       st.lists(st.sampled_from([("all", 4, 8), ("all", 4, 16), ("fan_in", 4, 8), ("fan_in", 8, 8), ("ring", 4, 8),
                                 ("pairs", 2, 16), ("ring", 2, 1)]), min_size=1, max_size=3, unique=True),
       st.integers(0, 2**31))
def test_pausing_never_slows_the_slowest_flow_and_never_overfills_a_link(leaf, oversubscription, paths, kinds, seed):
    """PFC's caps are rates of flows max-min already reached, so progressive filling meets the
    slowest flow before any cap binds: lossless rates keep max-min's slowest flow and fit every link."""
    gpus = 64
    tiers = (NODE, tier(1, leaf, 50e9), tier(2, gpus, 50e9 / oversubscription, oversubscription))
    f = flows.fabric(tiers, gpus, {2: paths}, seed)
    communicators = [flows.Communicator(f"{k}{i}", size, stride, pattern=k) for i, (k, size, stride) in enumerate(kinds)]
    matrix, _, _ = flows.flows(f, communicators)
    fair, paused = flows.max_min(matrix, f.capacity), flows.lossless_rates(matrix, f.capacity)
    assert paused.min() == pytest.approx(fair.min(), rel=1e-9)
    assert np.all(matrix @ paused <= f.capacity * (1 + 1e-9))


def test_an_unknown_pattern_or_congestion_is_refused():
    f = flows.fabric((NODE, tier(1, 16, 50e9)), 16)
    with pytest.raises(ValueError, match="pattern"):
        flows.ring_rates(f, [flows.Communicator("x", 2, 8, pattern="broadcast")])
    with pytest.raises(ValueError, match="congestion"):
        flows.ring_rates(f, [flows.Communicator("x", 2, 8)], "lossy")
