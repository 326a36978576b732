"""NCCL's algorithm and protocol choice by message size (model/network/nccl.py), against its
documented behaviour and published nccl-tests results (benchmarks/data/nccl_tests.csv)."""

import csv
import math
import importlib.util
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from gclc.model.network import nccl
from gclc.model.network.nccl import Communicator

ROOT = Path(__file__).resolve().parents[2]
NODE = Communicator(8, 1, 365.6e9, nvls=True)                       # 8 H100 on NVSwitch, NVLS on
NODES = Communicator(128, 16, 365.6e9, 40e9, wire=1.5e-6)            # 16 nodes of them over NDR


def test_small_messages_take_the_low_latency_protocol_large_ones_the_full_bandwidth():
    assert nccl.choose("all_reduce", 8, NODES).protocol == "LL"
    assert nccl.choose("all_reduce", 8, NODES).algorithm == "tree"     # log2 of the nodes beats a 254-step ring
    assert nccl.choose("all_reduce", 8 * 2**30, NODES).protocol == "Simple"


def test_nvls_carries_all_reduce_but_not_half_of_one_on_one_node():
    # NVIDIA/nccl#1083: NVLS sends the whole buffer for a reduce-scatter, the ring (n-1)/n
    assert nccl.choose("all_reduce", 2**30, NODE).algorithm == "nvls"
    assert nccl.choose("reduce_scatter", 2**30, NODE).algorithm == "ring"
    assert nccl.choose("all_gather", 2**30, NODE).algorithm == "ring"


def test_across_nodes_a_ring_gets_the_nodes_nics_together():
    # 4 nodes of 8 GPUs, 8 x 50 GB/s NICs a node: busbw tends to the node's 400 GB/s, not 50
    c = Communicator(32, 4, 682e9, 50e9)
    seconds = nccl.time("all_reduce", 16 * 2**30, c)
    assert nccl.bus_bandwidth("all_reduce", 16 * 2**30, seconds, 32) == pytest.approx(400e9, rel=0.02)


def test_one_gpu_a_node_gathers_with_pat_and_several_with_rings():
    # PAT (NCCL >= 2.23) takes log2 steps across the nodes; it runs with one GPU a node only
    one = Communicator(64, 64, 365.6e9, 40e9, wire=1.5e-6)
    assert nccl.choose("all_gather", 2**20, one).algorithm == "pat"
    eight = Communicator(512, 64, 365.6e9, 40e9, wire=1.5e-6)
    assert "pat" not in {a for a, *_ in nccl._options("all_gather", eight)}


communicators = st.builds(
    Communicator, st.sampled_from([2, 8, 16, 64, 128]), st.sampled_from([1, 2, 8]),
    st.sampled_from([100e9, 365.6e9, 682e9]), st.sampled_from([12.5e9, 40e9, 50e9]),
    nvls=st.booleans(), collnet=st.booleans(), wire=st.sampled_from([0.0, 1e-6, 5e-6]),
    reduce_rate=st.sampled_from([math.inf, 4e11, 8e11, 7.2e12]))
collectives = st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"])


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(communicators, collectives, st.integers(3, 33), st.integers(3, 33))
def test_bus_bandwidth_never_falls_as_the_message_grows(c, collective, a, b):
    # time = min over options of (latency + bytes / bandwidth): concave, positive at zero, so
    # bytes / time never falls
    small, large = sorted((2.0**a, 2.0**b))
    assert nccl.time(collective, large, c) / large <= nccl.time(collective, small, c) / small * (1 + 1e-12)


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(communicators, collectives, st.integers(3, 33))
def test_switches_that_reduce_never_slow_a_collective(c, collective, size):
    import attrs

    plain = attrs.evolve(c, nvls=False, collnet=False)
    assert nccl.time(collective, 2.0**size, c) <= nccl.time(collective, 2.0**size, plain) * (1 + 1e-12)


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(communicators, st.sampled_from(["all_reduce", "reduce_scatter"]), st.integers(10, 34), st.sampled_from([1, 2, 9]))
def test_nvls_reduces_no_faster_than_the_switch_chips_and_more_chips_never_slow_it(c, collective, size, more):
    # each element of an n-GPU reduction costs n - 1 adds in the switches: the NVLS bytes per
    # second never exceed 4 bytes x the chips' FP32 adds/s / (n - 1); more chips never slow a call
    import attrs

    c = attrs.evolve(c, nvls=True)
    assume(c.per_node > 1)   # one GPU a domain: nothing to reduce in its switches
    nbytes = 2.0**size
    nvls = [o for o in nccl._options(collective, c) if o[0] == "nvls"]
    for *_, bandwidth in nvls:
        assert bandwidth <= nccl.FP32_BYTES * c.reduce_rate / (c.per_node - 1) * (1 + 1e-12)
    faster = attrs.evolve(c, reduce_rate=c.reduce_rate * more)
    assert nccl.time(collective, nbytes, faster) <= nccl.time(collective, nbytes, c) * (1 + 1e-12)


def test_eight_b200_reduce_in_two_chips_and_an_nvl72_in_eighteen():
    # the DGX B200's "2 x 5th generation NVLink switches", the NVL72's 9 trays of 2: at 400 GFLOPS
    # FP32 each (NVSwitch3's, carried over: ESTIMATE) NVLS tops out at 4 x chips x rate / (n - 1)
    # bytes/s of algorithm bandwidth, the measured plateaus within 5 % (838 and 835 GB/s busbw)
    bench = _benchmark()
    for node, chips, ranks, measured in (("DGX_B200", 2, 8, 838.0), ("GB200_NVL72", 18, 72, 834.57)):
        tiers = bench.case_tiers({"node": node, "nodes": 1, "scaleout": ""})
        assert (tiers[0].switch_chips, tiers[0].switch_reduction) == (chips, 400e9)
        bound = nccl.FP32_BYTES * tiers[0].reduction_rate / (ranks - 1) * 2 * (ranks - 1) / ranks / 1e9
        assert bound == pytest.approx(measured, rel=0.05)


def test_the_step_model_prices_nvls_no_faster_than_the_switch_chips():
    # the training step's price (model/collectives.py) takes the same floor: 8 GiB over 8 B200's
    # two chips at 400 GFLOPS takes at least 2^33 / 4 x 7 / 8e11 s, and no switch-less ring beats it
    bench = _benchmark()
    row = {"node": "DGX_B200", "nodes": 1, "scaleout": "", "ranks": 8, "nvls": "1", "collnet": "0",
           "collective": "all_reduce", "bytes": str(2**33)}
    floor = 2**33 / nccl.FP32_BYTES * 7 / (2 * 400e9)
    assert floor <= bench.step_model_seconds(row) <= floor * 1.02


def test_a_small_tree_call_waits_for_its_piece_at_every_hop():
    # a tree's piece is not pipelined below NCCL's per-channel split: 2 KB costs more than
    # 16 B on 16 nodes (62 -> 77 us measured, NVIDIA/nccl#1469), 16 B next to nothing more
    assert nccl.choose("all_reduce", 2048, NODES).algorithm == "tree"
    tiny, small = nccl.time("all_reduce", 16, NODES), nccl.time("all_reduce", 2048, NODES)
    assert small - tiny > 5e-6
    assert nccl._fill("ring", "LL", 2048, NODES) == 0.0       # a ring cuts the buffer into blocks


def _benchmark():
    spec = importlib.util.spec_from_file_location("nccl_curves", ROOT / "benchmarks" / "nccl_curves.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_published_point_names_its_source():
    rows = list(csv.DictReader((ROOT / "benchmarks" / "data" / "nccl_tests.csv").open(encoding="utf-8")))
    assert rows and all(r["source"].strip() and (r["busbw_GBps"] or r["time_us"]) for r in rows)


NVL72_RAMP = pytest.mark.xfail(strict=True, reason=(
    "NVL72 (coreweave/nccl-tests#43): the published times carry a fixed ~0.57 ms per call at every size "
    "(test_the_nvl72_table_carries_a_constant_per_call_in_both_columns), 32 % of 512 MiB, 19 % of 1 GiB, "
    "3-6 % of 4-8 GiB; the model has no such cost (+34 %, +16 % at 512 MiB and 1 GiB) and NCCL 2.25.1's "
    "source gives none: NVLS step latency is us, its pipeline fills in 32 channels x 128 KiB (~10 us), and "
    "MNNVL's unregistered buffers (init.cc: no NVLS registration with MNNVL) cost per byte, not per call"))
GIB = 2**30


def _rows(case: str, sizes=None) -> list[dict]:
    rows = [r for r in csv.DictReader((ROOT / "benchmarks" / "data" / "nccl_tests.csv").open(encoding="utf-8"))
            if r["case"] == case and r["sets_std"] != "1" and (sizes is None or int(r["bytes"]) in sizes)]
    assert rows
    return rows


def test_the_nvl72_table_carries_a_constant_per_call_in_both_columns():
    """Not the source's noise: in-place and out-of-place (the same run's two columns) agree within
    6 %, and each is a line t = constant + bytes / rate with a constant near 0.57 ms (the 512 MiB
    call's third), every size within 6 % of the line through the other four. So 4-8 GiB do not
    reach the bandwidth either: their asymptote is ~870 GB/s busbw, not the 835 at 8 GiB."""
    bench = _benchmark()
    columns = bench.nvl72_columns()
    out, inp = columns["out_of_place"], columns["in_place"]
    assert all(abs(inp[s] / out[s] - 1) < 0.06 for s in out)
    fits = [bench.per_call_constant(times) for times in columns.values()]
    for constant, rate, left_out in fits:
        assert 0.5e-3 < constant < 0.65e-3 and max(map(abs, left_out)) < 0.06
        assert 850 < bench.nccl_bus(rate) < 890
    assert abs(fits[0][0] - fits[1][0]) < 0.05e-3


@pytest.mark.parametrize("case, goal, sizes", [
    ("h100_nvlink8", 0.10, None), ("h200_nvlink8", 0.10, None), ("b200_nvlink8", 0.10, None),
    ("h100_ib_16nodes", 0.25, None), ("h20_nvlink8", 0.25, None),
    ("h100_roce_4nodes", 0.10, None), ("h100_roce_2nodes", 0.10, None), ("h100_ib_sharp_8nodes", 0.10, None),
    ("gb200_nvl72", 0.10, (2 * GIB, 4 * GIB, 8 * GIB)),
    pytest.param("gb200_nvl72", 0.10, (GIB // 2, GIB), marks=NVL72_RAMP)])
def test_the_model_reproduces_published_busbw(case, goal, sizes):
    """Out of sample: the rows a std efficiency or NVLS_EFFICIENCY was read from are left out."""
    bench = _benchmark()
    for row in _rows(case, sizes):
        c = bench.communicator(row)
        model = nccl.bus_bandwidth(row["collective"], float(row["bytes"]), bench.choice(row).seconds, c.ranks) / 1e9
        assert model == pytest.approx(bench.measured_busbw(row), rel=goal), row["bytes"]
