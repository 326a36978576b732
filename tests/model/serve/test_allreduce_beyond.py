"""The custom all-reduce kernels past their tables' last rows (model/serve/allreduce.py [carsrc]): each byte
beyond the last row priced costs the peer reads of the one- or two-shot kernel the engine runs at that size,
at the NVLink rate the kernel was measured to reach, up to the kernel's 8 MiB maximum."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import comms
from gclc.model.serve import allreduce
from gclc.model.serve.inference import tp_all_reduce
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

TEXT = 'import "std/nvidia"\nimport "std/network"\ncluster C { units = 2 x DGX_H100  scaleout = NDR_FatTree }\n'
TIERS = lower(check_text(TEXT, str(Path(__file__).with_name("beyond_case.gcl"))).design).partitions[0].tiers
MIB = 1 << 20
# the limits a table is cut at (allreduce.CUSTOM_LIMITS' values), or none
UNDERS = sorted({float("inf"), *(n for limits in allreduce.CUSTOM_LIMITS.values() for n in limits.values())})
KERNELS = st.sampled_from(allreduce.CUSTOM)
TPS = st.sampled_from([2, 4, 6, 8])


def _last(kernel: str, tp: int, graphed: bool, under: float) -> float:
    """The bytes of the last row `measured` prices a call from (the tables' rows under `under`)."""
    sizes = allreduce.GRAPH_SIZES if graphed and kernel in allreduce.GRAPHED else allreduce.SIZES
    return max([s for s in sizes if s < under] or sizes[:1])


@given(KERNELS, TPS, st.booleans(), st.sampled_from(UNDERS), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
# GCLC_HYPOTHESIS=deep (2026-12-07): a rise of 1.2e-15 s over bytes 4e-11 of the span apart, off the law's
# bound by the rounding of two 18 us prices; the bounds allow that rounding since
@example("vllm", 2, False, 262144, 0.0, 3.916538740289432e-11)
@settings(max_examples=scaled_examples(200))
def test_past_the_last_row_more_bytes_cost_more_up_to_the_kernels_maximum(kernel, tp, graphed, under, a, b):
    """Law: above the last row priced and up to MAX_SIZE, a larger call costs more, by no less than the two-shot
    kernel's 2 (n - 1) / n peer reads a byte and no more than the one-shot's n - 1, at P2P_RATE."""
    last = _last(kernel, tp, graphed, under)
    low, high = sorted(last + f * (allreduce.MAX_SIZE - last) for f in (a, b))
    price = lambda n: allreduce.measured(kernel, n, tp, graphed, under)  # noqa: E731
    rise = price(high) - price(low)
    span = (high - low) / allreduce.P2P_RATE
    rounding = 1e-12 * price(high)   # the rise is a difference of two prices
    assert 2 * (tp - 1) / tp * span - rounding <= rise <= (tp - 1) * span + rounding
    if high > low * (1 + 1e-9):
        assert rise > 0


@given(KERNELS, TPS, st.booleans(), st.sampled_from(UNDERS), st.floats(1.0, 1e12))
@settings(max_examples=scaled_examples(200))
def test_past_the_kernels_maximum_the_price_is_held(kernel, tp, graphed, under, extra):
    """Law: the engines hand a call of MAX_SIZE or more to NCCL ([carsrc]); the kernel's price is held there
    (tp_all_reduce's floor), never falling."""
    at = allreduce.measured(kernel, allreduce.MAX_SIZE, tp, graphed, under)
    assert allreduce.measured(kernel, allreduce.MAX_SIZE + extra, tp, graphed, under) == at


@given(KERNELS, TPS, st.booleans(), st.sampled_from(UNDERS), st.floats(0.0, 64.0 * 1024))
@settings(max_examples=scaled_examples(200))
def test_the_extension_is_continuous_at_the_last_row(kernel, tp, graphed, under, step):
    """Law: a call `step` bytes past the last row costs the row's time and at most n - 1 peer reads of
    the step more: the law starts where the measurement ends."""
    last = _last(kernel, tp, graphed, under)
    at = allreduce.measured(kernel, last, tp, graphed, under)
    past = allreduce.measured(kernel, last + step, tp, graphed, under)
    assert 0 <= past - at <= (tp - 1) * step / allreduce.P2P_RATE + 1e-12 * past


@given(TPS, st.sampled_from(UNDERS), st.booleans(), st.floats(1.0, 2e8))
@settings(max_examples=scaled_examples(200))
def test_a_captured_call_never_costs_more_than_eager_past_the_tables(tp, under, fenced, nbytes):
    """Law: graph capture removes a launch and leaves the bytes, so vLLM's kernel captured ([aic], extended)
    never costs more than eager ([sgl2904], extended by the same law), under any hand-over limit."""
    graphed = allreduce.measured("vllm", nbytes, tp, True, under, fenced)
    eager = allreduce.measured("vllm", nbytes, tp, False, under, fenced)
    assert graphed <= eager


B200_TEXT = 'import "std/nvidia"\nimport "std/network"\ncluster C { units = 2 x DGX_B200  scaleout = NDR_FatTree }\n'
B200_TIERS = lower(check_text(B200_TEXT, str(Path(__file__).with_name("beyond_b200.gcl"))).design).partitions[0].tiers


@given(st.sampled_from([(TIERS, "hopper"), (B200_TIERS, "blackwell")]), st.sampled_from([2, 4, 8]), st.booleans(),
       st.floats(1.0, 2e8))
@settings(max_examples=scaled_examples(200))
def test_vllms_chain_never_undercuts_its_custom_kernel_at_the_limit_or_the_tiers(system, tp, graphed, nbytes):
    """Law: vLLM's chain inside a host (custom all-reduce under its limit, symmetric memory past it, NCCL past
    symmetric memory's maximum) never prices a call under the tiers' price, nor under its custom kernel's
    price, extended over the host's NVLink, at the smaller of the call and the hand-over limit."""
    tiers, generation = system
    node = comms.place(tp, 1, tiers)
    link = next(s.tier.bandwidth for s in node if s.tier.scope == "node")
    limit = allreduce.custom_limit(tp, generation)
    price = tp_all_reduce(nbytes, node, False, "vllm", tp, fallback="symm_mem", generation=generation,
                          graphed=graphed)
    assert price >= comms.all_reduce(nbytes, node)
    custom = allreduce.measured("vllm", min(nbytes, limit), tp, graphed, limit, link=link)
    assert price >= custom * (1 - 1e-12)


def test_the_peer_reads_run_at_the_same_share_of_a_faster_link():
    """ASSUMPTION (allreduce.p2p_rate): past the tables a B200's kernel reads its peers at the H100's share of
    NVLink 5, twice NVLink 4's rate a direction, so the same bytes past the last row take half the time;
    tp_all_reduce reads the link from the host's scale-up tier."""
    assert allreduce.p2p_rate(900e9) == pytest.approx(2 * allreduce.P2P_RATE)
    last = allreduce.SIZES[-1]
    h100 = allreduce.beyond("vllm", 4 * MIB, 4, last)
    assert allreduce.beyond("vllm", 4 * MIB, 4, last, link=900e9) == pytest.approx(h100 / 2)
    node = comms.place(4, 1, B200_TIERS)
    assert next(s.tier.bandwidth for s in node if s.tier.scope == "node") == pytest.approx(900e9)
    rise = lambda n: tp_all_reduce(n, node, False, "sglang", 4) - tp_all_reduce(last, node, False, "sglang", 4)  # noqa: E731
    assert rise(4 * MIB) == pytest.approx(allreduce.peer_reads("sglang", last, 4 * MIB, 4) / (2 * allreduce.P2P_RATE))


def test_the_captured_tables_last_doubling_reads_at_one_rate_once_the_algorithm_is_counted():
    """[aic]'s rows from 2 to 4 MiB (one-shot at TP 2, two-stage at TP 4 and 8): the extra peer reads over
    the extra time agree within 3 % across TP sizes (the law's check), and P2P_RATE is the fastest of them,
    so the extension never rises faster than a measured doubling did."""
    sizes = allreduce.GRAPH_SIZES
    rates = {}
    for tp, times in allreduce.PRICED_GRAPHED["vllm"].items():
        assert allreduce.two_stage(sizes[-2], tp) == (tp > 2)
        rates[tp] = allreduce.peer_reads("vllm", sizes[-2], sizes[-1], tp) / (times[-1] - times[-2])
    assert max(rates.values()) / min(rates.values()) < 1.03
    assert allreduce.P2P_RATE == pytest.approx(max(rates.values()), rel=1e-3)
    assert allreduce.P2P_RATE < 450e9    # NVLink 4's rate a direction an H100 could not exceed


def test_the_kernels_pick_one_or_two_shot_as_their_sources_do():
    """[carsrc]: vLLM's kernel two-stage from 512 KiB at TP 4 and 256 KiB at TP 6-8; sgl-kernel's
    TensorRT-LLM-derived one from 1 MiB at TP 4 and 512 KiB above; both one-shot at TP 2."""
    kib = 1024
    assert allreduce.two_shot_from("vllm", 4) == 512 * kib and allreduce.two_shot_from("vllm", 8) == 256 * kib
    assert allreduce.two_shot_from("sglang", 4) == MIB and allreduce.two_shot_from("sglang", 6) == 512 * kib
    assert allreduce.two_shot_from("vllm", 2) == allreduce.two_shot_from("sglang", 2) == float("inf")
    # one-shot reads every peer's buffer, two-shot 2 (n - 1) / n of it
    assert allreduce.peer_reads("vllm", 0, 128 * kib, 8) == 7 * 128 * kib
    assert allreduce.peer_reads("vllm", MIB, 2 * MIB, 8) == 1.75 * MIB
    assert allreduce.peer_reads("sglang", 0, 2 * MIB, 4) == 3 * MIB + 1.5 * MIB
    assert allreduce.beyond("symm_mem", 4 * MIB, 8, MIB) == 0.0
