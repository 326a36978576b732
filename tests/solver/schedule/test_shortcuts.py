"""The scheduler's shortcuts give what the plain algorithms give (benchmarks/schedule_scale.py
times them): preemption's dry run releases victims one at a time instead of releasing and
re-holding every tried set, yet picks the same victims and leaves the allocations (and each
domain's holders) in the order the plain way leaves them, which failures read; a backfill
pass skips the (GPUs, length) that an earlier job of the pass found no start for."""

import importlib.util
from pathlib import Path

from hypothesis import given, strategies as st

from gclc.solver.schedule.backfill import Refused
from gclc.solver.schedule.policies import PriorityBestFit, fits, victims
from gclc.solver.schedule.state import ClusterState
from gclc.testing import load_profile

load_profile()
_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def plain_victims(job, state, running):
    """The algorithm as first written: each tried set released, filtered, re-held."""
    def places(gone):
        held = [state.release(n) for n in gone]
        try:
            return any(c.option.partition == "a" for c in fits(job, state))
        finally:
            for n, a in zip(gone, held):
                state.bind(n, a)

    lower = sorted((n for n, a in state.allocations.items() if running[n][0].priority < job.priority),
                   key=lambda n: (running[n][0].priority, -running[n][1], n))
    chosen = []
    for name in lower:
        chosen.append(name)
        if places(chosen):
            break
    else:
        return None
    for name in sorted(chosen, key=lambda n: (-running[n][0].priority, running[n][1], n)):
        if places([n for n in chosen if n != name]):
            chosen.remove(name)
    return chosen or None


def order(state):
    return list(state.allocations), [list(d) for d in state.holding["a"]]


@given(st.lists(st.tuples(st.integers(1, 8), st.integers(1, 3), st.booleans()), min_size=1, max_size=10),
       st.integers(1, 32))
def test_the_dry_run_picks_the_victims_and_leaves_the_order_of_the_plain_way(held, need):
    states, running = [], {}
    for _ in range(2):
        state = ClusterState.of(fx.GRAPH)
        for i, (gpus, priority, _) in enumerate(held):
            job = fx.job(f"j{i}", gpus, priority=priority, partitions=("a",))
            found = fits(job, state)
            if found:
                state.bind(job.name, state.partitions["a"].take(job.name, gpus, found[0].level, found[0].group))
                running[job.name] = (job, float(i))
        for i, (_, _, gone) in enumerate(held):      # releases and re-binds shuffle the order
            if gone and f"j{i}" in state.allocations:
                state.bind(f"j{i}", state.release(f"j{i}"))
        states.append(state)
    top = fx.job("top", need, priority=9, partitions=("a",))
    fast, plain = victims(top, states[0], running, PriorityBestFit()), plain_victims(top, states[1], running)
    assert fast == plain
    assert order(states[0]) == order(states[1])
    for d, holders in enumerate(states[0].holding["a"]):   # each domain's holders: the bind order
        assert list(holders) == [n for n, a in states[0].allocations.items() if d in a.index]


@given(st.lists(st.tuples(st.integers(1, 64), st.sampled_from([60.0, 600.0, 3600.0, float("inf")])), max_size=12),
       st.integers(1, 64), st.sampled_from([60.0, 600.0, 3600.0, float("inf")]))
def test_a_refused_need_covers_exactly_what_needs_as_much_for_as_long(refusals, gpus, length):
    refused = Refused()
    for g, t in refusals:
        refused.add(g, t)
    assert refused.covers(gpus, length) == any(g <= gpus and t <= length for g, t in refusals)
