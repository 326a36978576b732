"""NCCL's algorithm and protocol choice by message size (model/network/nccl.py), against its
documented behaviour and published nccl-tests results (benchmarks/data/nccl_tests.csv)."""

import csv
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

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
    nvls=st.booleans(), collnet=st.booleans(), wire=st.sampled_from([0.0, 1e-6, 5e-6]))
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
    "NVL72 (coreweave/nccl-tests#43): NVLS at the share of the port measured on 8 H100 gives 999 GB/s "
    "busbw at 8 GiB against 835 measured (+19.6 %; 8 B200 measure 838 with 8 ranks), and 512 MiB-2 GiB "
    "run ~500 us below that plateau, a constant no latency or chunking of NCCL's tables accounts for"))


@pytest.mark.parametrize("case, goal", [("h100_nvlink8", 0.10), ("h200_nvlink8", 0.10), ("b200_nvlink8", 0.10),
                                        ("h100_ib_16nodes", 0.25), ("h20_nvlink8", 0.25),
                                        ("h100_roce_4nodes", 0.10), ("h100_roce_2nodes", 0.10),
                                        pytest.param("gb200_nvl72", 0.10, marks=NVL72_RAMP)])
def test_the_model_reproduces_published_busbw(case, goal):
    """Out of sample: the rows a std efficiency or NVLS_EFFICIENCY was read from are left out."""
    bench = _benchmark()
    rows = [r for r in csv.DictReader((ROOT / "benchmarks" / "data" / "nccl_tests.csv").open(encoding="utf-8"))
            if r["case"] == case and r["sets_std"] != "1"]
    assert rows
    for row in rows:
        c = bench.communicator(row)
        seconds = nccl.time(row["collective"], float(row["bytes"]), c)
        model = nccl.bus_bandwidth(row["collective"], float(row["bytes"]), seconds, c.ranks) / 1e9
        assert model == pytest.approx(bench.measured_busbw(row), rel=goal), row["bytes"]

