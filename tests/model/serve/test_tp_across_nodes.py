"""A decode step's tensor-parallel all-reduce: inside one node the engines' own one-shot kernels
(the tiers' price, model/comms.py); across nodes vLLM's custom all-reduce refuses the group and the
call is NCCL's, whose small-message latency (model/collectives.py, checked against nccl-tests in
benchmarks/nccl_curves.py) is what a TP group over several nodes pays at decode batch sizes."""

from __future__ import annotations

from pathlib import Path

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import collectives, comms
from gclc.model.serve.inference import tp_all_reduce

TEXT = 'import "std/nvidia"\nimport "std/network"\ncluster C { units = 4 x DGX_H100  scaleout = NDR_FatTree }\n'
TIERS = lower(check_text(TEXT, str(Path(__file__).with_name("tp_case.gcl"))).design).partitions[0].tiers
DECODE = 64 * 7168 * 2          # 64 sequences' hidden states (DeepSeek-V3), bf16


def test_a_group_inside_a_node_keeps_the_engines_own_all_reduce():
    node = comms.place(8, 1, TIERS)
    assert tp_all_reduce(DECODE, node) == comms.all_reduce(DECODE, node)


def test_a_group_across_nodes_pays_nccl_and_its_network_latency():
    across = comms.place(32, 1, TIERS)
    price = tp_all_reduce(DECODE, across)
    assert price == collectives.all_reduce(DECODE, across)
    # NCCL's inter-node latency dominates a ~1 MB call: tens of microseconds, several times
    # the tiers' alpha-beta price and the in-node call
    assert price > 3 * comms.all_reduce(DECODE, across)
    assert 20e-6 < price < 200e-6
    assert price > tp_all_reduce(DECODE, comms.place(8, 1, TIERS))
