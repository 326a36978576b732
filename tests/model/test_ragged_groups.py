"""Ragged groups: a group that does not divide a domain pays the tier above only for the ring
hops that leave the domain (model/network/placement.py)."""

from pathlib import Path

import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import comms
from gclc.model.network.placement import tile
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train.step import estimate

ROOT = Path(__file__).resolve().parents[2]


def tier(level, group, bandwidth, oversubscription=1.0, latency=0.0):
    return Tier(level, f"t{level}", "f", "infiniband", "scaleout", group, bandwidth, latency, oversubscription,
                False, 1.0, span=no_span())


# 8-GPU nodes on 24-GPU leaves (3 nodes) under a 2:1 spine: a 32-rank group straddles two leaves
NODE, LEAF, SPINE = tier(0, 8, 400e9), tier(1, 24, 50e9), tier(2, 32, 25e9, 2.0)


def test_a_ragged_group_rings_in_rank_order_at_the_port_rate():
    stages = comms.place(32, 1, (NODE, LEAF, SPINE))
    # inside the node as before; then one ring over the 4 nodes: it leaves the 3-node leaf once
    # each way, and the leaf's uplinks (24 GPUs x 25 GB/s) carry that hop at the port's 50 GB/s
    assert [(s.tier, s.peers) for s in stages] == [(NODE, 8), (SPINE, 4)]
    assert stages[-1].rate == pytest.approx(50e9)
    expected = 2 * 7 / 8 * 1e9 / 400e9 + 2 * 3 / 4 * (1e9 / 8) / 50e9
    assert comms.all_reduce(1e9, stages) == pytest.approx(expected)
    # the tiled stages charged every byte the spine's 25 GB/s: twice the outer time
    assert comms.all_reduce(1e9, tile(32, 1, (NODE, LEAF, SPINE))) > expected


def test_a_ring_that_leaves_every_domain_pays_the_oversubscribed_rate():
    # one member per leaf (stride 24): every hop climbs, each GPU gets the spine's share
    stages = comms.place(2, 24, (NODE, LEAF, tier(2, 48, 25e9, 2.0)))
    assert comms.stage_rate(stages[-1]) == pytest.approx(25e9)
    assert comms.all_reduce(1e9, stages) == pytest.approx(2 * 1 / 2 * 1e9 / 25e9)


def test_two_groups_straddling_one_leaf_share_its_uplinks():
    # 4-node groups on 3-node leaves over 12 nodes: the second leaf holds the ends of two groups,
    # two hops leave it each way on 24 GPUs' worth of 25 GB/s: 37.5 GB/s a hop, below the port
    spine = tier(2, 96, 25e9, 2.0)
    stages = comms.place(32, 1, (NODE, LEAF, spine))
    assert stages[-1].rate == pytest.approx(37.5e9)


def test_a_ragged_all_to_all_pays_the_spine_only_for_the_members_outside_the_leaf():
    # 32 ranks, 3 nodes under one leaf and 1 under the next: the tiled stages charged 24 of
    # every 32 bytes the spine's 25 GB/s. A GPU of the 3 nodes sends 1/4 out, one of the lone
    # node 3/4; the second leaf's uplinks (24 GPUs' worth) carry the lone node's 8 GPUs: 1/4
    # per GPU of uplink, 3/4 through its own 50 GB/s port. The NIC carries all 3/4 leaving
    # the node: 3/4 / 50 GB/s sets the pace, half the tiled charge.
    tiers = (NODE, LEAF, SPINE)
    tiled = comms.all_to_all(1e9, tile(32, 1, tiers))
    assert tiled == pytest.approx(24 / 32 * 1e9 / 25e9)
    assert comms.all_to_all(1e9, comms.place(32, 1, tiers)) == pytest.approx(0.75 * 1e9 / 50e9)


def test_an_all_to_all_that_tiles_keeps_its_tiled_price():
    tiers = (NODE, tier(1, 64, 50e9), tier(2, 1024, 25e9))
    assert comms.all_to_all(1e9, comms.place(64, 1, tiers)) == comms.all_to_all(1e9, tile(64, 1, tiers))


RAIL_VS_TREE = ROOT / "benchmarks" / "designs" / "superpod_sweep.gcl"


@pytest.mark.parametrize("nodes", [64, 128])
def test_rails_beat_a_plain_fat_tree_at_4_to_1(nodes):
    """Issue #33's report: at 4:1 a radix-64 rail leaf holds 51 nodes, the job's 8-node data
    groups straddle its edges, and the tiled stages charged them the spine for every byte, so a
    rail-optimized SuperPOD planned 89.6 k tokens/s against a plain fat tree's 135.5 k. The
    configuration is the search's choice at 64 nodes (tp 8, pp 7, cp 2, dp 4, ZeRO-1)."""
    text = RAIL_VS_TREE.read_text(encoding="utf-8")
    times = {}
    for topology in ("rail_optimized", "fat_tree"):
        design = text.replace("rail_optimized(", f"{topology}(").replace("param nodes = 127", f"param nodes = {nodes}")
        design = design.replace("param oversubscription = 1:1", "param oversubscription = 4:1")
        result = check_text(design, str(RAIL_VS_TREE))
        assert result.ok, [str(d) for d in result.diagnostics]
        job = train_job(result.design, "pinned")
        cfg = TrainConfig(batch=512, seq=8192, tp=8, pp=7, dp=4, cp=2, microbatch=1, zero=1, sp=True)
        times[topology] = estimate(job.shape, cfg, job.partition).step_time
    assert times["rail_optimized"] <= times["fat_tree"]
