"""A ring beside an incast, priced analytically (model/network/pfc.py) and simulated
(model/network/flows.py): under ECN the ring takes what the incast leaves of a shared port,
under PFC alone the receiver's pauses hold it to the incast's rate (Zhu et al., SIGCOMM 2015,
Sec. 2.2). The law: the analytic model's time rises as the flow simulator's does."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import comms
from gclc.model.network import flows
from gclc.model.network.pfc import Incast, beside_incast, victim_rate
from gclc.model.network.placement import stage_rate
from gclc.testing import load_profile

load_profile()


def switch(gpus: int, port: float, efficiency: float = 1.0) -> Tier:
    return Tier(1, "leaf", "Net", "ethernet", "scaleout", gpus, port, 1e-6, 1.0, False, efficiency, span=no_span())


@st.composite
def scenes(draw):
    gpus = draw(st.integers(4, 24))
    ring = draw(st.integers(2, gpus - 1))                       # ranks 1..ring; rank 0 receives the incast
    senders = draw(st.sets(st.integers(1, gpus - 1), min_size=2, max_size=gpus - 1))
    return gpus, ring, sorted(senders), draw(st.sampled_from([12.5e9, 50e9, 100e9])), draw(
        st.sampled_from([0.8, 1.0])), draw(st.sampled_from(flows.CONGESTION))


@given(scenes(), st.floats(1e6, 1e10))
def test_a_rings_time_beside_an_incast_rises_as_the_flow_simulations_does(scene, nbytes):
    gpus, ring, senders, port, efficiency, congestion = scene
    tier = switch(gpus, port, efficiency)
    f = flows.fabric((tier,), gpus)
    members = list(range(1, ring + 1))
    hops = [(members[k], members[(k + 1) % ring]) for k in range(ring)]
    simulated = flows.pair_rates(f, hops + [(s, 0) for s in senders], congestion)[:ring].min()
    alone = flows.pair_rates(f, hops, congestion).min()

    stages = comms.place(ring, 1, (tier,))
    incast = Incast("Net", len(senders), port * efficiency)
    victim = any(m in senders for m in members)
    priced = beside_incast(tuple(stages), incast, congestion) if victim else tuple(stages)
    assert math.isclose(stage_rate(priced[0]), simulated, rel_tol=1e-9)
    assert math.isclose(stage_rate(stages[0]), alone, rel_tol=1e-9)
    for collective in (comms.all_reduce, comms.reduce_scatter):   # the bytes' time, latency aside
        by_itself = collective(nbytes, stages) - collective(0.0, stages)
        beside = collective(nbytes, priced) - collective(0.0, priced)
        assert math.isclose(beside / by_itself, alone / simulated, rel_tol=1e-9)
    # PFC never leaves the ring faster than ECN does
    other = "ecn" if congestion == "pfc" else "pfc"
    other_rate = stage_rate(beside_incast(tuple(stages), incast, other)[0]) if victim else alone
    pfc, ecn = (stage_rate(priced[0]), other_rate)[:: 1 if congestion == "pfc" else -1]
    assert pfc <= ecn * (1 + 1e-12)


def test_four_senders_hold_a_rings_flow_to_a_quarter_under_pfc():
    # the flow simulator's own example (tests/model/test_flows.py): four senders into one 50 GB/s
    # port; a ring flow beside one of them keeps 37.5 GB/s under ECN, 12.5 GB/s under PFC
    incast = Incast("Net", 4, 50e9)
    assert victim_rate(50e9, 50e9, incast, "ecn") == 37.5e9
    assert victim_rate(50e9, 50e9, incast, "pfc") == 12.5e9
    nvlink = Tier(0, "node", "NVL", "nvlink", "node", 8, 450e9, 1e-6, 1.0, False, 1.0, span=no_span())
    stages = comms.place(16, 1, (nvlink, switch(64, 50e9)))
    priced = beside_incast(tuple(stages), incast, "pfc")
    assert [stage_rate(s) for s in priced if s.tier.fabric == "NVL"] == [stage_rate(s) for s in stages
                                                                          if s.tier.fabric == "NVL"]
    with pytest.raises(ValueError):
        victim_rate(50e9, 50e9, incast, "lossy")
