"""A decode step's tensor-parallel all-reduce: inside one node the engines' own one-shot kernels
(the tiers' price, model/comms.py); across nodes vLLM's custom all-reduce refuses the group and the
call is NCCL's, whose small-message latency (model/collectives.py, checked against nccl-tests in
benchmarks/nccl_curves.py) is what a TP group over several nodes pays at decode batch sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import collectives, comms
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig, replica, tp_all_reduce
from gclc.model.shape import ModelShape

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


# An NVL72 rack: one NVLink tier over 18 trays (hosts) of 4 GPUs
RACK_TEXT = 'import "std/nvidia"\nimport "std/network"\ncluster R { units = 1 x GB200_NVL72  scaleout = XDR_FatTree }\n'
RACK = lower(check_text(RACK_TEXT, str(Path(__file__).with_name("rack_case.gcl"))).design).partitions[0]
LLAMA = ModelShape(layers=8, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, vocab=128256, seq=8192)


def _collectives(tp: int, profile_name: str) -> float:
    engine = profile(profile_name).engine(RACK.node.accelerator.hbm_capacity, "GB200")
    r = replica(LLAMA, ServeConfig(tp, 64, "fp8"), RACK, engine)
    return r._token_costs(64)[5]


def test_a_tp_group_across_nvl72_trays_pays_nccl_in_vllm_and_sglang():
    """A tray is a host of 4 GPUs: vLLM's and SGLang's custom all-reduce refuse tp = 8 across two
    trays ([vllmcar]), so it is NCCL's price; inside a tray (tp = 4) it is the one-shot kernel's."""
    tiers = comms.place(8, 1, RACK.tiers)
    for name in ("vllm_v1", "sglang"):
        per_call = _collectives(8, name) / (2 * LLAMA.layers)
        assert per_call == pytest.approx(collectives.all_reduce(64 * LLAMA.hidden * 2, tiers))
        assert per_call > comms.all_reduce(64 * LLAMA.hidden * 2, tiers)
        inside = _collectives(4, name) / (2 * LLAMA.layers)
        assert inside == pytest.approx(comms.all_reduce(64 * LLAMA.hidden * 2, comms.place(4, 1, RACK.tiers)))


def test_tensorrt_llms_multi_node_nvlink_kernel_keeps_the_one_shot_across_trays():
    """TensorRT-LLM's PyTorch backend all-reduces across hosts of one NVLink domain with MNNVL
    ([trtmnnvl]); its TensorRT-engine releases do not (NCCL, as vLLM)."""
    tiers = comms.place(8, 1, RACK.tiers)
    one_shot = comms.all_reduce(64 * LLAMA.hidden * 2, tiers)
    assert _collectives(8, "trtllm_pytorch") / (2 * LLAMA.layers) == pytest.approx(one_shot)
    assert _collectives(8, "trtllm_0_12") > _collectives(8, "trtllm_pytorch")
