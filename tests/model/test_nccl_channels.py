"""NCCL's caps that go by its channels and by the host CPU (model/network/nccl.py): the per-channel caps of
tuning.cc over the search's channel speed (search.cc), and LL's cap across nodes by the host CPU's row."""

import math

import attrs
import pytest
from hypothesis import example, given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import collectives, comms
from gclc.model.network import nccl
from gclc.model.network.nccl import Communicator

H100_NODE = Communicator(8, 1, 365.6e9, channels=12)
H100_NODES = Communicator(128, 16, 365.6e9, 50e9, wire=1.5e-6, host="intel", channels=8)


def test_the_caps_are_tuning_cc_s_and_the_speeds_search_cc_s():
    # src/graph/tuning.cc, tag v2.30.4-1: perChMaxRingLL128Bws, perChMaxTreeBws, perChMaxTreeLL128Bws (N1/N2/N4);
    # llMaxBws row 0 "Volta-N1/Intel-N2/Intel-N4" {39.0, 39.0, 20.4}
    assert nccl.PER_CHANNEL_GBPS["ring_LL128"] == {"ampere": (20.0,) * 3, "hopper": (36.7,) * 3,
                                                   "blackwell": (40.0,) * 3}
    assert nccl.PER_CHANNEL_GBPS["tree"]["hopper"] == (38.7, 41.4, 36.0)
    assert nccl.PER_CHANNEL_GBPS["tree_LL128"]["blackwell"] == (55.6, 31.67, 20.0)
    assert nccl.LL_MAX_BUS_GBPS["volta"] == (39.0, 39.0, 20.4)
    # search.cc: 18 x 40.1 GB/s of NVLink 5 fill 8 channels at 90, duplicated to 16 at 45; Hopper 6 x 60 -> 12 x 30,
    # Ampere 6 x 40 -> 12 x 20
    assert [nccl.search_channels(g, 1, 8, math.inf) for g in ("ampere", "hopper", "blackwell")] == [12, 12, 16]
    assert nccl.search_channels("hopper", 1, 8, math.inf, link="pcie") == 0


@pytest.mark.parametrize("generation, nic, per_node, channels", [
    ("hopper", 50e9, 8, 8),          # NDR 400G: 48 GB/s, one channel a NIC, 8 of them: not duplicated (< 50, > 4)
    ("hopper", 25e9, 8, 8),          # HDR 200G: 24 GB/s (< 25: never duplicated)
    ("ampere", 25e9, 8, 8),          # an A100 on HDR: 24 GB/s, as docs/network.md reads it
    ("blackwell", 100e9, 8, 16),     # 800G: 96 GB/s, duplicated (>= 50)
    ("blackwell", 50e9, 4, 8),       # 400G on a 4-GPU tray: 48 GB/s on 4 channels, duplicated
    ("hopper", 0.1e9, 8, 0),         # slower than any speed of the array: no search modelled
])
def test_across_nodes_a_channel_runs_a_nic_and_nccl_duplicates_the_fast_or_few(generation, nic, per_node, channels):
    assert nccl.search_channels(generation, 2, per_node, nic) == channels


@pytest.mark.parametrize("generation, nodes, per_node, nic, kernel", [
    ("hopper", 256, 8, 50e9, 16),       # 8 search channels at 48 GB/s, doubled by ncclTopoPostset (the INFO line's 16)
    ("hopper", 1, 8, math.inf, 24),     # 12 on one board, doubled
    ("blackwell", 1, 8, math.inf, 32),  # 16 on one board, doubled
    ("ampere", 1, 8, math.inf, 24),     # a DGX A100's "Channel 00/24"
    ("blackwell", 4, 2, 100e9, 16),     # 4 search channels at 48 (800G halved): 8, < 16 at > 45 GB/s: 16
    ("hopper", 4, 4, 50e9, 16),         # 4 NICs at 48 GB/s duplicated to 8 at 24: 16, too slow to double again
    ("hopper", 4, 1, 50e9, 4),          # one NIC a node: 2 search channels at 24, 4
    ("ampere", 4, 1, 50e9, 4),          # the second doubling is Hopper's and later's
    ("hopper", 2, 8, 0.1e9, 0),         # no search modelled: none known
])
def test_the_kernels_run_the_search_s_channels_doubled(generation, nodes, per_node, nic, kernel):
    # connect.cc ncclTopoPostset (v2.30.4-1): comm->nChannels = min(MAXCHANNELS, 2 x the search's), and across nodes
    # on Hopper and later twice that again while under 16 with a channel faster than 45 GB/s
    assert nccl.collective_channels(generation, nodes, per_node, nic) == kernel


@given(st.sampled_from(["ampere", "hopper", "blackwell"]), st.integers(1, 512), st.sampled_from([1, 2, 4, 8, 72]),
       st.sampled_from([math.inf, 0.1e9, 12.5e9, 25e9, 50e9, 100e9]))
def test_the_kernels_run_at_least_the_search_s_channels_and_at_most_maxchannels(generation, nodes, per_node, nic):
    search = nccl.search_channels(generation, nodes, per_node, nic)
    kernel = nccl.collective_channels(generation, nodes, per_node, nic)
    assert search <= kernel <= nccl.MAX_CHANNELS
    assert (kernel == 0) == (search == 0)


def test_collnet_adds_half_the_channels_again_across_nodes_of_several_gpus():
    # connect.cc: with CollNet on, comm->nChannels = nChannels + nChannels / 2 before the <8 PPN doubling
    assert nccl.collective_channels("hopper", 8, 8, 50e9, collnet=True) == 24
    assert nccl.collective_channels("hopper", 8, 1, 50e9, collnet=True) == 4     # one GPU a node: none added
    assert nccl.collective_channels("hopper", 1, 8, math.inf, collnet=True) == 24   # one node runs no CollNet
    assert nccl.collective_channels("blackwell", 4, 2, 100e9, collnet=True) == 24   # 8 + 4, under 16 at 48: doubled


def test_a_256_node_dgx_h100_tree_runs_16_channels_held_to_the_search_s_8_x_36_gb_s():
    # NCCL's tree kernel runs 16 channels on 256 DGX H100 over 400G (24 where SHARP's CollNet is on: NDR_FatTree),
    # and tuning.cc caps its bus at the search's 8 channels x perChMaxTreeBws (Hopper, 3+ nodes, 36 GB/s) all the same
    c = _communicator("DGX_H100", 256)
    assert c.collnet and c.channels == 8
    assert nccl.collective_channels("hopper", 256, 8, 50e9) == 16
    assert nccl.collective_channels("hopper", 256, 8, 50e9, collnet=True) == 24
    for communicator in (c, attrs.evolve(c, collnet=False)):
        assert nccl._ring_tree_bus("tree", "Simple", communicator)[1] == pytest.approx(8 * 36.0e9)


def test_a_tree_piece_splits_the_share_over_the_16_channels_of_eight_400g_nics_whatever_the_search():
    # the fill's split is CHANNELS, the kernels' count on 8 NICs of 400G, not each communicator's (24 on one H100
    # board): a lone channel runs at its CTA's rate, not at a share of the bus that the idle ones leave, and more
    # search channels never slow a call (test_a_cap_never_speeds_a_call_and_more_channels_never_slow_one)
    assert nccl.CHANNELS == nccl.collective_channels("hopper", 16, 8, 50e9) == 16
    c = _communicator("DGX_H100", 1)
    share, cap = nccl._ring_tree_bus("tree", "Simple", c, whole_call=False)
    assert share / nccl.CHANNELS < cap / c.channels
    assert nccl._fill("tree", "Simple", 4096, c) == pytest.approx((2 * 7 - 1) * 4096 / (share / nccl.CHANNELS))


def test_one_hopper_node_runs_under_every_cap():
    # 12 channels x 36.7 (ring LL128), x 38.7 (tree) lie above 0.92 x the node's 365.6 GB/s: NCCL's shares alone
    assert nccl._bandwidth("all_reduce", "ring", "LL128", H100_NODE) == pytest.approx(
        nccl._bandwidth("all_reduce", "ring", "LL128", attrs.evolve(H100_NODE, channels=0)))
    assert nccl._bandwidth("all_reduce", "tree", "Simple", H100_NODE) == pytest.approx(365.6e9 * 0.92 * 0.5)


def test_across_many_nodes_eight_channels_are_held_to_their_caps():
    bus = min(365.6e9, 8 * 50e9)                             # the node's NICs together, at most its NVLink
    ring = 128 / (2 * 127)
    assert nccl._bandwidth("all_reduce", "ring", "LL128", H100_NODES) == pytest.approx(8 * 36.7e9 * ring)
    assert nccl._bandwidth("all_reduce", "ring", "Simple", H100_NODES) == pytest.approx(bus * ring)   # no cap
    assert nccl._bandwidth("all_reduce", "tree", "Simple", H100_NODES) == pytest.approx(8 * 36.0e9 * 0.5)
    assert nccl._bandwidth("all_reduce", "tree", "LL128", H100_NODES) == pytest.approx(8 * 29.0e9 * 0.5)


def test_a_blackwell_node_s_ll128_ring_stays_under_its_16_channels_cap():
    # 16 x 40 = 640 GB/s against 0.92 x the tiers' 682: the share binds (NCCL's own 720 x 0.92 = 662 meets the cap)
    c = Communicator(8, 1, 682e9, channels=16, generation="blackwell")
    assert nccl._bandwidth("all_reduce", "ring", "LL128", c) == pytest.approx(682e9 * 0.92 * 8 / 14)


@pytest.mark.parametrize("host, two, more", [("intel", 39.0, 20.4), ("nvidia", 39.0, 20.4), ("", 39.0, 20.4),
                                             ("amd", 22.5, 19.0), ("mixed", 22.5, 19.0)])
def test_across_nodes_ll_is_capped_by_the_host_cpu_s_row(host, two, more):
    for generation in ("ampere", "hopper", "blackwell"):
        c = Communicator(16, 2, 365.6e9, 400e9, host=host, generation=generation)
        assert nccl._ll_cap(c) == two * 1e9
        assert nccl._ll_cap(attrs.evolve(c, ranks=64, nodes=8)) == more * 1e9
        assert nccl._ll_cap(attrs.evolve(c, ranks=8, nodes=1)) == nccl.LL_MAX_BUS_GBPS[generation][0] * 1e9


def _communicator(node: str, nodes: int) -> Communicator:
    tiers = _tiers(node, nodes)
    per_node = tiers[0].group_gpus
    stages = comms.place(per_node * nodes, 1, tiers)
    return collectives.communicator(tuple(getattr(stages, "options", (stages,))[0]))


@pytest.mark.parametrize("vendor", ["AMD", "amd", "Advanced Micro Devices", "Advanced Micro Devices, Inc."])
def test_a_host_named_advanced_micro_devices_takes_amd_s_ll_row(vendor):
    # NCCL tells the CPU by its cpuid vendor (topo.cc "AuthenticAMD"): a data sheet's full name is the same vendor
    from gclc.compiler.vendors import vendor_of

    assert vendor_of(vendor) == "AMD"
    stages = comms.place(16, 1, tuple(attrs.evolve(t, host=vendor) for t in _tiers("DGX_H100", 2)))
    c = collectives.communicator(tuple(getattr(stages, "options", (stages,))[0]))
    assert c.host == "amd" and nccl._ll_cap(c) == 22.5e9


def _tiers(node: str, nodes: int):
    text = (f'import "std/nvidia"\nimport "std/network"\n'
            f'cluster C {{ units = {nodes} x {node}  scaleout = NDR_FatTree }}\n')
    result = check_text(text, "case.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return lower(result.design).partitions[0].tiers


@pytest.mark.parametrize("node, host", [("DGX_A100", "amd"), ("DGX_H100", "intel"), ("DGX_B200", "intel")])
def test_the_communicator_reads_the_host_cpu_off_the_design(node, host):
    c = _communicator(node, 4)
    assert c.host == host
    assert c.channels == 8      # a channel a NIC: HDR's 24 GB/s, NDR's 48 on eight NICs are not duplicated


def test_a_small_tree_piece_runs_on_one_channel_bounded_by_the_whole_call_s_ll_cap():
    # NCCL runs a call this small on one channel (enqueue.cc); LL's cap bounds all channels together, so the
    # piece's channel takes the tree's per-channel share, not a sixteenth of the cap. The per-channel cap is the
    # search's 8 channels x tuning.cc's rate (perChMaxTreeBws, Hopper beyond two nodes: 36 GB/s, x LL's 1/3.8), so
    # the cap is over those 8 channels: a channel runs no faster than tuning.cc's 36 GB/s x 1/3.8 (the cap / 16 had
    # halved it), and takes a sixteenth of the tree's bus share (the 16 collective channels NCCL opens)
    share, cap = nccl._ring_tree_bus("tree", "LL", H100_NODES, whole_call=False)
    uncapped = min(share, cap)
    assert nccl._bandwidth("all_reduce", "tree", "LL", H100_NODES) * 2 == 20.4e9 < uncapped
    assert cap / H100_NODES.channels == pytest.approx(36.0e9 * nccl.TREE_LL_SHARE)
    hops = 2 * (7 + 4)
    channel = min(share / nccl.CHANNELS, cap / 8)
    assert nccl._fill("tree", "LL", 2048, H100_NODES) == pytest.approx((hops - 1) * 2048 / channel)


communicators = st.builds(
    Communicator, st.sampled_from([2, 8, 16, 64, 128]), st.sampled_from([1, 2, 8]),
    st.sampled_from([100e9, 365.6e9, 682e9]), st.sampled_from([12.5e9, 40e9, 50e9]),
    wire=st.sampled_from([0.0, 1e-6, 5e-6]), generation=st.sampled_from(["ampere", "hopper", "blackwell"]),
    host=st.sampled_from(["", "intel", "amd", "mixed"]), channels=st.sampled_from([0, 4, 8, 12, 16]))
collectives_ = st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"])


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(communicators, collectives_, st.integers(3, 33), st.sampled_from([4, 8, 16, 32]))
def test_a_cap_never_speeds_a_call_and_more_channels_never_slow_one(c, collective, size, channels):
    # a per-channel cap only lowers an option's bandwidth, and it grows with the channels
    uncapped = nccl.time(collective, 2.0**size, attrs.evolve(c, channels=0))
    few, many = sorted((c.channels or channels, channels))
    assert nccl.time(collective, 2.0**size, c) >= uncapped * (1 - 1e-12)
    assert nccl.time(collective, 2.0**size, attrs.evolve(c, channels=many)) <= \
        nccl.time(collective, 2.0**size, attrs.evolve(c, channels=few)) * (1 + 1e-12)


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(communicators, collectives_, st.integers(3, 33))
# the deep profile's counterexample (2026-12-07): 64 Blackwell GPUs on 2 nodes, a 2 MiB reduce-scatter: on an Intel
# host NCCL's table picks the ring LL its 0.6 us NVLink step under-prices (NVLINK5_LL_STEP_US); AMD's lower LL cap
# turns it to an option the model prices faster
@example(Communicator(64, 2, 365.6e9, 12.5e9, generation="blackwell"), "reduce_scatter", 21)
def test_an_amd_host_never_runs_a_call_faster_than_an_intel_one(c, collective, size):
    # tuning.cc llMaxBws: AMD's row (22.5, 19.0) lies under row 0's (39.0, 20.4) across nodes, and equals it on one:
    # NCCL's prediction never falls; the price neither, but where the Intel host's pick is one NCCL's table
    # under-prices and AMD's is priced lower on the Intel host too
    amd, intel = attrs.evolve(c, host="amd"), attrs.evolve(c, host="intel")
    x, y = nccl.choose(collective, 2.0**size, amd), nccl.choose(collective, 2.0**size, intel)
    assert x.predicted >= y.predicted * (1 - 1e-12)
    if x.seconds >= y.seconds * (1 - 1e-12):
        return
    assert y.predicted < y.seconds and (x.algorithm, x.protocol) != (y.algorithm, y.protocol)
    on_intel = next(o for o in nccl.priced(collective, 2.0**size, intel)
                    if (o.algorithm, o.protocol) == (x.algorithm, x.protocol))
    assert on_intel.seconds <= x.seconds * (1 + 1e-12) and on_intel.seconds < y.seconds
