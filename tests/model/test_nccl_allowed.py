"""NCCL's algorithms as a caller's environment allows them (model/collectives.py `all_reduce(...,
nvls, collnet)`): NeMo-RL launches its vLLM engines with NCCL_NVLS_ENABLE=0 when a model-parallel
group spans hosts, and NCCL runs CollNet (SHARP) only with NCCL_COLLNET_ENABLE=1 and a plugin
(model/rl/stacks.py [1352] [collnet]). Barring an algorithm takes an option away from NCCL's pick:
it never makes a call faster (but where NCCL's own table picks NVLS inside one domain and its loops run
slower than a ring), and with every in-switch reduction barred the call is the one the same tiers price
with no switch reducing."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import collectives, comms
from gclc.model.network import nccl
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()


def _tiers(text: str, name: str):
    return lower(check_text(text, str(Path(__file__).with_name(name))).design).partitions[0].tiers


# DGX H100 on NDR: NVLink4 (NVLS) and the fat tree (SHARP) both declare in-switch reduction
H100 = _tiers('import "std/nvidia"\nimport "std/network"\ncluster C { units = 4 x DGX_H100  scaleout = NDR_FatTree }\n',
              "allowed_h100.gcl")
RACK = _tiers('import "std/nvidia"\nimport "std/network"\ncluster R { units = 1 x GB200_NVL72  scaleout = XDR_FatTree }\n',
              "allowed_rack.gcl")
FLAGS = ((True, True), (False, True), (True, False), (False, False))


def _plain(tiers):
    return tuple(attrs.evolve(t, in_network_reduction=False) for t in tiers)


def test_the_fixtures_reduce_in_their_switches():
    assert all(t.in_network_reduction for t in H100), "else the law below tests nothing"


@settings(max_examples=scaled_examples(60), deadline=None)
@given(st.sampled_from(("h100", "rack")), st.sampled_from((2, 4, 8, 16, 24, 32)), st.floats(64, 4e9))
def test_barring_an_algorithm_never_makes_an_all_reduce_faster(system, ranks, nbytes):
    # ... but barring NVLS where NCCL's own table picks an NVLS all-reduce inside one domain whose loops run
    # slower than the ring it passed over (NCCL picks by its prediction, enqueue.cc topoGetAlgoInfo: on one
    # HGX H100 NVLS from 2 MiB, nccl-tests#309; model/network/nccl.py `predicted`)
    tiers = H100 if system == "h100" else RACK
    group = comms.place(ranks, 1, tiers)
    price = {flags: collectives.all_reduce(nbytes, group, *flags) for flags in FLAGS}
    picked = collectives.choice("all_reduce", nbytes, group)
    table_nvls = picked.algorithm == "nvls" and collectives.communicator(tuple(group)).nodes == 1
    assert price[(True, True)] <= price[(True, False)] * (1 + 1e-12)
    assert price[(False, True)] <= price[(False, False)] * (1 + 1e-12)
    if not table_nvls:
        assert price[(True, True)] <= price[(False, True)] * (1 + 1e-12)
        assert price[(True, False)] <= price[(False, False)] * (1 + 1e-12)
        return
    # NCCL's table picked NVLS: the call is its loops' price (nccl.nvls_loop_seconds) on the port's bytes with the
    # switches reducing, and barring NVLS leaves the ring or tree the same tiers price with no switch reducing
    option = collectives._nvls_capable(tuple(group))
    c = collectives.communicator(option)
    moving = max(collectives._wire("all_reduce", nbytes, option),
                 nccl.switch_reduction_seconds("all_reduce", nbytes, c))
    assert price[(True, True)] == picked.seconds == pytest.approx(nccl.nvls_loop_seconds(nbytes, moving, c), rel=1e-12)
    plain = comms.place(ranks, 1, _plain(tiers))
    assert collectives.choice("all_reduce", nbytes, plain).algorithm in ("ring", "tree")
    assert price[(False, True)] == price[(False, False)] == collectives.all_reduce(nbytes, plain)


@settings(max_examples=scaled_examples(30), deadline=None)
@given(st.sampled_from((16, 32)), st.floats(64, 4e9))
def test_with_no_switch_allowed_the_call_is_the_plain_tiers(ranks, nbytes):
    barred = collectives.all_reduce(nbytes, comms.place(ranks, 1, H100), False, False)
    assert barred == collectives.all_reduce(nbytes, comms.place(ranks, 1, _plain(H100)))


def test_a_decode_all_reduce_over_four_h100_nodes_without_nvls_or_sharp():
    """DeepSeek-V3's decode step, 0.46-1.8 MB over TP 32 on four DGX H100: NCCL's pick with NVLS
    and SHARP is ~47-57 us; without them (ring or tree over the NICs) it is slower, 70-90 us."""
    group = comms.place(32, 1, H100)
    for nbytes in (0.46e6, 1.8e6):
        allowed, barred = collectives.all_reduce(nbytes, group), collectives.all_reduce(nbytes, group, False, False)
        assert barred > 1.3 * allowed
        assert 70e-6 < barred < 90e-6
