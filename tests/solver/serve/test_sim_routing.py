"""The least-requests router keeps the replicas' loads between events (solver/serve/sim.py
`least_loaded`): requests asked at once, thousands in an RL step, find their replicas in log
time. Every run is the run that reads every replica's load afresh for every request, to the
last bit: at once or apart, aggregated or with a prefill pool, a run that may stop or not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import Engine
from gclc.solver.serve import sim as sim_module
from gclc.solver.serve.sim import simulate
from gclc.testing.serve_sim import pool as make_pool

requests = st.lists(st.tuples(st.floats(0.0, 0.5), st.integers(1, 3000), st.integers(1, 400)), min_size=1, max_size=60)


def _afresh(self, servers):
    """The router as it was: every replica's load read for every request."""
    return min(servers, key=lambda s: s.load)


@settings(deadline=None)
@given(st.sampled_from([1, 4, 64]), st.sampled_from([0.002, 0.05, 1.0]), st.integers(1, 6), requests,
       st.sampled_from(["at once", "in pairs", "apart"]), st.sampled_from([0, 1, 3]), st.booleans(),
       st.sampled_from([Engine(), Engine(preemption="reserve"), Engine(mixed=False, chunk=256)]))
def test_kept_loads_route_as_loads_read_afresh(batch, cache, count, drawn, arrive, prefillers, stop, engine):
    times = {"at once": lambda i, t: 0.0, "in pairs": lambda i, t: float(i // 2) * 0.01, "apart": lambda i, t: t}
    demand = tuple(sorted((Request(times[arrive](i, t), p, o) for i, (t, p, o) in enumerate(drawn)),
                          key=lambda q: q.arrival))
    pool = make_pool(engine, batch, cache, count)
    prefill = make_pool(engine, batch, 1.0, prefillers) if prefillers else None
    transfer = (lambda prompt: 1e-6 * prompt) if prefillers else None
    slo = {"ttft.p99": 0.02, "tpot.p90": 0.004} if stop else None
    ask = (lambda missed: True) if stop else None
    kept = simulate(demand, pool, prefill, transfer, slo=slo, warmup_s=0.0, stop=ask)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_module._Simulation, "least_loaded", _afresh)
        assert kept == simulate(demand, pool, prefill, transfer, slo=slo, warmup_s=0.0, stop=ask)


def test_an_rl_step_of_requests_at_once_is_dealt_in_turn():
    """1,000 requests at once on 7 replicas (an RL step's samples): the run is the one that reads
    the loads afresh."""
    demand = tuple(Request(0.0, 64 + i % 5, 1 + i % 37) for i in range(1000))
    pool = make_pool(Engine(), 64, 1.0, 7)
    kept = simulate(demand, pool, warmup_s=0.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_module._Simulation, "least_loaded", _afresh)
        assert kept == simulate(demand, pool, warmup_s=0.0)
