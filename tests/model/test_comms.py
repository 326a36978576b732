"""Collective costs against the ring formulas (NCCL's bus-bandwidth definitions)."""

import pytest

from gclc.compiler.ir import Tier
from gclc.model import comms
from gclc.model.network.placement import tile
from gclc.dsl.source import no_span


def tier(level, group, bandwidth, latency=0.0, reduction=False, scope="node"):
    return Tier(level, f"t{level}", "f", "nvlink", scope, group, bandwidth, latency, 1.0, reduction, 1.0,
                span=no_span())


# an 8-GPU scale-up node under two network tiers (a ring's channels leave a scale-up domain at
# any of its members, so which tiers are scale-up decides how far a leaving hop spreads)
NODE, RACK, ALL = tier(0, 8, 400e9), tier(1, 64, 50e9, scope="scaleout"), tier(2, 1024, 25e9, scope="scaleout")
TIERS = (NODE, RACK, ALL)


def test_ring_all_reduce_volume():
    # a ring all-reduce moves 2 (n-1)/n of the data through each GPU's link
    stages = comms.place(8, 1, TIERS)
    assert comms.all_reduce(1e9, stages) == pytest.approx(2 * 7 / 8 * 1e9 / 400e9)
    assert comms.reduce_scatter(1e9, stages) == pytest.approx(7 / 8 * 1e9 / 400e9)


def test_placement_by_stride():
    assert [(s.tier.level, s.peers) for s in comms.place(8, 1, TIERS)] == [(0, 8)]
    assert [(s.tier.level, s.peers) for s in comms.place(16, 8, TIERS)] == [(1, 8), (2, 2)]
    assert [(s.tier.level, s.peers) for s in comms.place(32, 4, TIERS)] == [(0, 2), (1, 8), (2, 2)]
    assert comms.place(1, 8, TIERS) == ()


def test_hierarchical_all_reduce_passes_a_share_outward():
    tiled = tile(64, 1, TIERS)
    expected = 2 * 7 / 8 * 1e9 / 400e9 + 2 * 7 / 8 * (1e9 / 8) / 50e9
    assert comms.all_reduce(1e9, tiled) == pytest.approx(expected)


def test_a_ring_over_nodes_spreads_its_crossings_over_every_nic_of_the_node():
    # NCCL's channels leave each node at another GPU, so the one hop a ring makes out of a node
    # moves over its 8 NICs at once (8 x 50 GB/s) while the other hops run on NVLink: the ring
    # moves 2 (n-1)/n of the data at 400 GB/s, sooner than the tiled stages one after another
    stages = comms.place(64, 1, TIERS)
    assert comms.all_reduce(1e9, stages) == pytest.approx(2 * 63 / 64 * 1e9 / 400e9)
    assert comms.all_reduce(1e9, stages) < comms.all_reduce(1e9, tile(64, 1, TIERS))
    # one GPU a node (stride 8): each ring leaves through its own GPU's NIC, the tiled stages stay
    assert [(s.tier.level, s.peers) for s in comms.place(8, 8, TIERS)] == [(1, 8)]


def test_in_network_reduction_sends_each_byte_once():
    sharp = (tier(0, 8, 400e9, reduction=True),)
    assert comms.all_reduce(1e9, comms.place(8, 1, sharp)) == pytest.approx(1e9 / 400e9)


def test_all_to_all_uses_the_slowest_tier_for_its_share():
    stages = comms.place(64, 1, TIERS)
    # 7/64 of the data stays in the node, 56/64 crosses the rack tier
    assert comms.all_to_all(1e9, stages) == pytest.approx(56 / 64 * 1e9 / 50e9)
