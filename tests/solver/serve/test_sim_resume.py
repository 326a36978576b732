"""A run advanced in steps (solver/serve/sim.py `begin`, `advance`) is the run `simulate` gives
in one go, to the last bit, wherever it pauses; and at every pause `least_e2e` is no more than
the largest end-to-end time the run ends with (what lets solver/rl/search.py stop a generation
simulation part way: solver/rl/generation.py `GenerationRun`)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import Engine
from gclc.solver.serve.sim import begin, simulate
from gclc.testing.serve_sim import pool as make_pool

engines = st.builds(
    Engine, block=st.sampled_from([16, 64]), chunk=st.sampled_from([256, 2048]), mixed=st.booleans(),
    scheduler_steps=st.sampled_from([1, 4]), preemption=st.sampled_from(["recompute", "swap", "reserve"]),
    draft=st.sampled_from([0, 3]), prefix_share=st.sampled_from([0.0, 0.2]))
requests = st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(1, 3000), st.integers(1, 600)), min_size=1, max_size=40)


@settings(deadline=None)
@given(engines, st.sampled_from([4, 64]), st.sampled_from([0.002, 0.01, 1.0]), st.integers(1, 3), requests,
       st.booleans(), st.lists(st.floats(0.0, 5.0), max_size=6))
def test_a_run_advanced_in_steps_is_the_run_in_one_go(engine, batch, cache, count, drawn, at_once, pauses):
    demand = tuple(sorted((Request(0.0 if at_once else t, p, o) for t, p, o in drawn), key=lambda q: q.arrival))
    pool = make_pool(engine, batch, cache, count)
    whole = simulate(demand, pool, warmup_s=0.0)
    run, bounds = begin(demand, pool, warmup_s=0.0), []
    for until in sorted(pauses):
        run.advance(until)
        bounds.append(run.least_e2e())
    assert run.run() == whole
    # (the measured requests' largest end-to-end time, inf where one was never served)
    assert all(b <= max(whole.e2e) for b in bounds)
