"""The collectives NCCL launches on the tiers' stages (model/comms.py `by_nccl`): NCCL's per-call base and
its steps (tuning.cc, tag v2.28.7-1: baseLatencies, hwLatencies, as model/network/nccl.py carries them),
each protocol's bytes at its share of the bus, the protocol of least time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import collectives, comms
from gclc.model.network import nccl
from gclc.model.network.placement import tile
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

LL, LL128, SIMPLE = range(3)


def tier(level, group, bandwidth, latency, scope="node", kind="nvlink", reduces=False, ring=0, generation="hopper"):
    return Tier(level, f"t{level}", f"f{level}", kind, scope, group, bandwidth, latency, 1.0, reduces, 1.0,
                ring=ring, generation=generation if scope == "node" else None, span=no_span())


NODE = tier(0, 8, 400e9, 0.6e-6)
LEAF = tier(1, 64, 50e9, 0.5e-6, scope="scaleout", kind="infiniband")
TIERS = (NODE, LEAF)


def base(p):
    return nccl.BASE_LATENCY_US["ring"][p] * 1e-6


def step(link, p):
    return nccl.STEP_LATENCY_US[link]["ring"][p] * 1e-6


def test_a_small_gather_in_one_node_pays_lls_base_and_its_steps_by_hand():
    """8 B gathered over 8 NVLink GPUs: LL's 6.6 us base, log2 8 = 3 steps at the tier's 0.6 us (NCCL's own
    NVLink LL step), and 7/8 of the bytes at half the rate (LL's 8-byte stores with a flag)."""
    stages = comms.place(8, 1, TIERS)
    by_hand = base(LL) + 3 * 0.6e-6 + 7 / 8 * 8 / nccl.LL_SHARE / 400e9
    assert comms.all_gather(8, stages, by_nccl=True) == pytest.approx(by_hand, rel=1e-12)
    assert comms.all_gather(8, stages) == pytest.approx(3 * 0.6e-6 + 7 / 8 * 8 / 400e9, rel=1e-12)


def test_an_ll_step_over_blackwells_nvlink_is_the_one_nccl_py_prices():
    """Blackwell's NVLink LL step is nccl.NVLINK5_LL_STEP_US (1.44 us, read from the GB300 tables), not tuning.cc's
    0.6 us, as model/network/nccl.py prices its rings: 8 B gathered over 8 Blackwell GPUs pay it three times."""
    stages = comms.place(8, 1, (tier(0, 8, 400e9, 0.6e-6, generation="blackwell"),))
    by_hand = base(LL) + 3 * nccl.NVLINK5_LL_STEP_US * 1e-6 + 7 / 8 * 8 / nccl.LL_SHARE / 400e9
    assert comms.all_gather(8, stages, by_nccl=True) == pytest.approx(by_hand, rel=1e-12)


def test_each_step_out_of_the_node_pays_nccls_network_step_and_the_wire_by_hand():
    """16 GPUs, two nodes of 8, tiled: the NVLink stage's 3 steps at 0.6 us and the leaf's one step at NCCL's
    network LL step (2.7 us) plus the leaf's 0.5 us one way (latencyInter), over LL's base."""
    stages = tile(16, 1, TIERS)
    moving = 7 / 8 * 8 / 400e9 + 1 / 2 * 1 / 50e9   # 8 B over the node, its 1 B share over the leaf
    by_hand = base(LL) + 3 * 0.6e-6 + (step("net", LL) + 0.5e-6) + moving / nccl.LL_SHARE
    assert comms.reduce_scatter(8, stages, by_nccl=True) == pytest.approx(by_hand, rel=1e-12)


def test_a_large_call_runs_simple_with_its_base_steps_and_flush_by_hand():
    """1 GiB reduce-scattered over two nodes: Simple's 8.4 us base, its 3.4 us NVLink step (above the tier's
    0.6), its 14 us network step with the wire twice (the flush NCCL adds for Simple), the bytes at full rate."""
    stages = tile(16, 1, TIERS)
    nbytes = 2.0**30
    moving = 7 / 8 * nbytes / 400e9 + 1 / 2 * nbytes / 8 / 50e9
    by_hand = base(SIMPLE) + 3 * step("nvlink", SIMPLE) + step("net", SIMPLE) + 2 * 0.5e-6 + moving
    assert comms.reduce_scatter(nbytes, stages, by_nccl=True) == pytest.approx(by_hand, rel=1e-12)


def test_a_middle_all_reduce_runs_ll128_over_nvlink_and_not_over_pcie_by_hand():
    """An all-reduce whose bytes take 25 us on 8 GPUs' ring rate: over NVLink LL128 (14 us base, 6 steps at
    1.9 us, 92 % of the bus) beats LL (6.6 + 6 x 0.6 us, half the bus) and Simple (8.4 + 6 x 3.4 us); NCCL runs
    no LL128 over PCIe (tuning.cc: LL128 only where the GPUs meet over NVLink), so there LL or Simple, on PCIe's
    steps."""
    moving = 25e-6
    nbytes = moving * 400e9 / (2 * 7 / 8)
    nvlink = comms.place(8, 1, (NODE,))
    ll128 = base(LL128) + 6 * step("nvlink", LL128) + moving / nccl.LL128_SHARE
    others = (base(LL) + 6 * 0.6e-6 + moving / nccl.LL_SHARE, base(SIMPLE) + 6 * step("nvlink", SIMPLE) + moving)
    assert ll128 < min(others)
    assert comms.all_reduce(nbytes, nvlink, by_nccl=True) == pytest.approx(ll128, rel=1e-12)
    pcie = comms.place(8, 1, (tier(0, 8, 400e9, 0.6e-6, kind="pcie"),))
    on_pcie = min(base(LL) + 6 * step("pcie", LL) + moving / nccl.LL_SHARE,
                  base(SIMPLE) + 6 * step("pcie", SIMPLE) + moving)
    assert comms.all_reduce(nbytes, pcie, by_nccl=True) == pytest.approx(on_pcie, rel=1e-12)


def test_on_two_gpus_a_small_call_costs_what_nccls_own_model_says():
    """Two GPUs of one node: comms' one step is a ring's one step, so a small reduce-scatter NCCL launches
    costs what model/collectives.py prices it at (NCCL's ring LL: its base and one NVLink step)."""
    stages = comms.place(2, 1, (NODE,))
    assert comms.reduce_scatter(8, stages, by_nccl=True) == pytest.approx(collectives.reduce_scatter(8, stages),
                                                                          rel=1e-3)


def test_a_torus_axis_is_not_nccls():
    """NCCL runs no collective along a torus axis (its runtime's own: model/collectives.py): the tiers' price."""
    axis = tier(0, 16, 100e9, 1e-6, kind="ici", ring=16)
    stages = comms.place(16, 1, (axis,))
    assert comms.all_gather(4096, stages, by_nccl=True) == comms.all_gather(4096, stages)


groups = st.tuples(st.sampled_from([2, 4, 8, 16, 64, 256]), st.sampled_from([1, 2, 8]))
sizes = st.floats(1.0, 2.0**34)
collectives_ = st.sampled_from([comms.all_reduce, comms.reduce_scatter])
latencies = st.sampled_from([0.0, 0.6e-6, 2e-6, 10e-6])


@settings(max_examples=scaled_examples(60), deadline=None)
@given(groups, sizes, sizes, collectives_, latencies, latencies, st.booleans())
def test_an_nccl_call_pays_at_least_its_least_base_more_than_the_tiers_and_more_for_more_bytes(
        group, a, b, collective, up, out, reduces):
    """Laws: a call NCCL launches costs no less than the tiers alone (a base, steps no shorter than the tiers',
    no protocol faster than the bus) and at least NCCL's least ring base over them; and a larger call never
    takes less time (NCCL's protocol of least time: a minimum of times each growing with the bytes)."""
    tiers = (tier(0, 8, 400e9, up, reduces=reduces), tier(1, 4096, 50e9, out, scope="scaleout", kind="infiniband"))
    stages = comms.place(*group, tiers)
    small, large = min(a, b), max(a, b)
    launched = collective(small, stages, by_nccl=True)
    assert launched >= collective(small, stages) + min(nccl.BASE_LATENCY_US["ring"]) * 1e-6 * (1 - 1e-12)
    assert collective(large, stages, by_nccl=True) >= launched * (1 - 1e-12)
