"""Collective costs against the ring formulas (NCCL's bus-bandwidth definitions)."""

import pytest

from gclc.compiler.ir import Tier
from gclc.model import comms
from gclc.dsl.source import no_span


def tier(level, group, bandwidth, latency=0.0, reduction=False):
    return Tier(level, f"t{level}", "f", "nvlink", "node", group, bandwidth, latency, 1.0, reduction, 1.0,
                span=no_span())


NODE, RACK, ALL = tier(0, 8, 400e9), tier(1, 64, 50e9), tier(2, 1024, 25e9)
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
    stages = comms.place(64, 1, TIERS)
    expected = 2 * 7 / 8 * 1e9 / 400e9 + 2 * 7 / 8 * (1e9 / 8) / 50e9
    assert comms.all_reduce(1e9, stages) == pytest.approx(expected)


def test_in_network_reduction_sends_each_byte_once():
    sharp = (tier(0, 8, 400e9, reduction=True),)
    assert comms.all_reduce(1e9, comms.place(8, 1, sharp)) == pytest.approx(1e9 / 400e9)


def test_all_to_all_uses_the_slowest_tier_for_its_share():
    stages = comms.place(64, 1, TIERS)
    # 7/64 of the data stays in the node, 56/64 crosses the rack tier
    assert comms.all_to_all(1e9, stages) == pytest.approx(56 / 64 * 1e9 / 50e9)
