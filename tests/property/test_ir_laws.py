"""Physical laws of lowering: counts scale, oversubscription never helps, JSON round-trips."""

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.compiler.ir_json import from_json, graph_json
from gclc.compiler.lower import lower
from gclc.compiler.metrics import bisection, power_breakdown, totals

DATA = Path(__file__).parent.parent / "data"


def graph(name: str, **settings):
    result = check_file(str(DATA / name), {k: str(v) for k, v in settings.items()})
    assert result.design is not None, [d.summary for d in result.diagnostics]
    return lower(result.design)


def value(rows, key):
    return next(m.value for m in rows if m.key == key)


@given(st.integers(1, 128))
def test_doubling_units_doubles_flops_hbm_and_accelerator_power(nodes):
    one, two = graph("pod.gcl", nodes=nodes), graph("pod.gcl", nodes=2 * nodes)
    for key in ("peak.bf16", "peak.fp8", "hbm.capacity", "hbm.bandwidth"):
        assert value(totals(two), key) == pytest.approx(2 * value(totals(one), key))
    assert value(power_breakdown(two), "power.accelerators") == pytest.approx(
        2 * value(power_breakdown(one), "power.accelerators"))


@given(st.integers(1, 16))
def test_doubling_racks_doubles_nvl72_totals(racks):
    one, two = graph("nvl72.gcl", racks=racks), graph("nvl72.gcl", racks=2 * racks)
    assert two.gpus == 2 * one.gpus == 144 * racks
    assert value(totals(two), "peak.bf16") == pytest.approx(2 * value(totals(one), "peak.bf16"))


@given(st.integers(58, 256), st.integers(1, 4), st.integers(1, 4))
def test_more_oversubscription_never_raises_bisection(nodes, low, extra):
    """A higher down:up ratio never gives more bandwidth, tier by tier.

    An oversubscribed leaf also has more ports down (48 of 64 at 3:1), so a small cluster
    can fit under one leaf per rail at 3:1 but not at 2:1 and then needs no spine at all;
    from 58 nodes on, every ratio up to 8:1 (57 ports down) needs the spine, so the trees compare.
    """
    high = low + extra
    calm = graph("pod.gcl", nodes=nodes, oversubscription=f"{low}:1")
    busy = graph("pod.gcl", nodes=nodes, oversubscription=f"{high}:1")
    assert len(calm.partitions[0].tiers) == len(busy.partitions[0].tiers) == 3
    assert bisection(busy).value <= bisection(calm).value + 1e-6
    for a, b in zip(calm.partitions[0].tiers, busy.partitions[0].tiers):
        assert b.bandwidth <= a.bandwidth + 1e-6


@given(st.integers(1, 256), st.sampled_from(["1:1", "2:1", "3:1"]))
def test_json_round_trips(nodes, oversubscription):
    g = graph("pod.gcl", nodes=nodes, oversubscription=oversubscription)
    text = graph_json(g)
    assert from_json(text) == g
    assert graph_json(from_json(text)) == text
