"""A decode step's tensor-parallel all-reduce: inside one node the engines' own one-shot kernels
(the tiers' price, model/comms.py); across nodes vLLM's custom all-reduce refuses the group and the
call is NCCL's, whose small-message latency (model/collectives.py, checked against nccl-tests in
benchmarks/nccl_curves.py) is what a TP group over several nodes pays at decode batch sizes."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import example, given, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import collectives, comms
from gclc.model.serve import allreduce
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig, replica, tp_all_reduce
from gclc.model.shape import ModelShape
from gclc.testing import load_profile

load_profile()

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
ULTRA_TEXT = 'import "std/nvidia"\nimport "std/network"\ncluster U { units = 1 x GB300_NVL72  scaleout = XDR_FatTree }\n'
ULTRA = lower(check_text(ULTRA_TEXT, str(Path(__file__).with_name("ultra_case.gcl"))).design).partitions[0]
LLAMA = ModelShape(layers=8, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, vocab=128256, seq=8192)


def _collectives(tp: int, profile_name: str) -> float:
    engine = profile(profile_name).engine(RACK.node.accelerator.hbm_capacity, "GB200")
    r = replica(LLAMA, ServeConfig(tp, 64, "fp8"), RACK, engine)
    return r._token_costs(64)[5]


def test_a_tp_group_across_nvl72_trays_pays_nccl_in_vllm_and_sglang():
    """A tray is a host of 4 GPUs: vLLM's and SGLang's custom all-reduce refuse tp = 8 across two
    trays ([vllmcar]), so it is NCCL's price; inside a tray (tp = 4) it is the one-shot kernel's, captured
    in the decode step's CUDA graph (vLLM's graph-captured table; SGLang's kernel has none)."""
    tiers = comms.place(8, 1, RACK.tiers)
    for name in ("vllm_v1", "sglang"):
        per_call = _collectives(8, name) / (2 * LLAMA.layers)
        assert per_call == pytest.approx(collectives.all_reduce(64 * LLAMA.hidden * 2, tiers))
        assert per_call > comms.all_reduce(64 * LLAMA.hidden * 2, tiers)
        inside = _collectives(4, name) / (2 * LLAMA.layers)
        kernel = profile(name).engine().all_reduce
        assert inside == pytest.approx(max(comms.all_reduce(64 * LLAMA.hidden * 2, comms.place(4, 1, RACK.tiers)),
                                           allreduce.measured(kernel, 64 * LLAMA.hidden * 2, 4, graphed=True)))


def test_tensorrt_llms_multi_node_nvlink_kernel_keeps_the_one_shot_across_trays():
    """TensorRT-LLM's PyTorch backend all-reduces across hosts of one NVLink domain with MNNVL
    ([trtmnnvl]); its TensorRT-engine releases do not (NCCL, as vLLM)."""
    tiers = comms.place(8, 1, RACK.tiers)
    one_shot = comms.all_reduce(64 * LLAMA.hidden * 2, tiers)
    assert _collectives(8, "trtllm_pytorch") / (2 * LLAMA.layers) == pytest.approx(one_shot)
    assert _collectives(8, "trtllm_0_12") > _collectives(8, "trtllm_pytorch")


def test_vllms_symmetric_memory_kernel_takes_a_group_across_nvl72_trays():
    """From 0.11 vLLM reduces a TP group its custom all-reduce refuses with PyTorch's symmetric memory
    for 2-8 GPUs, over fabric handles across an NVL72's trays (model/rl/stacks.py [symm]): tp = 8 across
    two trays pays the measured multimem kernel ([vllm42324]: 11 us at 512 KiB), not NCCL; tp = 16,
    which it does not take, and a group across InfiniBand stay on NCCL."""
    nbytes = 64 * LLAMA.hidden * 2       # 1 MiB
    tiers = comms.place(8, 1, RACK.tiers)
    engine = profile("vllm_v1").engine(RACK.node.accelerator.hbm_capacity, "GB200")
    fabric = replica(LLAMA, ServeConfig(8, 64, "fp8"), RACK, attrs.evolve(engine, fallback_all_reduce="symm_mem"))
    per_call = fabric._token_costs(64)[5] / (2 * LLAMA.layers)
    assert per_call == pytest.approx(max(comms.all_reduce(nbytes, tiers), allreduce.measured("symm_mem", nbytes, 8)))
    assert per_call == pytest.approx(14e-6) and per_call < _collectives(8, "vllm_v1") / (2 * LLAMA.layers)
    wide = comms.place(16, 1, RACK.tiers)
    assert tp_all_reduce(nbytes, wide, True, "vllm", 16, fallback="symm_mem") == collectives.all_reduce(nbytes, wide)
    across = comms.place(16, 1, TIERS)
    assert tp_all_reduce(nbytes, across, True, "vllm", 16, fallback="symm_mem") == collectives.all_reduce(nbytes, across)
    assert allreduce.takes("symm_mem", 8, "blackwell") and not allreduce.takes("symm_mem", 16, "blackwell")
    assert allreduce.takes("vllm", 16)


def test_symmetric_memory_refuses_what_vllms_tables_do_not_list_and_other_engines_kernels():
    """vLLM's SymmMemCommunicator ([vllmsymm]) disables itself on a part its SYMM_MEM_ALL_REDUCE_MAX_SIZES does
    not list (SM 8.0 Ampere, 8.9 Ada) and refuses a call at or above its maximum (64 MiB at TP 8 on SM 9.0 and
    10.3, 128 MiB on 10.0), which NCCL then takes; SGLang's kernel never hands a call to vLLM's fallback."""
    tiers, nbytes = comms.place(8, 1, RACK.tiers), 1 << 20
    nccl_price = collectives.all_reduce(nbytes, tiers)
    assert tp_all_reduce(nbytes, tiers, True, "vllm", 8, fallback="symm_mem") < nccl_price
    for generation in ("ampere", "ada"):
        assert not allreduce.takes("symm_mem", 8, generation)
        assert tp_all_reduce(nbytes, tiers, True, "vllm", 8, fallback="symm_mem", generation=generation) == nccl_price
    assert tp_all_reduce(nbytes, tiers, True, "sglang", 8, fallback="symm_mem") == nccl_price
    node = comms.place(8, 1, TIERS)
    assert tp_all_reduce(1 << 20, node, False, "sglang", 8, fallback="symm_mem") == tp_all_reduce(1 << 20, node, False, "sglang", 8)
    # above the maximum: NCCL's price inside the host and across trays alike
    top = allreduce.SYMM_MAX["9.0"][8]
    assert top == 64 << 20 and allreduce.takes("symm_mem", 8, "hopper", top - 1) and not allreduce.takes("symm_mem", 8, "hopper", top)
    assert _inside(top, 8) == collectives.all_reduce(top, node)
    assert _inside(top - 16, 8) == max(comms.all_reduce(top - 16, node), allreduce.measured("symm_mem", top - 16, 8))
    big = allreduce.SYMM_MAX["10.0"][8]
    assert tp_all_reduce(big, tiers, True, "vllm", 8, fallback="symm_mem") == collectives.all_reduce(big, tiers)


@pytest.mark.parametrize("kernel", ["vllm", "sglang"])
def test_the_engines_measured_kernel_bounds_a_decode_all_reduce_from_below(kernel):
    """[sgl2904] on H100, TP 4: 256 KB takes 20.6 us in vLLM's kernel and 13.9 us in SGLang's,
    where the tiers' alpha-beta price says about 3 us; a profile priced on the tiers (TensorRT-LLM)
    keeps that price."""
    node = comms.place(4, 1, TIERS)
    tiers = comms.all_reduce(262144, node)
    assert tiers < 5e-6
    assert tp_all_reduce(262144, node, False, kernel, 4) == {"vllm": 20.6e-6, "sglang": 13.9e-6}[kernel]
    assert tp_all_reduce(262144, node, False, "tiers", 4) == tiers
    assert profile("trtllm_pytorch").engine().all_reduce == "tiers"
    assert profile("vllm_v1").engine().all_reduce == "vllm" and profile("sglang").engine().all_reduce == "sglang"


def test_the_measured_kernel_interpolates_holds_its_first_row_and_extends_its_last_by_its_algorithm():
    """Between the sizes measured the time is linear in the bytes; below the first it is the first's;
    above the last, each byte costs the peer reads of the kernel it picks at that size (here two-shot's
    2 (n - 1) / n; one-shot's n - 1 under its threshold and always at TP 2) at P2P_RATE, up to the
    kernel's 8 MiB maximum, held past it (the tiers' bandwidth-bound price takes over where higher)."""
    sizes, times = allreduce.SIZES, allreduce.PRICED["vllm"][4]
    middle = (sizes[3] + sizes[4]) / 2
    assert allreduce.measured("vllm", middle, 4) == pytest.approx((times[3] + times[4]) / 2)
    assert allreduce.measured("vllm", 1, 4) == times[0] and allreduce.measured("vllm", sizes[-1], 4) == times[-1]
    top = allreduce.MAX_SIZE
    assert top == 8 << 20
    assert allreduce.measured("vllm", top, 4) == pytest.approx(times[-1] + 1.5 * (top - sizes[-1]) / allreduce.P2P_RATE)
    assert allreduce.measured("vllm", 1e9, 4) == allreduce.measured("vllm", top, 4)
    # TP 2 reads its one peer's buffer once a byte, one-shot or two-shot alike
    assert allreduce.measured("sglang", 2 * sizes[-1], 2) == pytest.approx(
        allreduce.PRICED["sglang"][2][-1] + sizes[-1] / allreduce.P2P_RATE)
    assert allreduce.measured("symm_mem", 1e9, 8) == allreduce.PRICED["symm_mem"][8][-1]
    assert allreduce.measured("vllm", 4096, 1) == 0.0 and allreduce.measured("tiers", 4096, 4) == 0.0
    # a TP size between those measured takes the nearer (tp 6: the larger of 4 and 8 on a tie)
    assert allreduce.measured("vllm", 4096, 6) == allreduce.PRICED["vllm"][8][1]
    big = 64 * 2 ** 20
    assert tp_all_reduce(big, comms.place(8, 1, TIERS), False, "vllm", 8) == comms.all_reduce(big, comms.place(8, 1, TIERS))


@given(st.sampled_from(["tiers", *allreduce.KERNELS]), st.sampled_from([2, 4, 8]),
       st.floats(1.0, 2e8), st.floats(1.0, 2e8), st.sampled_from(["", "symm_mem"]), st.booleans())
# GCLC_HYPOTHESIS=deep (2026-12-07): [sgl2904]'s raw table dips (vLLM's kernel at TP 2: 9.5 us at
# 512 B, 8.8 at 4 KiB), so interpolated, 513 B reduced faster than 1 B; the tables are priced as
# their monotone envelope since
@example("vllm", 2, 1.0, 513.0, "", False)
def test_a_larger_all_reduce_never_takes_less_time(kernel, tp, a, b, fallback, graphed):
    """Law: inside a host, more bytes never all-reduce faster, whatever the engine's kernel, with vLLM's
    symmetric-memory fallback or without, graph-captured or not (across vLLM's switches too: the law below)."""
    low, high = sorted((a, b))
    node = comms.place(tp, 1, TIERS)
    price = lambda n: tp_all_reduce(n, node, False, kernel, tp, fallback=fallback, graphed=graphed)  # noqa: E731
    assert price(low) <= price(high)


def test_each_table_is_priced_as_its_monotone_envelope():
    """[sgl2904]'s dips below 32 KiB are noise: a size takes the largest time measured at any size up
    to it, so the priced table never falls with size and never undercuts a measurement."""
    assert allreduce.PRICED["vllm"][2][:3] == (9.5e-6, 9.5e-6, 9.5e-6)
    pairs = [(times, allreduce.PRICED[kernel][tp]) for kernel, table in allreduce.KERNELS.items() for tp, times in table.items()]
    pairs += [(times, allreduce.PRICED_GRAPHED[kernel][tp])
              for kernel, table in allreduce.GRAPHED.items() for tp, times in table.items()]
    for times, priced in pairs:
        assert all(a <= b for a, b in zip(priced, priced[1:]))
        assert all(p >= t for p, t in zip(priced, times)) and priced[-1] == max(times)


AMPERE_TEXT = 'import "std/nvidia"\nimport "std/network"\ncluster A { units = 2 x DGX_A100  scaleout = NDR_FatTree }\n'
AMPERE = lower(check_text(AMPERE_TEXT, str(Path(__file__).with_name("ampere_case.gcl"))).design).partitions[0].tiers


def _inside(nbytes: float, tp: int, tiers=TIERS, fallback: str = "symm_mem", generation: str | None = None,
            graphed: bool = False) -> float:
    return tp_all_reduce(nbytes, comms.place(tp, 1, tiers), False, "vllm", tp, fallback=fallback, generation=generation,
                         graphed=graphed)


def test_vllm_hands_a_call_to_symmetric_memory_at_its_custom_all_reduce_limit():
    """vLLM 0.11.2-0.20.0 ([vllmsymm]): with symmetric memory up, custom all-reduce takes a call under
    CUSTOM_ALL_REDUCE_MAX_SIZES (SM 9.0: 256 KiB at TP 8, 512 KiB at TP 6, its own 8 MiB at TP 2-4;
    SM 10.0: 1 MiB at TP 6-8, 2 MiB at TP 2-4) and SymmMemCommunicator the rest, multimem at TP 4-8 on
    Hopper and 6-8 on Blackwell, two-shot otherwise. An engine without the fallback (vLLM 0.10, the
    serving profiles) and an Ampere host (SM 8.0: symmetric memory off) keep custom all-reduce. Under the
    limit custom all-reduce is priced from its rows under it (vLLM never gives it the larger calls), past
    the last by its one-shot kernel's 7 peer reads a byte at TP 8 (allreduce.beyond), and a handed-over
    call no lower than that price at the limit: eager, [sgl2904]'s 11.8 us (32 KiB) and 224 KiB more
    (17.7 us) over multimem's 11 us; graph-captured, [aic]'s 7.7 us (128 KiB) and 128 KiB more (11.07 us),
    where multimem takes 11 us: the law meets vLLM's tuned limit within 1 %."""
    kib = 1024
    assert allreduce.CUSTOM_LIMITS["9.0"][8] == 256 * kib and allreduce.CUSTOM_LIMITS["9.0"][6] == 512 * kib
    under, at = 256 * kib - 16, 256 * kib
    one_shot = lambda low, high: 7 * (high - low) / allreduce.P2P_RATE  # noqa: E731
    eager_at = allreduce.PRICED["vllm"][8][2] + one_shot(32 * kib, at)
    graphed_at = allreduce.PRICED_GRAPHED["vllm"][8][9] + one_shot(128 * kib, at)
    assert allreduce.PRICED["vllm"][8][2] == 11.8e-6 and allreduce.PRICED_GRAPHED["vllm"][8][9] == 7.720e-6
    assert _inside(under, 8) == allreduce.measured("vllm", under, 8, under=at) == pytest.approx(eager_at - one_shot(under, at))
    assert _inside(under, 8, fallback="") == allreduce.measured("vllm", under, 8) > 20e-6
    assert _inside(at, 8) == pytest.approx(eager_at) and allreduce.measured("symm_mem", at, 8) == pytest.approx(11e-6)
    assert _inside(under, 8, graphed=True) == pytest.approx(graphed_at - one_shot(under, at))
    assert _inside(at, 8, graphed=True) == pytest.approx(graphed_at)
    assert abs(graphed_at / allreduce.measured("symm_mem", at, 8, graphed=True) - 1) < 0.01
    assert _inside(at, 8, fallback="") == allreduce.measured("vllm", at, 8) == pytest.approx(24.1e-6)
    assert _inside(at, 8, fallback="", graphed=True) == pytest.approx(14.986e-6)   # SGLang's row of the kernel
    assert not allreduce.hands_over("vllm", at, 6, "hopper") and allreduce.hands_over("vllm", 512 * kib, 6, "hopper")
    assert not allreduce.hands_over("sglang", 512 * kib, 6, "hopper") and not allreduce.hands_over("vllm", 1e9, 8, "ampere")
    assert _inside(1 << 20, 4) == max(comms.all_reduce(1 << 20, comms.place(4, 1, TIERS)),
                                      allreduce.measured("vllm", 1 << 20, 4))
    assert _inside(at, 8, AMPERE) == allreduce.measured("vllm", at, 8)
    # a GB200 tray of 4: custom all-reduce to 2 MiB, then two-shot (multimem only at 6 and 8 on SM 10.0), priced
    # no lower than custom all-reduce at the limit (captured: [aic]'s 12.8 us at 1 MiB and 1 MiB more two-stage
    # read over NVLink 5, under two-shot's 17 us, which vLLM tuned the limit against; eager: [sgl2904]'s 40.2 us
    # and the same MiB)
    tray, mib = RACK.tiers, 1 << 20
    link = next(t.bandwidth for t in tray if t.kind == "nvlink")
    assert link == pytest.approx(900e9)     # NVLink 5 a direction
    tiers_price = comms.all_reduce(2 * mib, comms.place(4, 1, tray))
    for graphed, last in ((True, allreduce.PRICED_GRAPHED["vllm"][4][12]), (False, allreduce.PRICED["vllm"][4][-1])):
        custom_at = last + 1.5 * mib / allreduce.p2p_rate(link)
        assert allreduce.measured("vllm", 2 * mib, 4, graphed, under=2 * mib, link=link) == pytest.approx(custom_at)
        assert _inside(2 * mib, 4, tray, graphed=graphed) == pytest.approx(max(tiers_price, 17e-6, custom_at))
    assert _inside(2 * mib, 4, tray, graphed=True) == pytest.approx(max(tiers_price, 17e-6))
    assert _inside((2 << 20) - 16, 4, tray) == max(comms.all_reduce((2 << 20) - 16, comms.place(4, 1, tray)),
                                                  allreduce.measured("vllm", (2 << 20) - 16, 4, link=link))
    assert allreduce.algorithm("symm_mem", 4, "hopper") == "symm_mem" and allreduce.algorithm("symm_mem", 2, "hopper") == "symm_mem_two_shot"
    assert allreduce.algorithm("symm_mem", 8, "blackwell") == "symm_mem"


GENERATIONS = {"hopper": TIERS, "blackwell": RACK.tiers, "blackwell_ultra": ULTRA.tiers}


@given(st.sampled_from([2, 4, 8]), st.sampled_from(list(GENERATIONS)), st.booleans(), st.sampled_from(["", "symm_mem"]),
       st.floats(1.0, 2e8), st.floats(1.0, 2e8))
# before 2026-12-07 the price fell across H100's TP 8 limit: custom all-reduce's 24.1 us just under 256 KiB
# (measured without CUDA graphs) against multimem's 11 us at it (with graphs)
@example(8, "hopper", False, "symm_mem", 256.0 * 1024 - 16, 256.0 * 1024)
@example(8, "hopper", True, "symm_mem", 256.0 * 1024 - 16, 256.0 * 1024)
# SM 10.3 at TP 2: custom all-reduce hands over at 4 MiB, where symmetric memory's maximum also is, so NCCL
# (21 us) took the call after custom all-reduce's 26.6 us just under it
@example(2, "blackwell_ultra", False, "symm_mem", 4194303.0, 4194304.0)
def test_within_one_mode_a_larger_call_never_costs_less_across_vllms_switches(tp, generation, graphed, fallback, a, b):
    """Law: inside a host, captured in a CUDA graph or issued eagerly, more bytes never all-reduce faster
    through vLLM's chain (custom all-reduce, symmetric memory from its limit, NCCL from symmetric memory's
    maximum): the kernels' tables are each monotone, and at each limit the call is priced no lower than
    the kernel it leaves was just under it (model/serve/allreduce.py docstring)."""
    if generation != "hopper" and tp > 4:
        return   # a tray holds 4
    low, high = sorted((a, b))
    tiers = GENERATIONS[generation]
    price = lambda n: _inside(n, tp, tiers, fallback, generation, graphed)  # noqa: E731
    assert price(low) <= price(high)


@given(st.sampled_from([2, 4, 8]), st.sampled_from(list(GENERATIONS)), st.booleans(), st.floats(1.0, 2e8))
@example(8, "hopper", True, 256.0 * 1024)
# GCLC_HYPOTHESIS=deep (2026-12-07): past the tables' last rows custom all-reduce's price rises, so the floor
# at SM 10.3's TP 2 limit (4 MiB, symmetric memory's maximum too) is 1e-3 byte's reads above the price 1e-3 under it
@example(2, "blackwell_ultra", False, 4194304.0)
def test_a_handed_over_call_never_costs_more_than_custom_all_reduce_would_have(tp, generation, graphed, nbytes):
    """Law of the switch: under the limit the call is custom all-reduce's, priced from the rows under the
    limit (never above the kernel's own price, from all its rows); a call symmetric memory takes never
    costs more than custom all-reduce would have (vLLM's limits sit where symmetric memory wins), graph-
    captured or eager; at or above symmetric memory's maximum the call is NCCL's, no lower than symmetric
    memory's price just under it. Not graph-captured on SM 10.0 at TP 2 (the strict xfail below)."""
    if generation != "hopper" and tp > 4 or (graphed and generation == "blackwell" and tp == 2):
        return
    tiers = GENERATIONS[generation]
    limit = allreduce.CUSTOM_LIMITS[allreduce.capability(generation)][tp]
    handed, kept = _inside(nbytes, tp, tiers, generation=generation, graphed=graphed), \
        _inside(nbytes, tp, tiers, fallback="", generation=generation, graphed=graphed)
    if nbytes < limit or allreduce.takes("symm_mem", tp, generation, nbytes):
        assert handed <= kept
    else:   # at or above symmetric memory's maximum vLLM runs NCCL
        top = allreduce.SYMM_MAX[allreduce.capability(generation)][tp]
        # graph-captured inside a host, NCCL's buffers are registered (no NVLS fill)
        nccl_price = collectives.all_reduce(nbytes, comms.place(tp, 1, tiers), registered=graphed)
        # no lower than symmetric memory's price just under its maximum, and above it by no more than the
        # custom kernel's peer reads of that last 1e-3 byte where custom all-reduce's floor binds (allreduce.beyond)
        under = max(nccl_price, _inside(top - 1e-3, tp, tiers, generation=generation, graphed=graphed))
        assert nccl_price <= under <= handed <= under + (tp - 1) * 1e-3 / allreduce.P2P_RATE + 1e-12 * handed


@pytest.mark.xfail(strict=True, reason="graph-captured, [aic]'s H100 custom all-reduce at TP 2 (12.5 us at 2 MiB) "
                   "undercuts the two-shot kernel vLLM hands the call to from SM 10.0's 2 MiB limit (17 us, [vllm42324]'s "
                   "SM 9.0 column): Blackwell's custom all-reduce under graphs is unmeasured (ASSUMPTION: Hopper's "
                   "times), so the tables contradict vLLM's limit there")
def test_a_handed_over_call_on_sm_10_0_at_tp_2_never_costs_more_than_custom_all_reduce_graph_captured():
    nbytes = 2 << 20
    assert _inside(nbytes, 2, RACK.tiers, graphed=True) <= _inside(nbytes, 2, RACK.tiers, fallback="", graphed=True)


@given(st.sampled_from(["vllm", "sglang"]), st.sampled_from([2, 4, 6, 8]), st.sampled_from(list(GENERATIONS)),
       st.sampled_from(["", "symm_mem"]), st.floats(1.0, 2e8))
def test_a_graph_captured_call_never_costs_more_than_the_same_call_issued_eagerly(kernel, tp, generation, fallback, nbytes):
    """Law: capturing the call in a CUDA graph removes its launch and leaves its work: vLLM's custom all-reduce
    graph-captured ([aic]) never costs more than outside graphs ([sgl2904]), nor does the chain vLLM runs."""
    if generation != "hopper" and tp > 4:
        return
    tiers = comms.place(tp, 1, GENERATIONS[generation])
    eager, graphed = (tp_all_reduce(nbytes, tiers, False, kernel, tp, fallback=fallback, generation=generation, graphed=g)
                      for g in (False, True))
    assert graphed <= eager


def test_the_graph_captured_table_is_the_published_rows():
    """allreduce.GRAPHED is benchmarks/data/allreduce_graphed.csv's rows ([aic]), bf16 sizes in bytes, ms to s;
    vLLM's own rows wherever its custom all-reduce runs on H100, SGLang's port of the kernel beyond."""
    import csv
    path = Path(__file__).parents[3] / "benchmarks" / "data" / "allreduce_graphed.csv"
    with path.open() as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    for tp, times in allreduce.GRAPHED["vllm"].items():
        own = [r for r in rows if int(r["num_gpus"]) == tp]
        assert tuple(int(r["bytes"]) for r in own) == allreduce.GRAPH_SIZES
        assert all(int(r["bytes"]) == 2 * int(r["message_size_elements"]) for r in own)
        assert times == pytest.approx(tuple(float(r["latency_ms"]) * 1e-3 for r in own), rel=1e-12)
        limit = allreduce.CUSTOM_LIMITS["9.0"][tp]
        assert all(r["runtime"] == ("vllm 0.14.0" if int(r["bytes"]) < limit else "sglang 0.5.9") for r in own)


def test_an_iteration_vllm_captures_prices_its_all_reduce_graph_captured():
    """vLLM V1 captures steps of up to 512 tokens (Engine.graph_tokens; vLLM 0.14 vllm/config/vllm.py
    `_set_cudagraph_sizes`: min(max_num_seqs x 2, 512)): a 64-sequence decode step's all-reduce takes the
    graph-captured price; a 2,048-token prefill chunk runs eagerly and keeps [sgl2904]'s."""
    engine = profile("vllm_v1").engine(80 * 2 ** 30, "H100")
    r = replica(LLAMA, ServeConfig(4, 64, "bf16"), lower(check_text(TEXT, str(Path(__file__).with_name("tp_case.gcl"))).design).partitions[0], engine)
    assert engine.graphed(64, 64) and not engine.graphed(0, 2048)
    node = comms.place(4, 1, TIERS)
    for tokens, graphed in ((64, True), (2048, False)):
        nbytes = tokens * LLAMA.hidden * 2
        per_call = r._token_costs(tokens, graphed)[5] / (2 * LLAMA.layers)
        assert per_call == pytest.approx(max(comms.all_reduce(nbytes, node), allreduce.measured("vllm", nbytes, 4, graphed)))
    r.iteration(64, 64 * 1000)
    r.iteration(0, 0, 2048, 2048 ** 2 / 2)
    assert 64 in r._memo and ("eager", 2048) in r._memo and 2048 not in r._memo


def test_blackwell_ultra_takes_vllms_sm_10_3_limits_not_sm_10_0s():
    """vLLM 0.20.0 all_reduce_utils.py keys its limits by compute capability ([vllmsymm]): a GB300 (SM 10.3)
    hands custom all-reduce's calls to symmetric memory from 4 MiB at TP 4 (a tray), a GB200 (SM 10.0) from
    2 MiB. The tiers name both generations "blackwell"; the chip tells them apart (compute.exp_generation)."""
    from gclc.model.compute import exp_generation
    assert exp_generation(ULTRA.node.accelerator) == "blackwell_ultra" and exp_generation(RACK.node.accelerator) == "blackwell"
    assert allreduce.capability("blackwell_ultra") == "10.3" and allreduce.capability("blackwell") == "10.0"
    nbytes = 3 << 20    # 3 MiB: past SM 10.0's 2 MiB limit at TP 4, under SM 10.3's 4 MiB
    assert allreduce.hands_over("vllm", nbytes, 4, "blackwell") and not allreduce.hands_over("vllm", nbytes, 4, "blackwell_ultra")
    assert allreduce.hands_over("vllm", 4 << 20, 4, "blackwell_ultra") and not allreduce.hands_over("vllm", (8 << 20) - 1, 6, "blackwell_ultra")
    tray = comms.place(4, 1, ULTRA.tiers)
    link = next(s.tier.bandwidth for s in tray if s.tier.kind == "nvlink")
    custom = max(comms.all_reduce(nbytes, tray), allreduce.measured("vllm", nbytes, 4, link=link))
    assert tp_all_reduce(nbytes, tray, False, "vllm", 4, fallback="symm_mem", generation="blackwell_ultra") == custom
    assert tp_all_reduce(nbytes, tray, False, "vllm", 4, fallback="symm_mem", graphed=True) != \
        max(comms.all_reduce(nbytes, tray), allreduce.measured("vllm", nbytes, 4, True, link=link))   # the tier alone reads SM 10.0
    engine = attrs.evolve(profile("vllm_v1").engine(ULTRA.node.accelerator.hbm_capacity, "GB300"), fallback_all_reduce="symm_mem")
    shape = attrs.evolve(LLAMA, hidden=24576)   # 64 sequences x 24576 x 2 B = 3 MiB a call
    per_call = replica(shape, ServeConfig(4, 64, "fp8"), ULTRA, engine)._token_costs(64)[5] / (2 * shape.layers)
    # a decode step, graph-captured: custom all-reduce's rows under SM 10.3's 4 MiB limit
    assert per_call == pytest.approx(max(comms.all_reduce(nbytes, tray), allreduce.measured("vllm", nbytes, 4, True, 4 << 20,
                                                                                             link=link)))


def test_vllms_custom_all_reduce_runs_two_stage_where_its_kernel_says():
    """csrc/custom_all_reduce.cuh `allreduce` (v0.3.0 to 0.14.0 alike): one-stage at TP 2; at TP 4 under
    512 KiB, at TP 6 and 8 under 256 KiB; two-stage above ([vllm8558] in model/serve/allreduce.py)."""
    kib = 1024
    assert not allreduce.two_stage(8 * 2 ** 20, 2)
    assert not allreduce.two_stage(512 * kib - 2, 4) and allreduce.two_stage(512 * kib, 4)
    assert not allreduce.two_stage(256 * kib - 2, 8) and allreduce.two_stage(256 * kib, 8)
    assert allreduce.two_stage(256 * kib, 6)


@given(st.sampled_from([2, 4, 6, 8]), st.booleans(), st.floats(1.0, 2e8), st.floats(1.0, 2e8))
def test_a_fenced_custom_all_reduce_pays_the_fence_on_two_stage_calls_alone_and_stays_monotone(tp, graphed, a, b):
    """Law: vLLM's custom all-reduce as built before pull 8558 (vLLM 0.5.5-0.6.1) costs FENCE_S more on a
    two-stage call, nothing more on a one-stage one, and still never all-reduces more bytes faster."""
    low, high = sorted((a, b))
    node = comms.place(tp, 1, TIERS)
    fenced = lambda n: tp_all_reduce(n, node, False, "vllm", tp, graphed=graphed, fenced=True)  # noqa: E731
    plain = tp_all_reduce(low, node, False, "vllm", tp, graphed=graphed)
    extra = allreduce.FENCE_S if allreduce.two_stage(low, tp) else 0.0
    assert fenced(low) <= fenced(high)
    assert plain <= fenced(low) <= plain + extra + 1e-15


def test_the_serving_benchmarks_engines_ran_the_fenced_kernel():
    """vLLM v0.6.0 and SGLang v0.3.0 (pinning vllm==0.5.5) predate pull 8558: a 70B TP 4 decode step of 64
    sequences (1 MiB calls, two-stage) pays the fence twice a layer; one of 16 (256 KiB, one-stage) does not."""
    engine = profile("vllm_0_6").engine(80 * 2 ** 30, "H100", all_reduce_fence=True)
    plain = profile("vllm_0_6").engine(80 * 2 ** 30, "H100")
    design = lower(check_text(TEXT, str(Path(__file__).with_name("tp_case.gcl"))).design).partitions[0]
    costs = {e: replica(LLAMA, ServeConfig(4, 64, "bf16"), design, e) for e in (engine, plain)}
    calls = 2 * LLAMA.layers
    for tokens, extra in ((64, allreduce.FENCE_S), (16, 0.0)):
        diff = costs[engine]._token_costs(tokens, True)[5] - costs[plain]._token_costs(tokens, True)[5]
        assert diff == pytest.approx(calls * extra, abs=1e-12)


def test_a_graph_captured_nccl_all_reduce_inside_a_host_pays_no_nvls_fill_and_across_trays_it_does():
    # NCCL registers a graph-captured call's buffers outside MNNVL (enqueue.cc, NCCL_GRAPH_REGISTER default 1) and
    # runNvls then skips the scatter and gather copies (all_reduce.h v2.28.7 `nelem = work->regUsed ? 0 : ...`):
    # on 8 H100s a call past symmetric memory's maximum (64 MiB at TP 8) is NCCL's NVLS, less the fill, in a graph
    node = comms.place(8, 1, TIERS)
    rack = comms.place(8, 1, RACK.tiers)
    for big in (128 * 2**20, 1 << 30):
        assert collectives.choice("all_reduce", big, node).algorithm == "nvls"
        graphed, eager = (tp_all_reduce(big, node, False, "vllm", 8, fallback="symm_mem", graphed=g) for g in (True, False))
        assert eager == collectives.all_reduce(big, node)
        assert graphed == collectives.all_reduce(big, node, registered=True) < eager
        # over an NVL72's trays (MNNVL) NCCL registers nothing by itself: the fill stays
        assert tp_all_reduce(big, rack, True, "vllm", 8, fallback="symm_mem", graphed=True) == \
            tp_all_reduce(big, rack, True, "vllm", 8, fallback="symm_mem", graphed=False)
