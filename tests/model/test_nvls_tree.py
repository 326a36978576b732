"""NCCL's NVLS tree (model/network/nccl.py): an all-reduce over several NVSwitch nodes with no
SHARP, NVLS inside each node and a tree across them (tuning.cc NCCL_ALGO_NVLS_TREE, NCCL 2.30),
against NCCL's tables and a published two-host nccl-tests run."""

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.model.network import nccl
from gclc.model.network.nccl import Communicator

ROOT = Path(__file__).resolve().parents[2]
NODE = Communicator(8, 1, 365.6e9, nvls=True)                       # 8 H100 on NVSwitch, NVLS on
NODES = Communicator(128, 16, 365.6e9, 40e9, wire=1.5e-6)            # 16 nodes of them over NDR, no NVLS


def test_nvls_tree_runs_all_reduce_across_nvswitch_nodes_without_sharp():
    # tuning.cc/enqueue.cc (NCCL 2.30): NVLS tree, all-reduce only, more than one node, where NVLS
    # runs; no SHARP needed (NVLS itself across nodes needs CollNet)
    two = Communicator(16, 2, 365.6e9, 40e9, nvls=True, wire=1.5e-6)
    names = lambda collective, c: {a for a, *_ in nccl._options(collective, c)}   # noqa: E731
    assert "nvls_tree" in names("all_reduce", two) and "nvls" not in names("all_reduce", two)
    assert "nvls_tree" not in names("reduce_scatter", two) | names("all_gather", two)
    assert "nvls_tree" not in names("all_reduce", NODE)                        # one node: plain NVLS
    assert "nvls_tree" not in names("all_reduce", NODES)                       # no NVLS in the nodes
    assert "nvls_tree" not in names("all_reduce", Communicator(16, 16, 365.6e9, 40e9, nvls=True))  # one GPU a node
    assert nccl.choose("all_reduce", 2**33, two).algorithm == "nvls_tree"
    assert nccl.choose("all_reduce", 8, two).algorithm != "nvls_tree"          # its 25 us NVLS step


@given(st.sampled_from([2, 4, 8]), st.sampled_from([12.5e9, 25e9, 40e9, 50e9, 100e9]),
       st.sampled_from([100e9, 365.6e9, 682e9]))
def test_nvls_tree_bus_bandwidth_is_one_nodes_nvls_or_the_nodes_nics(nodes, nic, intra):
    # tuning.cc: min(NVLS's intraBw, bwInter x 2 on two nodes, x 1 on more), as a ring's algbw
    c = Communicator(8 * nodes, nodes, intra, nic, nvls=True)
    one = Communicator(8, 1, intra, nvls=True)
    inside = nccl._bandwidth("all_reduce", "nvls", "Simple", one) * 2 * 7 / 8      # one node's NVLS busbw
    across = nic * 8 * (2 if nodes == 2 else 1)
    algbw = nccl._bandwidth("all_reduce", "nvls_tree", "Simple", c)
    assert algbw * 2 * (c.ranks - 1) / c.ranks == pytest.approx(min(inside, across), rel=1e-9)


def test_two_h100_hosts_all_reduce_at_one_hosts_nvls_bus_bandwidth():
    # Bitdeer's two DGX H100 hosts over 8 x 400G: 468 GB/s busbw at 8 GiB, one host 470
    # (tests/data/measurements/nccl/bitdeer_h100_*_all_reduce.txt); a ring over the NICs
    # reaches ~320. The step model's price (model/collectives.py) of the same call:
    bench = _benchmark()
    row = {"node": "DGX_H100", "nodes": 2, "scaleout": "NDR_FatTree", "ranks": 16, "nvls": "1",
           "collnet": "0", "collective": "all_reduce", "bytes": str(2**33)}
    seconds = bench.step_model_seconds(row)
    assert nccl.bus_bandwidth("all_reduce", 2**33, seconds, 16) == pytest.approx(468e9, rel=0.05)
    assert bench.choice(row).algorithm == "nvls_tree"
    ring = bench.choice({**row, "nvls": "0"})
    assert nccl.bus_bandwidth("all_reduce", 2**33, ring.seconds, 16) < 400e9


def _benchmark():
    spec = importlib.util.spec_from_file_location("nccl_curves", ROOT / "benchmarks" / "nccl_curves.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
