"""Fabric expansion against hand counts and published reference architectures."""

from gclc.compiler import topology


def test_dgx_h100_superpod_four_scalable_units():
    # NVIDIA DGX SuperPOD (H100) reference architecture, compute fabric of 4 SUs
    # (127 DGX H100, 8 rails of NDR 400 Gb/s, QM9700 64-port switches): 32 leaf and
    # 16 spine switches (RA-11333-001, "compute fabric" table).
    leaf, spine = topology.fat_tree(endpoints=127 * 8, radix=64, tiers=2)
    assert (leaf.switches, spine.switches) == (32, 16)
    assert leaf.links_below == 1016 and spine.links_below == 32 * 32


def test_capacity_of_non_blocking_trees():
    # k^2/2 endpoints for two tiers and k^3/4 for three (Al-Fares et al., SIGCOMM 2008).
    assert topology.fat_tree_capacity(64, 2) == 64**2 // 2
    assert topology.fat_tree_capacity(64, 3) == 64**3 // 4
    assert topology.fat_tree_capacity(144, 2) == 144**2 // 2


def test_three_tier_full_tree_switch_count():
    # A full 3-tier tree of radix k has k^2/2 leaves, k^2/2 aggregation and k^2/4 core switches.
    k = 16
    leaf, agg, core = topology.fat_tree(endpoints=k**3 // 4, radix=k, tiers=3)
    assert (leaf.switches, agg.switches, core.switches) == (k * k // 2, k * k // 2, k * k // 4)
    assert [s.hops for s in (leaf, agg, core)] == [1, 3, 5]


def test_oversubscription_moves_ports_down():
    # 2:1 on a 48-port leaf: 32 ports down, 16 up.
    leaf, spine = topology.fat_tree(endpoints=64, radix=48, tiers=2, oversubscription=2)
    assert leaf.switches == 2 and spine.links_below == 2 * 16
    assert spine.oversubscription == 2


def test_torus_groups():
    assert topology.torus_groups((4, 4, 8)) == (4, 16, 128)
    assert topology.torus_bisection_links((4, 4, 8)) == 2 * 16


def test_a_tree_is_only_as_tall_as_its_endpoints_need():
    # Issue 28: one DGX H100 (8 NDR ports) on a two-tier radix-64 fabric was charged a leaf and
    # a spine. One switch with all 64 ports down reaches the 8 ports: it is the top, no spine.
    (only,) = topology.fat_tree(endpoints=8, radix=64, tiers=2)
    assert (only.level, only.switches, only.links_below, only.hops) == (1, 1, 8, 1)
    (only,) = topology.fat_tree(endpoints=64, radix=64, tiers=3)
    assert only.switches == 1
    # one port more than a switch holds needs the tier above (two leaves of 32 down, one spine)
    leaf, spine = topology.fat_tree(endpoints=65, radix=64, tiers=2)
    assert (leaf.switches, spine.switches) == (3, 2)
    # a middle tier stops the tree too: two tiers of radix 64 hold 2,048 ports, so 1,024 on a
    # three-tier fabric are 32 leaves and 16 spines (as the SuperPOD's 4 SUs above), no core
    leaf, spine = topology.fat_tree(endpoints=1024, radix=64, tiers=3)
    assert (leaf.switches, spine.switches, spine.hops) == (32, 16, 3)
    # and a tree one port beyond a tier's reach keeps the tier above it
    assert len(topology.fat_tree(endpoints=2049, radix=64, tiers=3)) == 3
